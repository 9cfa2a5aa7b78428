package controllers

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/engine"
)

// want is a condition a test expects: status, reason and message.
type want struct {
	status          metav1.ConditionStatus
	reason, message string
}

func checkCondition(t *testing.T, conds []metav1.Condition, typ string, generation int64, w want) {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		t.Fatalf("no %s condition", typ)
	}
	if c.Status != w.status || c.Reason != w.reason || c.Message != w.message || c.ObservedGeneration != generation {
		t.Errorf("%s = %s %s %q (generation %d), want %s %s %q (generation %d)",
			typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, w.status, w.reason, w.message, generation)
	}
}

func cond(typ string, status bool, reason, message string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message}
}

// placed is a server pool in the topology file, created at `created`.
func placed(name string, created int64, conds ...metav1.Condition) v1.ServerPool {
	p := unplaced(name, conds...)
	p.CreationTimestamp = metav1.NewTime(time.Unix(created, 0))
	p.Status.Layout = &v1.ErasureLayout{SetSize: 4}
	return p
}

func unplaced(name string, conds ...metav1.Condition) v1.ServerPool {
	p := v1.ServerPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Status.Conditions = conds
	return p
}

func gatewayPool(name, endpoint string, conds ...metav1.Condition) v1.GatewayPool {
	g := v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Status.Conditions, g.Status.Endpoint = conds, endpoint
	return g
}

var (
	ready    = cond(v1.ConditionReady, true, v1.ReasonReconciled, "")
	notReady = cond(v1.ConditionReady, false, v1.ReasonWaitingForPods, "")
)

func degradedBy(reason, message string) metav1.Condition {
	return cond(v1.ConditionDegraded, true, reason, message)
}

func TestObserveTenantPools(t *testing.T) {
	cases := []struct {
		name               string
		servers            []v1.ServerPool
		gateways           []v1.GatewayPool
		order              []string
		notReady, degraded []string
		degradedReason     string
	}{
		{name: "no pools"},
		{name: "topology order, then pools not placed yet in list order, then gateways by name",
			servers:  []v1.ServerPool{unplaced("a", ready), placed("b", 2, ready), unplaced("c", ready), placed("d", 1, ready)},
			gateways: []v1.GatewayPool{gatewayPool("z", "", ready), gatewayPool("y", "", ready)},
			order:    []string{"d", "b", "a", "c", "y", "z"}},
		{name: "pools not ready, in status order",
			servers:  []v1.ServerPool{placed("b", 1, notReady), placed("a", 2)},
			gateways: []v1.GatewayPool{gatewayPool("g", "", notReady), gatewayPool("f", "", ready)},
			order:    []string{"b", "a", "f", "g"},
			notReady: []string{"ServerPool b", "ServerPool a", "GatewayPool g"}},
		{name: "degraded pools with their messages; the last reason",
			servers: []v1.ServerPool{placed("a", 1, ready, degradedBy(v1.ReasonDrivesOffline, "1 drive offline")),
				placed("b", 2, ready, cond(v1.ConditionDegraded, false, v1.ReasonReconciled, "fine"))},
			gateways:       []v1.GatewayPool{gatewayPool("g", "", ready, degradedBy(v1.ReasonWaitingForPods, "1 of 2"))},
			order:          []string{"a", "b", "g"},
			degraded:       []string{"ServerPool a: 1 drive offline", "GatewayPool g: 1 of 2"},
			degradedReason: v1.ReasonWaitingForPods},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := observeTenantPools(&tenantScope{servers: tc.servers, gateways: tc.gateways})
			var order []string
			for _, p := range got.servers {
				order = append(order, p.Name)
			}
			for _, g := range got.gateways {
				order = append(order, g.Name)
			}
			if fmt.Sprint(order) != fmt.Sprint(tc.order) || fmt.Sprint(got.notReady) != fmt.Sprint(tc.notReady) ||
				fmt.Sprint(got.degraded) != fmt.Sprint(tc.degraded) || got.degradedReason != tc.degradedReason {
				t.Errorf("got order %v, not ready %v, degraded %v (%s)\nwant order %v, not ready %v, degraded %v (%s)",
					order, got.notReady, got.degraded, got.degradedReason, tc.order, tc.notReady, tc.degraded, tc.degradedReason)
			}
		})
	}
}

