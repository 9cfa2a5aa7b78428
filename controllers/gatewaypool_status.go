package controllers

import (
	"fmt"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// computeGatewayPoolStatus derives a gateway pool's status from one pass.
func computeGatewayPoolStatus(g *v1.GatewayPool, s *gatewayScope, clusterDomain string) {
	st := &g.Status
	gen := g.Generation
	st.ObservedGeneration = gen
	if s.tenant != nil {
		st.Selector = gatewaySelector(s.tenant.Name, g.Name)
		st.Endpoint = builders.ServiceURL(s.tenant, builders.GatewayName(s.tenant.Name, g.Name), clusterDomain)
	}
	want := int32(0)
	if d := s.deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
	}
	switch {
	case s.waitReason != "":
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, s.waitReason, s.waitMsg)
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, s.waitReason, s.waitMsg)
	case !s.claimOK:
		msg := fmt.Sprintf("PersistentVolumeClaim %q named by spec.volume.claimName does not exist: create a ReadWriteMany claim with that name", g.Spec.Volume.ClaimName)
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonClaimMissing, msg)
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonClaimMissing, msg)
	case st.ReadyReplicas >= want && want > 0:
		setCondition(&st.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled, fmt.Sprintf("%d of %d gateways ready", st.ReadyReplicas, want))
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonReconciled, "all gateways run the desired spec")
	default:
		msg := fmt.Sprintf("%d of %d gateways ready", st.ReadyReplicas, want)
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonWaitingForPods, msg)
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonWaitingForPods, msg)
	}
	if st.ReadyReplicas > 0 && st.ReadyReplicas < want && s.waitReason == "" {
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, v1.ReasonWaitingForPods,
			fmt.Sprintf("only %d of %d gateways ready", st.ReadyReplicas, want))
	} else {
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, false, v1.ReasonReconciled, "no gateway missing")
	}
}
