package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// The prometheus-operator CRDs are discovered, never required: installed
// after the operator started, they are used on the next reconcile.
var _ = Describe("monitoring", Ordered, func() {
	BeforeAll(func() {
		var crds []*apiextensionsv1.CustomResourceDefinition
		for _, k := range []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}} {
			crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".monitoring.coreos.com"},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Group: "monitoring.coreos.com", Scope: apiextensionsv1.NamespaceScoped,
					Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, ListKind: k.kind + "List", Plural: k.plural, Singular: ""},
					Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
						Name: "v1", Served: true, Storage: true,
						Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
							Type: "object", XPreserveUnknownFields: ptr.To(true),
						}},
					}},
				},
			})
		}
		_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})
		Expect(err).NotTo(HaveOccurred())
	})

	It("scrapes every pod over TLS with the tenant CA and its metrics token, and installs alerts; off removes them", func() {
		ns := newNamespace()
		t := tenant(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		sm := &monitoringv1.ServiceMonitor{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media"), sm) }).Should(Succeed())
		Expect(sm.Spec.Selector.MatchLabels).To(HaveKeyWithValue("storage.strata.dev/metrics", "true"))
		Expect(sm.Labels).To(HaveKeyWithValue("release", "kube-prometheus-stack"), "the operator's --monitoring-labels")
		ep := sm.Spec.Endpoints[0]
		Expect(ep.Path).To(Equal("/strata/metrics"))
		Expect(ep.Port).To(Equal("https"))
		Expect(string(ep.Interval)).To(Equal("30s"))
		Expect(ep.TLSConfig.CA.Secret.Name).To(Equal("media-tls"))
		Expect(*ep.TLSConfig.ServerName).To(Equal("media." + ns + ".svc"))
		Expect(ep.Authorization.Type).To(Equal("Bearer"))
		Expect(*ep.Authorization.Credentials).To(Equal(corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "media-metrics-token"}, Key: "token"}))
		Expect(ep.RelabelConfigs).To(ContainElement(HaveField("TargetLabel", "tenant")))
		pr := &monitoringv1.PrometheusRule{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media"), pr) }).Should(Succeed())
		Expect(pr.Labels).To(HaveKeyWithValue("team", "storage"), "the operator's --monitoring-labels")
		var alerts []string
		for _, r := range pr.Spec.Groups[0].Rules {
			alerts = append(alerts, r.Alert)
		}
		Expect(alerts).To(ContainElements("StrataDriveOffline", "StrataWriteQuorumAtRisk", "StrataPodDown", "StrataCapacityCritical",
			"StrataCertificateExpiring", "StrataDecommissionStuck"))

		update(t, func(t *v1.Tenant) { t.Spec.Monitoring.ServiceMonitor.Labels = map[string]string{"release": "prom-b"} })
		Eventually(func() map[string]string {
			Expect(k8s.Get(ctx, key(ns, "media"), sm)).To(Succeed())
			return sm.Labels
		}).Should(And(HaveKeyWithValue("release", "prom-b"), HaveKeyWithValue("team", "storage")), "the Tenant's own labels win")

		update(t, func(t *v1.Tenant) { t.Spec.Monitoring.ServiceMonitor.Enabled = ptr.To(false) })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media"), &monitoringv1.ServiceMonitor{}))
		}).Should(BeTrue())
		Expect(k8s.Get(ctx, key(ns, "media"), &monitoringv1.PrometheusRule{})).To(Succeed())
	})

	It("generates the metrics token once, keeps one rotated by hand, replaces an emptied or deleted one, and never tells it", func() {
		ns := newNamespace()
		t := tenant(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		token := func() (string, error) {
			sec := &corev1.Secret{}
			err := k8s.Get(ctx, key(ns, "media-metrics-token"), sec)
			return string(sec.Data["token"]), err
		}
		Eventually(token).Should(HaveLen(43))
		first, _ := token()
		sec := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "media-metrics-token"), sec)).To(Succeed())
		Expect(k8s.Get(ctx, key(ns, "media"), t)).To(Succeed())
		Expect(metav1.IsControlledBy(sec, t)).To(BeTrue(), "the token goes with its Tenant")

		By("keeping a token rotated by hand across reconciles")
		update(sec, func(s *corev1.Secret) { s.Data["token"] = []byte("rotated-by-hand") })
		update(t, func(t *v1.Tenant) { t.Labels = map[string]string{"reconcile": "again"} })
		Consistently(token, "2s").Should(Equal("rotated-by-hand"))

		By("replacing an emptied token, and a deleted Secret")
		update(sec, func(s *corev1.Secret) { s.Data["token"] = nil })
		Eventually(token).Should(HaveLen(43))
		Expect(k8s.Delete(ctx, sec)).To(Succeed())
		Eventually(func() (string, error) {
			tok, err := token()
			if tok == "rotated-by-hand" || tok == first {
				return "", err
			}
			return tok, err
		}).Should(HaveLen(43))

		By("naming the Secret in Events, never the token")
		last, _ := token()
		events := &eventsv1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(BeEmpty())
		for _, e := range events.Items {
			for _, tok := range []string{first, last} {
				Expect(e.Note).NotTo(ContainSubstring(tok))
			}
		}
	})
})