func TestSetTenantPools(t *testing.T) {
	tolerates := func(drives, servers, domains int32, backends *int32) *v1.FaultTolerance {
		return &v1.FaultTolerance{Drives: drives, Servers: servers, Domains: domains, Backends: backends}
	}
	withTolerance := func(p v1.ServerPool, f *v1.FaultTolerance) v1.ServerPool {
		p.Status.Tolerates = f
		return p
	}
	cases := []struct {
		name  string
		pools tenantPools
		want  []v1.TenantPoolStatus
		ft    *v1.FaultTolerance
	}{
		{name: "no pools: none listed, no tolerance"},
		{name: "server pools then gateway pools, each with its readiness",
			pools: tenantPools{servers: []v1.ServerPool{placed("a", 1, ready), placed("b", 1, notReady)},
				gateways: []v1.GatewayPool{gatewayPool("g", "", ready)}},
			want: []v1.TenantPoolStatus{{Name: "a", Kind: "ServerPool", Ready: true}, {Name: "b", Kind: "ServerPool"},
				{Name: "g", Kind: "GatewayPool", Ready: true}}},
		{name: "the weakest pool's tolerance, field by field",
			pools: tenantPools{servers: []v1.ServerPool{
				withTolerance(placed("a", 1), tolerates(4, 1, 1, ptr.To[int32](2))),
				withTolerance(placed("b", 1), tolerates(2, 2, 0, nil)),
				placed("c", 1)}},
			want: []v1.TenantPoolStatus{{Name: "a", Kind: "ServerPool", Tolerates: tolerates(4, 1, 1, ptr.To[int32](2))},
				{Name: "b", Kind: "ServerPool", Tolerates: tolerates(2, 2, 0, nil)}, {Name: "c", Kind: "ServerPool"}},
			ft: tolerates(2, 1, 0, ptr.To[int32](2))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1.TenantStatus{Pools: []v1.TenantPoolStatus{{Name: "stale"}}, FaultTolerance: tolerates(9, 9, 9, nil)}
			setTenantPools(st, tc.pools)
			if !reflect.DeepEqual(st.Pools, tc.want) || !reflect.DeepEqual(st.FaultTolerance, tc.ft) {
				t.Errorf("pools %+v, tolerance %+v\nwant %+v, %+v", st.Pools, st.FaultTolerance, tc.want, tc.ft)
			}
		})
	}
}

