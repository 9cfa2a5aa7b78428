package controllers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// pool is a ServerPool of `servers` servers, generation 7.
func pool(servers int32, conds ...metav1.Condition) *v1.ServerPool {
	p := &v1.ServerPool{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
	p.Spec.Servers = servers
	p.Status.Conditions = conds
	return p
}

// running is a pass that found ready (and updated) servers in one
// StatefulSet.
func running(ready int32) *poolScope {
	sts := appsv1.StatefulSet{}
	sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas = ready, ready
	return &poolScope{created: true, sets: []appsv1.StatefulSet{sts}}
}

var (
	storageRefused  = cond(v1.ConditionStorageReady, false, v1.ReasonNoMatchingNodes, "no node has label zone")
	storageAccepted = cond(v1.ConditionStorageReady, true, v1.ReasonReconciled, "placed")
)

func TestSetServerPoolCounts(t *testing.T) {
	sets := func(ready, updated []int32) []appsv1.StatefulSet {
		var out []appsv1.StatefulSet
		for i := range ready {
			s := appsv1.StatefulSet{}
			s.Status.ReadyReplicas, s.Status.UpdatedReplicas = ready[i], updated[i]
			out = append(out, s)
		}
		return out
	}
	last := v1.DriveCounts{Online: 8}
	cases := []struct {
		name           string
		scope          *poolScope
		ready, updated int32
		drives         v1.DriveCounts
		state          string
	}{
		{name: "nothing running; the engine not asked", scope: &poolScope{}, drives: last, state: v1.PoolStateActive},
		{name: "servers summed over StatefulSets", scope: &poolScope{sets: sets([]int32{2, 3}, []int32{1, 3})}, ready: 5, updated: 4,
			drives: last, state: v1.PoolStateActive},
		{name: "the engine's drives and pool state",
			scope:  &poolScope{drives: &v1.DriveCounts{Online: 7, Offline: 1}, poolState: v1.PoolStateDraining},
			drives: v1.DriveCounts{Online: 7, Offline: 1}, state: v1.PoolStateDraining},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1.ServerPoolStatus{ReadyServers: 9, UpdatedServers: 9, Drives: last, PoolState: v1.PoolStateActive}
			setServerPoolCounts(st, tc.scope)
			if st.ReadyServers != tc.ready || st.UpdatedServers != tc.updated || st.Drives != tc.drives || st.PoolState != tc.state {
				t.Errorf("got %d ready, %d updated, %+v, %q; want %d, %d, %+v, %q", st.ReadyServers, st.UpdatedServers, st.Drives, st.PoolState,
					tc.ready, tc.updated, tc.drives, tc.state)
			}
		})
	}
}

func TestSetServerPoolReady(t *testing.T) {
	waiting := &poolScope{waitReason: v1.ReasonWaitingForTenant, waitMessage: "no Tenant media"}
	waitingCreated := running(2)
	waitingCreated.waitReason = v1.ReasonSecretMissing
	cases := []struct {
		name  string
		pool  *v1.ServerPool
		scope *poolScope
		want  want
	}{
		{"stopped before anything exists", pool(4), waiting, want{metav1.ConditionFalse, v1.ReasonWaitingForTenant, "no Tenant media"}},
		{"stopped after the servers exist: their count", pool(4), waitingCreated, want{metav1.ConditionFalse, v1.ReasonWaitingForPods, "2 of 4 servers ready"}},
		{"servers starting", pool(4), running(3), want{metav1.ConditionFalse, v1.ReasonWaitingForPods, "3 of 4 servers ready"}},
		{"every server ready", pool(4), running(4), want{metav1.ConditionTrue, v1.ReasonReconciled, "4 of 4 servers ready"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setServerPoolCounts(&tc.pool.Status, tc.scope)
			setServerPoolReady(tc.pool, tc.scope)
			checkCondition(t, tc.pool.Status.Conditions, v1.ConditionReady, 7, tc.want)
		})
	}
}

