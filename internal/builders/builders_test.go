package builders

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/placement"
)

func testTenant(mut ...func(*v1.Tenant)) *v1.Tenant {
	t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "media", Namespace: "store", UID: "6f1c2a9e"}}
	t.Spec.TLS.Mode = v1.TLSOperator
	for _, m := range mut {
		m(t)
	}
	return t
}

func testPool(name string, servers, volumes int32, mut ...func(*v1.ServerPool)) *v1.ServerPool {
	p := &v1.ServerPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "store"},
		Spec: v1.ServerPoolSpec{
			TenantRef: v1.TenantReference{Name: "media"}, Servers: servers, VolumesPerServer: volumes,
			Storage: v1.StorageSpec{Media: v1.MediaLocalNVMe, StorageClassNames: []string{"nvme"}, Size: resource.MustParse("1Ti")},
		},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func TestServerStatefulSet(t *testing.T) {
	cases := []struct {
		name      string
		tenant    *v1.Tenant
		pool      *v1.ServerPool
		group     placement.Group
		wantName  string
		wantArgs  []string
		wantProbe corev1.URIScheme
		wantVols  []string
	}{{
		name:      "TLS: certificates mounted, HTTPS probes",
		tenant:    testTenant(),
		pool:      testPool("pool-a", 4, 2),
		group:     placement.Group{Replicas: 4},
		wantName:  "media-pool-a",
		wantArgs:  []string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json", "--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"},
		wantProbe: corev1.URISchemeHTTPS,
		wantVols:  []string{"root-credentials", "iam", "metrics-token", "tmp", "certs", "notify-targets", "topology", "encryption-keys"},
	}, {
		name:      "TLS disabled: no certificates, HTTP probes",
		tenant:    testTenant(func(t *v1.Tenant) { t.Spec.TLS.Mode = v1.TLSDisabled }),
		pool:      testPool("pool-a", 4, 2),
		group:     placement.Group{Replicas: 4},
		wantName:  "media-pool-a",
		wantArgs:  []string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json", "--insecure-internode", "--admin-over-http", "--metrics-token-file", "/etc/strata/metrics/token"},
		wantProbe: corev1.URISchemeHTTP,
		wantVols:  []string{"root-credentials", "iam", "metrics-token", "tmp", "notify-targets", "topology", "encryption-keys"},
	}, {
		name:      "explicit domain: one StatefulSet per domain",
		tenant:    testTenant(),
		pool:      testPool("pool-a", 4, 2),
		group:     placement.Group{Suffix: "rack1", Domain: "rack1", Replicas: 2, FirstServer: 2},
		wantName:  "media-pool-a-rack1",
		wantArgs:  []string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json", "--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"},
		wantProbe: corev1.URISchemeHTTPS,
		wantVols:  []string{"root-credentials", "iam", "metrics-token", "tmp", "certs", "notify-targets", "topology", "encryption-keys"},
	}, {
		name: "console enabled: its flags",
		tenant: testTenant(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, SessionTTL: "30m", PublicS3URL: "https://s3.example.com", PrometheusURL: "http://prom:9090"}
		}),
		pool:     testPool("pool-a", 4, 2),
		group:    placement.Group{Replicas: 4},
		wantName: "media-pool-a",
		wantArgs: []string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json",
			"--console-address", ":9090", "--console-session-ttl", "30m", "--console-s3-url", "https://s3.example.com",
			"--console-prometheus-url", "http://prom:9090", "--console-prometheus-selector", `tenant="media",namespace="store"`,
			"--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"},
		wantProbe: corev1.URISchemeHTTPS,
		wantVols:  []string{"root-credentials", "iam", "metrics-token", "tmp", "certs", "notify-targets", "topology", "encryption-keys"},
	}, {
		name: "console single sign-on: its flags, the client's secret as a file",
		tenant: testTenant(func(t *v1.Tenant) {
			t.Spec.Console = v1.ConsoleSpec{Enabled: true, PublicS3URL: "https://s3.example.com", OIDC: &v1.ConsoleOIDCSpec{
				IssuerURL: "https://id.example.com/realms/staff", ClientID: "strata-console", RoleARN: "arn:aws:iam:::role/console-users",
				ClientSecretRef: &v1.SecretReference{Name: "console-oidc"}, Scopes: []string{"openid", "email"}}}
		}),
		pool:     testPool("pool-a", 4, 2),
		group:    placement.Group{Replicas: 4},
		wantName: "media-pool-a",
		wantArgs: []string{"server", "--address", ":9000", "--topology", "/etc/strata/topology/topology.json",
			"--console-address", ":9090", "--console-s3-url", "https://s3.example.com",
			"--console-oidc-issuer", "https://id.example.com/realms/staff", "--console-oidc-client-id", "strata-console",
			"--console-oidc-role-arn", "arn:aws:iam:::role/console-users", "--console-oidc-scopes", "openid email",
			"--console-oidc-client-secret-file", "/etc/strata/console-oidc/clientSecret",
			"--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"},
		wantProbe: corev1.URISchemeHTTPS,
		wantVols:  []string{"root-credentials", "iam", "metrics-token", "tmp", "certs", "notify-targets", "topology", "encryption-keys", "console-oidc"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := EngineFor(tc.tenant, "strata:default", "abc")
			claims := []placement.Claim{{Name: "data0", StorageClassName: "a"}, {Name: "data1", StorageClassName: "b"}}
			sts := ServerStatefulSet(tc.tenant, tc.pool, tc.group, claims, e)
			if sts.Name != tc.wantName || *sts.Spec.Replicas != int32(tc.group.Replicas) {
				t.Fatalf("name/replicas = %s/%d", sts.Name, *sts.Spec.Replicas)
			}
			c := sts.Spec.Template.Spec.Containers[0]
			if !slices.Equal(c.Args, tc.wantArgs) {
				t.Errorf("args = %v, want %v", c.Args, tc.wantArgs)
			}
			if c.Image != "strata:default" {
				t.Errorf("image = %s", c.Image)
			}
			if c.ReadinessProbe.HTTPGet.Scheme != tc.wantProbe || c.LivenessProbe.HTTPGet.Path != HealthLive {
				t.Errorf("probes = %+v", c.ReadinessProbe.HTTPGet)
			}
			var vols []string
			for _, v := range sts.Spec.Template.Spec.Volumes {
				vols = append(vols, v.Name)
				if v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil {
					t.Errorf("emptyDir %s has no sizeLimit: a pod could fill its node's ephemeral storage", v.Name)
				}
				// Mounted before the tenant has targets: declaring them rolls nothing.
				if v.Name == "notify-targets" && (v.Secret == nil || v.Secret.Optional == nil || !*v.Secret.Optional) {
					t.Errorf("the notification targets Secret is not mounted optional: %+v", v.VolumeSource)
				}
			}
			if !slices.Contains(c.Env, corev1.EnvVar{Name: "STRATA_NOTIFY_TARGETS_FILE", Value: "/etc/strata/notify/targets.json"}) {
				t.Errorf("env %v does not name the notification targets file", c.Env)
			}
			if !slices.Equal(vols, tc.wantVols) {
				t.Errorf("volumes = %v, want %v", vols, tc.wantVols)
			}
			for _, env := range c.Env {
				if env.ValueFrom != nil && env.ValueFrom.ResourceFieldRef == nil || strings.Contains(env.Value, "secret") && !strings.HasPrefix(env.Value, "/") {
					t.Errorf("credential not passed as a file: %+v", env)
				}
			}
			if len(sts.Spec.VolumeClaimTemplates) != 2 || *sts.Spec.VolumeClaimTemplates[1].Spec.StorageClassName != "b" {
				t.Errorf("claim templates = %+v", sts.Spec.VolumeClaimTemplates)
			}
			sel := sts.Spec.Selector.MatchLabels
			for k, v := range sel {
				if sts.Spec.Template.Labels[k] != v {
					t.Errorf("pod labels %v do not match selector %v", sts.Spec.Template.Labels, sel)
				}
			}
			if !slices.Contains(c.Env, corev1.EnvVar{Name: "STRATA_KMS_KEYS_FILE", Value: "/etc/strata/kms/keys.json"}) {
				t.Errorf("the keys file is not given to the server: %v", c.Env)
			}
			if sts.Spec.Template.Annotations[AnnotationCredentialsHash] != "abc" {
				t.Error("no credentials hash on the pod template")
			}
			if *sts.Spec.Template.Spec.SecurityContext.RunAsNonRoot != true || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Error("not restricted")
			}
		})
	}
}

