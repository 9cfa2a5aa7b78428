package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/certs"
	"github.com/strata-storage/strata/internal/engine"
)

// Certificates reach the pods in two steps (docs/tls.md). A source offers
// a certificate: the operator's own CA (mode Operator), cert-manager's
// Secret (CertManager) or the user's (External). The operator stages it
// into the Secret every pod mounts, with the trust bundle as ca.crt, and it
// orders a CA change so that no pod ever refuses another or a client:
//
//  1. a new CA joins the trust bundle as soon as the source shows it;
//  2. a certificate it signed is staged only once every server reports
//     trusting it and the bundle has carried it for Config.CAOverlap;
//  3. an old CA leaves the bundle once no pod serves a certificate it
//     signed.
//
// A renewal under the same CA passes straight through all three.

// certificateWarning is how long before expiry a served certificate makes
// the tenant Degraded and records a Warning Event.
const certificateWarning = builders.CertificateWarningDays * 24 * time.Hour

// rotationPoll is how often a rotation in progress is looked at again:
// each look asks every pod which CAs it trusts and serves, only while a
// rotation is under way. Each of a CA rotation's three steps waits for
// one (10 s until 2026-12-02).
const rotationPoll = 2 * time.Second

// tlsSource is what a TLS mode offers.
type tlsSource struct {
	leaf certs.Pair   // the certificate to serve
	cas  certs.Bundle // CAs that must be trusted now
	from string       // where it comes from, for messages
}

// reconcileCertificates provides the serving certificate for the TLS mode.
func (r *TenantReconciler) reconcileCertificates(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	if t.Spec.TLS.Mode == v1.TLSDisabled {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCertificatesReady, true, v1.ReasonReconciled, "TLS is disabled: S3 is served over plain HTTP")
		t.Status.Certificate = nil
		return nil
	}
	n, err := r.certificateNames(ctx, t)
	if err != nil {
		return err
	}
	var src tlsSource
	switch t.Spec.TLS.Mode {
	case v1.TLSExternal:
		src, err = r.externalSource(ctx, t)
	case v1.TLSCertManager:
		src, err = r.certManagerSource(ctx, s, n)
	default:
		src, err = r.operatorSource(ctx, s, n)
	}
	if err != nil {
		return err
	}
	return r.stage(ctx, s, src, n)
}

// tlsNames are the names of a tenant's certificate.
type tlsNames struct {
	dns      []string // what generated certificates cover
	ips      []net.IP
	required []string // what a certificate from elsewhere must cover
}

func (r *TenantReconciler) certificateNames(ctx context.Context, t *v1.Tenant) (tlsNames, error) {
	gws, err := r.gatewayNames(ctx, t)
	if err != nil {
		return tlsNames{}, err
	}
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: builders.S3ServiceName(t.Name)}, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return tlsNames{}, fmt.Errorf("reading the S3 Service: %w", err)
		}
		svc = nil
	}
	return tlsNames{
		dns:      builders.DNSNames(t, gws, r.Config.ClusterDomain),
		ips:      builders.IPAddresses(t, svc),
		required: builders.RequiredNames(t, gws, r.Config.ClusterDomain),
	}, nil
}

func (r *TenantReconciler) gatewayNames(ctx context.Context, t *v1.Tenant) ([]string, error) {
	list := &v1.GatewayPoolList{}
	if err := r.Client.List(ctx, list, client.InNamespace(t.Namespace), client.MatchingFields{indexTenantRef: t.Name}); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range list.Items {
		out = append(out, g.Name)
	}
	return out, nil
}

// readSecret returns a Secret's data; nil when it does not exist.
func (r *TenantReconciler) readSecret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", name, err)
	}
	return sec.Data, nil
}

func (r *TenantReconciler) certificatesWaiting(t *v1.Tenant, reason, msg string) error {
	setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCertificatesReady, false, reason, msg)
	return errWaiting
}

// externalSource reads the user's Secret (mode External).
func (r *TenantReconciler) externalSource(ctx context.Context, t *v1.Tenant) (tlsSource, error) {
	name := builders.TLSSourceSecretName(t)
	data, err := r.readSecret(ctx, t.Namespace, name)
	if err != nil {
		return tlsSource{}, err
	}
	if len(data[corev1.TLSCertKey]) == 0 || len(data[corev1.TLSPrivateKeyKey]) == 0 {
		return tlsSource{}, r.certificatesWaiting(t, v1.ReasonSecretMissing,
			fmt.Sprintf("Secret %q named by spec.tls.secretRef does not exist or lacks tls.crt/tls.key", name))
	}
	return tlsSource{
		leaf: certs.Pair{Cert: data[corev1.TLSCertKey], Key: data[corev1.TLSPrivateKeyKey]},
		cas:  certs.ParseBundle(data["ca.crt"]),
		from: "Secret " + name,
	}, nil
}