func TestWeakest(t *testing.T) {
	b := func(n int32) *int32 { return &n }
	cases := []struct {
		name    string
		a, b    *v1.FaultTolerance
		want    *v1.FaultTolerance
		aliased bool // the result may be a itself
	}{
		{name: "nothing", want: nil},
		{name: "only the first", a: &v1.FaultTolerance{Drives: 1}, want: &v1.FaultTolerance{Drives: 1}, aliased: true},
		{name: "only the second", b: &v1.FaultTolerance{Drives: 2}, want: &v1.FaultTolerance{Drives: 2}},
		{name: "minimum of each", a: &v1.FaultTolerance{Drives: 1, Servers: 3, Domains: 2}, b: &v1.FaultTolerance{Drives: 2, Servers: 1, Domains: 2},
			want: &v1.FaultTolerance{Drives: 1, Servers: 1, Domains: 2}},
		{name: "backends of the one that has them", a: &v1.FaultTolerance{}, b: &v1.FaultTolerance{Backends: b(2)},
			want: &v1.FaultTolerance{Backends: b(2)}},
		{name: "fewer backends", a: &v1.FaultTolerance{Backends: b(1)}, b: &v1.FaultTolerance{Backends: b(2)},
			want: &v1.FaultTolerance{Backends: b(1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := weakest(tc.a, tc.b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("weakest = %+v, want %+v", got, tc.want)
			}
			if got != nil && got == tc.b {
				t.Error("weakest returned the second argument itself, not a copy")
			}
		})
	}
}

func TestSetTenantEndpoints(t *testing.T) {
	cases := []struct {
		name     string
		servers  []v1.ServerPool
		gateways []v1.GatewayPool
		want     v1.TenantEndpoints
	}{
		{name: "no pools: no endpoints"},
		{name: "the S3 Service once a server pool exists", servers: []v1.ServerPool{unplaced("a")},
			want: v1.TenantEndpoints{S3: "https://media.ns.svc.cluster.local:443"}},
		{name: "gateways that report an endpoint, in status order",
			gateways: []v1.GatewayPool{gatewayPool("b", "http://b"), gatewayPool("a", "http://a"), gatewayPool("c", "")},
			want:     v1.TenantEndpoints{Gateways: []string{"http://a", "http://b"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "media"}}
			tn.Status.Endpoints = v1.TenantEndpoints{S3: "stale", Gateways: []string{"stale"}}
			s := &tenantScope{tenant: tn, servers: tc.servers, gateways: tc.gateways}
			setTenantEndpoints(tn, s, observeTenantPools(s), "cluster.local")
			if !reflect.DeepEqual(tn.Status.Endpoints, tc.want) {
				t.Errorf("endpoints %+v, want %+v", tn.Status.Endpoints, tc.want)
			}
		})
	}
}

func TestSetTenantCapacity(t *testing.T) {
	st := &v1.TenantStatus{}
	setTenantCapacity(st, &tenantScope{})
	if st.Capacity != nil {
		t.Errorf("capacity %+v without figures", st.Capacity)
	}
	setTenantCapacity(st, &tenantScope{capacity: &engine.Capacity{TotalBytes: 4 << 30, UsableBytes: 2 << 30, UsedBytes: 1 << 20, FreeBytes: 7}})
	if c := st.Capacity; c == nil || c.Raw.String() != "4Gi" || c.Usable.String() != "2Gi" || c.Used.String() != "1Mi" {
		t.Fatalf("capacity %+v, want 4Gi raw, 2Gi usable, 1Mi used", c)
	}
	setTenantCapacity(st, &tenantScope{})
	if st.Capacity == nil || st.Capacity.Raw.String() != "4Gi" {
		t.Errorf("a pass that did not ask the engine lost the last figures: %+v", st.Capacity)
	}
}

func TestSetTenantReady(t *testing.T) {
	creds := cond(v1.ConditionCredentialsReady, true, v1.ReasonReconciled, "")
	certs := cond(v1.ConditionCertificatesReady, true, v1.ReasonReconciled, "")
	cases := []struct {
		name       string
		conditions []metav1.Condition
		servers    []v1.ServerPool
		gateways   []v1.GatewayPool
		want       want
		phase      v1.TenantPhase
	}{
		{name: "credentials not checked yet", servers: []v1.ServerPool{placed("a", 1, ready)},
			want: want{metav1.ConditionFalse, v1.ReasonSecretMissing, "waiting for credentials"}, phase: v1.TenantPending},
		{name: "credentials missing", conditions: []metav1.Condition{cond(v1.ConditionCredentialsReady, false, v1.ReasonSecretMissing, "no root Secret"), certs},
			want: want{metav1.ConditionFalse, v1.ReasonSecretMissing, "no root Secret"}, phase: v1.TenantPending},
		{name: "certificates not checked yet", conditions: []metav1.Condition{creds},
			want: want{metav1.ConditionFalse, v1.ReasonCreating, "waiting for certificates"}, phase: v1.TenantPending},
		{name: "certificates missing, with their reason", conditions: []metav1.Condition{creds,
			cond(v1.ConditionCertificatesReady, false, v1.ReasonCertManagerMissing, "install cert-manager")},
			want: want{metav1.ConditionFalse, v1.ReasonCertManagerMissing, "install cert-manager"}, phase: v1.TenantPending},
		{name: "no pools", conditions: []metav1.Condition{creds, certs},
			want:  want{metav1.ConditionFalse, v1.ReasonCreating, "no ServerPool or GatewayPool names this tenant in spec.tenantRef yet"},
			phase: v1.TenantPending},
		{name: "pools not ready", conditions: []metav1.Condition{creds, certs},
			servers: []v1.ServerPool{placed("a", 1, ready), placed("b", 2)}, gateways: []v1.GatewayPool{gatewayPool("g", "", notReady)},
			want:  want{metav1.ConditionFalse, v1.ReasonWaitingForPods, "2 of 3 pool(s) not ready: [ServerPool b GatewayPool g]"},
			phase: v1.TenantProvisioning},
		{name: "every pool ready", conditions: []metav1.Condition{creds, certs},
			servers: []v1.ServerPool{placed("a", 1, ready)}, gateways: []v1.GatewayPool{gatewayPool("g", "", ready)},
			want: want{metav1.ConditionTrue, v1.ReasonReconciled, "2 pool(s) ready"}, phase: v1.TenantReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			tn.Status.Conditions = tc.conditions
			s := &tenantScope{tenant: tn, servers: tc.servers, gateways: tc.gateways}
			setTenantReady(tn, s, observeTenantPools(s))
			checkCondition(t, tn.Status.Conditions, v1.ConditionReady, 3, tc.want)
			if tn.Status.Phase != tc.phase {
				t.Errorf("phase %s, want %s", tn.Status.Phase, tc.phase)
			}
		})
	}
}