func TestSetServerPoolProgressing(t *testing.T) {
	waiting := &poolScope{waitReason: v1.ReasonWaitingForTenant, waitMessage: "no Tenant media"}
	draining := running(4)
	draining.poolState = v1.PoolStateDraining
	decommissioned := running(0)
	decommissioned.poolState = v1.PoolStateDecommissioned
	decommission := func() *v1.ServerPool {
		p := pool(4)
		p.Spec.Decommission = true
		return p
	}
	cases := []struct {
		name  string
		pool  *v1.ServerPool
		scope *poolScope
		want  want
	}{
		{"waiting", pool(4), waiting, want{metav1.ConditionTrue, v1.ReasonWaitingForTenant, "no Tenant media"}},
		{"waiting, placement accepted", pool(4, storageAccepted), waiting, want{metav1.ConditionTrue, v1.ReasonWaitingForTenant, "no Tenant media"}},
		{"placement refused: nothing to wait for", pool(4, storageRefused), waiting,
			want{metav1.ConditionFalse, v1.ReasonPlacementRefused, "placement refused the pool; nothing was created: no node has label zone"}},
		{"servers starting", pool(4), running(1), want{metav1.ConditionTrue, v1.ReasonWaitingForPods, "1 of 4 servers ready"}},
		{"converged", pool(4), running(4), want{metav1.ConditionFalse, v1.ReasonReconciled, "all servers run the desired spec"}},
		{"decommission asked", decommission(), running(4),
			want{metav1.ConditionTrue, v1.ReasonDraining, "decommission asked: waiting for the engine to start draining the pool"}},
		{"draining, even with every server ready", pool(4), draining,
			want{metav1.ConditionTrue, v1.ReasonDraining, "the engine is moving the pool's objects to the tenant's other pools"}},
		{"draining beats waiting", pool(4), &poolScope{poolState: v1.PoolStateDraining, waitReason: "W"},
			want{metav1.ConditionTrue, v1.ReasonDraining, "the engine is moving the pool's objects to the tenant's other pools"}},
		{"decommissioned", decommission(), decommissioned,
			want{metav1.ConditionFalse, v1.ReasonDecommissioned, "the pool is empty: deleting the ServerPool loses nothing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setServerPoolCounts(&tc.pool.Status, tc.scope)
			setServerPoolProgressing(tc.pool, tc.scope)
			checkCondition(t, tc.pool.Status.Conditions, v1.ConditionProgressing, 7, tc.want)
		})
	}
}

// TestServerPoolProgressingKeepsTransitionTime: a draining pool whose
// servers are all ready sets Progressing once per pass, so its
// lastTransitionTime says when draining started and an unchanged pass
// writes no status.
func TestServerPoolProgressingKeepsTransitionTime(t *testing.T) {
	p := pool(4)
	s := running(4)
	s.poolState = v1.PoolStateDraining
	computeServerPoolStatus(p, s)
	started := metav1.NewTime(time.Unix(1000, 0))
	meta.FindStatusCondition(p.Status.Conditions, v1.ConditionProgressing).LastTransitionTime = started
	before := p.Status.DeepCopy()
	computeServerPoolStatus(p, s)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionProgressing); !c.LastTransitionTime.Equal(&started) {
		t.Errorf("lastTransitionTime moved to %v on a pass that changed nothing", c.LastTransitionTime)
	}
	for i := range before.Conditions {
		if b, a := before.Conditions[i], p.Status.Conditions[i]; b != a {
			t.Errorf("%s changed on an unchanged pass: %+v -> %+v", b.Type, b, a)
		}
	}
}

func TestSetServerPoolUpgrading(t *testing.T) {
	cases := []struct {
		name    string
		rollout rolloutState
		want    want
	}{
		{"nothing to roll", rolloutState{}, want{metav1.ConditionFalse, v1.ReasonReconciled, "every server runs the pool's spec"}},
		{"rolling, with the step's message", rolloutState{rolling: true, message: "next: media-a-2"},
			want{metav1.ConditionTrue, v1.ReasonRollingUpdate, "next: media-a-2"}},
		{"rolling, counted", rolloutState{rolling: true}, want{metav1.ConditionTrue, v1.ReasonRollingUpdate, "3 of 4 servers run the new spec"}},
		{"health gate failed", rolloutState{rolling: true, failed: "paused at media-a-2"},
			want{metav1.ConditionFalse, v1.ReasonHealthGateFailed, "paused at media-a-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, s := pool(4), running(3)
			s.rollout = tc.rollout
			setServerPoolCounts(&p.Status, s)
			setServerPoolUpgrading(p, s)
			checkCondition(t, p.Status.Conditions, v1.ConditionUpgrading, 7, tc.want)
		})
	}
}

func TestSetServerPoolDegraded(t *testing.T) {
	drives := func(offline, healing int32) *poolScope {
		s := running(4)
		s.drives = &v1.DriveCounts{Online: 8 - offline - healing, Offline: offline, Healing: healing}
		return s
	}
	refusedDeletion := drives(1, 0)
	refusedDeletion.deletionRefused = "the pool may hold objects"
	cases := []struct {
		name  string
		pool  *v1.ServerPool
		scope *poolScope
		want  want
	}{
		{"every drive online", pool(4, storageAccepted), drives(0, 0), want{metav1.ConditionFalse, v1.ReasonReconciled, "no drive offline or healing"}},
		{"healing", pool(4), drives(0, 2), want{metav1.ConditionTrue, v1.ReasonHealing, "2 drive(s) healing from parity"}},
		{"offline beats healing", pool(4), drives(1, 2), want{metav1.ConditionTrue, v1.ReasonDrivesOffline, "1 drive(s) offline; objects are served from parity"}},
		{"placement refused, with its reason", pool(4, storageRefused), drives(1, 0),
			want{metav1.ConditionTrue, v1.ReasonNoMatchingNodes, "no node has label zone"}},
		{"a refused deletion first", pool(4, storageRefused), refusedDeletion,
			want{metav1.ConditionTrue, v1.ReasonDeletionRefused, "the pool may hold objects"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setServerPoolCounts(&tc.pool.Status, tc.scope)
			setServerPoolDegraded(tc.pool, tc.scope)
			checkCondition(t, tc.pool.Status.Conditions, v1.ConditionDegraded, 7, tc.want)
		})
	}
}