func TestServerPDB(t *testing.T) {
	for _, tc := range []struct{ servers, want int }{{0, 0}, {1, 1}, {2, 2}, {-1, 0}} {
		pdb := ServerPDB(testTenant(), testPool("p", 4, 4), tc.servers)
		if got := pdb.Spec.MaxUnavailable.IntValue(); got != tc.want {
			t.Errorf("writeServers %d: maxUnavailable = %d, want %d", tc.servers, got, tc.want)
		}
	}
}

func TestServices(t *testing.T) {
	cases := []struct {
		name     string
		tenant   *v1.Tenant
		port     int32
		portName string
		typ      corev1.ServiceType
	}{
		{"TLS default port", testTenant(), 443, "https", corev1.ServiceTypeClusterIP},
		{"plain default port", testTenant(func(t *v1.Tenant) { t.Spec.TLS.Mode = v1.TLSDisabled }), 80, "http", corev1.ServiceTypeClusterIP},
		{"explicit port and type", testTenant(func(t *v1.Tenant) {
			t.Spec.Expose = v1.ExposeSpec{Type: "LoadBalancer", Port: 9443, Annotations: map[string]string{"lb": "internal"}}
		}), 9443, "https", corev1.ServiceTypeLoadBalancer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := S3Service(tc.tenant)
			p := s.Spec.Ports[0]
			if p.Port != tc.port || p.Name != tc.portName || p.TargetPort.IntValue() != S3Port || s.Spec.Type != tc.typ {
				t.Errorf("service = %+v %s", p, s.Spec.Type)
			}
			if s.Spec.Selector[LabelComponent] != ComponentServer {
				t.Errorf("selector = %v", s.Spec.Selector)
			}
			if tc.tenant.Spec.Expose.Annotations != nil && s.Annotations["lb"] != "internal" {
				t.Error("annotations not copied")
			}
			g := GatewayService(tc.tenant, &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "store"}})
			if g.Name != "media-nas" || g.Spec.Ports[0].Port != tc.port || g.Spec.Selector[LabelPool] != "nas" {
				t.Errorf("gateway service = %+v", g)
			}
		})
	}
	hl := HeadlessService(testTenant())
	if hl.Name != "media-hl" || hl.Spec.ClusterIP != corev1.ClusterIPNone || !hl.Spec.PublishNotReadyAddresses {
		t.Errorf("headless = %+v", hl.Spec)
	}
}