// certManagerSource asks cert-manager for the certificate (mode
// CertManager): from spec.tls.issuerRef, the operator's --default-issuer,
// or a CA bootstrapped for the tenant.
func (r *TenantReconciler) certManagerSource(ctx context.Context, s *tenantScope, n tlsNames) (tlsSource, error) {
	t := s.tenant
	if !hasKind(r.Mapper, cmv1.SchemeGroupVersion.WithKind("Certificate")) {
		s.requeueWithin(5 * time.Minute)
		return tlsSource{}, r.certificatesWaiting(t, v1.ReasonCertManagerMissing,
			"spec.tls.mode is CertManager but the cert-manager CRDs are not installed: install cert-manager, or use mode Operator")
	}
	issuer, own, err := r.certManagerIssuer(ctx, t)
	if err != nil {
		return tlsSource{}, err
	}
	cert := builders.Certificate(t, n.dns, n.ips, issuer)
	cert.Spec.SecretTemplate = &cmv1.CertificateSecretTemplate{Labels: builders.TenantLabels(t.Name)}
	if _, err := apply(ctx, r.Client, r.Scheme, t, cert, certificateOps); err != nil {
		return tlsSource{}, err
	}
	data, err := r.readSecret(ctx, t.Namespace, cert.Spec.SecretName)
	if err != nil {
		return tlsSource{}, err
	}
	if len(data[corev1.TLSCertKey]) == 0 {
		return tlsSource{}, r.certificatesWaiting(t, v1.ReasonCreating,
			fmt.Sprintf("waiting for cert-manager to issue Certificate %s into Secret %s", cert.Name, cert.Spec.SecretName))
	}
	src := tlsSource{
		leaf: certs.Pair{Cert: data[corev1.TLSCertKey], Key: data[corev1.TLSPrivateKeyKey]},
		cas:  certs.ParseBundle(data["ca.crt"]),
		from: "cert-manager's Secret " + cert.Spec.SecretName,
	}
	if own {
		// A renewed CA is trusted as soon as cert-manager writes it, before
		// the CA Issuer signs a certificate with it.
		caData, err := r.readSecret(ctx, t.Namespace, builders.CertManagerCASecretName(t.Name))
		if err != nil {
			return tlsSource{}, err
		}
		for _, c := range certs.ParseBundle(caData[corev1.TLSCertKey]) {
			src.cas = src.cas.With(c)
		}
	}
	return src, nil
}

// certManagerIssuer picks the issuer of the serving certificate; own says
// it is the tenant's bootstrapped CA Issuer, which it then applies.
func (r *TenantReconciler) certManagerIssuer(ctx context.Context, t *v1.Tenant) (cmmeta.IssuerReference, bool, error) {
	if ref := t.Spec.TLS.IssuerRef; ref != nil {
		return cmmeta.IssuerReference{Name: ref.Name, Kind: ref.Kind, Group: ref.Group}, false, nil
	}
	if r.Config.DefaultIssuer.Name != "" {
		return r.Config.DefaultIssuer, false, nil
	}
	selfSigned, ca, caIssuer := builders.CertManagerCA(t)
	for _, is := range []*cmv1.Issuer{selfSigned, caIssuer} {
		if _, err := apply(ctx, r.Client, r.Scheme, t, is, issuerOps); err != nil {
			return cmmeta.IssuerReference{}, false, err
		}
	}
	ca.Spec.SecretTemplate = &cmv1.CertificateSecretTemplate{Labels: builders.TenantLabels(t.Name)}
	if _, err := apply(ctx, r.Client, r.Scheme, t, ca, certificateOps); err != nil {
		return cmmeta.IssuerReference{}, false, err
	}
	return cmmeta.IssuerReference{Name: caIssuer.Name, Kind: "Issuer", Group: "cert-manager.io"}, true, nil
}

