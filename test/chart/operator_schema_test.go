package chart_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
)

// The operator chart's values.schema.json: it must accept the chart's own
// values.yaml, leave room for monitoring settings under metrics and
// dashboards, and refuse misspelt keys and wrong types with a message that
// names the key.
var _ = Describe("the strata-operator chart's values schema", func() {
	render := func(vals string) error {
		install := action.NewInstall(helm())
		install.ReleaseName, install.Namespace = "schema", namespace
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
		_, err := install.RunWithContext(ctx, chrt, values(vals))
		return err
	}

	It("accepts the chart's own values.yaml", func() {
		Expect(chrt.Schema).NotTo(BeEmpty(), "the chart has no values.schema.json")
		Expect(chartutil.ValidateAgainstSchema(chrt, chrt.Values)).To(Succeed())
		Expect(render("")).To(Succeed())
	})

	It("prints NOTES with the next step, the default engine image, the CRD upgrade step and where the webhook certificate comes from", func() {
		install := action.NewInstall(helm())
		install.ReleaseName, install.Namespace = "notes", namespace
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
		rel, err := install.RunWithContext(ctx, chrt, values(`webhook: {enabled: false}`))
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintln(GinkgoWriter, rel.Info.Notes)
		Expect(rel.Info.Notes).To(And(
			ContainSubstring("helm install media charts/strata-tenant"),
			ContainSubstring("kubectl apply --server-side --force-conflicts -f charts/strata-operator/crds/"),
			ContainSubstring("ghcr.io/strata-storage/strata:"+chrt.Metadata.AppVersion),
			ContainSubstring("Admission webhooks are off"),
		))

		rel, err = install.RunWithContext(ctx, chrt, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Notes).To(And(
			ContainSubstring("certificate is the operator's own (Secret\nnotes-strata-operator-webhook-ca"),
			ContainSubstring("kubectl get validatingwebhookconfiguration notes-strata-operator-validating -o jsonpath='{.webhooks[0].clientConfig.caBundle}'"),
		))
		rel, err = install.RunWithContext(ctx, chrt, values(`webhook: {certificates: certManager}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Notes).To(ContainSubstring("certificate comes from cert-manager"))
	})

	It("accepts the monitoring settings", func() {
		Expect(render(`
metrics:
  serviceMonitor: {enabled: true, interval: 1m, labels: {release: kube-prometheus-stack}}
  prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
dashboards: {enabled: true, namespace: monitoring, labels: {team: storage}, annotations: {grafana_folder: Strata}}
`)).To(Succeed())
	})

	DescribeTable("refuses wrong values with a message naming the key",
		func(vals string, wants ...string) {
			err := render(vals)
			Expect(err).To(HaveOccurred(), vals)
			fmt.Fprintf(GinkgoWriter, "%s\n=> %v\n", vals, err)
			for _, want := range wants {
				Expect(err.Error()).To(ContainSubstring(want), vals)
			}
		},
		Entry("a count given as a string", `replicaCount: "2"`,
			"at '/replicaCount'", "got string, want integer"),
		// (Helm's schema library names the wrong key in the path of a
		// propertyNames failure; the message itself names the label.)
		Entry("a monitoring label key with a space", `tenantMonitoringLabels: {"my label": x}`,
			"invalid propertyName 'my label'"),
		Entry("a misspelt ServiceMonitor setting", `metrics: {serviceMonitor: {enable: true}}`,
			"at '/metrics/serviceMonitor'", "additional properties 'enable' not allowed"),
		Entry("a dashboard namespace that cannot be one", `dashboards: {namespace: Monitoring}`,
			"at '/dashboards/namespace'", "does not match pattern"),
		Entry("a misspelt top-level key", `webhooks: {enabled: false}`,
			"additional properties 'webhooks' not allowed"),
		Entry("the engine image under its old key", `defaultStrataImage: ghcr.io/strata-storage/strata:0.1.0`,
			"additional properties 'defaultStrataImage' not allowed"),
		Entry("an engine image without a repository", `engineImage: {repository: ""}`,
			"at '/engineImage/repository'", "minLength"),
		Entry("a pull policy that does not exist", `image: {pullPolicy: Sometimes}`,
			"at '/image/pullPolicy'", "'Always', 'IfNotPresent', 'Never'"),
		Entry("one namespace given as a string", `watchNamespaces: team-a`,
			"at '/watchNamespaces'", "got string, want array"),
		Entry("a namespace that is not a DNS label", `watchNamespaces: [Team_A]`,
			"at '/watchNamespaces/0'", "does not match pattern"),
		Entry("a flag without its dashes", `extraArgs: [zap-log-level=debug]`,
			"at '/extraArgs/0'", "does not match pattern"),
		Entry("a scrape interval that is not a duration", `metrics: {serviceMonitor: {interval: 30}}`,
			"at '/metrics/serviceMonitor/interval'", "got number, want string"),
		Entry("a misspelt webhook key", `webhook: {enable: false}`,
			"at '/webhook'", "additional properties 'enable' not allowed"),
		Entry("a webhook certificate source that does not exist", `webhook: {certificates: selfSigned}`,
			"at '/webhook/certificates'", "'operator', 'certManager'"),
	)
})
