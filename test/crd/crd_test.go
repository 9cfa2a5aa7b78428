package crd_test

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/test/testenv"
)

var _ = Describe("a console signing in through a listed provider", func() {
	It("is accepted", func() {
		t := tenantWith(func(t *v1.Tenant) {
			t.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{{URL: "https://id.example.com/realms/staff", ClientIDs: []string{"apps", "strata-console"}}}
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, OIDC: &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com/realms/staff",
				ClientID: "strata-console", ClientSecretRef: &v1.SecretReference{Name: "console-oidc"}, RoleARN: "arn:aws:iam:::role/console-users",
				Scopes: []string{"openid", "email"}, RedirectURL: "https://console.example.com/api/oidc/callback"}}
		})(newNamespace())
		Expect(k8s.Create(ctx, t)).To(Succeed())
	})
})

var _ = Describe("samples", func() {
	It("are all accepted by the API server", func() {
		ns := newNamespace()
		dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
		files, err := filepath.Glob(filepath.Join(dir, "storage_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		kinds := map[string]int{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed(), f)
			obj.SetNamespace(ns)
			Expect(k8s.Create(ctx, obj)).To(Succeed(), "sample %s", filepath.Base(f))
			kinds[obj.GetKind()]++
		}
		Expect(kinds).To(HaveKeyWithValue("Tenant", 1))
		Expect(kinds).To(HaveKeyWithValue("ServerPool", 2))
		Expect(kinds).To(HaveKeyWithValue("GatewayPool", 1))

		By("the LocalNVMe and ArrayLUN samples keeping their media")
		nvme := &v1.ServerPool{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media-nvme"}, nvme)).To(Succeed())
		Expect(nvme.Spec.Storage.Media).To(Equal(v1.MediaLocalNVMe))
		array := &v1.ServerPool{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media-array"}, array)).To(Succeed())
		Expect(array.Spec.Storage.Media).To(Equal(v1.MediaArrayLUN))
		Expect(array.Spec.Storage.StorageClassNames).To(HaveLen(2))
	})
})

var _ = Describe("defaults", func() {
	It("fill in a minimal Tenant", func() {
		t := minimalTenant(newNamespace())
		t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "app-keys"}, Buckets: []string{"*"}}}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		s := t.Spec
		Expect(s.ImagePullPolicy).To(Equal("IfNotPresent"))
		Expect(s.TLS.Mode).To(Equal(v1.TLSOperator))
		Expect(s.Expose.Type).To(Equal("ClusterIP"))
		Expect(s.Monitoring.ServiceMonitor.Enabled).To(HaveValue(BeTrue()))
		Expect(s.Monitoring.ServiceMonitor.Interval).To(Equal("30s"))
		Expect(s.Monitoring.PrometheusRule.Enabled).To(HaveValue(BeTrue()))
		Expect(s.Upgrade.Strategy).To(Equal(v1.UpgradeRolling))
		Expect(s.Upgrade.HealthGateTimeout).NotTo(BeNil())
		Expect(s.Upgrade.HealthGateTimeout.Duration.Minutes()).To(BeEquivalentTo(10))
		Expect(s.DeletionPolicy).To(Equal(v1.DeletionPolicyRetain))
		Expect(s.Users[0].Policy).To(BeEquivalentTo("readwrite"))
	})

	It("fill in a minimal ServerPool", func() {
		p := minimalServerPool(newNamespace())
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.Erasure).To(Equal(v1.ErasureSpec{SetSize: 0, Parity: 0}))
		Expect(p.Spec.Topology.FailureDomainKey).To(Equal("kubernetes.io/hostname"))
		Expect(p.Spec.Topology.Tolerate.Domains).To(HaveValue(BeEquivalentTo(1)))
	})

	It("fill in a minimal GatewayPool", func() {
		g := minimalGatewayPool(newNamespace())
		g.Spec.Autoscaling = &v1.AutoscalingSpec{MaxReplicas: 8}
		Expect(k8s.Create(ctx, g)).To(Succeed())
		Expect(g.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		Expect(g.Spec.Posix.Metadata).To(Equal(v1.PosixXattr))
		Expect(g.Spec.Autoscaling.MinReplicas).To(BeEquivalentTo(2))
		Expect(g.Spec.Autoscaling.TargetCPUUtilizationPercentage).To(BeEquivalentTo(70))
	})
})