// Keys of the operator's CA Secret besides tls.crt and tls.key (the CA
// that signs now).
const (
	caNextCert  = "next.crt" // the CA that replaces it, during a rotation
	caNextKey   = "next.key"
	caLeafCert  = "leaf.crt" // the certificate to serve, once staged
	caLeafKey   = "leaf.key"
	caSignerKey = corev1.TLSPrivateKeyKey
	caRequested = "rotation-request" // the last AnnotationRotateCA acted on
)

// operatorSource runs the operator's own CA (mode Operator). When the CA is
// a third of its life from expiry a next CA is created; the certificate to
// serve is then signed by it, and once that certificate is staged the next
// CA becomes the current one.
func (r *TenantReconciler) operatorSource(ctx context.Context, s *tenantScope, n tlsNames) (tlsSource, error) {
	t := s.tenant
	now := r.Config.Now()
	data, err := r.readSecret(ctx, t.Namespace, builders.CASecretName(t.Name))
	if err != nil {
		return tlsSource{}, err
	}
	before := fmt.Sprint(data)
	if data == nil {
		data = map[string][]byte{}
	}
	served, _ := r.readSecret(ctx, t.Namespace, builders.TLSSecretName(t))
	if err := r.advanceCA(t, data, served, now); err != nil {
		return tlsSource{}, err
	}
	signer := pairOf(data, corev1.TLSCertKey, caSignerKey)
	if next := pairOf(data, caNextCert, caNextKey); len(next.Cert) > 0 {
		signer = next
	}
	if !certs.Valid(pairOf(data, caLeafCert, caLeafKey), signer, n.dns, n.ips, now) {
		leaf, err := certs.Issue(signer, n.dns, n.ips, now, r.Config.Random)
		if err != nil {
			return tlsSource{}, fmt.Errorf("issuing the serving certificate: %w", err)
		}
		data[caLeafCert], data[caLeafKey] = leaf.Cert, leaf.Key
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "CertificateIssued", "IssueCertificate",
			"issued a serving certificate for %d names and %d addresses; pods get it once every server trusts its CA", len(n.dns), len(n.ips))
	}
	if fmt.Sprint(data) != before {
		if _, err := apply(ctx, r.Client, r.Scheme, t, builders.CASecret(t, data), secretOps); err != nil {
			return tlsSource{}, err
		}
	}
	if renew, err := certs.RenewAt(data[caLeafCert]); err == nil {
		s.requeueWithin(renew.Sub(now) + time.Minute)
	}
	src := tlsSource{leaf: pairOf(data, caLeafCert, caLeafKey), from: "the operator's CA in Secret " + builders.CASecretName(t.Name)}
	for _, k := range []string{corev1.TLSCertKey, caNextCert} {
		for _, c := range certs.ParseBundle(data[k]) {
			src.cas = src.cas.With(c)
		}
	}
	return src, nil
}

// advanceCA moves the operator's CA through a rotation: a first CA, a next
// CA when the current one is due for renewal, and the next one becoming
// current once pods serve a certificate it signed.
func (r *TenantReconciler) advanceCA(t *v1.Tenant, data, served map[string][]byte, now time.Time) error {
	current := pairOf(data, corev1.TLSCertKey, caSignerKey)
	next := pairOf(data, caNextCert, caNextKey)
	newCA := func() (certs.Pair, error) {
		return certs.NewCA(t.Name+"."+t.Namespace+" strata CA "+now.UTC().Format(time.RFC3339), now, r.Config.Random)
	}
	switch {
	case len(next.Cert) > 0 && signedBy(served[corev1.TLSCertKey], next.Cert):
		data[corev1.TLSCertKey], data[caSignerKey] = next.Cert, next.Key
		delete(data, caNextCert)
		delete(data, caNextKey)
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "CARotated", "RotateCA",
			"pods serve a certificate from the new CA; the old CA leaves the trust bundle once no pod serves one it signed")
	case !certs.ValidCA(current, now) && (len(current.Cert) == 0 || !stillValid(current.Cert, now)):
		ca, err := newCA()
		if err != nil {
			return fmt.Errorf("creating the tenant CA: %w", err)
		}
		data[corev1.TLSCertKey], data[caSignerKey] = ca.Cert, ca.Key
		if v := t.Annotations[v1.AnnotationRotateCA]; v != "" {
			data[caRequested] = []byte(v) // a new CA is what it asks for
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "CAIssued", "CreateCA", "created the tenant CA in Secret %s", builders.CASecretName(t.Name))
	case len(next.Cert) == 0 && (!certs.ValidCA(current, now) || rotationRequested(t, data)):
		ca, err := newCA()
		if err != nil {
			return fmt.Errorf("creating the next tenant CA: %w", err)
		}
		data[caNextCert], data[caNextKey] = ca.Cert, ca.Key
		why := "the tenant CA is due for renewal"
		if rotationRequested(t, data) {
			data[caRequested] = []byte(t.Annotations[v1.AnnotationRotateCA])
			why = "annotation " + v1.AnnotationRotateCA + " asked for a new CA"
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "CARotationStarted", "RotateCA",
			"%s: a new CA joins the trust bundle; certificates move to it once every server trusts it", why)
	}
	return nil
}