func TestSetTenantDegraded(t *testing.T) {
	cases := []struct {
		name        string
		phase, want v1.TenantPhase
		pools       tenantPools
		expiring    string
		condition   want
	}{
		{name: "full redundancy", phase: v1.TenantReady, want: v1.TenantReady,
			condition: want{metav1.ConditionFalse, v1.ReasonReconciled, "every pool has its full redundancy"}},
		{name: "a degraded pool degrades a ready tenant", phase: v1.TenantReady, want: v1.TenantDegraded,
			pools:     tenantPools{degraded: []string{"ServerPool a: 1 drive offline"}, degradedReason: v1.ReasonDrivesOffline},
			condition: want{metav1.ConditionTrue, v1.ReasonDrivesOffline, "[ServerPool a: 1 drive offline]"}},
		{name: "and a provisioning one", phase: v1.TenantProvisioning, want: v1.TenantDegraded,
			pools:     tenantPools{degraded: []string{"a", "b"}, degradedReason: v1.ReasonHealing},
			condition: want{metav1.ConditionTrue, v1.ReasonHealing, "[a b]"}},
		{name: "a pending tenant stays pending", phase: v1.TenantPending, want: v1.TenantPending,
			pools:     tenantPools{degraded: []string{"a"}, degradedReason: v1.ReasonHealing},
			condition: want{metav1.ConditionTrue, v1.ReasonHealing, "[a]"}},
		{name: "a certificate close to expiry degrades a ready tenant", phase: v1.TenantReady, want: v1.TenantDegraded,
			expiring:  "the served certificate expires at X",
			condition: want{metav1.ConditionTrue, v1.ReasonCertificateExpiring, "the served certificate expires at X"}},
		{name: "a degraded pool says more than the certificate", phase: v1.TenantReady, want: v1.TenantDegraded,
			pools: tenantPools{degraded: []string{"a"}, degradedReason: v1.ReasonHealing}, expiring: "soon",
			condition: want{metav1.ConditionTrue, v1.ReasonHealing, "[a]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			tn.Status.Phase = tc.phase
			setTenantDegraded(tn, tc.pools, tc.expiring)
			checkCondition(t, tn.Status.Conditions, v1.ConditionDegraded, 2, tc.condition)
			if tn.Status.Phase != tc.want {
				t.Errorf("phase %s, want %s", tn.Status.Phase, tc.want)
			}
		})
	}
}

