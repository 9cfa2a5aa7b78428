package chart_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The chart's monitoring assets: the Grafana dashboard's ConfigMap (on by
// default, labelled for the sidecar) and the PrometheusRule on the
// operator's metrics (off by default). Both carry their files verbatim:
// test/monitoring parses and unit-tests those files.
var _ = Describe("the strata-operator chart's monitoring assets", func() {
	// render returns the documents of one kind, by name.
	render := func(vals string, kind string) map[string]string {
		linter := lint.All(chartDir, values(vals), namespace, false)
		Expect(linter.HighestSeverity).To(BeNumerically("<", support.WarningSev), fmt.Sprint(linter.Messages))
		install := action.NewInstall(helm())
		install.ReleaseName, install.Namespace = "monitoring", namespace
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
		rel, err := install.RunWithContext(ctx, chrt, values(vals))
		Expect(err).NotTo(HaveOccurred())
		out := map[string]string{}
		for _, doc := range strings.Split(rel.Manifest, "\n---") {
			var head struct {
				metav1.TypeMeta   `json:",inline"`
				metav1.ObjectMeta `json:"metadata"`
			}
			Expect(yaml.Unmarshal([]byte(doc), &head)).To(Succeed())
			if head.Kind == kind {
				out[head.Name] = doc
			}
		}
		return out
	}
	file := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(chartDir, rel))
		Expect(err).NotTo(HaveOccurred())
		return b
	}

	It("passes tenantMonitoringLabels to the operator, sorted, and nothing without them", func() {
		args := func(vals string) []string {
			for _, doc := range render(vals, "Deployment") {
				var d appsv1.Deployment
				Expect(yaml.Unmarshal([]byte(doc), &d)).To(Succeed())
				return d.Spec.Template.Spec.Containers[0].Args
			}
			Fail("no Deployment rendered")
			return nil
		}
		Expect(args(`tenantMonitoringLabels: {team: storage, release: kube-prometheus-stack}`)).To(
			ContainElement("--monitoring-labels=release=kube-prometheus-stack,team=storage"))
		Expect(args("")).NotTo(ContainElement(HavePrefix("--monitoring-labels")))
	})

	It("ships the dashboard in a ConfigMap labelled for Grafana's sidecar, in the namespace asked for", func() {
		docs := render("", "ConfigMap")
		Expect(docs).To(HaveKey("monitoring-strata-operator-dashboards"))
		cm := &corev1.ConfigMap{}
		Expect(yaml.UnmarshalStrict([]byte(docs["monitoring-strata-operator-dashboards"]), cm)).To(Succeed())
		Expect(cm.Namespace).To(Equal(namespace))
		Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
		Expect(cm.Data["strata.json"]).To(Equal(strings.TrimSpace(string(file("dashboards/strata.json")))), "the dashboard must be copied verbatim")
		Expect(json.Valid([]byte(cm.Data["strata.json"]))).To(BeTrue())

		docs = render(`
dashboards: {namespace: monitoring, sidecarLabel: team_dashboard, sidecarLabelValue: strata, labels: {team: storage}, annotations: {grafana_folder: Strata}}
`, "ConfigMap")
		cm = &corev1.ConfigMap{}
		Expect(yaml.UnmarshalStrict([]byte(docs["monitoring-strata-operator-dashboards"]), cm)).To(Succeed())
		Expect(cm.Namespace).To(Equal("monitoring"))
		Expect(cm.Labels).To(HaveKeyWithValue("team_dashboard", "strata"))
		Expect(cm.Labels).To(HaveKeyWithValue("team", "storage"))
		Expect(cm.Labels).NotTo(HaveKey("grafana_dashboard"))
		Expect(cm.Annotations).To(HaveKeyWithValue("grafana_folder", "Strata"))

		Expect(render(`dashboards: {enabled: false}`, "ConfigMap")).NotTo(HaveKey("monitoring-strata-operator-dashboards"))
	})

	It("renders the operator's PrometheusRule only when asked, with the rule file's groups", func() {
		Expect(render("", "PrometheusRule")).To(BeEmpty())
		docs := render(`metrics: {prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}}`, "PrometheusRule")
		Expect(docs).To(HaveKey("monitoring-strata-operator"))
		pr := &monitoringv1.PrometheusRule{}
		Expect(yaml.UnmarshalStrict([]byte(docs["monitoring-strata-operator"]), pr)).To(Succeed(), "fields prometheus-operator does not know")
		Expect(pr.Labels).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		var want monitoringv1.PrometheusRuleSpec
		Expect(yaml.UnmarshalStrict(file("rules/operator.yaml"), &want)).To(Succeed())
		Expect(pr.Spec).To(Equal(want))
		Expect(pr.Spec.Groups[0].Rules[0].Annotations["summary"]).To(ContainSubstring("{{ $labels.tenant }}"), "Helm must not expand the rule's templates")
	})
})
