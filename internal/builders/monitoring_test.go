package builders

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/placement"
)

func TestMetricsTokenSecret(t *testing.T) {
	tn := testTenant()
	random := bytes.NewReader(bytes.Repeat([]byte{7}, 64))
	sec, err := NewMetricsToken(tn, random)
	if err != nil {
		t.Fatal(err)
	}
	tok := string(sec.Data[MetricsTokenKey])
	if sec.Name != "media-metrics-token" || sec.Namespace != "store" || len(tok) != 43 || strings.TrimSpace(tok) != tok {
		t.Fatalf("secret %s/%s with a %d-character token", sec.Namespace, sec.Name, len(tok))
	}
	if sec.Labels[LabelTenant] != "media" {
		t.Error("the token Secret must carry the tenant label (its changes reconcile the tenant)")
	}
	if _, err := NewMetricsToken(tn, bytes.NewReader(nil)); err == nil {
		t.Error("a short random source must fail, not yield a weak token")
	}
}

// TestMetricsTokenMounted: every server and gateway pod mounts the token
// Secret and passes its path to the engine.
func TestMetricsTokenMounted(t *testing.T) {
	tn := testTenant()
	e := EngineFor(tn, "strata:x", "")
	g := &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "nas", Namespace: "store"}}
	g.Spec.Volume = v1.GatewayVolume{ClaimName: "shared-fs"}
	sts := ServerStatefulSet(tn, testPool("pool-a", 4, 2), placement.Group{Replicas: 4}, nil, e)
	for name, pod := range map[string]corev1.PodSpec{"server": sts.Spec.Template.Spec, "gateway": GatewayDeployment(tn, g, e).Spec.Template.Spec} {
		c := pod.Containers[0]
		i := slices.Index(c.Args, "--metrics-token-file")
		if i < 0 || i+1 >= len(c.Args) || c.Args[i+1] != "/etc/strata/metrics/token" {
			t.Errorf("%s: args %v lack --metrics-token-file /etc/strata/metrics/token", name, c.Args)
		}
		vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "metrics-token" })
		if vol < 0 || pod.Volumes[vol].Secret == nil || pod.Volumes[vol].Secret.SecretName != "media-metrics-token" {
			t.Fatalf("%s: no volume of Secret media-metrics-token: %+v", name, pod.Volumes)
		}
		if items := pod.Volumes[vol].Secret.Items; len(items) != 1 || items[0].Key != MetricsTokenKey {
			t.Errorf("%s: the volume should project only the token: %+v", name, items)
		}
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "metrics-token" })
		if m < 0 || c.VolumeMounts[m].MountPath != "/etc/strata/metrics" || !c.VolumeMounts[m].ReadOnly {
			t.Errorf("%s: token not mounted read-only at /etc/strata/metrics: %+v", name, c.VolumeMounts)
		}
	}
}

func TestServiceMonitor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant *v1.Tenant
		scheme string
	}{
		{"TLS", testTenant(), "https"},
		{"plain HTTP", testTenant(func(t *v1.Tenant) { t.Spec.TLS.Mode = v1.TLSDisabled }), "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tenant.Spec.Monitoring.ServiceMonitor.Labels = map[string]string{"release": "kube-prometheus-stack"}
			sm := ServiceMonitor(tc.tenant)
			if sm.Labels["release"] != "kube-prometheus-stack" || sm.Labels[LabelTenant] != "media" {
				t.Errorf("labels = %v", sm.Labels)
			}
			ep := sm.Spec.Endpoints[0]
			// Lower case exactly: older prometheus-operator CRDs refuse "HTTPS".
			if ep.Path != MetricsPath || string(*ep.Scheme) != tc.scheme {
				t.Errorf("endpoint %s %s", *ep.Scheme, ep.Path)
			}
			a := ep.Authorization
			if a == nil || a.Type != "Bearer" || a.Credentials == nil || a.Credentials.Name != "media-metrics-token" || a.Credentials.Key != "token" {
				t.Fatalf("authorization = %+v", a)
			}
			if (ep.TLSConfig != nil) != (tc.scheme == "https") {
				t.Errorf("TLS config %+v with scheme %s", ep.TLSConfig, tc.scheme)
			}
			rl := ep.RelabelConfigs
			if len(rl) != 1 || rl[0].TargetLabel != "tenant" || rl[0].Replacement == nil || *rl[0].Replacement != "media" || len(rl[0].SourceLabels) != 0 {
				t.Errorf("relabelings = %+v, want tenant=media on every series", rl)
			}
		})
	}
}

