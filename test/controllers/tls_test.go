package controllers_test

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/certs"
)

// The operator stages certificates into Secret <tenant>-tls in every TLS
// mode, and orders a CA change: the new CA is trusted first, the
// certificate moves after the overlap, the old CA leaves last. No pods run
// here (no kubelet), so no pod holds a step back; test/localcluster runs
// the same rotations with pods under load.
var _ = Describe("certificates", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("rotates the operator's CA with overlap: the new CA is published before certificates move to it and dropped from nowhere", func() {
		now := clock.Now()
		By("starting from a CA six and a half years into its ten")
		old, err := certs.NewCA("old CA", now.Add(-6*365*24*time.Hour-180*24*time.Hour), rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		t := tenant(ns)
		Expect(k8s.Create(ctx, builders.CASecret(t, map[string][]byte{"tls.crt": old.Cert, "tls.key": old.Key}))).To(Succeed())
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(servedIssuer(ns)).Should(Equal("old CA"))
		// The bundle's ConfigMap is written after the serving Secret in a
		// pass (seed 1796124908 read between the two).
		Eventually(bundleSubjects(ns)).Should(Equal([]string{"old CA"}))

		By("moving the clock past the CA's renewal (and the certificate's)")
		clock.Advance(70 * 24 * time.Hour)
		DeferCleanup(clock.Reset)
		touch(t)
		Eventually(bundleSubjects(ns)).Should(HaveLen(2))
		Expect(servedIssuer(ns)()).To(Equal("old CA"), "the certificate waits for the overlap")
		Eventually(func() string { return tenantRenewal(t) }).Should(ContainSubstring("certificates move to it after"))
		Eventually(eventsFor(ns, "media")).Should(ContainElement("CARotationStarted"))

		By("serving from the new CA once the overlap has passed, then dropping the old CA")
		Eventually(servedIssuer(ns), 20*time.Second).Should(HavePrefix("media." + ns + " strata CA"))
		// One match on the whole bundle: while the ConfigMap and the Secret
		// are written one after the other, bundleSubjects reports their
		// difference as a single entry, which a bare length check accepts.
		Eventually(bundleSubjects(ns), 20*time.Second).Should(ConsistOf(HavePrefix("media." + ns + " strata CA")))
		Eventually(eventsFor(ns, "media")).Should(ContainElements("CARotated", "CertificateStaged"))
		ca := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "media-ca"), ca)).To(Succeed())
		Expect(ca.Data).NotTo(HaveKey("next.crt"))
		Expect(string(ca.Data["tls.crt"])).NotTo(Equal(string(old.Cert)))
		Eventually(func() string { return tenantRenewal(t) }).Should(BeEmpty())
	})

	It("puts spec.tls.ipAddresses and the Service's load balancer addresses in the certificate; refuses a malformed address", func() {
		t := tenant(ns)
		t.Spec.TLS.IPAddresses = []string{"127.0.0.1"}
		t.Spec.Expose.Type = "LoadBalancer"
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(servedIPs(ns)).Should(Equal([]string{"127.0.0.1"}))

		svc := &corev1.Service{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media"), svc) }).Should(Succeed())
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
		Expect(k8s.Status().Update(ctx, svc)).To(Succeed())
		Eventually(servedIPs(ns)).Should(Equal([]string{"127.0.0.1", "203.0.113.7"}))

		bad := tenant(newNamespace())
		bad.Spec.TLS.IPAddresses = []string{"localhost"}
		err := k8s.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("tls.ipAddresses must hold IPv4 or IPv6 addresses"))
	})

	It("validates an External certificate, keeps the last good one, stages a CA change with overlap and warns before expiry", func() {
		t := tenant(ns)
		t.Spec.TLS = v1.TLSSpec{Mode: v1.TLSExternal, SecretRef: &v1.SecretReference{Name: "mine"}}
		names := builders.DNSNames(t, nil, "cluster.local")
		caX, leafX := caAndLeaf("ca X", names, clock.Now(), 90*24*time.Hour)
		user := userSecret(ns, "mine", leafX, caX.Cert)
		Expect(k8s.Create(ctx, user)).To(Succeed())
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Eventually(servedIssuer(ns)).Should(Equal("ca X"))
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("True/Reconciled"))

		By("refusing a certificate that misses the pods' names, naming what is missing")
		_, narrow := caAndLeafFrom(caX, []string{"media." + ns + ".svc"}, clock.Now(), 90*24*time.Hour)
		user.Data["tls.crt"], user.Data["tls.key"] = narrow.Cert, narrow.Key
		Expect(k8s.Update(ctx, user)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("False/CertificateInvalid"))
		msg := conditionMessage(t, v1.ConditionCertificatesReady)
		Expect(msg).To(ContainSubstring("*.media-hl." + ns + ".svc.cluster.local"))
		Expect(msg).To(ContainSubstring("pods keep serving the previous certificate"))
		Expect(servedIssuer(ns)()).To(Equal("ca X"))

		By("a new CA and a certificate from it at once: the CA is trusted first, the certificate follows after the overlap")
		caY, leafY := caAndLeaf("ca Y", names, clock.Now(), 90*24*time.Hour)
		user.Data = map[string][]byte{"tls.crt": leafY.Cert, "tls.key": leafY.Key, "ca.crt": caY.Cert}
		Expect(k8s.Update(ctx, user)).To(Succeed())
		Eventually(bundleSubjects(ns)).Should(Equal([]string{"ca Y", "ca X"}))
		Expect(servedIssuer(ns)()).To(Equal("ca X"))
		Eventually(servedIssuer(ns), 20*time.Second).Should(Equal("ca Y"))
		Eventually(bundleSubjects(ns), 20*time.Second).Should(Equal([]string{"ca Y"}))
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("True/Reconciled"))

		By("a certificate that expires in ten days makes the tenant Degraded and records a Warning")
		_, short := caAndLeafFrom(caY, names, clock.Now(), 10*24*time.Hour)
		user.Data["tls.crt"], user.Data["tls.key"] = short.Cert, short.Key
		Expect(k8s.Update(ctx, user)).To(Succeed())
		Eventually(tenantCondition(t, v1.ConditionDegraded)).Should(Equal("True/CertificateExpiring"))
		Expect(conditionMessage(t, v1.ConditionCertificatesReady)).To(ContainSubstring("valid until"))
		Expect(t.Status.Certificate.NotAfter).NotTo(BeNil())
		Eventually(eventsFor(ns, "media")).Should(ContainElement("CertificateExpiring"))
	})

	It("bootstraps a CA chain through cert-manager and trusts a renewed CA before any certificate uses it", func() {
		installCertManagerCRDs()
		t := tenant(ns)
		t.Spec.TLS = v1.TLSSpec{Mode: v1.TLSCertManager, IPAddresses: []string{"127.0.0.1"}}
		Expect(k8s.Create(ctx, t)).To(Succeed())

		By("creating a self-signed Issuer, the tenant's CA Certificate, a CA Issuer and the serving Certificate")
		selfSigned, caIssuer, caCert, leafCert := &cmv1.Issuer{}, &cmv1.Issuer{}, &cmv1.Certificate{}, &cmv1.Certificate{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media"), leafCert) }).Should(Succeed())
		Expect(k8s.Get(ctx, key(ns, "media-selfsigned"), selfSigned)).To(Succeed())
		Expect(selfSigned.Spec.SelfSigned).NotTo(BeNil())
		Expect(k8s.Get(ctx, key(ns, "media-ca"), caIssuer)).To(Succeed())
		Expect(caIssuer.Spec.CA.SecretName).To(Equal("media-cert-manager-ca"))
		Expect(k8s.Get(ctx, key(ns, "media-ca"), caCert)).To(Succeed())
		Expect(caCert.Spec.IsCA).To(BeTrue())
		Expect(caCert.Spec.IssuerRef.Name).To(Equal("media-selfsigned"))
		Expect(leafCert.Spec.IssuerRef.Name).To(Equal("media-ca"))
		Expect(leafCert.Spec.SecretName).To(Equal("media-cert-manager-tls"))
		Expect(leafCert.Spec.IPAddresses).To(Equal([]string{"127.0.0.1"}))
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("False/Creating"))

		By("acting as cert-manager: the CA Secret, then the serving Secret")
		names := leafCert.Spec.DNSNames
		ca1, leaf1 := caAndLeaf("cm CA 1", names, clock.Now(), 90*24*time.Hour, net.ParseIP("127.0.0.1"))
		Expect(k8s.Create(ctx, certManagerSecret(ns, "media-cert-manager-ca", ca1, ca1.Cert))).To(Succeed())
		Expect(k8s.Create(ctx, certManagerSecret(ns, "media-cert-manager-tls", leaf1, ca1.Cert))).To(Succeed())
		Eventually(servedIssuer(ns)).Should(Equal("cm CA 1"))
		Eventually(tenantCondition(t, v1.ConditionCertificatesReady)).Should(Equal("True/Reconciled"))

		By("the CA renews: it is trusted at once, while the certificate still comes from the old one")
		ca2, leaf2 := caAndLeaf("cm CA 2", names, clock.Now(), 90*24*time.Hour, net.ParseIP("127.0.0.1"))
		sec := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "media-cert-manager-ca"), sec)).To(Succeed())
		sec.Data = certManagerSecret(ns, "media-cert-manager-ca", ca2, ca2.Cert).Data
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Eventually(bundleSubjects(ns)).Should(ConsistOf("cm CA 1", "cm CA 2"))
		Expect(servedIssuer(ns)()).To(Equal("cm CA 1"))

		By("the certificate renews from the new CA: served after the overlap, the old CA dropped")
		Expect(k8s.Get(ctx, key(ns, "media-cert-manager-tls"), sec)).To(Succeed())
		sec.Data = certManagerSecret(ns, "media-cert-manager-tls", leaf2, ca2.Cert).Data
		Expect(k8s.Update(ctx, sec)).To(Succeed())
		Eventually(servedIssuer(ns), 20*time.Second).Should(Equal("cm CA 2"))
		Eventually(bundleSubjects(ns), 20*time.Second).Should(Equal([]string{"cm CA 2"}))
	})
})

