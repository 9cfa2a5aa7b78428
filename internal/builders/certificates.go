package builders

import (
	"fmt"
	"net"
	"slices"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/certs"
)

// DNSNames are the subject alternative names of a tenant's serving
// certificate: its Services (short, namespaced and fully qualified), the
// headless wildcard that covers every server pod, each gateway Service, and
// spec.tls.dnsNames.
func DNSNames(t *v1.Tenant, gateways []string, clusterDomain string) []string {
	var out []string
	add := func(svc string) {
		out = append(out, svc, svc+"."+t.Namespace, svc+"."+t.Namespace+".svc", svc+"."+t.Namespace+".svc."+clusterDomain)
	}
	add(S3ServiceName(t.Name))
	hl := HeadlessServiceName(t.Name)
	out = append(out, fmt.Sprintf("*.%s.%s.svc", hl, t.Namespace), fmt.Sprintf("*.%s.%s.svc.%s", hl, t.Namespace, clusterDomain))
	for _, g := range gateways {
		add(GatewayName(t.Name, g))
	}
	out = append(out, t.Spec.TLS.DNSNames...)
	return out
}

// RequiredNames are the names an External certificate must cover: the
// pods' wildcard (servers verify each other by it) and the fully qualified
// names of the S3 and gateway Services (the operator reaches them so).
func RequiredNames(t *v1.Tenant, gateways []string, clusterDomain string) []string {
	fq := func(svc string) string { return svc + "." + t.Namespace + ".svc." + clusterDomain }
	out := []string{fmt.Sprintf("*.%s", fq(HeadlessServiceName(t.Name))), fq(S3ServiceName(t.Name))}
	for _, g := range gateways {
		out = append(out, fq(GatewayName(t.Name, g)))
	}
	return out
}

// IPAddresses are the IP subject alternative names of a tenant's serving
// certificate: spec.tls.ipAddresses, then the S3 Service's external IPs and
// load balancer ingress IPs (svc may be nil), each once.
func IPAddresses(t *v1.Tenant, svc *corev1.Service) []net.IP {
	var out []net.IP
	add := func(s string) {
		ip := net.ParseIP(s)
		if ip != nil && !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	for _, a := range t.Spec.TLS.IPAddresses {
		add(a)
	}
	if svc != nil {
		for _, a := range svc.Spec.ExternalIPs {
			add(a)
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			add(in.IP)
		}
	}
	return out
}

// certManagerCADuration is the lifetime of the CA cert-manager bootstraps
// for a tenant; it renews a third before expiry, with a new key.
const certManagerCADuration = 5 * 365 * 24 * time.Hour

// Certificate asks cert-manager for the tenant's serving certificate (TLS
// mode CertManager) from issuer. cert-manager writes tls.crt, tls.key and
// ca.crt into TLSSourceSecretName; the operator stages them into the Secret
// the pods mount.
func Certificate(t *v1.Tenant, dnsNames []string, ips []net.IP, issuer cmmeta.IssuerReference) *cmv1.Certificate {
	var addrs []string
	for _, ip := range ips {
		addrs = append(addrs, ip.String())
	}
	return &cmv1.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Spec: cmv1.CertificateSpec{
			SecretName:  TLSSourceSecretName(t),
			CommonName:  dnsNames[3],
			DNSNames:    dnsNames,
			IPAddresses: addrs,
			IssuerRef:   issuer,
			Usages:      []cmv1.KeyUsage{cmv1.UsageServerAuth, cmv1.UsageClientAuth, cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment},
			PrivateKey:  &cmv1.CertificatePrivateKey{Algorithm: cmv1.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmv1.RotationPolicyAlways},
		},
	}
}

// CertManagerCA is the chain cert-manager bootstraps for a tenant without an
// issuerRef: a self-signed Issuer, the tenant's CA Certificate it signs (in
// Secret CASecretName), and a CA Issuer that signs the serving certificate
// with it. The CA renews with a new key; the operator publishes the new CA
// to every pod before a certificate it signed is served (docs/tls.md).
func CertManagerCA(t *v1.Tenant) (selfSigned *cmv1.Issuer, ca *cmv1.Certificate, caIssuer *cmv1.Issuer) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: t.Namespace, Labels: TenantLabels(t.Name)}
	}
	selfSigned = &cmv1.Issuer{ObjectMeta: meta(SelfSignedIssuerName(t.Name)),
		Spec: cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}}}}
	ca = &cmv1.Certificate{
		ObjectMeta: meta(CAIssuerName(t.Name)),
		Spec: cmv1.CertificateSpec{
			IsCA:       true,
			CommonName: t.Name + "." + t.Namespace + " strata CA",
			SecretName: CertManagerCASecretName(t.Name),
			Duration:   &metav1.Duration{Duration: certManagerCADuration},
			IssuerRef:  cmmeta.IssuerReference{Name: SelfSignedIssuerName(t.Name), Kind: "Issuer", Group: "cert-manager.io"},
			PrivateKey: &cmv1.CertificatePrivateKey{Algorithm: cmv1.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmv1.RotationPolicyAlways},
		},
	}
	caIssuer = &cmv1.Issuer{ObjectMeta: meta(CAIssuerName(t.Name)),
		Spec: cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{CA: &cmv1.CAIssuer{SecretName: CertManagerCASecretName(t.Name)}}}}
	return selfSigned, ca, caIssuer
}

// CASecret holds the operator-managed CA of a tenant (mode Operator): keys
// as given (tls.crt and tls.key, the signing CA; next.crt and next.key
// during a rotation; leaf.crt and leaf.key, the certificate to serve next).
func CASecret(t *v1.Tenant, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CASecretName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
}

// ServingSecret is the kubernetes.io/tls Secret pods mount, in every TLS
// mode: the certificate staged for serving and, as ca.crt, the trust
// bundle (omitted when empty: the engine then verifies peers against the
// system roots).
func ServingSecret(t *v1.Tenant, serving certs.Pair, bundle []byte) *corev1.Secret {
	data := map[string][]byte{corev1.TLSCertKey: serving.Cert, corev1.TLSPrivateKeyKey: serving.Key}
	if len(bundle) > 0 {
		data["ca.crt"] = bundle
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: TLSSecretName(t), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
}

// TrustBundle is the ConfigMap clients read the tenant's CAs from (key
// ca.crt): the same bundle as the pods', without needing Secret access.
func TrustBundle(t *v1.Tenant, bundle []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: TrustBundleName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Data:       map[string]string{"ca.crt": string(bundle)},
	}
}
