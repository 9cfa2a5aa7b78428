package chart_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/test/testenv"
)

// tenantNamespace enforces the restricted Pod Security Standard, so the
// helm test Pods are checked against it when the API server admits them.
const tenantNamespace = "storage"

// fullTenantValues exercise every part of the chart: users, buckets, an
// explicit root Secret, a second ServerPool with explicit domains, gateway
// pools of both volume kinds, and test settings.
const fullTenantValues = `
name: media
tenant:
  image: registry.example/strata:1.2.3
  imagePullSecrets: [{name: registry-keys}]
  credentials: {secretRef: {name: media-root}}
  users:
  - {name: app, secretRef: {name: media-app-keys}, policy: readwrite, buckets: [photos]}
  - {name: backup, secretRef: {name: media-backup-keys}, policy: readonly, buckets: ["*"]}
  buckets:
  - {name: photos, versioning: Enabled}
  tls: {mode: CertManager, issuerRef: {name: corp-ca, kind: ClusterIssuer}, dnsNames: [s3.example.com]}
  expose: {type: LoadBalancer, port: 8443, annotations: {lb.example/internal: "true"}}
  monitoring:
    serviceMonitor: {enabled: true, interval: 15s, labels: {release: kube-prometheus-stack}}
    prometheusRule: {enabled: false}
  upgrade: {strategy: Rolling, healthGateTimeout: 20m}
  networkPolicy:
    s3From: [{podSelector: {matchLabels: {app.kubernetes.io/component: selftest}}}]
  deletionPolicy: Retain
serverPools:
- name: nvme
  spec:
    servers: 4
    volumesPerServer: 4
    storage: {media: LocalNVMe, storageClassNames: [nvme-local], size: 3840Gi}
    resources: {requests: {cpu: "2", memory: 8Gi}, limits: {memory: 8Gi}}
    nodeSelector: {node-role.strata.dev/storage: "true"}
    tolerations: [{key: node-role.strata.dev/storage, operator: Exists, effect: NoSchedule}]
    priorityClassName: system-cluster-critical
- name: array
  spec:
    servers: 4
    volumesPerServer: 2
    erasure: {setSize: 8, parity: 1}
    storage: {media: ArrayLUN, storageClassNames: [array-a, array-b], size: 8Ti}
    topology:
      failureDomainKey: topology.kubernetes.io/zone
      domains: [{name: zone-a}, {name: zone-b, value: eu-west-1b}]
      tolerate: {domains: 1}
gatewayPools:
- name: nas
  spec:
    autoscaling: {minReplicas: 2, maxReplicas: 8, targetCPUUtilizationPercentage: 70}
    volume: {claimName: shared-fs}
    posix: {metadata: xattr}
- name: scratch
  spec:
    replicas: 1
    volume: {storageClassName: cephfs, size: 10Ti}
    posix: {metadata: sidecar}
tests:
  bucket: photos
  wait: 5m
`