func rotationRequested(t *v1.Tenant, data map[string][]byte) bool {
	v := t.Annotations[v1.AnnotationRotateCA]
	return v != "" && v != string(data[caRequested])
}

func pairOf(data map[string][]byte, cert, key string) certs.Pair {
	return certs.Pair{Cert: data[cert], Key: data[key]}
}

// stillValid reports whether a certificate parses and has not expired.
func stillValid(pemCert []byte, now time.Time) bool {
	c, err := certs.Leaf(pemCert)
	return err == nil && now.Before(c.NotAfter)
}

// signedBy reports whether the leaf of chain was signed by the CA in caPEM.
func signedBy(chain, caPEM []byte) bool {
	leaf, err := certs.Leaf(chain)
	return err == nil && certs.ParseBundle(caPEM).Signer(leaf) != nil
}

// stage writes the Secret the pods mount and the clients' ConfigMap (see
// the top of this file) and reports the outcome in status.
func (r *TenantReconciler) stage(ctx context.Context, s *tenantScope, src tlsSource, n tlsNames) error {
	t := s.tenant
	now := r.Config.Now()
	data, err := r.readSecret(ctx, t.Namespace, builders.TLSSecretName(t))
	if err != nil {
		return err
	}
	staged := certs.Pair{Cert: data[corev1.TLSCertKey], Key: data[corev1.TLSPrivateKeyKey]}
	prev := certs.ParseBundle(data["ca.crt"])
	checkErr := certs.Check(src.leaf, src.cas, n.required, n.ips, now)
	if t.Spec.TLS.Mode == v1.TLSOperator || t.Spec.TLS.Mode == "" {
		checkErr = nil // issued here for exactly these names
	}
	pending := checkErr == nil && string(src.leaf.Cert) != string(staged.Cert)
	var pods []podTLS
	var unseen []string
	if pending || !sameCAs(prev, src.cas) {
		pods, unseen = r.observePods(ctx, s, prev)
	}
	bundle := retain(prev, src.cas, staged, pods, unseen, now)
	hold, retry := "", rotationPoll
	if pending {
		hold, retry = r.holdReason(t, src.leaf, staged, bundle, pods, unseen, now)
		if hold == "" {
			staged = src.leaf
			bundle = retain(prev, src.cas, staged, pods, unseen, now)
			r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "CertificateStaged", "StageCertificate",
				"pods load the certificate from %s (expires %s) without a restart", src.from, notAfter(staged.Cert))
		}
	}
	if len(staged.Cert) == 0 {
		return r.certificatesWaiting(t, v1.ReasonCertificateInvalid, fmt.Sprintf("%s: %v", src.from, checkErr))
	}
	if err := r.writeServing(ctx, t, staged, bundle); err != nil {
		return err
	}
	s.ca = bundle.PEM()
	if hold != "" || !sameCAs(bundle, src.cas) {
		s.requeueWithin(retry)
	}
	r.certificateStatus(s, src, staged, bundle, hold, checkErr, now)
	return nil
}

func (r *TenantReconciler) writeServing(ctx context.Context, t *v1.Tenant, staged certs.Pair, bundle certs.Bundle) error {
	if _, err := apply(ctx, r.Client, r.Scheme, t, builders.ServingSecret(t, staged, bundle.PEM()), secretOps); err != nil {
		return err
	}
	_, err := apply(ctx, r.Client, r.Scheme, t, builders.TrustBundle(t, bundle.PEM()), configMapOps)
	return err
}

func sameCAs(a, b certs.Bundle) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		if !b.Has(c) {
			return false
		}
	}
	return true
}

