package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// computeServerPoolStatus derives a pool's status from one pass. Pure.
func computeServerPoolStatus(p *v1.ServerPool, s *poolScope) {
	st := &p.Status
	gen := p.Generation
	st.ObservedGeneration = gen
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

	storage := meta.FindStatusCondition(st.Conditions, v1.ConditionStorageReady)
	refused := storage != nil && storage.Status == "False"
	switch {
	case s.waitReason != "" && !s.created:
		// Stopped before any workload exists: waiting, or refused.
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, s.waitReason, s.waitMessage)
		if refused {
			setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonPlacementRefused,
				"placement refused the pool; nothing was created: "+storage.Message)
		} else {
			setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, s.waitReason, s.waitMessage)
		}
	case st.ReadyServers >= p.Spec.Servers:
		setCondition(&st.Conditions, gen, v1.ConditionReady, true, v1.ReasonReconciled,
			fmt.Sprintf("%d of %d servers ready", st.ReadyServers, p.Spec.Servers))
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, false, v1.ReasonReconciled, "all servers run the desired spec")
	default:
		msg := fmt.Sprintf("%d of %d servers ready", st.ReadyServers, p.Spec.Servers)
		setCondition(&st.Conditions, gen, v1.ConditionReady, false, v1.ReasonWaitingForPods, msg)
		setCondition(&st.Conditions, gen, v1.ConditionProgressing, true, v1.ReasonWaitingForPods, msg)
	}

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
	}

	switch {
	case s.rollout.failed != "":
		setCondition(&st.Conditions, gen, v1.ConditionUpgrading, false, v1.ReasonHealthGateFailed, s.rollout.failed)
	case s.rollout.rolling:
		msg := s.rollout.message
		if msg == "" {
			msg = fmt.Sprintf("%d of %d servers run the new spec", st.UpdatedServers, p.Spec.Servers)
		}
		setCondition(&st.Conditions, gen, v1.ConditionUpgrading, true, v1.ReasonRollingUpdate, msg)
	default:
		setCondition(&st.Conditions, gen, v1.ConditionUpgrading, false, v1.ReasonReconciled, "every server runs the pool's spec")
	}

	switch {
	case s.deletionRefused != "":
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, v1.ReasonDeletionRefused, s.deletionRefused)
	case refused:
		setCondition(&st.Conditions, gen, v1.ConditionDegraded, true, storage.Reason, storage.Message)
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