var _ = Describe("the strata-tenant chart", Ordered, func() {
	var (
		tenantDir   string
		tenantChart *chart.Chart
	)

	BeforeAll(func() {
		tenantDir = filepath.Join(testenv.RepoRoot(), "charts", "strata-tenant")
		var err error
		tenantChart, err = loader.Load(tenantDir)
		Expect(err).NotTo(HaveOccurred())
		// The operator chart's specs may run before or after these: install
		// its CRDs here (an update when they are there already), as a
		// cluster with the operator has them.
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(chartDir, "crds")}, ErrorIfPathMissing: true,
		})
		Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
		}}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
	})

	// render runs `helm install --dry-run` offline, as `helm template` does.
	render := func(releaseName, vals string) (*helmrelease.Release, error) {
		install := action.NewInstall(helmIn(tenantNamespace))
		install.ReleaseName, install.Namespace = releaseName, tenantNamespace
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
		return install.RunWithContext(ctx, tenantChart, values(vals))
	}
	mustRender := func(vals string) *helmrelease.Release {
		rel, err := render("media", vals)
		Expect(err).NotTo(HaveOccurred())
		return rel
	}

	It("lints without warnings or errors, with the default values and with every part in use", func() {
		for _, vals := range []string{"", fullTenantValues} {
			linter := lint.All(tenantDir, values(vals), tenantNamespace, false)
			for _, m := range linter.Messages {
				fmt.Fprintln(GinkgoWriter, m.Error())
			}
			Expect(linter.HighestSeverity).To(BeNumerically("<", support.WarningSev), "helm lint reported warnings or errors (see the log)")
		}
	})

	It("renders the default values into a Tenant, its ServerPool and a helm test Pod the API server accepts", func() {
		rel := mustRender("")
		objs := renderedObjects(rel)
		Expect(kinds(objs)).To(Equal(map[string]int{"Tenant": 1, "ServerPool": 1, "Pod": 1}))
		expectAccepted(objs)

		tenant := &storagev1alpha1.Tenant{}
		Expect(convert(objs, "Tenant", "media", tenant)).To(Succeed())
		Expect(tenant.Spec.TLS.Mode).To(Equal(storagev1alpha1.TLSOperator))
		Expect(tenant.Spec.DeletionPolicy).To(Equal(storagev1alpha1.DeletionPolicyRetain))
		pool := &storagev1alpha1.ServerPool{}
		Expect(convert(objs, "ServerPool", "pool-0", pool)).To(Succeed())
		Expect(pool.Spec.TenantRef.Name).To(Equal("media"))
		Expect(pool.Spec.Servers * pool.Spec.VolumesPerServer).To(BeEquivalentTo(16))

		pod := &corev1.Pod{}
		Expect(convert(objs, "Pod", "media-selftest", pod)).To(Succeed())
		Expect(pod.Annotations).To(HaveKeyWithValue("helm.sh/hook", "test"))
		c := pod.Spec.Containers[0]
		Expect(c.Image).To(Equal("ghcr.io/strata-storage/strata:" + tenantChart.Metadata.AppVersion))
		Expect(c.Args).To(Equal([]string{"selftest", "--endpoint=https://media.storage.svc:443", "--ca-file=/etc/strata/ca/ca.crt", "--wait=2m"}))
		Expect(secretVolumes(pod)).To(Equal(map[string]string{"/etc/strata/root": "media-root-credentials", "/etc/strata/ca": "media-tls"}))
	})

	It("renders every part of the values into objects the API server accepts", func() {
		rel := mustRender(fullTenantValues)
		objs := renderedObjects(rel)
		Expect(kinds(objs)).To(Equal(map[string]int{"Tenant": 1, "ServerPool": 2, "GatewayPool": 2, "Pod": 3}))
		expectAccepted(objs)

		tenant := &storagev1alpha1.Tenant{}
		Expect(convert(objs, "Tenant", "media", tenant)).To(Succeed())
		Expect(tenant.Spec.Users).To(HaveLen(2))
		Expect(tenant.Spec.Expose.Port).To(BeEquivalentTo(8443))
		Expect(tenant.Spec.NetworkPolicy.S3From).To(HaveLen(1))
		for _, name := range []string{"nas", "scratch"} {
			gw := &storagev1alpha1.GatewayPool{}
			Expect(convert(objs, "GatewayPool", name, gw)).To(Succeed())
			Expect(gw.Spec.TenantRef.Name).To(Equal("media"))
		}
		pod := &corev1.Pod{}
		Expect(convert(objs, "Pod", "media-nas-selftest", pod)).To(Succeed())
		c := pod.Spec.Containers[0]
		Expect(c.Image).To(Equal("registry.example/strata:1.2.3"), "the image the tenant runs")
		Expect(c.Args).To(ContainElements("--endpoint=https://media-nas.storage.svc:8443", "--bucket=photos", "--wait=5m"))
		Expect(pod.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry-keys"}}))
		Expect(pod.Labels).To(HaveKeyWithValue("app.kubernetes.io/component", "selftest"))
		Expect(secretVolumes(pod)).To(HaveKeyWithValue("/etc/strata/root", "media-root"))
	})

	It("renders test Pods that match each TLS mode", func() {
		cases := []struct {
			vals     string
			endpoint string
			secrets  map[string]string
		}{{
			vals:     `tenant: {tls: {mode: Disabled}}`,
			endpoint: "--endpoint=http://media.storage.svc:80",
			secrets:  map[string]string{"/etc/strata/root": "media-root-credentials"},
		}, {
			vals:     `tenant: {tls: {mode: External, secretRef: {name: media-cert}}}`,
			endpoint: "--endpoint=https://media.storage.svc:443",
			secrets:  map[string]string{"/etc/strata/root": "media-root-credentials"},
		}, {
			vals:     `{tenant: {tls: {mode: External, secretRef: {name: media-cert}}}, tests: {caSecret: corp-ca}}`,
			endpoint: "--endpoint=https://media.storage.svc:443",
			secrets:  map[string]string{"/etc/strata/root": "media-root-credentials", "/etc/strata/ca": "corp-ca"},
		}}
		for _, tc := range cases {
			objs := renderedObjects(mustRender(tc.vals))
			expectAccepted(objs)
			pod := &corev1.Pod{}
			Expect(convert(objs, "Pod", "media-selftest", pod)).To(Succeed())
			Expect(pod.Spec.Containers[0].Args).To(ContainElement(tc.endpoint), tc.vals)
			Expect(secretVolumes(pod)).To(Equal(tc.secrets), tc.vals)
			_, hasCA := tc.secrets["/etc/strata/ca"]
			Expect(slicesContainPrefix(pod.Spec.Containers[0].Args, "--ca-file=")).To(Equal(hasCA), tc.vals)
		}
		By("no test Pods when tests are off")
		Expect(kinds(renderedObjects(mustRender(`tests: {enabled: false}`)))).NotTo(HaveKey("Pod"))
	})

	It("prints in NOTES where the endpoint, the root keys and the CA are", func() {
		notes := mustRender("").Info.Notes
		for _, want := range []string{
			"Service media, port 443 (https)",
			"https://media.storage.svc:443",
			"kubectl -n storage get tenant media -o jsonpath='{.status.endpoints.s3}'",
			"kubectl -n storage port-forward svc/media 9000:443",
			"Root keys (Secret media-root-credentials, keys accessKey and secretKey)",
			"kubectl -n storage get secret media-root-credentials -o jsonpath='{.data.accessKey}' | base64 -d",
			"kubectl -n storage get secret media-root-credentials -o jsonpath='{.data.secretKey}' | base64 -d",
			"kubectl -n storage get configmap media-ca-bundle -o jsonpath='{.data.ca\\.crt}' > media-ca.crt",
			"helm test media -n storage",
		} {
			Expect(notes).To(ContainSubstring(want))
		}

		notes = mustRender(fullTenantValues).Info.Notes
		Expect(notes).To(ContainSubstring("Root keys (Secret media-root,"))
		Expect(notes).To(ContainSubstring("GatewayPool nas: Service media-nas, https://media-nas.storage.svc:8443"))
		Expect(notes).To(ContainSubstring("The Services are of type LoadBalancer"))
		Expect(notes).To(ContainSubstring("CA bundle (TLS mode CertManager): ConfigMap media-ca-bundle, key ca.crt."))

		notes = mustRender(`tenant: {tls: {mode: Disabled}}`).Info.Notes
		Expect(notes).To(ContainSubstring("http://media.storage.svc:80"))
		Expect(notes).To(ContainSubstring("TLS is disabled"))
		Expect(notes).NotTo(ContainSubstring("ca.crt"))
	})

	It("names the Tenant after the release unless name is set, and refuses a release name that cannot be one", func() {
		rel, err := render("photos-eu", "")
		Expect(err).NotTo(HaveOccurred())
		objs := renderedObjects(rel)
		Expect(convert(objs, "Tenant", "photos-eu", &storagev1alpha1.Tenant{})).To(Succeed())

		_, err = render("media.prod", "")
		Expect(err).To(MatchError(ContainSubstring(`the Tenant would be named "media.prod" (the release name), which is not a DNS label: set name`)))
	})

	// Each case is wrong values and what the refusal must say: the
	// schema's (path and reason) or the templates' own checks.
	DescribeTable("refuses wrong values with a message that says what is wrong",
		func(vals string, wants ...string) {
			_, err := render("media", vals)
			Expect(err).To(HaveOccurred(), vals)
			fmt.Fprintf(GinkgoWriter, "%s\n=> %v\n", vals, err)
			for _, want := range wants {
				Expect(err.Error()).To(ContainSubstring(want), vals)
			}
		},
		Entry("a misspelt Tenant field", `tenant: {tsl: {mode: Disabled}}`,
			"at '/tenant'", "additional properties 'tsl' not allowed"),
		Entry("a TLS mode that does not exist", `tenant: {tls: {mode: Plain}}`,
			"at '/tenant/tls/mode'", "'CertManager', 'Operator', 'External', 'Disabled'"),
		Entry("an S3 port out of range", `tenant: {expose: {port: 70000}}`,
			"at '/tenant/expose/port'", "maximum"),
		Entry("a user without buckets", `tenant: {users: [{name: app, secretRef: {name: app-keys}}]}`,
			"at '/tenant/users/0'", "missing property 'buckets'"),
		Entry("a bucket name S3 refuses", `tenant: {buckets: [{name: My_Bucket}]}`,
			"at '/tenant/buckets/0/name'", "does not match pattern"),
		Entry("a Tenant name with capitals", `name: Media`,
			"at '/name'", "does not match pattern"),
		Entry("a pool without a name", `serverPools: [{spec: {servers: 4, volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1Ti}}}]`,
			"at '/serverPools/0'", "missing property 'name'"),
		Entry("a pool name that is not a DNS label", `serverPools: [{name: Pool_0, spec: {servers: 4, volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1Ti}}}]`,
			"at '/serverPools/0/name'", "does not match pattern"),
		Entry("servers given as a string", `serverPools: [{name: p, spec: {servers: "4", volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1Ti}}}]`,
			"at '/serverPools/0/spec/servers'", "got string, want integer"),
		Entry("a tenantRef the chart sets itself", `serverPools: [{name: p, spec: {tenantRef: {name: other}, servers: 4, volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1Ti}}}]`,
			"at '/serverPools/0/spec'", "additional properties 'tenantRef' not allowed"),
		Entry("a pool without storage", `serverPools: [{name: p, spec: {servers: 4, volumesPerServer: 1}}]`,
			"at '/serverPools/0/spec'", "missing property 'storage'"),
		Entry("media that does not exist", `serverPools: [{name: p, spec: {servers: 4, volumesPerServer: 1, storage: {media: SSD, storageClassNames: [x], size: 1Ti}}}]`,
			"at '/serverPools/0/spec/storage/media'", "'LocalNVMe', 'NVMeoF', 'ArrayLUN'"),
		Entry("a drive size that is not a quantity", `serverPools: [{name: p, spec: {servers: 4, volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1TB}}}]`,
			"at '/serverPools/0/spec/storage/size'", "does not match pattern"),
		Entry("a gateway metadata mode that does not exist", `gatewayPools: [{name: nas, spec: {volume: {claimName: fs}, posix: {metadata: xattrs}}}]`,
			"at '/gatewayPools/0/spec/posix/metadata'", "'xattr', 'sidecar'"),
		Entry("a gateway pool without a volume", `gatewayPools: [{name: nas, spec: {replicas: 2}}]`,
			"at '/gatewayPools/0/spec'", "missing property 'volume'"),
		Entry("a test wait that is not a duration", `tests: {wait: 5 minutes}`,
			"at '/tests/wait'", "does not match pattern"),
		Entry("one name for a ServerPool and a GatewayPool", `gatewayPools: [{name: pool-0, spec: {volume: {claimName: fs}}}]`,
			`pool name "pool-0" is used twice`, "unique across serverPools and gatewayPools"),
		Entry("a StatefulSet name longer than Kubernetes allows", `serverPools: [{name: a-pool-name-long-enough-to-overflow-the-limit, spec: {servers: 4, volumesPerServer: 1, storage: {media: LocalNVMe, storageClassNames: [x], size: 1Ti}, topology: {domains: [{name: rack-1}, {name: rack-2}]}}}]`,
			`its StatefulSet would be named "media-a-pool-name-long-enough-to-overflow-the-limit-rack-1"`, "Kubernetes allows 52"),
	)

	It("has a schema whose closed objects list the CRDs' fields, with the CRDs' enums, patterns and bounds", func() {
		b, err := os.ReadFile(filepath.Join(tenantDir, "values.schema.json"))
		Expect(err).NotTo(HaveOccurred())
		var schema map[string]any
		Expect(json.Unmarshal(b, &schema)).To(Succeed())
		defs := schema["definitions"].(map[string]any)
		for def, plural := range map[string]string{"tenantSpec": "tenants", "serverPoolSpec": "serverpools", "gatewayPoolSpec": "gatewaypools"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			b, err := os.ReadFile(filepath.Join(chartDir, "crds", "storage.strata.dev_"+plural+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(yaml.Unmarshal(b, crd)).To(Succeed())
			spec, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"])
			Expect(err).NotTo(HaveOccurred())
			var crdSpec map[string]any
			Expect(json.Unmarshal(spec, &crdSpec)).To(Succeed())
			// The chart sets tenantRef; values may not.
			delete(crdSpec["properties"].(map[string]any), "tenantRef")
			if required, ok := crdSpec["required"].([]any); ok {
				crdSpec["required"] = slices.DeleteFunc(required, func(r any) bool { return r == "tenantRef" })
			}
			Expect(schemaDrift(def, defs[def].(map[string]any), crdSpec, defs)).To(BeEmpty(),
				"charts/strata-tenant/values.schema.json disagrees with the %s CRD: update the schema", plural)
		}
	})

	It("installs with helm, and an upgrade adds a ServerPool and a GatewayPool", func() {
		install := action.NewInstall(helmIn(tenantNamespace))
		install.ReleaseName, install.Namespace, install.Timeout = "media", tenantNamespace, time.Minute
		rel, err := install.RunWithContext(ctx, tenantChart, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Status).To(Equal(helmrelease.StatusDeployed))
		Expect(rel.Info.Notes).To(ContainSubstring("helm test media -n storage"))
		tenant := &storagev1alpha1.Tenant{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "media"}, tenant)).To(Succeed())
		Expect(tenant.Spec.NetworkPolicy.Enabled).To(HaveValue(BeTrue()), "CRD defaults fill what the values leave out")
		Expect(exists(&storagev1alpha1.ServerPool{}, client.ObjectKey{Namespace: tenantNamespace, Name: "pool-0"})).To(BeTrue())

		upgrade := action.NewUpgrade(helmIn(tenantNamespace))
		upgrade.Namespace, upgrade.Timeout = tenantNamespace, time.Minute
		_, err = upgrade.RunWithContext(ctx, "media", tenantChart, values(`
serverPools:
- name: pool-0
  spec: {servers: 4, volumesPerServer: 4, storage: {media: LocalNVMe, storageClassNames: [nvme-local], size: 1Ti}}
- name: pool-1
  spec: {servers: 4, volumesPerServer: 4, storage: {media: LocalNVMe, storageClassNames: [nvme-local], size: 2Ti}}
gatewayPools:
- name: nas
  spec: {volume: {claimName: shared-fs}}
`))
		Expect(err).NotTo(HaveOccurred())
		grown := &storagev1alpha1.ServerPool{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: tenantNamespace, Name: "pool-1"}, grown)).To(Succeed())
		Expect(grown.Spec.TenantRef.Name).To(Equal("media"))
		Expect(grown.Spec.Storage.Size.String()).To(Equal("2Ti"))
		Expect(exists(&storagev1alpha1.GatewayPool{}, client.ObjectKey{Namespace: tenantNamespace, Name: "nas"})).To(BeTrue())

		By("an upgrade that changes a pool's shape is refused by the API server, not silently applied")
		_, err = upgrade.RunWithContext(ctx, "media", tenantChart, values(`
serverPools:
- name: pool-0
  spec: {servers: 8, volumesPerServer: 4, storage: {media: LocalNVMe, storageClassNames: [nvme-local], size: 1Ti}}
`))
		Expect(err).To(MatchError(ContainSubstring("servers is immutable: add another ServerPool to the tenant to grow it")))

		// Leave nothing for the operator chart's specs (which run the
		// manager) to reconcile. The failed upgrade is the release helm
		// uninstalls: the pools only the one before it had stay.
		_, err = action.NewUninstall(helmIn(tenantNamespace)).Run("media")
		Expect(err).NotTo(HaveOccurred())
		Expect(exists(&storagev1alpha1.Tenant{}, client.ObjectKey{Namespace: tenantNamespace, Name: "media"})).To(BeFalse())
		Expect(k8s.DeleteAllOf(ctx, &storagev1alpha1.ServerPool{}, client.InNamespace(tenantNamespace))).To(Succeed())
		Expect(k8s.DeleteAllOf(ctx, &storagev1alpha1.GatewayPool{}, client.InNamespace(tenantNamespace))).To(Succeed())
	})

	It("renders a helm test Pod whose command line, run as a node would run it, passes against a real strata server", func() {
		strataBin := os.Getenv("STRATA_BIN")
		if strataBin == "" {
			var err error
			strataBin, err = gexec.Build("github.com/strata-storage/strata/cmd/strata")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(gexec.CleanupBuildArtifacts)
		}
		const access, secret = "selftest-root", "selftest-root-secret"
		addr := freeAddr()
		root := GinkgoT().TempDir()
		server := exec.Command(strataBin, "server", "--address", addr, "--shutdown-delay", "0s",
			filepath.Join(root, "d1"), filepath.Join(root, "d2"), filepath.Join(root, "d3"), filepath.Join(root, "d4"))
		server.Env = append(os.Environ(), "STRATA_ROOT_USER="+access, "STRATA_ROOT_PASSWORD="+secret)
		session, err := gexec.Start(server, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill().Wait() })
		Eventually(func() (int, error) {
			resp, err := http.Get("http://" + addr + "/strata/health/ready")
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))

		pod := &corev1.Pod{}
		Expect(convert(renderedObjects(mustRender(`tenant: {tls: {mode: Disabled}}`)), "Pod", "media-selftest", pod)).To(Succeed())
		c := pod.Spec.Containers[0]
		// The node: Secret volumes become directories holding the items
		// the Pod asks for; paths in the environment follow the mounts;
		// the Service's address becomes the server's.
		mounts := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			Expect(v.Secret).NotTo(BeNil())
			data := map[string]string{"accessKey": access, "secretKey": secret}
			dir := GinkgoT().TempDir()
			for _, item := range v.Secret.Items {
				Expect(os.WriteFile(filepath.Join(dir, item.Path), []byte(data[item.Key]), 0o600)).To(Succeed())
			}
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					mounts[m.MountPath] = dir
				}
			}
		}
		env := []string{"PATH=" + os.Getenv("PATH")}
		for _, e := range c.Env {
			value := e.Value
			for mountPath, dir := range mounts {
				value = strings.Replace(value, mountPath, dir, 1)
			}
			env = append(env, e.Name+"="+value)
		}
		args := append([]string(nil), c.Args...)
		for i, a := range args {
			if a == "--endpoint=http://media.storage.svc:80" {
				args[i] = "--endpoint=http://" + addr
			}
		}
		Expect(args).To(ContainElement("--endpoint=http://"+addr), "the rendered endpoint is not the tenant's Service")
		selftest := exec.Command(strataBin, args...)
		selftest.Env = env
		run, err := gexec.Start(selftest, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(run).WithTimeout(time.Minute).Should(gexec.Exit(0))
		Expect(string(run.Out.Contents())).To(ContainSubstring("ok: 2 objects written, read back intact and deleted"))
	})
})