func TestTopologyConfigMap(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	layout := func(size, parity int32) func(*v1.ServerPool) {
		return func(p *v1.ServerPool) { p.Status.Layout = &v1.ErasureLayout{SetSize: size, Parity: parity, Sets: 1} }
	}
	created := func(tm metav1.Time) func(*v1.ServerPool) {
		return func(p *v1.ServerPool) { p.CreationTimestamp = tm }
	}
	pools := []v1.ServerPool{
		*testPool("pool-b", 2, 2, created(metav1.NewTime(t0.Add(time.Hour))), layout(4, 2),
			func(p *v1.ServerPool) { p.Spec.Topology.Domains = []v1.FailureDomain{{Name: "r1"}, {Name: "r2"}} }),
		*testPool("pool-a", 4, 4, created(t0), layout(16, 4)),
		*testPool("pool-c", 4, 1, created(t0)), // layout not decided: not listed yet
		*testPool("pool-0", 4, 1, created(metav1.NewTime(t0.Add(time.Hour))), layout(4, 2),
			func(p *v1.ServerPool) { p.Spec.Decommission = true }), // listed Draining
	}
	ordered := TopologyPools(pools)
	var names []string
	for _, p := range ordered {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"pool-a", "pool-0", "pool-b"}) {
		t.Fatalf("order = %v, want creation order then name, decided layouts only", names)
	}
	cm, err := TopologyConfigMap(testTenant(), ordered, "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	var doc Topology
	if err := json.Unmarshal([]byte(cm.Data[TopologyFileKey]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Version != 1 || doc.DeploymentID != "6f1c2a9e" || cm.Name != "media-topology" {
		t.Fatalf("header = %+v %s", doc, cm.Name)
	}
	want := []TopologyPool{{
		Name:      "pool-a",
		Endpoints: []string{"https://media-pool-a-{0...3}.media-hl.store.svc.cluster.local:9000/data{0...3}"},
		SetSize:   16, Parity: 4,
		DriveOrder: []int{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15},
		State:      "Active",
	}, {
		Name:      "pool-0",
		Endpoints: []string{"https://media-pool-0-{0...3}.media-hl.store.svc.cluster.local:9000/data0"},
		SetSize:   4, Parity: 2, DriveOrder: []int{0, 1, 2, 3}, State: "Draining",
	}, {
		Name: "pool-b",
		Endpoints: []string{
			"https://media-pool-b-r1-0.media-hl.store.svc.cluster.local:9000/data{0...1}",
			"https://media-pool-b-r2-0.media-hl.store.svc.cluster.local:9000/data{0...1}",
		},
		SetSize: 4, Parity: 2, DriveOrder: []int{0, 2, 1, 3}, State: "Active",
	}}
	got, _ := json.Marshal(doc.Pools)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Fatalf("pools =\n%s\nwant\n%s", got, exp)
	}
	if !PoolInTopology(cm, "pool-b") || PoolInTopology(cm, "pool-c") {
		t.Fatal("PoolInTopology disagrees with the file")
	}
}

func TestGatewayHPAAndReplicas(t *testing.T) {
	tn := testTenant()
	g := &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "store"}}
	if GatewayHPA(tn, g) != nil {
		t.Fatal("HPA without autoscaling")
	}
	if *GatewayReplicas(g) != 2 {
		t.Fatal("default replicas")
	}
	g.Spec.Autoscaling = &v1.AutoscalingSpec{MinReplicas: 3, MaxReplicas: 9}
	h := GatewayHPA(tn, g)
	if *h.Spec.MinReplicas != 3 || h.Spec.MaxReplicas != 9 || *h.Spec.Metrics[0].Resource.Target.AverageUtilization != 70 ||
		h.Spec.ScaleTargetRef.Name != "media-nas" || h.Spec.ScaleTargetRef.Kind != "Deployment" {
		t.Fatalf("hpa = %+v", h.Spec)
	}
	if *GatewayReplicas(g) != 3 {
		t.Fatal("replicas should start at minReplicas")
	}
	g.Spec.Replicas = ptr.To[int32](4)
	if *GatewayReplicas(g) != 4 {
		t.Fatal("spec.replicas should win")
	}
}

