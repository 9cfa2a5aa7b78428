// Package webhookcert gives the operator's admission webhooks a certificate
// without cert-manager: a self-signed CA and a serving certificate kept in
// one Secret of the operator's namespace, the CA written into the caBundle
// of every webhook of the operator's ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration, and the serving certificate handed to the
// webhook server from memory (no files, so it changes without a restart).
//
// Every replica runs a Keeper. Each pass reads the Secret and the two
// configurations from the API server, serves the certificate the Secret
// holds, and takes the next rotation step if one is due (rotation.go).
// There is no leader: every write carries the resourceVersion it was
// computed from, so when two replicas act on the same state one write wins
// and the other replica re-reads. That also means a new replica never waits
// on another one to become leader before its webhook can be called (during
// a rolling update the old pod keeps the lease until the new one is ready).
//
// Nothing here needs the webhooks themselves: Secrets and webhook
// configurations are never sent to admission webhooks, so the first
// certificate can be written while the API server cannot call the operator
// yet.
//
// RBAC: get and update on the Secret (create too when the chart has not
// created it empty) and get and update on the two configurations. The
// operator chart grants them by name; they are not in the generated
// ClusterRole (config/rbac), whose installs (kustomize, OLM) bring their
// own webhook certificates.
package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Config says where the certificate lives and what it is for.
type Config struct {
	// Client reads and writes the Secret and the configurations. It should
	// not cache: a replica must see what another one just wrote.
	Client client.Client
	// Secret holds the CAs and the serving certificate.
	Secret types.NamespacedName
	// The configurations whose webhooks get the caBundle.
	ValidatingWebhookConfiguration string
	MutatingWebhookConfiguration   string
	// The serving certificate's names: the webhook Service's DNS names (and
	// addresses, for a webhook reached by URL).
	DNSNames    []string
	IPAddresses []net.IP
	// Zero: DefaultLifetimes.
	Lifetimes Lifetimes
	// How often the Secret and configurations are read again when nothing
	// happens (a replica picks up another's new certificate, a wiped
	// caBundle is written again, a due step is taken). Zero: a minute.
	Resync time.Duration
	// Zero: time.Now. Tests move it to walk through a rotation.
	Now func() time.Time
	// Zero: the controller-runtime logger, named webhook-certificate.
	Log logr.Logger
}

// Keeper issues, rotates and serves the webhook certificate. It is a
// controller-runtime Runnable that runs on every replica.
type Keeper struct {
	cfg   Config
	hosts hosts

	mu       sync.Mutex
	serving  *tls.Certificate
	notReady error
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Keeper, error) {
	if cfg.Lifetimes == (Lifetimes{}) {
		cfg.Lifetimes = DefaultLifetimes
	}
	if cfg.Resync == 0 {
		cfg.Resync = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = ctrl.Log.WithName("webhook-certificate")
	}
	switch {
	case cfg.Client == nil:
		return nil, errors.New("webhook certificate: no client")
	case cfg.Secret.Name == "" || cfg.Secret.Namespace == "":
		return nil, fmt.Errorf("webhook certificate: the Secret needs a namespace and a name, got %q", cfg.Secret)
	case cfg.ValidatingWebhookConfiguration == "" || cfg.MutatingWebhookConfiguration == "":
		return nil, errors.New("webhook certificate: name both the validating and the mutating webhook configuration")
	case len(cfg.DNSNames) == 0 && len(cfg.IPAddresses) == 0:
		return nil, errors.New("webhook certificate: no DNS name or address to issue it for")
	}
	if err := cfg.Lifetimes.validate(); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	return &Keeper{
		cfg:      cfg,
		hosts:    hosts{dnsNames: cfg.DNSNames, ips: cfg.IPAddresses},
		notReady: errors.New("the webhook certificate has not been read yet"),
	}, nil
}

// NeedLeaderElection is false: every replica serves the webhooks, so every
// replica needs the certificate.
func (k *Keeper) NeedLeaderElection() bool { return false }

// TLSOption makes a TLS server (the webhook server's TLSOpts) serve the
// Keeper's current certificate.
func (k *Keeper) TLSOption(c *tls.Config) { c.GetCertificate = k.GetCertificate }

// GetCertificate is the current serving certificate.
func (k *Keeper) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.serving == nil {
		return nil, fmt.Errorf("no webhook serving certificate yet (Secret %s)", k.cfg.Secret)
	}
	return k.serving, nil
}

// Ready is a readiness check: nil once this replica serves a certificate
// whose CA every webhook's caBundle holds, so the API server can call it.
func (k *Keeper) Ready(*http.Request) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.notReady
}

