package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// computeServerPoolStatus derives a pool's status from one pass. Pure.
func computeServerPoolStatus(p *v1.ServerPool, s *poolScope) {
	p.Status.ObservedGeneration = p.Generation
	setServerPoolCounts(&p.Status, s)
	setServerPoolReady(p, s)
	setServerPoolProgressing(p, s)
	setServerPoolUpgrading(p, s)
	setServerPoolDegraded(p, s)
}

// setServerPoolCounts copies what the pass observed: servers from the
// StatefulSets; drives and pool state from the engine, kept from the last
// pass when the engine was not asked.
func setServerPoolCounts(st *v1.ServerPoolStatus, s *poolScope) {
	st.ReadyServers, st.UpdatedServers = 0, 0
	for _, sts := range s.sets {
		st.ReadyServers += sts.Status.ReadyReplicas
		st.UpdatedServers += sts.Status.UpdatedReplicas
	}
	if s.drives != nil {
		st.Drives = *s.drives
	}
	if s.poolState != "" {
		st.PoolState = s.poolState
	}
}

// placementRefusal is the StorageReady condition when placement refused
// the pool, nil otherwise.
func placementRefusal(st *v1.ServerPoolStatus) *metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionStorageReady); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	return nil
}

// setServerPoolReady: Ready once every server is ready. A pass stopped
// before any workload exists says what it waits for.
func setServerPoolReady(p *v1.ServerPool, s *poolScope) {
	st := &p.Status
	msg := fmt.Sprintf("%d of %d servers ready", st.ReadyServers, p.Spec.Servers)
	switch {
	case s.waitReason != "" && !s.created:
		setCondition(&st.Conditions, p.Generation, v1.ConditionReady, false, s.waitReason, s.waitMessage)
	case st.ReadyServers >= p.Spec.Servers:
		setCondition(&st.Conditions, p.Generation, v1.ConditionReady, true, v1.ReasonReconciled, msg)
	case s.pods.reason != "":
		setCondition(&st.Conditions, p.Generation, v1.ConditionReady, false, s.pods.reason, msg+"; "+s.pods.message)
	default:
		setCondition(&st.Conditions, p.Generation, v1.ConditionReady, false, v1.ReasonWaitingForPods, msg)
	}
}

// setServerPoolProgressing: a draining or decommissioned pool says so;
// otherwise the pool progresses until every server is ready, except when
// placement refused it (nothing will happen until the spec changes).
// Setting the condition once per pass keeps its lastTransitionTime.
func setServerPoolProgressing(p *v1.ServerPool, s *poolScope) {
	st := &p.Status
	gen := p.Generation
	switch {
	case st.PoolState == v1.PoolStateDecommissioned:
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonDecommissioned,
			"the pool is empty: deleting the ServerPool loses nothing")
	case st.PoolState == v1.PoolStateDraining:
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonDraining,
			"the engine is moving the pool's objects to the tenant's other pools")
	case p.Spec.Decommission:
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonDraining,
			"decommission asked: waiting for the engine to start draining the pool")
	case s.waitReason != "" && !s.created:
		if refused := placementRefusal(st); refused != nil {
			setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonPlacementRefused,
				"placement refused the pool; nothing was created: "+refused.Message)
		} else {
			setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, s.waitReason, s.waitMessage)
		}
	case st.ReadyServers >= p.Spec.Servers:
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonReconciled, "all servers run the desired spec")
	default:
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonWaitingForPods,
			fmt.Sprintf("%d of %d servers ready", st.ReadyServers, p.Spec.Servers))
	}
}

// setServerPoolUpgrading reports the roll-out step's findings.
func setServerPoolUpgrading(p *v1.ServerPool, s *poolScope) {
	st := &p.Status
	switch {
	case s.rollout.failed != "":
		setCondition(&st.Conditions, p.Generation, v1.ConditionUpgrading, false, v1.ReasonHealthGateFailed, s.rollout.failed)
	case s.rollout.rolling:
		msg := s.rollout.message
		if msg == "" {
			msg = fmt.Sprintf("%d of %d servers run the new spec", st.UpdatedServers, p.Spec.Servers)
		}
		setCondition(&st.Conditions, p.Generation, v1.ConditionUpgrading, true, v1.ReasonRollingUpdate, msg)
	default:
		setCondition(&st.Conditions, p.Generation, v1.ConditionUpgrading, false, v1.ReasonReconciled, "every server runs the pool's spec")
	}
}

// setServerPoolDegraded: a refused deletion or placement first, then
// drives offline, then drives healing.
func setServerPoolDegraded(p *v1.ServerPool, s *poolScope) {
	st := &p.Status
	gen := p.Generation
	switch refused := placementRefusal(st); {
	case s.deletionRefused != "":
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, v1.ReasonDeletionRefused, s.deletionRefused)
	case refused != nil:
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, refused.Reason, refused.Message)
	case st.Drives.Offline > 0:
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, v1.ReasonDrivesOffline,
			fmt.Sprintf("%d drive(s) offline; objects are served from parity", st.Drives.Offline))
	case st.Drives.Healing > 0:
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, v1.ReasonHealing,
			fmt.Sprintf("%d drive(s) healing from parity", st.Drives.Healing))
	default:
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, false, v1.ReasonReconciled, "no drive offline or healing")
	}
}