func TestGatewayDeploymentAndClaim(t *testing.T) {
	tn := testTenant()
	g := &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "store"}}
	g.Spec.Volume = v1.GatewayVolume{ClaimName: "shared-fs"}
	g.Spec.Posix.Metadata = v1.PosixSidecar
	if GatewayPVC(tn, g) != nil {
		t.Fatal("a named claim is the user's; the operator must not create one")
	}
	d := GatewayDeployment(tn, g, EngineFor(tn, "strata:x", ""))
	c := d.Spec.Template.Spec.Containers[0]
	want := []string{"gateway", "--address", ":9000", "--root", "/data", "--posix-metadata", "sidecar", "--metrics-token-file", "/etc/strata/metrics/token", "--certs-dir", "/etc/strata/certs"}
	if !slices.Equal(c.Args, want) {
		t.Fatalf("args = %v", c.Args)
	}
	if d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Fatal("gateways must roll with maxUnavailable 0")
	}
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		found = found || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared-fs")
		if v.Name == "encryption-keys" {
			t.Error("the gateway, which encrypts nothing, mounts the encryption keys")
		}
	}
	if !found {
		t.Fatal("claim not mounted")
	}
	g.Spec.Volume = v1.GatewayVolume{StorageClassName: "cephfs", Size: ptr.To(resource.MustParse("10Ti"))}
	pvc := GatewayPVC(tn, g)
	if pvc.Name != "media-nas-data" || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany || len(pvc.OwnerReferences) != 0 {
		t.Fatalf("pvc = %+v", pvc)
	}
}

