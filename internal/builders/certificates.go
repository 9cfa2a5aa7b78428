package builders

import (
	"fmt"

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

// Certificate asks cert-manager for the tenant's serving certificate (TLS
// mode CertManager), from spec.tls.issuerRef or the operator's default
// issuer. cert-manager writes tls.crt, tls.key and ca.crt into the Secret
// every pod mounts.
func Certificate(t *v1.Tenant, dnsNames []string, defaultIssuer cmmeta.IssuerReference) *cmv1.Certificate {
	issuer := defaultIssuer
	if r := t.Spec.TLS.IssuerRef; r != nil {
		issuer = cmmeta.IssuerReference{Name: r.Name, Kind: r.Kind, Group: r.Group}
	}
	return &cmv1.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Spec: cmv1.CertificateSpec{
			SecretName: TLSSecretName(t),
			CommonName: dnsNames[3],
			DNSNames:   dnsNames,
			IssuerRef:  issuer,
			Usages:     []cmv1.KeyUsage{cmv1.UsageServerAuth, cmv1.UsageClientAuth, cmv1.UsageDigitalSignature, cmv1.UsageKeyEncipherment},
			PrivateKey: &cmv1.CertificatePrivateKey{Algorithm: cmv1.ECDSAKeyAlgorithm, Size: 256, RotationPolicy: cmv1.RotationPolicyAlways},
		},
	}
}

// CASecret holds the operator-managed CA of a tenant.
func CASecret(t *v1.Tenant, ca certs.Pair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CASecretName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.Cert, corev1.TLSPrivateKeyKey: ca.Key},
	}
}

// ServingSecret is the kubernetes.io/tls Secret pods mount (TLS mode
// Operator), with the CA as ca.crt like cert-manager writes it.
func ServingSecret(t *v1.Tenant, serving certs.Pair, caCert []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: TLSSecretName(t), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey: serving.Cert, corev1.TLSPrivateKeyKey: serving.Key, "ca.crt": caCert,
		},
	}
}
