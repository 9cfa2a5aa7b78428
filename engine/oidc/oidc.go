// Package oidc verifies OpenID Connect ID tokens, Kubernetes
// ServiceAccount tokens among them, against the keys their issuer
// publishes (OIDC discovery: ISSUER/.well-known/openid-configuration, then
// its jwks_uri). Keys are cached per issuer and fetched again when a token
// names a key the cache does not hold, at most every few seconds.
package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Errors, each an answer of STS's.
var (
	// ErrInvalidToken: not a token of the issuer's, or not for us.
	ErrInvalidToken = errors.New("invalid identity token")
	// ErrExpired: the token's time is past.
	ErrExpired = errors.New("identity token expired")
	// ErrCommunication: the issuer's keys could not be read.
	ErrCommunication = errors.New("identity provider unreachable")
)

// algorithms are the signatures accepted (Kubernetes signs RS256 or
// ES256).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256}

// Timing.
const (
	keysFresh    = 10 * time.Minute // keys held this long before a fetch
	refetchAfter = 10 * time.Second // an unknown key ID fetches again after this
	leeway       = time.Minute      // clocks apart
	maxDocument  = 1 << 20
)

// Claims are what a verified token says.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	Expiry   time.Time
	// AuthorizedParty is azp (an OIDC client's ID).
	AuthorizedParty string
	// A Kubernetes ServiceAccount token's: its namespace, ServiceAccount
	// and pod.
	Namespace, ServiceAccount, Pod string
	// Tags are the session tags the issuer gives the token's subject
	// (the claim https://aws.amazon.com/tags, principal_tags: AWS's
	// shape; a value may be a list, as an identity provider's
	// multi-valued attribute is).
	Tags map[string][]string
}

// TagsClaim is where an issuer puts session tags, as AWS names it.
const TagsClaim = "https://aws.amazon.com/tags"

// Limits AWS sets on session tags.
const (
	maxTags        = 50
	maxTagKey      = 128
	maxTagValue    = 256
	maxValuesOfTag = 16
)

// tagsOf reads the tags claim: principal_tags maps a key to a string or a
// list of strings.
func tagsOf(raw json.RawMessage) (map[string][]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var c struct {
		PrincipalTags map[string]json.RawMessage `json:"principal_tags"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: the %s claim: %w", ErrInvalidToken, TagsClaim, err)
	}
	if len(c.PrincipalTags) > maxTags {
		return nil, fmt.Errorf("%w: more than %d session tags", ErrInvalidToken, maxTags)
	}
	tags := make(map[string][]string, len(c.PrincipalTags))
	for k, v := range c.PrincipalTags {
		var values []string
		if err := json.Unmarshal(v, &values); err != nil {
			var one string
			if err := json.Unmarshal(v, &one); err != nil {
				return nil, fmt.Errorf("%w: session tag %q is neither a string nor a list of strings", ErrInvalidToken, k)
			}
			values = []string{one}
		}
		if k == "" || len(k) > maxTagKey || len(values) == 0 || len(values) > maxValuesOfTag {
			return nil, fmt.Errorf("%w: session tag %q: a key of 1 to %d characters with 1 to %d values", ErrInvalidToken, k, maxTagKey, maxValuesOfTag)
		}
		for _, one := range values {
			if len(one) > maxTagValue {
				return nil, fmt.Errorf("%w: session tag %q: a value longer than %d characters", ErrInvalidToken, k, maxTagValue)
			}
		}
		tags[k] = values
	}
	return tags, nil
}

// Verifier verifies tokens.
type Verifier struct {
	// Client fetches the issuers' documents (nil: http.DefaultClient).
	Client *http.Client
	// Bearer is a token to present to an issuer (the Kubernetes API
	// server serves its discovery to authenticated ServiceAccounts only),
	// "" for none. Nil: none.
	Bearer func(issuer string) string
	now    func() time.Time

	mu      sync.Mutex
	issuers map[string]*issuerKeys
}

type issuerKeys struct {
	mu      sync.Mutex // one fetch at a time
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// Issuer returns a token's issuer, unverified: which provider to verify
// it against.
func Issuer(token string) (string, error) {
	var c jwt.Claims
	if err := UnverifiedClaims(token, &c); err != nil {
		return "", err
	}
	if c.Issuer == "" {
		return "", fmt.Errorf("%w: no issuer", ErrInvalidToken)
	}
	return c.Issuer, nil
}

// UnverifiedClaims decodes a token's claims into out without checking its
// signature: for a token's issuer before its keys are fetched, or a token
// just taken from its issuer's token endpoint whose signature a verifier
// checks later.
func UnverifiedClaims(token string, out any) error {
	t, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := t.UnsafeClaimsWithoutVerification(out); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return nil
}

// Verify checks a token: signed by a key issuer publishes, issued by
// issuer, within its time, for one of audiences.
func (v *Verifier) Verify(ctx context.Context, token, issuer string, audiences []string) (Claims, error) {
	if len(audiences) == 0 {
		return Claims{}, fmt.Errorf("%w: no audience to accept", ErrInvalidToken)
	}
	t, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if len(t.Headers) != 1 {
		return Claims{}, fmt.Errorf("%w: one signature expected", ErrInvalidToken)
	}
	key, err := v.key(ctx, issuer, t.Headers[0].KeyID)
	if err != nil {
		return Claims{}, err
	}
	var std jwt.Claims
	var extra struct {
		AZP string `json:"azp"`
		K8s struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				Name string `json:"name"`
			} `json:"serviceaccount"`
			Pod struct {
				Name string `json:"name"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
		Tags json.RawMessage `json:"https://aws.amazon.com/tags"`
	}
	if err := t.Claims(key, &std, &extra); err != nil {
		return Claims{}, fmt.Errorf("%w: the signature does not verify", ErrInvalidToken)
	}
	tags, err := tagsOf(extra.Tags)
	if err != nil {
		return Claims{}, err
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: audiences, Time: v.clock()}, leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return Claims{}, ErrExpired
	case errors.Is(err, jwt.ErrInvalidAudience):
		return Claims{}, fmt.Errorf("%w: incorrect token audience", ErrInvalidToken)
	case err != nil:
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	case std.Expiry == nil || std.Subject == "":
		return Claims{}, fmt.Errorf("%w: a token needs exp and sub", ErrInvalidToken)
	}
	return Claims{Issuer: std.Issuer, Subject: std.Subject, Audience: std.Audience, Expiry: std.Expiry.Time(),
		AuthorizedParty: extra.AZP, Namespace: extra.K8s.Namespace, ServiceAccount: extra.K8s.ServiceAccount.Name,
		Pod: extra.K8s.Pod.Name, Tags: tags}, nil
}

