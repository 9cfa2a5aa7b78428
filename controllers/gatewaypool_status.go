package controllers

import (
	"fmt"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// computeGatewayPoolStatus derives a gateway pool's status from one pass.
func computeGatewayPoolStatus(g *v1.GatewayPool, s *gatewayScope, clusterDomain string) {
	g.Status.ObservedGeneration = g.Generation
	want := setGatewayPoolFields(g, s, clusterDomain)
	setGatewayPoolReady(g, s, want)
	setGatewayPoolProgressing(g, s, want)
	setGatewayPoolDegraded(g, s, want)
}

// setGatewayPoolFields copies the selector, endpoint and replica counts,
// and returns how many gateways the Deployment asks for.
func setGatewayPoolFields(g *v1.GatewayPool, s *gatewayScope, clusterDomain string) (want int32) {
	st := &g.Status
	if s.tenant != nil {
		st.Selector = gatewaySelector(s.tenant.Name, g.Name)
		st.Endpoint = builders.ServiceURL(s.tenant, builders.GatewayName(s.tenant.Name, g.Name), clusterDomain)
	}
	if d := s.deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
	}
	return want
}

// gatewayClaimMissing says what to do when the claim named by
// spec.volume.claimName does not exist.
func gatewayClaimMissing(g *v1.GatewayPool) string {
	return fmt.Sprintf("PersistentVolumeClaim %q named by spec.volume.claimName does not exist: create a ReadWriteMany claim with that name", g.Spec.Volume.ClaimName)
}

// setGatewayPoolReady: Ready once every gateway the Deployment asks for
// (at least one) is ready.
func setGatewayPoolReady(g *v1.GatewayPool, s *gatewayScope, want int32) {
	st := &g.Status
	switch {
	case s.waitReason != "":
		setCondition(&st.Conditions, g.Generation, v1.ConditionReady, false, s.waitReason, s.waitMsg)
	case !s.claimOK:
		setCondition(&st.Conditions, g.Generation, v1.ConditionReady, false, v1.ReasonClaimMissing, gatewayClaimMissing(g))
	case st.ReadyReplicas >= want && want > 0:
		setCondition(&st.Conditions, g.Generation, v1.ConditionReady, true, v1.ReasonReconciled, fmt.Sprintf("%d of %d gateways ready", st.ReadyReplicas, want))
	case s.pods.reason != "":
		setCondition(&st.Conditions, g.Generation, v1.ConditionReady, false, s.pods.reason,
			fmt.Sprintf("%d of %d gateways ready; %s", st.ReadyReplicas, want, s.pods.message))
	default:
		setCondition(&st.Conditions, g.Generation, v1.ConditionReady, false, v1.ReasonWaitingForPods, fmt.Sprintf("%d of %d gateways ready", st.ReadyReplicas, want))
	}
}

// setGatewayPoolProgressing: the pool progresses until it is Ready, for
// the same reason it is not.
func setGatewayPoolProgressing(g *v1.GatewayPool, s *gatewayScope, want int32) {
	st := &g.Status
	switch {
	case s.waitReason != "":
		setCondition(&st.Conditions, g.Generation, v1.ConditionProgressing, true, s.waitReason, s.waitMsg)
	case !s.claimOK:
		setCondition(&st.Conditions, g.Generation, v1.ConditionProgressing, true, v1.ReasonClaimMissing, gatewayClaimMissing(g))
	case st.ReadyReplicas >= want && want > 0:
		setCondition(&st.Conditions, g.Generation, v1.ConditionProgressing, false, v1.ReasonReconciled, "all gateways run the desired spec")
	default:
		setCondition(&st.Conditions, g.Generation, v1.ConditionProgressing, true, v1.ReasonWaitingForPods, fmt.Sprintf("%d of %d gateways ready", st.ReadyReplicas, want))
	}
}

// setGatewayPoolDegraded: some but not all gateways ready.
func setGatewayPoolDegraded(g *v1.GatewayPool, s *gatewayScope, want int32) {
	st := &g.Status
	if st.ReadyReplicas > 0 && st.ReadyReplicas < want && s.waitReason == "" {
		setCondition(&st.Conditions, g.Generation, v1.ConditionDegraded, true, v1.ReasonWaitingForPods,
			fmt.Sprintf("only %d of %d gateways ready", st.ReadyReplicas, want))
	} else {
		setCondition(&st.Conditions, g.Generation, v1.ConditionDegraded, false, v1.ReasonReconciled, "no gateway missing")
	}
}