// servedIssuer is the issuer CN of the certificate staged for the pods.
func servedIssuer(ns string) func() string {
	return func() string {
		if c := stagedLeaf(ns); c != nil {
			return c.Issuer.CommonName
		}
		return ""
	}
}

func servedIPs(ns string) func() []string {
	return func() []string {
		c := stagedLeaf(ns)
		if c == nil {
			return nil
		}
		var out []string
		for _, ip := range c.IPAddresses {
			out = append(out, ip.String())
		}
		return out
	}
}

func stagedLeaf(ns string) *x509.Certificate {
	sec := &corev1.Secret{}
	if err := k8s.Get(ctx, key(ns, "media-tls"), sec); err != nil {
		return nil
	}
	c, err := certs.Leaf(sec.Data["tls.crt"])
	if err != nil {
		return nil
	}
	return c
}

// bundleSubjects are the CNs of the clients' trust bundle; the pods' ca.crt
// must hold the same.
func bundleSubjects(ns string) func() []string {
	return func() []string {
		cm, sec := &corev1.ConfigMap{}, &corev1.Secret{}
		if k8s.Get(ctx, key(ns, "media-ca-bundle"), cm) != nil || k8s.Get(ctx, key(ns, "media-tls"), sec) != nil {
			return nil
		}
		if cm.Data["ca.crt"] != string(sec.Data["ca.crt"]) {
			return []string{"the ConfigMap and the Secret differ"}
		}
		var out []string
		for _, c := range certs.ParseBundle([]byte(cm.Data["ca.crt"])) {
			out = append(out, c.Subject.CommonName)
		}
		return out
	}
}