func (v *Verifier) clock() time.Time {
	if v.now != nil {
		return v.now()
	}
	return time.Now()
}

// key returns the issuer's key of that ID (the only key when the token
// names none), fetching the issuer's keys when they are stale or lack it.
func (v *Verifier) key(ctx context.Context, issuer, kid string) (any, error) {
	v.mu.Lock()
	if v.issuers == nil {
		v.issuers = map[string]*issuerKeys{}
	}
	ik := v.issuers[issuer]
	if ik == nil {
		ik = &issuerKeys{}
		v.issuers[issuer] = ik
	}
	v.mu.Unlock()

	ik.mu.Lock()
	defer ik.mu.Unlock()
	now := v.clock()
	find := func() (any, bool) {
		keys := ik.keys.Keys
		if kid != "" {
			keys = ik.keys.Key(kid)
		}
		if len(keys) != 1 {
			return nil, false
		}
		return keys[0].Key, true
	}
	stale := now.Sub(ik.fetched) > keysFresh
	if k, ok := find(); ok && !stale {
		return k, nil
	}
	if !stale && now.Sub(ik.fetched) < refetchAfter {
		return nil, fmt.Errorf("%w: the issuer publishes no key %q", ErrInvalidToken, kid)
	}
	keys, err := v.fetch(ctx, issuer)
	if err != nil {
		if k, ok := find(); ok {
			return k, nil // keep serving the keys known while the issuer is away
		}
		return nil, err
	}
	ik.keys, ik.fetched = keys, now
	if k, ok := find(); ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: the issuer publishes no key %q", ErrInvalidToken, kid)
}

// fetch reads the issuer's discovery document, then its keys.
func (v *Verifier) fetch(ctx context.Context, issuer string) (jose.JSONWebKeySet, error) {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.get(ctx, issuer, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	if disc.Issuer != issuer || disc.JWKSURI == "" {
		return jose.JSONWebKeySet{}, fmt.Errorf("%w: the discovery document names issuer %q and keys %q", ErrCommunication, disc.Issuer, disc.JWKSURI)
	}
	var keys jose.JSONWebKeySet
	if err := v.get(ctx, issuer, disc.JWKSURI, &keys); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	return keys, nil
}

func (v *Verifier) get(ctx context.Context, issuer, url string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCommunication, err)
	}
	if v.Bearer != nil {
		if b := v.Bearer(issuer); b != "" {
			req.Header.Set("Authorization", "Bearer "+b)
		}
	}
	client := v.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCommunication, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", ErrCommunication, url, resp.Status)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCommunication, url, err)
	}
	return nil
}