// invalid is one spec the API server must refuse, and the words the user reads.
type invalid struct {
	build   func(ns string) client.Object
	message string
}

func tenantWith(change func(*v1.Tenant)) func(string) client.Object {
	return func(ns string) client.Object { t := minimalTenant(ns); change(t); return t }
}

func serverPoolWith(change func(*v1.ServerPool)) func(string) client.Object {
	return func(ns string) client.Object { p := minimalServerPool(ns); change(p); return p }
}

func gatewayPoolWith(change func(*v1.GatewayPool)) func(string) client.Object {
	return func(ns string) client.Object { g := minimalGatewayPool(ns); change(g); return g }
}

var _ = Describe("invalid specs", func() {
	DescribeTable("are refused on create with a message saying what to change",
		func(c invalid) {
			obj := c.build(newNamespace())
			err := k8s.Create(ctx, obj)
			Expect(err).To(HaveOccurred(), "the API server accepted an invalid %T", obj)
			Expect(err.Error()).To(ContainSubstring(c.message))
		},
		Entry("pool with fewer than 4 drives", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Servers, p.Spec.VolumesPerServer = 1, 3
			p.Spec.Topology.Tolerate.Domains = int32Ptr(0)
		}), "a ServerPool needs at least 4 drives"}),
		Entry("set size above 16", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Servers, p.Spec.VolumesPerServer = 17, 2
			p.Spec.Erasure.SetSize = 17
		}), "erasure.setSize must be 0 (automatic) or between 2 and 16"}),
		Entry("set size of 1", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Erasure.SetSize = 1
		}), "erasure.setSize must be 0 (automatic) or between 2 and 16"}),
		Entry("parity above half the set", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Erasure = v1.ErasureSpec{SetSize: 4, Parity: 3}
		}), "erasure.parity may be at most half of erasure.setSize"}),
		Entry("set size not dividing the drives", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Erasure.SetSize = 6
		}), "erasure.setSize must divide the pool's drive count"}),
		Entry("parity above 8", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Erasure.Parity = 9
		}), "spec.erasure.parity: Invalid value: 9"}),
		Entry("no storage class", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Storage.StorageClassNames = []string{}
		}), "spec.storage.storageClassNames: Invalid value"}),
		Entry("empty storage class name", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Storage.StorageClassNames = []string{""}
		}), "spec.storage.storageClassNames[0]"}),
		Entry("zero drive size", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Storage.Size = quantity("0")
		}), "storage.size must be larger than zero"}),
		Entry("unknown media", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Storage.Media = "Floppy"
		}), `Unsupported value: "Floppy"`}),
		Entry("single server asked to survive a domain loss", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Servers = 1
		}), "a single-server pool has one failure domain"}),
		Entry("servers not a multiple of the domains", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Topology.Domains = []v1.FailureDomain{{Name: "a"}, {Name: "b"}, {Name: "c"}}
		}), "servers must be a multiple of the number of topology.domains"}),
		Entry("tolerating the loss of every domain", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Topology.Domains = []v1.FailureDomain{{Name: "a"}, {Name: "b"}}
			p.Spec.Topology.Tolerate.Domains = int32Ptr(2)
		}), "topology.tolerate.domains must be smaller than the number of topology.domains"}),
		Entry("tolerating the loss of every server", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Topology.Tolerate.Servers = 4
		}), "topology.tolerate.servers must be smaller than servers"}),
		Entry("domain name that is not a DNS label", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.Topology.Domains = []v1.FailureDomain{{Name: "Rack_A"}, {Name: "b"}}
		}), "spec.topology.domains[0].name"}),
		Entry("pool without a tenant", invalid{serverPoolWith(func(p *v1.ServerPool) {
			p.Spec.TenantRef.Name = ""
		}), "spec.tenantRef.name"}),
		Entry("autoscaling minimum above maximum", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			g.Spec.Replicas = nil
			g.Spec.Autoscaling = &v1.AutoscalingSpec{MinReplicas: 5, MaxReplicas: 3}
		}), "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"}),
		Entry("replicas outside the autoscaling range", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			g.Spec.Replicas = int32Ptr(10)
			g.Spec.Autoscaling = &v1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 4}
		}), "replicas must lie between autoscaling.minReplicas and autoscaling.maxReplicas"}),
		Entry("gateway volume with both a claim and a template", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			q := quantity("10Ti")
			g.Spec.Volume = v1.GatewayVolume{ClaimName: "shared-fs", StorageClassName: "cephfs", Size: &q}
		}), "volume needs either claimName"}),
		Entry("gateway volume with neither", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			g.Spec.Volume = v1.GatewayVolume{}
		}), "volume needs either claimName"}),
		Entry("gateway volume template without a size", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			g.Spec.Volume = v1.GatewayVolume{StorageClassName: "cephfs"}
		}), "a volume the operator creates needs both storageClassName and size"}),
		Entry("unknown gateway metadata mode", invalid{gatewayPoolWith(func(g *v1.GatewayPool) {
			g.Spec.Posix.Metadata = "database"
		}), `Unsupported value: "database"`}),
		Entry("External TLS without a Secret", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.TLS.Mode = v1.TLSExternal
		}), "tls.mode External needs tls.secretRef"}),
		Entry("issuerRef without CertManager", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.TLS = v1.TLSSpec{Mode: v1.TLSOperator, IssuerRef: &v1.IssuerReference{Name: "ca"}}
		}), "tls.issuerRef is only used with tls.mode CertManager"}),
		Entry("bucket name with capitals and underscores", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Buckets = []v1.BucketSpec{{Name: "My_Bucket"}}
		}), "spec.buckets[0].name"}),
		Entry("bucket name like an IP address", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Buckets = []v1.BucketSpec{{Name: "192.168.1.1"}}
		}), "bucket names may not look like an IP address"}),
		Entry("bucket name with adjacent dots", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Buckets = []v1.BucketSpec{{Name: "photos..raw"}}
		}), "bucket names may not contain two adjacent dots"}),
		Entry("a user sharing the root Secret", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Credentials.SecretRef = &v1.SecretReference{Name: "root"}
			t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "root"}, Buckets: []string{"*"}}}
		}), "a user's secretRef may not be the root credentials Secret"}),
		Entry("two users of one name", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Users = []v1.UserSpec{
				{Name: "app", SecretRef: v1.SecretReference{Name: "a"}, Buckets: []string{"*"}},
				{Name: "app", SecretRef: v1.SecretReference{Name: "b"}, Buckets: []string{"*"}},
			}
		}), "Duplicate value"}),
		Entry("a user without buckets", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "a"}}}
		}), "spec.users[0].buckets"}),
		Entry("every bucket and some", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "a"}, Buckets: []string{"photos", "*"}}}
		}), `"*" (every bucket) cannot be listed with bucket names`}),
		Entry("unknown user policy", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "a"}, Policy: "superuser", Buckets: []string{"*"}}}
		}), `Unsupported value: "superuser"`}),
		Entry("unknown deletion policy", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.DeletionPolicy = "Forget"
		}), `Unsupported value: "Forget"`}),
		Entry("malformed scrape interval", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Monitoring.ServiceMonitor.Interval = "thirty seconds"
		}), "spec.monitoring.serviceMonitor.interval"}),
		Entry("a console session of a week", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, SessionTTL: "168h"}
		}), "sessionTTL is a duration from 1m to 24h"}),
		Entry("a console session that is no duration", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, SessionTTL: "an hour"}
		}), "spec.console.sessionTTL"}),
		Entry("a console's S3 URL with a path", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, PublicS3URL: "https://s3.example.com/media"}
		}), "publicS3URL is scheme://host[:port]"}),
		Entry("a console's Prometheus that is no URL", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, PrometheusURL: "prometheus:9090"}
		}), "prometheusURL is an http:// or https:// URL"}),
		Entry("a console signing in through an issuer the tenant does not list", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{{URL: "https://id.example.com/realms/staff", ClientIDs: []string{"apps"}}}
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, OIDC: &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com/realms/staff",
				ClientID: "strata-console", RoleARN: "arn:aws:iam:::role/console"}}
		}), "console.oidc signs in through STS, which accepts only spec.webIdentity.providers"}),
		Entry("single sign-on on a console that is off", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{{URL: "https://id.example.com", ClientIDs: []string{"strata-console"}}}
			t.Spec.Console = v1.ConsoleSpec{OIDC: &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com",
				ClientID: "strata-console", RoleARN: "arn:aws:iam:::role/console"}}
		}), "console.oidc is the console's sign-in: set console.enabled too"}),
		Entry("single sign-on without the openid scope", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{{URL: "https://id.example.com", ClientIDs: []string{"strata-console"}}}
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, OIDC: &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com",
				ClientID: "strata-console", RoleARN: "arn:aws:iam:::role/console", Scopes: []string{"profile"}}}
		}), "scopes must include openid"}),
		Entry("single sign-on into a role that is no role ARN", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{{URL: "https://id.example.com", ClientIDs: []string{"strata-console"}}}
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, OIDC: &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com",
				ClientID: "strata-console", RoleARN: "console-users"}}
		}), "spec.console.oidc.roleARN"}),
		Entry("service port out of range", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Expose.Port = 70000
		}), "spec.expose.port"}),
		Entry("an image without a repository", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Image = ":bar13"
		}), "image must be a container image reference such as ghcr.io/strata-storage/strata:0.1.0"}),
		Entry("an image repository in capitals", invalid{tenantWith(func(t *v1.Tenant) {
			t.Spec.Image = "ghcr.io/Strata/strata:0.1.0"
		}), "the repository is lower case"}),
	)

	It("image references: the API server and the registries' reference grammar agree", func() {
		digest := "@sha256:" + strings.Repeat("0a", 32)
		for _, ref := range []string{
			"strata", "strata:0.1.0", "ghcr.io/strata-storage/strata:0.1.0", "localhost:5000/strata",
			"127.0.0.1:5000/team/strata:v1.2-rc.1_b", "registry.example.com/a/b/c" + digest,
			"ghcr.io/strata-storage/strata:0.1.0" + digest, "team/x__y/z--w.v:latest", "My-Registry.example:443/strata",
			":bar13", "Strata:1", "ghcr.io/strata:", "ghcr.io/strata:-rc", "ghcr.io/strata:0.1.0:1", "ghcr.io//strata",
			"https://ghcr.io/strata", "ghcr.io/strata@sha256:0a0a", "strata 0.1.0", "ghcr.io/strata/", "-strata", "strata_",
			"ghcr.io/strata:" + strings.Repeat("t", 129),
		} {
			_, parseErr := reference.ParseNormalizedNamed(ref)
			t := minimalTenant(newNamespace())
			t.Spec.Image = ref
			err := k8s.Create(ctx, t)
			if parseErr == nil {
				Expect(err).NotTo(HaveOccurred(), "image %q is a valid reference", ref)
			} else {
				Expect(err).To(HaveOccurred(), "image %q is not a reference (%v) but was accepted", ref, parseErr)
				Expect(err.Error()).To(ContainSubstring("image must be a container image reference"))
			}
		}
	})

	DescribeTable("are refused on update when a field is immutable",
		func(create func(ns string) client.Object, change func(client.Object), message string) {
			obj := create(newNamespace())
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			change(obj)
			err := k8s.Update(ctx, obj)
			Expect(err).To(HaveOccurred(), "the API server accepted a change to an immutable field")
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("servers", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.Servers = 8
		}, "servers is immutable: add another ServerPool"),
		Entry("volumesPerServer", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.VolumesPerServer = 8
		}, "volumesPerServer is immutable"),
		Entry("erasure", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.Erasure = v1.ErasureSpec{SetSize: 8, Parity: 2}
		}, "erasure is immutable"),
		Entry("a pool's tenantRef", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.TenantRef.Name = "other"
		}, "tenantRef is immutable"),
		Entry("media", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.Storage.Media = v1.MediaArrayLUN
		}, "storage.media is immutable"),
		Entry("storage classes", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.Storage.StorageClassNames = []string{"other"}
		}, "storage.storageClassNames is immutable"),
		Entry("a shrinking drive size", serverPoolWith(func(*v1.ServerPool) {}), func(o client.Object) {
			o.(*v1.ServerPool).Spec.Storage.Size = quantity("512Gi")
		}, "storage.size can grow but never shrink"),
		Entry("a gateway's tenantRef", gatewayPoolWith(func(*v1.GatewayPool) {}), func(o client.Object) {
			o.(*v1.GatewayPool).Spec.TenantRef.Name = "other"
		}, "tenantRef is immutable"),
		Entry("a gateway's volume", gatewayPoolWith(func(*v1.GatewayPool) {}), func(o client.Object) {
			o.(*v1.GatewayPool).Spec.Volume.ClaimName = "other-fs"
		}, "volume is immutable"),
	)
})