// retain is the trust bundle: every CA the source needs, then every CA of
// the previous bundle that has not expired and that a pod may still serve
// a certificate from (the staged one, one a pod reports, or any while a
// pod could not be asked).
func retain(prev, need certs.Bundle, staged certs.Pair, pods []podTLS, unseen []string, now time.Time) certs.Bundle {
	out := certs.Bundle{}
	for _, c := range need {
		out = out.With(c)
	}
	leaf, _ := certs.Leaf(staged.Cert)
	for _, c := range prev {
		if out.Has(c) || now.After(c.NotAfter) {
			continue
		}
		keep := len(unseen) > 0 || (leaf != nil && (certs.Bundle{c}).Signer(leaf) != nil)
		for _, p := range pods {
			for _, l := range p.served {
				keep = keep || (certs.Bundle{c}).Signer(l) != nil
			}
		}
		if keep {
			out = out.With(c)
		}
	}
	return out
}

// holdReason says why the source's certificate may not be staged yet, ""
// when it may, and when to look again: a certificate from a CA not every
// server trusts, or one the bundle has carried for less than
// Config.CAOverlap (clients need time to fetch it), waits unless the
// staged one is unusable.
func (r *TenantReconciler) holdReason(t *v1.Tenant, next, staged certs.Pair, bundle certs.Bundle, pods []podTLS, unseen []string, now time.Time) (string, time.Duration) {
	leaf, err := certs.Leaf(next.Cert)
	if err != nil {
		return "", 0
	}
	cur, err := certs.Leaf(staged.Cert)
	if err != nil || now.After(cur.NotAfter.Add(-time.Hour)) {
		return "", 0 // nothing usable is served: the new one cannot make it worse
	}
	ca := bundle.Signer(leaf)
	if ca == nil || (certs.Bundle{ca}).Signer(cur) != nil {
		return "", 0 // a public chain, or a renewal under the CA already served
	}
	if len(unseen) > 0 {
		return fmt.Sprintf("waiting to ask %s which CAs they trust before serving a certificate from CA %q",
			strings.Join(unseen, ", "), ca.Subject.CommonName), rotationPoll
	}
	var doubters []string
	for _, p := range pods {
		if p.trusts != nil && !p.trusts[certs.Fingerprint(ca)] {
			doubters = append(doubters, p.name)
		}
	}
	if len(doubters) > 0 {
		return fmt.Sprintf("waiting for %s to trust CA %q before serving a certificate it signed",
			strings.Join(doubters, ", "), ca.Subject.CommonName), rotationPoll
	}
	if since := publishedAt(t, ca, now); now.Sub(since) < r.Config.CAOverlap {
		return fmt.Sprintf("CA %q is in the trust bundle (ConfigMap %s) since %s; certificates move to it after %s, so clients can fetch it",
			ca.Subject.CommonName, builders.TrustBundleName(t.Name), since.UTC().Format(time.RFC3339), r.Config.CAOverlap), since.Add(r.Config.CAOverlap).Sub(now) + time.Second
	}
	return "", 0
}

// publishedAt is when a CA joined the tenant's trust bundle, as status
// recorded it (now when status does not know it yet).
func publishedAt(t *v1.Tenant, ca *x509.Certificate, now time.Time) time.Time {
	if st := t.Status.Certificate; st != nil {
		for _, c := range st.TrustedCAs {
			if c.SHA256 == certs.Fingerprint(ca) && c.PublishedAt != nil {
				return c.PublishedAt.Time
			}
		}
	}
	return now
}

func notAfter(chain []byte) string {
	if c, err := certs.Leaf(chain); err == nil {
		return c.NotAfter.UTC().Format(time.RFC3339)
	}
	return "never"
}