func tenantRenewal(t *v1.Tenant) string {
	if k8s.Get(ctx, key(t.Namespace, t.Name), t) != nil || t.Status.Certificate == nil {
		return ""
	}
	return t.Status.Certificate.Renewal
}

func conditionMessage(t *v1.Tenant, typ string) string {
	Expect(k8s.Get(ctx, key(t.Namespace, t.Name), t)).To(Succeed())
	for _, c := range t.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

// touch makes the operator look at a tenant again (after the clock moved):
// a merge patch, which the operator's own writes cannot make conflict.
func touch(t *v1.Tenant) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.strata.dev/touched":%q}}}`, clock.Now().String())
	Expect(k8s.Patch(ctx, t, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

func caAndLeaf(cn string, names []string, now time.Time, life time.Duration, ips ...net.IP) (ca, leaf certs.Pair) {
	ca, err := certs.NewCA(cn, now, rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	return caAndLeafFrom(ca, names, now, life, ips...)
}

// caAndLeafFrom issues a certificate for names and ips from ca that
// expires life after now.
func caAndLeafFrom(ca certs.Pair, names []string, now time.Time, life time.Duration, ips ...net.IP) (certs.Pair, certs.Pair) {
	leaf, err := certs.Issue(ca, names, ips, now.Add(life-certs.ServingLifetime), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	return ca, leaf
}

func userSecret(ns, name string, leaf certs.Pair, ca []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": ca},
	}
}

// certManagerSecret is a Secret as cert-manager writes it, with the labels
// of the Certificate's secretTemplate.
func certManagerSecret(ns, name string, p certs.Pair, ca []byte) *corev1.Secret {
	s := userSecret(ns, name, p, ca)
	s.Labels = builders.TenantLabels("media")
	return s
}

// installCertManagerCRDs installs cert-manager's own CRDs (from its Go
// module) once.
func installCertManagerCRDs() {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	Expect(err).NotTo(HaveOccurred())
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	Expect(err).NotTo(HaveOccurred())
}