var _ = Describe("allowed changes", func() {
	It("lets a drive size grow", func() {
		p := minimalServerPool(newNamespace())
		Expect(k8s.Create(ctx, p)).To(Succeed())
		p.Spec.Storage.Size = quantity("2Ti")
		Expect(k8s.Update(ctx, p)).To(Succeed())
	})

	It("lets an image change (a rolling upgrade) and new users be added", func() {
		t := minimalTenant(newNamespace())
		t.Spec.Image = "strata:0.1.0"
		Expect(k8s.Create(ctx, t)).To(Succeed())
		t.Spec.Image = "strata:0.2.0"
		t.Spec.Users = append(t.Spec.Users, v1.UserSpec{Name: "backup", SecretRef: v1.SecretReference{Name: "backup-keys"}, Policy: "readonly", Buckets: []string{"*"}})
		Expect(k8s.Update(ctx, t)).To(Succeed())
	})

	It("scales a GatewayPool through the scale subresource", func() {
		g := minimalGatewayPool(newNamespace())
		Expect(k8s.Create(ctx, g)).To(Succeed())
		scale := &autoscalingv1.Scale{}
		Expect(k8s.SubResource("scale").Get(ctx, g, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(BeEquivalentTo(2))
		scale.Spec.Replicas = 5
		Expect(k8s.SubResource("scale").Update(ctx, g, client.WithSubResourceBody(scale))).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(g), g)).To(Succeed())
		Expect(g.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
	})
})

var _ = Describe("kubectl get", func() {
	It("has printer columns and short names for every kind", func() {
		for _, kind := range []string{"Tenant", "ServerPool", "GatewayPool"} {
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			plural := strings.ToLower(kind) + "s"
			Expect(k8s.Get(ctx, client.ObjectKey{Name: plural + "." + v1.GroupVersion.Group}, crd)).To(Succeed())
			short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
			Expect(short).NotTo(BeEmpty(), kind)
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			Expect(versions).To(HaveLen(1))
			cols, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "additionalPrinterColumns")
			Expect(len(cols)).To(BeNumerically(">=", 4), kind)
		}
	})
})