// TestPrometheusRule checks the rules' shape; test/monitoring parses and
// evaluates them.
func TestPrometheusRule(t *testing.T) {
	pr := PrometheusRule(testTenant(func(t *v1.Tenant) { t.Spec.Monitoring.PrometheusRule.Labels = map[string]string{"role": "alert-rules"} }))
	if pr.Labels["role"] != "alert-rules" || len(pr.Spec.Groups) != 1 {
		t.Fatalf("labels %v, %d groups", pr.Labels, len(pr.Spec.Groups))
	}
	var names []string
	for _, r := range pr.Spec.Groups[0].Rules {
		names = append(names, r.Alert)
		expr := r.Expr.String()
		if !strings.Contains(expr, `namespace="store", tenant="media"`) {
			t.Errorf("%s selects more than the tenant: %s", r.Alert, expr)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || len(r.Annotations["description"]) < 80 || r.For == nil {
			t.Errorf("%s: a summary, an actionable description and a for duration are required: %+v", r.Alert, r)
		}
		if _, ok := r.Annotations["runbook_url"]; ok {
			t.Errorf("%s: the description is the runbook", r.Alert)
		}
	}
	want := []string{"StrataDriveOffline", "StrataErasureSetDegraded", "StrataWriteQuorumAtRisk", "StrataPodDown", "StrataPeerOffline",
		"StrataClockSkew", "StrataHealBacklogGrowing", "StrataHealingStalled", "StrataMetadataWriteStalls", "StrataCapacityHigh", "StrataCapacityCritical", "StrataS3ErrorsHigh",
		"StrataS3LatencyHigh", "StrataDecommissionStuck", "StrataBucketNearQuota", "StrataNotificationBacklog", "StrataNotifyTargetsRefused", "StrataReplicationLag", "StrataReplicationFailed", "StrataCertificateExpiring", "StrataCAExpiring"}
	if !slices.Equal(names, want) {
		t.Errorf("alerts = %v, want %v", names, want)
	}
	plain := PrometheusRule(testTenant(func(t *v1.Tenant) { t.Spec.TLS.Mode = v1.TLSDisabled }))
	for _, r := range plain.Spec.Groups[0].Rules {
		if r.Alert == "StrataCertificateExpiring" || r.Alert == "StrataCAExpiring" {
			t.Error("a tenant without TLS has no certificate to expire")
		}
	}
}

// TestAPIAccessOnlyForWebIdentity: server pods hold no ServiceAccount token
// unless the tenant verifies ServiceAccount tokens (its servers then read
// the issuer's keys with one, projected where the automount would put it).
func TestAPIAccessOnlyForWebIdentity(t *testing.T) {
	for _, on := range []bool{false, true} {
		tn := testTenant()
		tn.Spec.WebIdentity.ServiceAccounts = on
		pod := ServerStatefulSet(tn, testPool("pool-a", 4, 2), placement.Group{Replicas: 4}, nil, EngineFor(tn, "strata:x", "")).Spec.Template.Spec
		vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == apiAccessVolumeName })
		mount := slices.IndexFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == APIAccessMountPath })
		if (vol >= 0) != on || (mount >= 0) != on || *pod.AutomountServiceAccountToken {
			t.Errorf("webIdentity.serviceAccounts=%v: token volume %v, mounted %v, automount %v", on, vol >= 0, mount >= 0, *pod.AutomountServiceAccountToken)
		}
		if on && pod.Volumes[vol].Projected.Sources[0].ServiceAccountToken == nil {
			t.Errorf("the volume projects no token: %+v", pod.Volumes[vol])
		}
	}
}

// TestOIDCAudiencesFromProviders: the issuers and client IDs the Tenant
// names reach the servers, in one stable form (a pod template that
// changed on its own would roll the pool).
func TestOIDCAudiencesFromProviders(t *testing.T) {
	env := func(tn *v1.Tenant) (string, bool) {
		c := ServerStatefulSet(tn, testPool("pool-a", 4, 2), placement.Group{Replicas: 4}, nil, EngineFor(tn, "strata:x", "")).Spec.Template.Spec.Containers[0]
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvOIDCAudiences })
		if i < 0 {
			return "", false
		}
		return c.Env[i].Value, true
	}
	tn := testTenant()
	if v, ok := env(tn); ok {
		t.Errorf("no providers: %s=%s", EnvOIDCAudiences, v)
	}
	tn.Spec.WebIdentity.Providers = []v1.OIDCProviderSpec{
		{URL: "https://login.example.com/realms/b", ClientIDs: []string{"s3"}},
		{URL: "https://accounts.example.org", ClientIDs: []string{"app-1", "app-2"}},
	}
	want := `{"https://accounts.example.org":["app-1","app-2"],"https://login.example.com/realms/b":["s3"]}`
	for range 3 {
		if v, _ := env(tn); v != want {
			t.Fatalf("%s=%s, want %s", EnvOIDCAudiences, v, want)
		}
	}
}
