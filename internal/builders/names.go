// Package builders turns Strata specs into the Kubernetes objects that run
// them. Every function here is pure: values in, objects out, no client.
// Reconcilers in controllers/ compare these desired objects with what
// exists and write only the difference.
package builders

import (
	"fmt"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Names of the objects the operator creates. All are derived from the
// Tenant's and pools' names, so they are stable across reconciles.

// S3Port is the port every strata container serves S3, health, metrics and
// the admin API on.
const S3Port = 9000

// ConsolePort is where a server pod serves the web console when the
// Tenant enables it (spec.console), on the tenant's Service too.
const ConsolePort = 9090

// MaxWorkloadName is the longest StatefulSet name Kubernetes accepts: pods
// get a controller-revision-hash label "<name>-<10 chars>" that must fit in
// 63 characters.
const MaxWorkloadName = 52

// HeadlessServiceName gives every server pod of a tenant a DNS name.
func HeadlessServiceName(tenant string) string { return tenant + "-hl" }

// S3ServiceName is the Service clients use for the tenant's server pools.
func S3ServiceName(tenant string) string { return tenant }

// RootSecretName is the Secret holding root keys: the referenced one, or the
// one the operator generates.
func RootSecretName(t *v1.Tenant) string {
	if t.Spec.Credentials.SecretRef != nil {
		return t.Spec.Credentials.SecretRef.Name
	}
	return GeneratedRootSecretName(t.Name)
}

// GeneratedRootSecretName is where generated root keys live.
func GeneratedRootSecretName(tenant string) string { return tenant + "-root-credentials" }

// EncryptionKeysSecretName is the Secret of the tenant's encryption master
// keys: the one spec.encryption names, else the generated one.
func EncryptionKeysSecretName(t *v1.Tenant) string {
	if t.Spec.Encryption.KeysSecretRef != nil {
		return t.Spec.Encryption.KeysSecretRef.Name
	}
	return GeneratedEncryptionKeysSecretName(t.Name)
}

// GeneratedEncryptionKeysSecretName is where generated master keys live.
func GeneratedEncryptionKeysSecretName(tenant string) string { return tenant + "-encryption-keys" }

// NotifyTargetsSecretName holds the rendered notification targets file.
func NotifyTargetsSecretName(tenant string) string { return tenant + "-notify-targets" }

// IAMSecretName holds the rendered IAM users file.
func IAMSecretName(tenant string) string { return tenant + "-iam" }

// MetricsTokenSecretName holds the bearer token Prometheus presents to
// the tenant's /strata/metrics.
func MetricsTokenSecretName(tenant string) string { return tenant + "-metrics-token" }

// TopologyConfigMapName holds topology.json (docs/topology.md).
func TopologyConfigMapName(tenant string) string { return tenant + "-topology" }

// TLSSecretName is the serving certificate Secret mounted by every pod,
// written by the operator in every TLS mode (docs/tls.md: the operator
// stages a new certificate there once every pod trusts its CA); "" when
// TLS is disabled.
func TLSSecretName(t *v1.Tenant) string {
	if t.Spec.TLS.Mode == v1.TLSDisabled {
		return ""
	}
	return t.Name + "-tls"
}

// TLSSourceSecretName is the Secret a new certificate comes from: the one
// cert-manager writes (mode CertManager) or the user's (mode External); ""
// in mode Operator, which issues into TLSSecretName itself.
func TLSSourceSecretName(t *v1.Tenant) string {
	switch t.Spec.TLS.Mode {
	case v1.TLSCertManager:
		return t.Name + "-cert-manager-tls"
	case v1.TLSExternal:
		if t.Spec.TLS.SecretRef != nil {
			return t.Spec.TLS.SecretRef.Name
		}
	}
	return ""
}

// TrustBundleName is the ConfigMap with the tenant's trust bundle (key
// ca.crt) for clients: every CA a pod may serve a certificate from.
func TrustBundleName(tenant string) string { return tenant + "-ca-bundle" }

// CASecretName holds the operator's CA of a tenant (mode Operator).
func CASecretName(tenant string) string { return tenant + "-ca" }

// CertManagerCASecretName holds the CA cert-manager bootstraps for a tenant
// (mode CertManager without an issuerRef).
func CertManagerCASecretName(tenant string) string { return tenant + "-cert-manager-ca" }

// SelfSignedIssuerName is the cert-manager Issuer that signs the tenant's
// CA (mode CertManager without an issuerRef).
func SelfSignedIssuerName(tenant string) string { return tenant + "-selfsigned" }

// CAIssuerName is the cert-manager CA Issuer that signs the tenant's
// serving certificate from Secret CertManagerCASecretName; the CA's
// Certificate has the same name.
func CAIssuerName(tenant string) string { return tenant + "-ca" }

// ServerPoolName is the base name of a ServerPool's StatefulSets and PDB.
func ServerPoolName(tenant, pool string) string { return tenant + "-" + pool }

// StatefulSetName is one StatefulSet of a pool; suffix is the domain name
// for pools with explicit domains.
func StatefulSetName(tenant, pool, suffix string) string {
	if suffix == "" {
		return ServerPoolName(tenant, pool)
	}
	return ServerPoolName(tenant, pool) + "-" + suffix
}

// GatewayName is a GatewayPool's Deployment, Service, HPA and PDB.
func GatewayName(tenant, pool string) string { return tenant + "-" + pool }

// GatewayClaimName is the claim the operator creates for a GatewayPool
// without volume.claimName.
func GatewayClaimName(tenant, pool string) string { return GatewayName(tenant, pool) + "-data" }

// TLSEnabled reports whether the tenant serves HTTPS.
func TLSEnabled(t *v1.Tenant) bool { return TLSSecretName(t) != "" }

// Scheme of the tenant's URLs.
func Scheme(t *v1.Tenant) string {
	if TLSEnabled(t) {
		return "https"
	}
	return "http"
}

// ServicePort is the tenant's exposed S3 port: spec.expose.port, else 443
// with TLS and 80 without.
func ServicePort(t *v1.Tenant) int32 {
	if t.Spec.Expose.Port != 0 {
		return t.Spec.Expose.Port
	}
	if TLSEnabled(t) {
		return 443
	}
	return 80
}

// ServiceURL is the in-cluster URL of a Service of the tenant.
func ServiceURL(t *v1.Tenant, service, clusterDomain string) string {
	return fmt.Sprintf("%s://%s.%s.svc.%s:%d", Scheme(t), service, t.Namespace, clusterDomain, ServicePort(t))
}

// Image is the engine image of a tenant.
func Image(t *v1.Tenant, defaultImage string) string {
	if t.Spec.Image != "" {
		return t.Spec.Image
	}
	return defaultImage
}

// PodNameURL is the address of a server pod, by name, through the headless
// Service (the operator asks each pod what certificates it uses).
func PodNameURL(t *v1.Tenant, pod, clusterDomain string) string {
	return fmt.Sprintf("%s://%s.%s.%s.svc.%s:%d", Scheme(t), pod, HeadlessServiceName(t.Name), t.Namespace, clusterDomain, S3Port)
}

// PodURL is the address of one server pod through the headless Service
// (the upgrade gate asks each pod before it restarts).
func PodURL(t *v1.Tenant, statefulSet string, ordinal int32, clusterDomain string) string {
	return fmt.Sprintf("%s://%s-%d.%s.%s.svc.%s:%d", Scheme(t), statefulSet, ordinal, HeadlessServiceName(t.Name), t.Namespace, clusterDomain, S3Port)
}