func TestCredentials(t *testing.T) {
	tn := testTenant(func(t *v1.Tenant) {
		t.Spec.Users = []v1.UserSpec{
			{Name: "app", Policy: "readonly", Buckets: []string{"photos"}},
			{Name: "ops", Buckets: []string{"photos", "*"}},
		}
	})
	root, err := NewRootCredentials(tn, bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if len(root.Data[AccessKeyKey]) != 20 || len(root.Data[SecretKeyKey]) != 40 || len(root.OwnerReferences) != 0 {
		t.Fatalf("root = %+v", root)
	}
	if _, err := NewRootCredentials(tn, bytes.NewReader(nil)); err == nil {
		t.Fatal("no error from an empty random source")
	}
	iam, err := IAMSecret(tn, map[string][2]string{"app": {"A1", "S1"}, "ops": {"A2", "S2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"users":[{"accessKey":"A1","secretKey":"S1","policy":"readonly","buckets":["photos"],"displayName":"app"},{"accessKey":"A2","secretKey":"S2","policy":"readwrite","buckets":[],"displayName":"ops"}]}`
	if string(iam.Data[IAMFileKey]) != want {
		t.Fatalf("iam = %s", iam.Data[IAMFileKey])
	}
	if _, err := IAMSecret(tn, map[string][2]string{"app": {"A1", "S1"}}); err == nil {
		t.Fatal("missing user keys not reported")
	}
	_, _, err = CredentialsIn(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Data: map[string][]byte{AccessKeyKey: []byte("a")}})
	if err == nil || !strings.Contains(err.Error(), "secretKey") {
		t.Fatalf("err = %v", err)
	}
}

// Generated keys are letters and digits only (a key that began with '-'
// was taken for a flag by mc), drawn uniformly: bytes past the last whole
// round of the alphabet are drawn again.
func TestGeneratedKeysAreLettersAndDigits(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9]+$`)
	for range 300 {
		root, err := NewRootCredentials(testTenant(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		for key, n := range map[string]int{AccessKeyKey: 20, SecretKeyKey: 40} {
			if v := string(root.Data[key]); len(v) != n || !plain.MatchString(v) {
				t.Fatalf("%s %q: want %d letters and digits", key, v, n)
			}
		}
	}
	// 0xF8-0xFF are drawn again; 0 is 'A', 61 '9', 62 'A' again, 0xF7 '9'.
	src := append(bytes.Repeat([]byte{0xFF}, 19), 0xF8, 0, 61, 62, 0xF7)
	src = append(src, bytes.Repeat([]byte{1}, 16)...)
	key, err := randomKey(bytes.NewReader(src), 20)
	if err != nil || key != "A9A9"+strings.Repeat("B", 16) {
		t.Fatalf("key %q, err %v", key, err)
	}
}

func TestDNSNames(t *testing.T) {
	tn := testTenant(func(t *v1.Tenant) { t.Spec.TLS.DNSNames = []string{"s3.example.com"} })
	got := DNSNames(tn, []string{"nas"}, "cluster.local")
	for _, want := range []string{"media", "media.store.svc.cluster.local", "*.media-hl.store.svc.cluster.local", "media-nas.store.svc", "s3.example.com"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s missing from %v", want, got)
		}
	}
}

func TestPoolDeletionRefusal(t *testing.T) {
	now := metav1.Now()
	tenant := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "media"}}
	deletingTenant := tenant.DeepCopy()
	deletingTenant.DeletionTimestamp = &now
	pool := func(state string, ready int32, drives v1.DriveCounts, annotations map[string]string) *v1.ServerPool {
		return &v1.ServerPool{ObjectMeta: metav1.ObjectMeta{Name: "nvme", Annotations: annotations},
			Status: v1.ServerPoolStatus{PoolState: state, ReadyServers: ready, Drives: drives}}
	}
	for _, tc := range []struct {
		name        string
		pool        *v1.ServerPool
		tenant      *v1.Tenant
		terminating bool
		refused     bool
	}{
		{"never ran", pool("", 0, v1.DriveCounts{}, nil), tenant, false, false},
		{"servers ready", pool("", 2, v1.DriveCounts{}, nil), tenant, false, true},
		{"drives seen, servers down now", pool("", 0, v1.DriveCounts{Offline: 4}, nil), tenant, false, true},
		{"active", pool(v1.PoolStateActive, 4, v1.DriveCounts{Online: 16}, nil), tenant, false, true},
		{"draining", pool(v1.PoolStateDraining, 4, v1.DriveCounts{Online: 16}, nil), tenant, false, true},
		{"decommissioned", pool(v1.PoolStateDecommissioned, 4, v1.DriveCounts{Online: 16}, nil), tenant, false, false},
		{"tenant gone", pool(v1.PoolStateActive, 4, v1.DriveCounts{}, nil), nil, false, false},
		{"tenant being deleted", pool(v1.PoolStateActive, 4, v1.DriveCounts{}, nil), deletingTenant, false, false},
		{"namespace terminating", pool(v1.PoolStateActive, 4, v1.DriveCounts{}, nil), tenant, true, false},
		{"delete-with-data", pool(v1.PoolStateActive, 4, v1.DriveCounts{}, map[string]string{v1.AnnotationDeleteWithData: "true"}), tenant, false, false},
		{"delete-with-data not true", pool(v1.PoolStateActive, 4, v1.DriveCounts{}, map[string]string{v1.AnnotationDeleteWithData: "yes"}), tenant, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PoolDeletionRefusal(tc.pool, tc.tenant, tc.terminating)
			if (got != "") != tc.refused {
				t.Fatalf("refused = %q, want refused %v", got, tc.refused)
			}
			if tc.refused && !strings.Contains(got, "/strata/admin/v1/pools/nvme/decommission") {
				t.Fatalf("the refusal does not say how to decommission: %q", got)
			}
		})
	}
}

// TestServerNetworkPolicy: the servers' internode port admits only the
// tenant's servers, the S3 port spec.networkPolicy.s3From (anywhere when
// empty), and nothing else is opened.
func TestServerNetworkPolicy(t *testing.T) {
	tn := testTenant()
	np := ServerNetworkPolicy(tn)
	if np.Name != "media-servers" || !maps.Equal(np.Spec.PodSelector.MatchLabels, ServerSelector("media")) {
		t.Fatalf("policy %s selects %v", np.Name, np.Spec.PodSelector.MatchLabels)
	}
	if len(np.Spec.Ingress) != 2 || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Fatalf("rules: %+v", np.Spec)
	}
	s3, internode := np.Spec.Ingress[0], np.Spec.Ingress[1]
	if s3.Ports[0].Port.IntValue() != S3Port || s3.From != nil {
		t.Errorf("S3 rule: %+v", s3)
	}
	if internode.Ports[0].Port.IntValue() != InternodePort || len(internode.From) != 1 ||
		!maps.Equal(internode.From[0].PodSelector.MatchLabels, ServerSelector("media")) || internode.From[0].NamespaceSelector != nil {
		t.Errorf("internode rule: %+v", internode)
	}
	tn.Spec.NetworkPolicy.S3From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}}
	if got := ServerNetworkPolicy(tn).Spec.Ingress[0].From; len(got) != 1 || got[0].IPBlock.CIDR != "10.0.0.0/8" {
		t.Errorf("s3From not applied: %+v", got)
	}
	if !NetworkPolicyEnabled(tn) {
		t.Error("enabled by default")
	}
}

func TestEncryptionKeys(t *testing.T) {
	tn := testTenant()
	gen, err := NewEncryptionKeys(tn, bytes.NewReader(bytes.Repeat([]byte{9}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if gen.Name != "media-encryption-keys" || len(gen.OwnerReferences) != 0 {
		t.Fatalf("generated Secret %s with owners %v: want media-encryption-keys without owner", gen.Name, gen.OwnerReferences)
	}
	st, err := EncryptionKeysIn(gen)
	if err != nil || st.DefaultKey != "media-1" || st.Keys != 1 || st.KeysSecret != "media-encryption-keys" {
		t.Fatalf("generated keys read back as %+v, %v", st, err)
	}
	if _, err := NewEncryptionKeys(tn, bytes.NewReader(make([]byte, 8))); err == nil {
		t.Error("no error from a short random source")
	}
	for doc, want := range map[string]string{
		"":                            "has no keys.json",
		`{"keys": {"k": "c2hvcnQ="}}`: `key "k" is not 32`,
		`{"default": "x", "keys": {"k": "` + strings.Repeat("A", 43) + `="}}`: `default key "x"`,
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Data: map[string][]byte{}}
		if doc != "" {
			s.Data[EncryptionKeysFileKey] = []byte(doc)
		}
		if _, err := EncryptionKeysIn(s); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"mine"`) {
			t.Errorf("keys file %q: %v, want an error naming the Secret and %q", doc, err, want)
		}
	}
	ref := testTenant(func(t *v1.Tenant) { t.Spec.Encryption.KeysSecretRef = &v1.SecretReference{Name: "vault-keys"} })
	if EncryptionKeysSecretName(ref) != "vault-keys" || EngineFor(ref, "x", "").EncryptionSecret != "vault-keys" {
		t.Error("spec.encryption.keysSecretRef not used")
	}
}

