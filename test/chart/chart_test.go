package chart_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/test/testenv"
)

// The Helm chart is what users install: it must lint, install into a real
// API server (CRDs, RBAC, the Deployment, the webhook and its cert-manager
// objects), start the operator binary with the flags it renders, upgrade
// to other values, and uninstall leaving the CRDs (and so the data's
// objects) in place.
func TestChart(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Helm chart suite")
}

const (
	release   = "strata"
	namespace = "strata-system"
)

var (
	env        *envtest.Environment
	k8s        client.Client
	kubeconfig string
	chartDir   string
	chrt       *chart.Chart
	ctx        = context.Background()
)

var _ = BeforeSuite(func() {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(), "run with `make envtest-suites`")
	chartDir = filepath.Join(testenv.RepoRoot(), "charts", "strata-operator")
	var err error
	chrt, err = loader.Load(chartDir)
	Expect(err).NotTo(HaveOccurred())

	// The API server starts with cert-manager's CRDs only (as a cluster
	// with cert-manager installed); ours come from the chart.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	Expect(err).NotTo(HaveOccurred())
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(certmanagerv1.AddToScheme(scheme)).To(Succeed())
	Expect(storagev1alpha1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	kubeconfig, err = testenv.AdminKubeconfig(env, "admin", GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// helm is an action configuration talking to the test API server, as
// `helm --kubeconfig ... --namespace strata-system` would.
func helm() *action.Configuration { return helmIn(namespace) }

// helmIn is helm for releases in namespace ns.
func helmIn(ns string) *action.Configuration {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	Expect(cfg.Init(flags, ns, "secret", func(format string, v ...any) {
		fmt.Fprintf(GinkgoWriter, format+"\n", v...)
	})).To(Succeed())
	return cfg
}

func values(y string) map[string]any {
	v := map[string]any{}
	Expect(yaml.Unmarshal([]byte(y), &v)).To(Succeed())
	return v
}

func deployment() *appsv1.Deployment {
	d := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator"}, d)).To(Succeed())
	return d
}

func manager(d *appsv1.Deployment) corev1.Container {
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	Expect(i).To(BeNumerically(">=", 0), "the Deployment has no manager container")
	return d.Spec.Template.Spec.Containers[i]
}

func exists(obj client.Object, key client.ObjectKey) bool {
	err := k8s.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

var _ = Describe("the strata-operator chart", Ordered, func() {
	It("lints without warnings or errors", func() {
		linter := lint.All(chartDir, nil, namespace, false)
		for _, m := range linter.Messages {
			fmt.Fprintln(GinkgoWriter, m.Error())
		}
		Expect(linter.HighestSeverity).To(BeNumerically("<", support.WarningSev), "helm lint reported warnings or errors (see the log)")
	})

	It("installs with the default values: CRDs, RBAC, the operator, its webhooks and the operator's own webhook certificate", func() {
		install := action.NewInstall(helm())
		install.ReleaseName, install.Namespace, install.CreateNamespace = release, namespace, true
		install.Timeout = time.Minute
		rel, err := install.RunWithContext(ctx, chrt, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Status.String()).To(Equal("deployed"))

		By("establishing the three CRDs")
		for _, plural := range []string{"tenants", "serverpools", "gatewaypools"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Eventually(func() bool {
				if err := k8s.Get(ctx, client.ObjectKey{Name: plural + ".storage.strata.dev"}, crd); err != nil {
					return false
				}
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return true
					}
				}
				return false
			}).WithTimeout(30*time.Second).Should(BeTrue(), plural)
		}

		By("running the operator image with webhooks on, keeping their certificate itself")
		d := deployment()
		c := manager(d)
		Expect(c.Image).To(Equal("ghcr.io/strata-storage/strata-operator:" + chrt.Metadata.AppVersion))
		Expect(c.Args).To(ContainElements("--leader-elect=true", operatorCertFlags[0], operatorCertFlags[1], operatorCertFlags[2], operatorCertFlags[3]))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--webhook-cert-dir")))
		Expect(c.VolumeMounts).To(BeEmpty())
		Expect(*d.Spec.Template.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal(release + "-strata-operator"))

		By("binding the generated ClusterRole to its ServiceAccount")
		bindings := &rbacv1.ClusterRoleBindingList{}
		Expect(k8s.List(ctx, bindings)).To(Succeed())
		var rules []rbacv1.PolicyRule
		for _, b := range bindings.Items {
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && s.Namespace == namespace && s.Name == release+"-strata-operator" {
					cr := &rbacv1.ClusterRole{}
					Expect(k8s.Get(ctx, client.ObjectKey{Name: b.RoleRef.Name}, cr)).To(Succeed())
					rules = append(rules, cr.Rules...)
				}
			}
		}
		generated := &rbacv1.ClusterRole{}
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(b, generated)).To(Succeed())
		Expect(rules).To(ContainElements(generated.Rules), "the chart does not grant every rule of config/rbac/role.yaml")
		// The secure metrics endpoint authenticates scrapers itself.
		Expect(rules).To(ContainElement(rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}}))

		By("leaving cert-manager out of the webhook: no Issuer, no Certificate, no CA injection")
		Expect(exists(&certmanagerv1.Certificate{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook"})).To(BeFalse())
		Expect(exists(&certmanagerv1.Issuer{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-selfsigned"})).To(BeFalse())
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--default-issuer")), "without tenantIssuer.name each CertManager Tenant gets its own CA")
		for _, w := range webhookConfigurations() {
			Expect(w.GetAnnotations()).NotTo(HaveKey("cert-manager.io/inject-ca-from"), w.GetName())
		}
		Expect(exists(&corev1.Service{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook"})).To(BeTrue())

		By("creating the operator's Secret empty, and letting the operator write it and the two configurations, by name")
		Expect(webhookCASecret().Data).To(BeEmpty())
		Expect(rulesBoundTo(namespace)).To(ContainElements(
			rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{release + "-strata-operator-webhook-ca"}},
			rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{release + "-strata-operator-validating"}},
			rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{release + "-strata-operator-mutating"}},
		))
		for _, w := range webhookConfigurations() {
			Expect(caBundles(w)).To(HaveEach(BeEmpty()), "nothing but the operator writes the caBundle")
		}
	})

	It("runs the operator binary with the rendered flags as its ServiceAccount: it fills the Secret, writes every caBundle, and becomes ready", func() {
		// The chart's RBAC is all it has, as in a cluster.
		saKubeconfig := serviceAccountKubeconfig()
		started := time.Now()
		session, probe := startManager(manager(deployment()).Args, saKubeconfig)
		waitReady(session, probe)
		fmt.Fprintf(GinkgoWriter, "operator binary ready %v after it started (Secret filled, both configurations written)\n", time.Since(started).Round(time.Millisecond))
		session.Kill()

		secret := webhookCASecret()
		Expect(secret.Data).To(HaveKey("ca.crt"))
		Expect(secret.Data).To(HaveKey("tls.crt"))
		cert := parseCert(secret.Data["tls.crt"])
		Expect(cert.DNSNames).To(ConsistOf(
			release+"-strata-operator-webhook."+namespace+".svc",
			release+"-strata-operator-webhook."+namespace+".svc.cluster.local"))
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: release + "-strata-operator-webhook." + namespace + ".svc"})
		Expect(err).NotTo(HaveOccurred())
		for _, w := range webhookConfigurations() {
			Expect(caBundles(w)).To(HaveEach(Equal(secret.Data["ca.crt"])), w.GetName())
		}
	})

	It("keeps the operator's caBundle and Secret through a helm upgrade", func() {
		before := webhookCASecret().Data
		upgrade := action.NewUpgrade(helm())
		upgrade.Namespace, upgrade.Timeout = namespace, time.Minute
		_, err := upgrade.RunWithContext(ctx, release, chrt, values(`extraArgs: ["--zap-log-level=debug"]`))
		Expect(err).NotTo(HaveOccurred())
		Expect(manager(deployment()).Args).To(ContainElement("--zap-log-level=debug"))
		Expect(webhookCASecret().Data).To(Equal(before))
		for _, w := range webhookConfigurations() {
			Expect(caBundles(w)).To(HaveEach(Equal(before["ca.crt"])), w.GetName())
		}
	})

	It("upgrades to webhook.certificates=certManager: cert-manager's Issuer, Certificate and CA injection, the certificate mounted, no operator Secret or roles", func() {
		upgrade := action.NewUpgrade(helm())
		upgrade.Namespace, upgrade.Timeout = namespace, time.Minute
		_, err := upgrade.RunWithContext(ctx, release, chrt, values(`webhook: {certificates: certManager}`))
		Expect(err).NotTo(HaveOccurred())
		c := manager(deployment())
		Expect(c.Args).To(ContainElement("--webhook-cert-dir=/etc/strata-operator/webhook-certs"))
		for _, f := range operatorCertFlags {
			Expect(c.Args).NotTo(ContainElement(f))
		}
		Expect(c.VolumeMounts).To(ConsistOf(HaveField("MountPath", "/etc/strata-operator/webhook-certs")))
		Expect(exists(&certmanagerv1.Certificate{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook"})).To(BeTrue())
		Expect(exists(&certmanagerv1.Issuer{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-selfsigned"})).To(BeTrue())
		configs := webhookConfigurations()
		Expect(configs).To(HaveLen(2))
		for _, w := range configs {
			Expect(w.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+release+"-strata-operator-webhook"))
		}
		Expect(exists(&corev1.Secret{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook-ca"})).To(BeFalse())
		Expect(exists(&rbacv1.ClusterRole{}, client.ObjectKey{Name: release + "-strata-operator-webhook-configurations"})).To(BeFalse())
		Expect(exists(&rbacv1.Role{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook-certificate"})).To(BeFalse())
	})

	It("upgrades to values without webhooks and with a tenant issuer of the user's, dropping what the webhooks made", func() {
		upgrade := action.NewUpgrade(helm())
		upgrade.Namespace, upgrade.Timeout = namespace, time.Minute
		_, err := upgrade.RunWithContext(ctx, release, chrt, values(`
image: {tag: test}
webhook: {enabled: false}
tenantIssuer: {name: corp-ca}
extraArgs: ["--zap-log-level=debug"]
`))
		Expect(err).NotTo(HaveOccurred())
		c := manager(deployment())
		Expect(c.Image).To(Equal("ghcr.io/strata-storage/strata-operator:test"))
		Expect(c.Args).To(ContainElements("--enable-webhooks=false", "--zap-log-level=debug"))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--webhook-cert-dir")))
		Expect(exists(&certmanagerv1.Certificate{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook"})).To(BeFalse())
		Expect(c.Args).To(ContainElements("--default-issuer=corp-ca", "--default-issuer-kind=ClusterIssuer"))
		vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		Expect(k8s.List(ctx, vwcs)).To(Succeed())
		Expect(vwcs.Items).To(BeEmpty())
	})

	It("upgrades to a watch-namespaces install: write access only in those namespaces, read access to what placement needs", func() {
		for _, name := range []string{"team-a", "team-b"} {
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		}
		upgrade := action.NewUpgrade(helm())
		upgrade.Namespace, upgrade.Timeout = namespace, time.Minute
		_, err := upgrade.RunWithContext(ctx, release, chrt, values(`
image: {tag: test}
webhook: {enabled: false}
watchNamespaces: [team-a, team-b]
`))
		Expect(err).NotTo(HaveOccurred())
		Expect(manager(deployment()).Args).To(ContainElement("--watch-namespaces=team-a,team-b"))
		managerRole := release + "-strata-operator-manager"
		Expect(exists(&rbacv1.ClusterRoleBinding{}, client.ObjectKey{Name: managerRole})).To(BeFalse(), "no cluster-wide binding of the manager's rules")
		for _, ns := range []string{"team-a", "team-b"} {
			rb := &rbacv1.RoleBinding{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: managerRole}, rb)).To(Succeed())
			Expect(rb.RoleRef.Kind).To(Equal("ClusterRole"))
			Expect(rb.RoleRef.Name).To(Equal(managerRole))
		}
		reader := &rbacv1.ClusterRole{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: release + "-strata-operator-cluster-reader"}, reader)).To(Succeed())
		for _, r := range reader.Rules {
			Expect(r.Verbs).NotTo(ContainElements("create", "update", "patch", "delete"), "cluster-wide access is read-only")
		}
		Expect(exists(&rbacv1.ClusterRoleBinding{}, client.ObjectKey{Name: release + "-strata-operator-cluster-reader"})).To(BeTrue())
	})

	It("renders flags the operator binary accepts: it starts with them and becomes ready", func() {
		session, probe := startManager(manager(deployment()).Args, kubeconfig)
		waitReady(session, probe)
		Consistently(session).WithTimeout(2 * time.Second).ShouldNot(gexec.Exit())
	})

	It("accepts a Tenant through the CRDs it installed, and refuses an invalid one with the CEL message", func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		tenant := &storagev1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "media"}}
		Expect(k8s.Create(ctx, tenant)).To(Succeed())
		pool := &storagev1alpha1.ServerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "nvme"}}
		pool.Spec.TenantRef.Name = "media"
		pool.Spec.Servers, pool.Spec.VolumesPerServer = 4, 2
		pool.Spec.Storage.Media = storagev1alpha1.MediaLocalNVMe
		pool.Spec.Storage.StorageClassNames = []string{"nvme-local"}
		pool.Spec.Storage.Size = resource.MustParse("1Ti")
		Expect(k8s.Create(ctx, pool.DeepCopy())).To(Succeed())
		bad := pool.DeepCopy()
		bad.Name, bad.Spec.Servers = "small", 1
		bad.Spec.Topology.Tolerate.Domains = new(int32)
		err := k8s.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), fmt.Sprint(err))
		Expect(err.Error()).To(ContainSubstring("a ServerPool needs at least 4 drives"))
	})

	It("renders a ServiceMonitor for the operator's metrics when asked, selecting the metrics Service", func() {
		vals := values(`
metrics:
  serviceMonitor: {enabled: true, interval: 15s, labels: {release: kube-prometheus-stack}}
`)
		linter := lint.All(chartDir, vals, namespace, false)
		Expect(linter.HighestSeverity).To(BeNumerically("<", support.WarningSev), fmt.Sprint(linter.Messages))
		render := action.NewInstall(helm())
		render.ReleaseName, render.Namespace = "render", namespace
		render.DryRun, render.ClientOnly, render.Replace = true, true, true
		// Rendered offline (the API server here has no monitoring CRDs),
		// for the Kubernetes version envtest runs.
		render.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
		rel, err := render.RunWithContext(ctx, chrt, vals)
		Expect(err).NotTo(HaveOccurred())
		var sm *monitoringv1.ServiceMonitor
		var svc *corev1.Service
		for _, doc := range strings.Split(rel.Manifest, "\n---") {
			var head metav1.TypeMeta
			Expect(yaml.Unmarshal([]byte(doc), &head)).To(Succeed())
			switch head.Kind {
			case "ServiceMonitor":
				sm = &monitoringv1.ServiceMonitor{}
				Expect(yaml.UnmarshalStrict([]byte(doc), sm)).To(Succeed(), "the ServiceMonitor has fields prometheus-operator does not know")
			case "Service":
				s := &corev1.Service{}
				Expect(yaml.Unmarshal([]byte(doc), s)).To(Succeed())
				if strings.HasSuffix(s.Name, "-metrics") {
					svc = s
				}
			}
		}
		Expect(sm).NotTo(BeNil(), "no ServiceMonitor rendered")
		Expect(svc).NotTo(BeNil(), "no metrics Service rendered")
		Expect(sm.Labels).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		Expect(sm.Spec.Selector.MatchLabels).NotTo(BeEmpty())
		for k, v := range sm.Spec.Selector.MatchLabels {
			Expect(svc.Labels).To(HaveKeyWithValue(k, v), "the ServiceMonitor does not select the metrics Service")
		}
		Expect(sm.Spec.Endpoints).To(HaveLen(1))
		ep := sm.Spec.Endpoints[0]
		Expect(ep.Port).To(Equal(svc.Spec.Ports[0].Name))
		Expect(string(*ep.Scheme)).To(Equal("https"))
		Expect(string(ep.Interval)).To(Equal("15s"))
	})

	It("uninstalls, keeping the CRDs and so every Tenant", func() {
		_, err := action.NewUninstall(helm()).Run(release)
		Expect(err).NotTo(HaveOccurred())
		Expect(exists(&appsv1.Deployment{}, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator"})).To(BeFalse())
		Expect(exists(&apiextensionsv1.CustomResourceDefinition{}, client.ObjectKey{Name: "tenants.storage.strata.dev"})).To(BeTrue())
		Expect(exists(&storagev1alpha1.Tenant{}, client.ObjectKey{Namespace: "tenants", Name: "media"})).To(BeTrue())
	})
})

// The flags of webhook.certificates=operator for this release.
var operatorCertFlags = []string{
	"--webhook-cert-secret=" + release + "-strata-operator-webhook-ca",
	"--webhook-service=" + namespace + "/" + release + "-strata-operator-webhook",
	"--validating-webhook-configuration=" + release + "-strata-operator-validating",
	"--mutating-webhook-configuration=" + release + "-strata-operator-mutating",
}

// startManager runs the operator binary (MANAGER_BIN, or built here) with
// the Deployment's args, its probe and metrics on free local ports, talking
// to the test API server through kubeconfig; it is killed after the spec.
func startManager(deploymentArgs []string, kubeconfig string) (*gexec.Session, string) {
	managerBin := os.Getenv("MANAGER_BIN")
	if managerBin == "" {
		var err error
		managerBin, err = gexec.Build("github.com/strata-storage/strata")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
	}
	probe, metrics, webhooks := freeAddr(), freeAddr(), freeAddr()
	_, webhookPort, _ := net.SplitHostPort(webhooks)
	var args []string
	for _, a := range deploymentArgs {
		switch {
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + probe
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metrics
		}
		args = append(args, a)
	}
	// Out of a cluster the Lease's namespace is not the pod's, and the
	// webhook server's port (9443 in the pod) may be taken.
	args = append(args, "--leader-election-namespace="+namespace, "--webhook-port="+webhookPort)
	cmd := exec.Command(managerBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { session.Kill() })
	return session, probe
}

// waitReady waits for the operator's /readyz.
func waitReady(session *gexec.Session, probe string) {
	Eventually(func() (int, error) {
		Expect(session).NotTo(gexec.Exit(), "the operator exited")
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(60 * time.Second).Should(Equal(http.StatusOK))
}

// serviceAccountKubeconfig is a kubeconfig for the chart's ServiceAccount:
// a client certificate with the identity a pod's token would carry.
func serviceAccountKubeconfig() string {
	user, err := env.ControlPlane.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + release + "-strata-operator",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

// rulesBoundTo lists the rules of every ClusterRole and Role (in ns)
// bound to the chart's ServiceAccount.
func rulesBoundTo(ns string) []rbacv1.PolicyRule {
	sa := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == namespace && s.Name == release+"-strata-operator"
		})
	}
	var rules []rbacv1.PolicyRule
	crbs := &rbacv1.ClusterRoleBindingList{}
	Expect(k8s.List(ctx, crbs)).To(Succeed())
	for _, b := range crbs.Items {
		if sa(b.Subjects) {
			cr := &rbacv1.ClusterRole{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: b.RoleRef.Name}, cr)).To(Succeed())
			rules = append(rules, cr.Rules...)
		}
	}
	rbs := &rbacv1.RoleBindingList{}
	Expect(k8s.List(ctx, rbs, client.InNamespace(ns))).To(Succeed())
	for _, b := range rbs.Items {
		if sa(b.Subjects) && b.RoleRef.Kind == "Role" {
			r := &rbacv1.Role{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.RoleRef.Name}, r)).To(Succeed())
			rules = append(rules, r.Rules...)
		}
	}
	return rules
}

func webhookCASecret() *corev1.Secret {
	s := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-strata-operator-webhook-ca"}, s)).To(Succeed())
	return s
}

// webhookConfigurations are the release's two configurations.
func webhookConfigurations() []client.Object {
	var out []client.Object
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, vwcs)).To(Succeed())
	for i := range vwcs.Items {
		out = append(out, &vwcs.Items[i])
	}
	mwcs := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, mwcs)).To(Succeed())
	for i := range mwcs.Items {
		out = append(out, &mwcs.Items[i])
	}
	for _, w := range out {
		Expect(w.GetName()).To(HavePrefix(release+"-strata-operator-"), "a configuration from elsewhere")
	}
	return out
}

// caBundles lists the caBundle of every webhook of a configuration, and
// checks each calls the chart's webhook Service.
func caBundles(obj client.Object) [][]byte {
	var configs []admissionregistrationv1.WebhookClientConfig
	switch c := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			configs = append(configs, w.ClientConfig)
		}
	}
	Expect(configs).NotTo(BeEmpty(), obj.GetName())
	var out [][]byte
	for _, cc := range configs {
		Expect(cc.Service.Name).To(Equal(release + "-strata-operator-webhook"))
		Expect(cc.Service.Namespace).To(Equal(namespace))
		out = append(out, cc.CABundle)
	}
	return out
}

func parseCert(p []byte) *x509.Certificate {
	block, _ := pem.Decode(p)
	Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return c
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