// certificateStatus writes status.certificate and CertificatesReady, and
// warns when the served certificate is close to expiry.
func (r *TenantReconciler) certificateStatus(s *tenantScope, src tlsSource, staged certs.Pair, bundle certs.Bundle, hold string, checkErr error, now time.Time) {
	t := s.tenant
	st := &v1.CertificateStatus{Renewal: hold}
	for _, c := range bundle {
		at := metav1.NewTime(publishedAt(t, c, now))
		st.TrustedCAs = append(st.TrustedCAs, v1.TrustedCA{Subject: c.Subject.String(), SHA256: certs.Fingerprint(c),
			NotAfter: metav1.NewTime(c.NotAfter), PublishedAt: &at})
	}
	leaf, err := certs.Leaf(staged.Cert)
	if err != nil {
		return
	}
	st.NotAfter = &metav1.Time{Time: leaf.NotAfter}
	t.Status.Certificate = st
	expires := leaf.NotAfter.UTC().Format(time.RFC3339)
	switch {
	case checkErr != nil:
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCertificatesReady, false, v1.ReasonCertificateInvalid,
			fmt.Sprintf("%s: %v; pods keep serving the previous certificate (expires %s)", src.from, checkErr, expires))
	default:
		msg := "pods serve the certificate from " + src.from + ", valid until " + expires
		if hold != "" {
			msg += "; a new one waits: " + hold
		}
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCertificatesReady, true, v1.ReasonReconciled, msg)
	}
	if left := leaf.NotAfter.Sub(now); left < certificateWarning {
		s.certificateExpiring = fmt.Sprintf("the served certificate expires at %s (in %s)", expires, left.Round(time.Hour))
		if hold != "" {
			s.certificateExpiring += "; its successor waits: " + hold
		}
		if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionDegraded); c == nil || c.Reason != v1.ReasonCertificateExpiring {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, v1.ReasonCertificateExpiring, "CheckCertificate", "%s", s.certificateExpiring)
		}
	}
}

// podTLS is what one pod serves and trusts.
type podTLS struct {
	name   string
	served []*x509.Certificate // S3 and internode leaves
	trusts map[string]bool     // CA fingerprints; nil for gateways, which verify no peer
}

// observePods asks every ready pod of the tenant what it serves and (a
// server) which CAs it trusts; unseen names the ready pods that did not
// answer. Pods that are not ready serve nothing, and load the current files
// when they start.
func (r *TenantReconciler) observePods(ctx context.Context, s *tenantScope, bundle certs.Bundle) ([]podTLS, []string) {
	t := s.tenant
	list := &corev1.PodList{}
	if err := r.APIReader.List(ctx, list, client.InNamespace(t.Namespace), client.MatchingLabels{builders.LabelInstance: t.Name}); err != nil {
		return nil, []string{"the tenant's pods (" + err.Error() + ")"}
	}
	var pods []podTLS
	var unseen []string
	for i := range list.Items {
		p := &list.Items[i]
		if !podReady(p) {
			continue
		}
		obs, err := r.observePod(ctx, s, p, bundle)
		if err != nil {
			unseen = append(unseen, p.Name)
			continue
		}
		pods = append(pods, obs)
	}
	return pods, unseen
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *TenantReconciler) observePod(ctx context.Context, s *tenantScope, p *corev1.Pod, bundle certs.Bundle) (podTLS, error) {
	t := s.tenant
	obs := podTLS{name: p.Name}
	if p.Labels[builders.LabelComponent] != builders.ComponentServer {
		leaf, err := servedCertificate(ctx, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(builders.S3Port)))
		if err != nil {
			return obs, err
		}
		obs.served = append(obs.served, leaf)
		return obs, nil
	}
	if r.Config.Engine == nil {
		return obs, errors.New("no engine client")
	}
	info, err := r.Config.Engine.TLS(ctx, engine.Endpoint{
		URL: builders.PodNameURL(t, p.Name, r.Config.ClusterDomain), AccessKey: s.rootKeys[0], SecretKey: s.rootKeys[1], CA: bundle.PEM(),
	})
	if err != nil {
		return obs, err
	}
	obs.trusts = map[string]bool{}
	for _, c := range info.TrustedCAs {
		obs.trusts[c.SHA256] = true
	}
	for _, c := range []*engine.CertInfo{info.Certificate, info.InternodeCertificate} {
		if c == nil {
			continue
		}
		leaf, err := x509.ParseCertificate(c.DER)
		if err != nil {
			return obs, err
		}
		obs.served = append(obs.served, leaf)
	}
	return obs, nil
}

// servedCertificate is the leaf a pod presents on addr. It is only read,
// never trusted: no request is sent.
func servedCertificate(ctx context.Context, addr string) (*x509.Certificate, error) {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // reads the peer's certificate, sends nothing
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	state := conn.(*tls.Conn).ConnectionState()
	if len(state.PeerCertificates) == 0 {
		return nil, errors.New("no certificate served")
	}
	return state.PeerCertificates[0], nil
}