func TestPodSizing(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name           string
		given          corev1.ResourceRequirements
		sizing         Sizing
		requests, lims corev1.ResourceList
	}{
		{name: "nothing given: the server's defaults", sizing: ServerSizing,
			requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("2Gi")},
			lims:     corev1.ResourceList{corev1.ResourceMemory: q("4Gi")}},
		{name: "nothing given: the gateway's defaults", sizing: GatewaySizing,
			requests: corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("512Mi")},
			lims:     corev1.ResourceList{corev1.ResourceMemory: q("2Gi")}},
		{name: "a memory limit alone: the API server makes it the request", sizing: ServerSizing,
			given:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
			requests: corev1.ResourceList{corev1.ResourceCPU: q("1")},
			lims:     corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
		{name: "a request above the default limit raises the limit", sizing: ServerSizing,
			given:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("8Gi"), corev1.ResourceCPU: q("3")}},
			requests: corev1.ResourceList{corev1.ResourceCPU: q("3"), corev1.ResourceMemory: q("8Gi")},
			lims:     corev1.ResourceList{corev1.ResourceMemory: q("8Gi")}},
		{name: "a CPU limit is kept, never added", sizing: ServerSizing,
			given:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			requests: corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
			lims:     corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := tc.given.DeepCopy()
			got := withDefaults(tc.given, tc.sizing)
			if !equality.Semantic.DeepEqual(got.Requests, tc.requests) || !equality.Semantic.DeepEqual(got.Limits, tc.lims) {
				t.Errorf("requests %v limits %v, want %v %v", got.Requests, got.Limits, tc.requests, tc.lims)
			}
			if !equality.Semantic.DeepEqual(&tc.given, given) {
				t.Errorf("the spec's resources were changed: %v", tc.given)
			}
		})
	}
}