// renderedObjects are the documents of a rendered release, its test hooks
// included, decoded.
func renderedObjects(rel *helmrelease.Release) []*unstructured.Unstructured {
	docs := strings.Split(rel.Manifest, "\n---")
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed(), doc)
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	return n
}

// expectAccepted creates every object with dryRun=All: the API server
// validates it (CRD schemas and CEL rules, Pod Security admission of the
// namespace) without keeping it.
func expectAccepted(objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(o.GetNamespace()).To(Equal(tenantNamespace), "%s %s", o.GetKind(), o.GetName())
		Expect(k8s.Create(ctx, o.DeepCopy(), client.DryRunAll)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
}

// convert finds the object of kind and name and decodes it strictly into
// out: a field the Go type does not know fails.
func convert(objs []*unstructured.Unstructured, kind, name string, out any) error {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			return yaml.UnmarshalStrict(b, out)
		}
	}
	return fmt.Errorf("no %s %s rendered", kind, name)
}

// secretVolumes maps a Pod's mount paths to the Secrets mounted there.
func secretVolumes(pod *corev1.Pod) map[string]string {
	secrets := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name {
				secrets[m.MountPath] = v.Secret.SecretName
			}
		}
	}
	return secrets
}

func slicesContainPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// schemaDrift lists where a values schema node disagrees with the CRD
// schema node it mirrors: a closed object (additionalProperties false)
// must list exactly the CRD's fields, and bounds, enums, patterns and
// required fields given in both must be equal. What only the CRD checks is
// fine: the API server refuses it at install.
func schemaDrift(path string, s, crd map[string]any, defs map[string]any) []string {
	if ref, ok := s["$ref"].(string); ok {
		s = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	var drift []string
	for _, k := range []string{"enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "required"} {
		sv, inSchema := s[k]
		cv, inCRD := crd[k]
		if k == "enum" || k == "required" {
			sv, cv = sortedList(sv), sortedList(cv)
		}
		if inSchema && inCRD && !reflect.DeepEqual(sv, cv) {
			drift = append(drift, fmt.Sprintf("%s: %s is %v in the schema, %v in the CRD", path, k, sv, cv))
		}
	}
	sProps, _ := s["properties"].(map[string]any)
	cProps, _ := crd["properties"].(map[string]any)
	if s["additionalProperties"] == false {
		for name := range cProps {
			if _, ok := sProps[name]; !ok {
				drift = append(drift, fmt.Sprintf("%s.%s: a CRD field the schema refuses", path, name))
			}
		}
		for name := range sProps {
			if _, ok := cProps[name]; !ok {
				drift = append(drift, fmt.Sprintf("%s.%s: not a field of the CRD", path, name))
			}
		}
	}
	for name, sp := range sProps {
		if cp, ok := cProps[name]; ok {
			drift = append(drift, schemaDrift(path+"."+name, sp.(map[string]any), cp.(map[string]any), defs)...)
		}
	}
	if si, ok := s["items"].(map[string]any); ok {
		if ci, ok := crd["items"].(map[string]any); ok {
			drift = append(drift, schemaDrift(path+"[]", si, ci, defs)...)
		}
	}
	return drift
}

// sortedList is a JSON list in sorted order (nil for anything else):
// enums and required fields are sets.
func sortedList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		out = append(out, fmt.Sprint(e))
	}
	slices.Sort(out)
	return out
}
