package iam

// OIDC providers: the issuers whose tokens AssumeRoleWithWebIdentity
// accepts for an account, named by their URL without its scheme (as an
// ARN names them: arn:aws:iam::ACCOUNT:oidc-provider/HOST/PATH).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Provider is an OIDC identity provider of an account.
type Provider struct {
	Account     string    `json:"account,omitempty"`
	URL         string    `json:"url"` // as given, https://...
	ClientIDs   []string  `json:"clientIDs,omitempty"`
	Thumbprints []string  `json:"thumbprints,omitempty"`
	Created     time.Time `json:"created"`
}

// Limits of IAM's for providers.
const (
	maxClientIDs   = 100
	maxThumbprints = 5
)

// ProviderName is a provider URL without its scheme: its name in ARNs,
// in trust policies' condition keys and in tokens' issuers.
func ProviderName(rawURL string) string {
	if i := strings.Index(rawURL, "://"); i >= 0 {
		rawURL = rawURL[i+3:]
	}
	return strings.TrimSuffix(rawURL, "/")
}

func providerKey(account, rawURL string) string { return account + "\x00" + ProviderName(rawURL) }

func (p Provider) object() string {
	sum := sha256.Sum256([]byte(ProviderName(p.URL)))
	return providersPrefix + accountSegment(p.Account) + "/" + hex.EncodeToString(sum[:16])
}

// CreateProvider adds an account's OIDC provider.
func (d *Directory) CreateProvider(ctx context.Context, p Provider) (Provider, error) {
	if err := checkProvider(p); err != nil {
		return Provider{}, err
	}
	err := d.changing(ctx, func() error {
		if _, err := d.Provider(p.Account, p.URL); err == nil {
			return fmt.Errorf("%w: provider with url %s already exists", ErrEntityExists, p.URL)
		}
		p.Created = d.now().UTC().Truncate(time.Second)
		return d.putProvider(ctx, p)
	})
	return p, err
}

func checkProvider(p Provider) error {
	u, err := url.Parse(p.URL)
	switch {
	case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" || len(p.URL) > 255:
		return fmt.Errorf("%w: the provider URL %q must be an http(s) URL of at most 255 characters", ErrInvalidInput, p.URL)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%w: the provider URL %q may hold no query or fragment", ErrInvalidInput, p.URL)
	case len(p.ClientIDs) > maxClientIDs:
		return fmt.Errorf("%w: at most %d client IDs", ErrLimitExceeded, maxClientIDs)
	case len(p.Thumbprints) > maxThumbprints:
		return fmt.Errorf("%w: at most %d thumbprints", ErrLimitExceeded, maxThumbprints)
	}
	for _, t := range p.Thumbprints {
		if len(t) != 40 {
			return fmt.Errorf("%w: thumbprint %q is not 40 characters long", ErrInvalidInput, t)
		}
	}
	return nil
}

// Provider returns an account's provider by its URL or name (the URL
// without its scheme).
func (d *Directory) Provider(account, name string) (Provider, error) {
	d.mu.RLock()
	p, ok := d.providers[providerKey(account, name)]
	d.mu.RUnlock()
	if !ok {
		return Provider{}, fmt.Errorf("%w: OpenIDConnect provider %s cannot be found", ErrNoSuchEntity, name)
	}
	return p, nil
}

// Providers lists an account's providers by name.
func (d *Directory) Providers(account string) []Provider {
	d.mu.RLock()
	var out []Provider
	for _, p := range d.providers {
		if p.Account == account {
			out = append(out, p)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(ProviderName(a.URL), ProviderName(b.URL)) })
	return out
}

// EditProvider changes a provider's client IDs or thumbprints by fn.
func (d *Directory) EditProvider(ctx context.Context, account, name string, fn func(*Provider) error) error {
	return d.changing(ctx, func() error {
		p, err := d.Provider(account, name)
		if err != nil {
			return err
		}
		p.ClientIDs, p.Thumbprints = slices.Clone(p.ClientIDs), slices.Clone(p.Thumbprints)
		if err := fn(&p); err != nil {
			return err
		}
		if err := checkProvider(p); err != nil {
			return err
		}
		return d.putProvider(ctx, p)
	})
}

// DeleteProvider removes a provider.
func (d *Directory) DeleteProvider(ctx context.Context, account, name string) error {
	return d.changing(ctx, func() error {
		p, err := d.Provider(account, name)
		if err != nil {
			return err
		}
		return d.remove(ctx, p.object())
	})
}

func (d *Directory) putProvider(ctx context.Context, p Provider) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return d.write(ctx, p.object(), data, nil)
}