// Start runs passes until ctx ends: at once again after a write, after
// Resync when nothing changed, sooner with backoff after an error.
func (k *Keeper) Start(ctx context.Context) error {
	started := time.Now()
	failures := 0
	wasReady := false
	for {
		again, err := k.pass(ctx)
		select {
		case <-ctx.Done():
			return nil // stopping; an error from the cancelled pass says nothing
		default:
		}
		wait := k.cfg.Resync
		switch {
		case err != nil:
			failures++
			wait = min(k.cfg.Resync, 100*time.Millisecond<<min(failures, 10))
			k.cfg.Log.Error(err, "webhook certificate pass failed", "retryIn", wait)
		case again:
			failures, wait = 0, 0
		default:
			failures = 0
		}
		if ready := k.Ready(nil) == nil; ready != wasReady {
			wasReady = ready
			if ready {
				k.cfg.Log.Info("webhook certificate ready: the configurations trust the certificate served", "sinceStart", time.Since(started).Round(time.Millisecond))
			} else {
				k.cfg.Log.Info("webhook certificate not ready", "reason", k.Ready(nil))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// pass reads the Secret and the configurations, serves the certificate,
// and makes at most one write. again says a write was made (or lost to
// another replica's): the next pass should come at once.
func (k *Keeper) pass(ctx context.Context) (again bool, err error) {
	secret := &corev1.Secret{}
	found := true
	switch err := k.cfg.Client.Get(ctx, k.cfg.Secret, secret); {
	case apierrors.IsNotFound(err):
		found = false
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.cfg.Secret.Namespace, Name: k.cfg.Secret.Name, Labels: map[string]string{
				"app.kubernetes.io/name":      "strata-operator",
				"app.kubernetes.io/component": "webhook-certificate",
			}},
			Type: corev1.SecretTypeOpaque,
		}
	case err != nil:
		return false, fmt.Errorf("reading Secret %s: %w", k.cfg.Secret, err)
	}
	m := parseMaterial(secret.Data)
	if m.serving != nil {
		k.serve(m.serving)
	}

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	var missing []string
	for _, c := range []struct {
		obj  client.Object
		kind string
	}{{vwc, "ValidatingWebhookConfiguration"}, {mwc, "MutatingWebhookConfiguration"}} {
		name := k.configurationName(c.obj)
		switch err := k.cfg.Client.Get(ctx, client.ObjectKey{Name: name}, c.obj); {
		case apierrors.IsNotFound(err):
			missing = append(missing, c.kind+" "+name)
		case err != nil:
			return false, fmt.Errorf("reading %s %s: %w", c.kind, name, err)
		}
	}
	bundles := caBundles(vwc, mwc)

	now := k.cfg.Now()
	nextTrusted := m.next != nil && len(missing) == 0 && trustedByAll(bundles, m.next.cert)
	if s := nextStep(m, now, k.hosts, k.cfg.Lifetimes, nextTrusted); s != stepNone {
		return k.write(ctx, secret, found, s, m, now)
	}

	if len(missing) > 0 {
		err := fmt.Errorf("waiting for %v to exist (installed with the operator)", missing)
		k.setNotReady(err)
		return false, err
	}
	want := m.bundle()
	wrote := false
	for _, obj := range []client.Object{vwc, mwc} {
		if !setCABundles(obj, want) {
			continue
		}
		switch err := k.cfg.Client.Update(ctx, obj); {
		case apierrors.IsConflict(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("writing the caBundle of %s: %w", obj.GetName(), err)
		}
		k.cfg.Log.Info("wrote the caBundle", "configuration", obj.GetName(), "cas", len(parseCerts(want)))
		wrote = true
	}
	if wrote {
		return true, nil
	}
	if trustedByAll(bundles, m.ca.cert) {
		k.setNotReady(nil)
	} else {
		k.setNotReady(errors.New("the webhook configurations do not trust the serving certificate's CA yet"))
	}
	return false, nil
}

// write takes step s and stores the result in the Secret.
func (k *Keeper) write(ctx context.Context, secret *corev1.Secret, found bool, s step, m material, now time.Time) (bool, error) {
	m, err := apply(s, m, now, k.hosts, k.cfg.Lifetimes)
	if err != nil {
		return false, fmt.Errorf("%s: %w", s, err)
	}
	secret.Data = m.data()
	if found {
		err = k.cfg.Client.Update(ctx, secret)
	} else {
		err = k.cfg.Client.Create(ctx, secret)
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		k.cfg.Log.V(1).Info("another replica changed the Secret first; reading it again", "step", s.String())
		return true, nil
	case err != nil:
		return false, fmt.Errorf("writing Secret %s (%s): %w", k.cfg.Secret, s, err)
	}
	k.cfg.Log.Info("webhook certificate step", "step", s.String(), "secret", k.cfg.Secret.String(),
		"caNotAfter", m.ca.cert.NotAfter, "servingNotAfter", m.serving.cert.NotAfter,
		"nextCA", m.next != nil, "previousCA", m.previous != nil)
	return true, nil
}

// serve makes p the certificate handed to TLS clients.
func (k *Keeper) serve(p *keyPair) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.serving != nil && bytes.Equal(k.serving.Leaf.Raw, p.cert.Raw) {
		return
	}
	k.serving = p.tlsCertificate()
	k.cfg.Log.Info("serving webhook certificate", "serial", p.cert.SerialNumber.Text(16), "issuer", p.cert.Issuer.CommonName,
		"notAfter", p.cert.NotAfter)
}

func (k *Keeper) setNotReady(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.notReady = err
}

func (k *Keeper) configurationName(obj client.Object) string {
	if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
		return k.cfg.ValidatingWebhookConfiguration
	}
	return k.cfg.MutatingWebhookConfiguration
}

// caBundles lists every webhook's caBundle (none for a configuration not
// read).
func caBundles(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, mwc *admissionregistrationv1.MutatingWebhookConfiguration) [][]byte {
	var b [][]byte
	for _, w := range vwc.Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	for _, w := range mwc.Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	return b
}

// trustedByAll tells whether every caBundle holds cert (and there is one).
func trustedByAll(bundles [][]byte, cert *x509.Certificate) bool {
	for _, b := range bundles {
		if !bundleHas(b, cert) {
			return false
		}
	}
	return len(bundles) > 0
}

// setCABundles sets every webhook's caBundle of a configuration to want;
// false when they all had it already.
func setCABundles(obj client.Object, want []byte) bool {
	changed := false
	set := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if !bytes.Equal(cc.CABundle, want) {
			cc.CABundle, changed = want, true
		}
	}
	switch c := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			set(&c.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			set(&c.Webhooks[i].ClientConfig)
		}
	}
	return changed
}
