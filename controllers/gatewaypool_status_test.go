package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

func gateway() *v1.GatewayPool {
	g := &v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nas", Generation: 3}}
	g.Spec.Volume.ClaimName = "shared"
	return g
}

// gateways is a pass that found a Deployment asking for `want` gateways
// (nil: none yet), `ready` of them ready.
func gateways(want *int32, ready int32) *gatewayScope {
	d := &appsv1.Deployment{}
	d.Spec.Replicas = want
	d.Status.Replicas, d.Status.ReadyReplicas = ready, ready
	return &gatewayScope{claimOK: true, deployment: d}
}

func TestSetGatewayPoolFields(t *testing.T) {
	cases := []struct {
		name                  string
		scope                 *gatewayScope
		want, replicas, ready int32
		selector, endpoint    string
	}{
		{name: "nothing found yet", scope: &gatewayScope{}},
		{name: "the Deployment's counts", scope: gateways(ptr.To[int32](3), 2), want: 3, replicas: 2, ready: 2},
		{name: "a Deployment without a count", scope: gateways(nil, 1), replicas: 1, ready: 1},
		{name: "the tenant's selector and endpoint",
			scope:    &gatewayScope{tenant: &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "media"}}},
			selector: gatewaySelector("media", "nas"), endpoint: "https://media-nas.ns.svc.cluster.local:443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateway()
			got := setGatewayPoolFields(g, tc.scope, "cluster.local")
			st := g.Status
			if got != tc.want || st.Replicas != tc.replicas || st.ReadyReplicas != tc.ready || st.Selector != tc.selector || st.Endpoint != tc.endpoint {
				t.Errorf("want %d, status %+v; want %d, %d replicas, %d ready, %q, %q", got, st, tc.want, tc.replicas, tc.ready, tc.selector, tc.endpoint)
			}
		})
	}
}

func TestSetGatewayPoolReadyAndProgressing(t *testing.T) {
	claimMissing := gateways(ptr.To[int32](2), 0)
	claimMissing.claimOK = false
	waiting := &gatewayScope{waitReason: v1.ReasonSecretMissing, waitMsg: "no root keys"}
	const claimMsg = `PersistentVolumeClaim "shared" named by spec.volume.claimName does not exist: create a ReadWriteMany claim with that name`
	cases := []struct {
		name               string
		scope              *gatewayScope
		ready, progressing want
	}{
		{"waiting", waiting, want{metav1.ConditionFalse, v1.ReasonSecretMissing, "no root keys"},
			want{metav1.ConditionTrue, v1.ReasonSecretMissing, "no root keys"}},
		{"the claim is missing", claimMissing, want{metav1.ConditionFalse, v1.ReasonClaimMissing, claimMsg},
			want{metav1.ConditionTrue, v1.ReasonClaimMissing, claimMsg}},
		{"gateways starting", gateways(ptr.To[int32](2), 1), want{metav1.ConditionFalse, v1.ReasonWaitingForPods, "1 of 2 gateways ready"},
			want{metav1.ConditionTrue, v1.ReasonWaitingForPods, "1 of 2 gateways ready"}},
		{"no gateway asked for is not ready", gateways(ptr.To[int32](0), 0), want{metav1.ConditionFalse, v1.ReasonWaitingForPods, "0 of 0 gateways ready"},
			want{metav1.ConditionTrue, v1.ReasonWaitingForPods, "0 of 0 gateways ready"}},
		{"every gateway ready", gateways(ptr.To[int32](2), 2), want{metav1.ConditionTrue, v1.ReasonReconciled, "2 of 2 gateways ready"},
			want{metav1.ConditionFalse, v1.ReasonReconciled, "all gateways run the desired spec"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateway()
			n := setGatewayPoolFields(g, tc.scope, "cluster.local")
			setGatewayPoolReady(g, tc.scope, n)
			setGatewayPoolProgressing(g, tc.scope, n)
			checkCondition(t, g.Status.Conditions, v1.ConditionReady, 3, tc.ready)
			checkCondition(t, g.Status.Conditions, v1.ConditionProgressing, 3, tc.progressing)
		})
	}
}

func TestSetGatewayPoolDegraded(t *testing.T) {
	waitingWithSome := gateways(ptr.To[int32](3), 1)
	waitingWithSome.waitReason = v1.ReasonSecretMissing
	cases := []struct {
		name  string
		scope *gatewayScope
		want  want
	}{
		{"every gateway ready", gateways(ptr.To[int32](3), 3), want{metav1.ConditionFalse, v1.ReasonReconciled, "no gateway missing"}},
		{"none ready yet is not degraded", gateways(ptr.To[int32](3), 0), want{metav1.ConditionFalse, v1.ReasonReconciled, "no gateway missing"}},
		{"some ready", gateways(ptr.To[int32](3), 2), want{metav1.ConditionTrue, v1.ReasonWaitingForPods, "only 2 of 3 gateways ready"}},
		{"a stopped pass says nothing of redundancy", waitingWithSome, want{metav1.ConditionFalse, v1.ReasonReconciled, "no gateway missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateway()
			setGatewayPoolDegraded(g, tc.scope, setGatewayPoolFields(g, tc.scope, "cluster.local"))
			checkCondition(t, g.Status.Conditions, v1.ConditionDegraded, 3, tc.want)
		})
	}
}