// TestConsolePorts: an enabled console is a container port, a port of the
// tenant's Service and a rule of its NetworkPolicy with the S3 port's
// sources; a disabled one is none of these.
func TestConsolePorts(t *testing.T) {
	from := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}}
	for _, enabled := range []bool{false, true} {
		tn := testTenant(func(t *v1.Tenant) {
			t.Spec.Console.Enabled = enabled
			t.Spec.Console.OIDC = &v1.ConsoleOIDCSpec{IssuerURL: "https://id.example.com", ClientID: "c", RoleARN: "arn:aws:iam:::role/r"}
			t.Spec.NetworkPolicy.S3From = from
		})
		sts := ServerStatefulSet(tn, testPool("pool-a", 4, 2), placement.Group{Replicas: 4}, nil, EngineFor(tn, "strata:default", "abc"))
		hasPort := slices.ContainsFunc(sts.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
			return p.Name == "console" && p.ContainerPort == ConsolePort
		})
		inService := slices.ContainsFunc(S3Service(tn).Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Name == "console" && p.Port == ConsolePort && p.TargetPort.IntVal == ConsolePort
		})
		rules := ServerNetworkPolicy(tn).Spec.Ingress
		inPolicy := slices.ContainsFunc(rules, func(r networkingv1.NetworkPolicyIngressRule) bool {
			return len(r.Ports) == 1 && r.Ports[0].Port.IntVal == ConsolePort && equality.Semantic.DeepEqual(r.From, from)
		})
		if hasPort != enabled || inService != enabled || inPolicy != enabled {
			t.Errorf("console enabled=%v: container port %v, Service port %v, NetworkPolicy rule %v", enabled, hasPort, inService, inPolicy)
		}
		g := &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "store"}}
		gc := GatewayDeployment(tn, g, EngineFor(tn, "strata:default", "abc")).Spec.Template.Spec.Containers[0]
		gwPort := slices.ContainsFunc(gc.Ports, func(p corev1.ContainerPort) bool { return p.Name == "console" })
		gwArg := slices.Contains(gc.Args, "--console-address")
		gwService := slices.ContainsFunc(GatewayService(tn, g).Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "console" })
		if slices.ContainsFunc(gc.Args, func(a string) bool { return strings.HasPrefix(a, "--console-oidc") }) {
			t.Errorf("a gateway, which has no STS, was given single sign-on flags: %v", gc.Args)
		}
		if gwPort != enabled || gwArg != enabled || gwService != enabled {
			t.Errorf("console enabled=%v on a gateway: container port %v, flag %v, Service port %v", enabled, gwPort, gwArg, gwService)
		}
	}
}