func TestSetTenantProgressing(t *testing.T) {
	for _, tc := range []struct {
		phase v1.TenantPhase
		want  want
	}{
		{v1.TenantProvisioning, want{metav1.ConditionTrue, v1.ReasonWaitingForPods, "pools are being created or started"}},
		{v1.TenantPending, want{metav1.ConditionFalse, v1.ReasonReconciled, "nothing to converge"}},
		{v1.TenantReady, want{metav1.ConditionFalse, v1.ReasonReconciled, "nothing to converge"}},
		{v1.TenantDegraded, want{metav1.ConditionFalse, v1.ReasonReconciled, "nothing to converge"}},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
			tn.Status.Phase = tc.phase
			setTenantProgressing(tn)
			checkCondition(t, tn.Status.Conditions, v1.ConditionProgressing, 4, tc.want)
		})
	}
}

// workload is a StatefulSet of n servers running image, `updated` of them
// with the current template; observed says whether its controller saw the
// latest spec.
func workload(image string, n, updated int32, observed bool) appsv1.StatefulSet {
	s := appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	s.Spec.Replicas = ptr.To(n)
	s.Spec.Template.Spec.Containers = []corev1.Container{{Image: image}}
	s.Status.UpdatedReplicas, s.Status.ObservedGeneration = updated, 1
	if observed {
		s.Status.ObservedGeneration = 2
	}
	return s
}

func TestComputeImages(t *testing.T) {
	gateways := func(image string, n, updated int32) []appsv1.Deployment {
		d := appsv1.Deployment{}
		d.Spec.Replicas = ptr.To(n)
		d.Spec.Template.Spec.Containers = []corev1.Container{{Image: image}}
		d.Status.UpdatedReplicas = updated
		return []appsv1.Deployment{d}
	}
	gateFailed := placed("a", 1, cond(v1.ConditionUpgrading, false, v1.ReasonHealthGateFailed, "paused at media-a-0"))
	cases := []struct {
		name                    string
		image                   string // the tenant's
		current, target         string // before
		sets                    []appsv1.StatefulSet
		deployments             []appsv1.Deployment
		servers                 []v1.ServerPool
		wantCurrent, wantTarget string
		upgrade                 *v1.UpgradeProgress
		want                    want
	}{
		{name: "everything runs the image", image: "s:1", current: "s:1", sets: []appsv1.StatefulSet{workload("s:1", 4, 4, true)},
			wantCurrent: "s:1", want: want{metav1.ConditionFalse, v1.ReasonReconciled, "every pod runs s:1"}},
		{name: "first roll-out: current at once", image: "s:1", sets: []appsv1.StatefulSet{workload("s:1", 4, 1, true)},
			wantCurrent: "s:1", wantTarget: "s:1", upgrade: &v1.UpgradeProgress{Updated: 1, Total: 4},
			want: want{metav1.ConditionFalse, v1.ReasonReconciled, "every pod runs s:1"}},
		{name: "a pod restarting is not a roll-out", image: "s:2", current: "s:2", sets: []appsv1.StatefulSet{workload("s:2", 4, 3, true)},
			wantCurrent: "s:2", want: want{metav1.ConditionFalse, v1.ReasonReconciled, "every pod runs s:2"}},
		{name: "upgrade under way, servers and gateways counted", image: "s:2", current: "s:1",
			sets: []appsv1.StatefulSet{workload("s:2", 4, 1, true)}, deployments: gateways("s:2", 2, 2),
			wantCurrent: "s:1", wantTarget: "s:2", upgrade: &v1.UpgradeProgress{Updated: 3, Total: 6},
			want: want{metav1.ConditionTrue, v1.ReasonRollingUpdate, "rolling s:1 -> s:2: 3 of 6 pods updated"}},
		{name: "a workload its controller has not seen yet counts as not updated", image: "s:2", current: "s:1", target: "s:2",
			sets:        []appsv1.StatefulSet{workload("s:2", 4, 4, false), workload("s:2", 2, 2, true)},
			wantCurrent: "s:1", wantTarget: "s:2", upgrade: &v1.UpgradeProgress{Updated: 2, Total: 6},
			want: want{metav1.ConditionTrue, v1.ReasonRollingUpdate, "rolling s:1 -> s:2: 2 of 6 pods updated"}},
		{name: "an old template counts as not updated", image: "s:2", current: "s:1",
			sets:        []appsv1.StatefulSet{workload("s:1", 4, 4, true)},
			wantCurrent: "s:1", wantTarget: "s:2", upgrade: &v1.UpgradeProgress{Updated: 0, Total: 4},
			want: want{metav1.ConditionTrue, v1.ReasonRollingUpdate, "rolling s:1 -> s:2: 0 of 4 pods updated"}},
		{name: "upgrade done", image: "s:2", current: "s:1", target: "s:2", sets: []appsv1.StatefulSet{workload("s:2", 4, 4, true)},
			wantCurrent: "s:2", want: want{metav1.ConditionFalse, v1.ReasonReconciled, "every pod runs s:2"}},
		{name: "a pool's health gate failed", image: "s:2", current: "s:1", sets: []appsv1.StatefulSet{workload("s:2", 4, 1, true)},
			servers: []v1.ServerPool{placed("b", 1, ready), gateFailed}, wantCurrent: "s:1", wantTarget: "s:2",
			upgrade: &v1.UpgradeProgress{Updated: 1, Total: 4},
			want:    want{metav1.ConditionFalse, v1.ReasonHealthGateFailed, "ServerPool a: paused at media-a-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Generation: 5}}
			tn.Status.CurrentImage, tn.Status.TargetImage = tc.current, tc.target
			computeImages(tn, &tenantScope{statefulSets: tc.sets, deployments: tc.deployments, servers: tc.servers}, tc.image)
			st := tn.Status
			if st.CurrentImage != tc.wantCurrent || st.TargetImage != tc.wantTarget || !reflect.DeepEqual(st.Upgrade, tc.upgrade) {
				t.Errorf("current %q, target %q, progress %+v; want %q, %q, %+v", st.CurrentImage, st.TargetImage, st.Upgrade,
					tc.wantCurrent, tc.wantTarget, tc.upgrade)
			}
			checkCondition(t, st.Conditions, v1.ConditionUpgrading, 5, tc.want)
		})
	}
}

func TestTenantPhaseDuringARollOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		phase     v1.TenantPhase
		upgrading metav1.ConditionStatus
		want      v1.TenantPhase
	}{
		{name: "a roll-out under way", phase: v1.TenantDegraded, upgrading: metav1.ConditionTrue, want: v1.TenantUpgrading},
		{name: "a paused one", phase: v1.TenantDegraded, upgrading: metav1.ConditionFalse, want: v1.TenantDegraded},
		{name: "no credentials yet", phase: v1.TenantPending, upgrading: metav1.ConditionTrue, want: v1.TenantPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1.TenantStatus{Phase: tc.phase, Conditions: []metav1.Condition{{Type: v1.ConditionUpgrading, Status: tc.upgrading}}}
			setTenantUpgradingPhase(st)
			if st.Phase != tc.want {
				t.Fatalf("phase %s, want %s", st.Phase, tc.want)
			}
		})
	}
}

func TestRoundUsed(t *testing.T) {
	const ti = int64(1) << 40 // a step of 256 MiB
	for _, c := range []struct{ used, raw, want int64 }{
		{0, ti, 0},
		{3 << 30, ti, 3 << 30},
		{3<<30 + 100<<20, ti, 3 << 30},         // a few writes later: the same figure
		{3<<30 + 128<<20, ti, 3<<30 + 256<<20}, // to the nearest step
		{5<<20 + 100, 100 << 20, 5 << 20},      // 1 MiB at least
		{2<<30 + 12345, 4 << 30, 2 << 30},      // a step of 1 MiB
	} {
		if got := roundUsed(c.used, c.raw); got != c.want {
			t.Errorf("roundUsed(%d, %d) = %d, want %d", c.used, c.raw, got, c.want)
		}
	}
}
