package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

// AnnotationRolloutStep records on a StatefulSet when its partition last
// moved ("<partition> <RFC 3339 time>"): the health gate's timeout counts
// from there.
const AnnotationRolloutStep = "storage.strata.dev/rollout-step"

// rolloutState is what the roll-out step found, for status.
type rolloutState struct {
	rolling bool   // some server still runs an old template
	failed  string // the health gate failed past spec.upgrade.healthGateTimeout
	message string
}

// reconcileRollout lets a changed server template roll one server at a
// time: a StatefulSet's partition moves down by one only when every server
// of the tenant is ready, the previous step is done, and the next server's
// engine says the tenant keeps write quorum without it
// (/strata/health/cluster?maintenance=true). One StatefulSet of the pool
// moves at a time, in group order; other pools wait while any server of the
// tenant is not ready.
func (r *ServerPoolReconciler) reconcileRollout(ctx context.Context, s *poolScope) error {
	if s.tenant.Spec.Upgrade.Strategy == v1.UpgradeOnDelete {
		return nil
	}
	for i := range s.sets {
		sts := &s.sets[i]
		p := rolloutPartition(sts)
		n := ptrValue(sts.Spec.Replicas)
		if p == 0 {
			if sts.Status.UpdatedReplicas < n || sts.Status.ObservedGeneration < sts.Generation {
				s.rollout.rolling = sts.Status.CurrentRevision != sts.Status.UpdateRevision
			}
			continue
		}
		s.rollout.rolling = true
		s.requeueWithin(r.Config.RolloutPoll)
		since, err := r.stepSince(ctx, sts, p)
		if err != nil {
			return err
		}
		next := p - 1
		pod := fmt.Sprintf("%s-%d", sts.Name, next)
		s.rollout.message = fmt.Sprintf("%d of %d servers of %s updated; next: %s", n-p, n, sts.Name, pod)
		wait, err := r.gate(ctx, s, sts, n, p)
		if err != nil {
			return err
		}
		if wait != "" {
			r.checkTimeout(s, since, pod, wait)
			return nil
		}
		sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(next)
		setStep(sts, next, r.Config.Now())
		if err := r.Client.Update(ctx, sts); err != nil {
			return fmt.Errorf("moving the roll-out of %s to %s: %w", sts.Name, pod, err)
		}
		r.Recorder.Eventf(s.pool, sts, corev1.EventTypeNormal, "RolloutStep", "Upgrade",
			"%s may restart: the tenant keeps write quorum without it", pod)
		return nil
	}
	return nil
}

// gate says why the next server may not restart yet ("" when it may).
func (r *ServerPoolReconciler) gate(ctx context.Context, s *poolScope, sts *appsv1.StatefulSet, n, p int32) (string, error) {
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdatedReplicas < n-p {
		return fmt.Sprintf("waiting for %s to restart %d server(s) with the new spec", sts.Name, n-p), nil
	}
	all := &appsv1.StatefulSetList{}
	if err := r.Client.List(ctx, all, client.InNamespace(s.tenant.Namespace),
		client.MatchingLabels(builders.ServerSelector(s.tenant.Name))); err != nil {
		return "", fmt.Errorf("listing the tenant's StatefulSets: %w", err)
	}
	// The next server may itself be the one not ready: a roll-out to an
	// image that does not start, reverted. Replacing it takes nothing
	// away, and no other way out exists (the StatefulSet restarts pods
	// from the highest ordinal down).
	nextDown, err := r.serverDown(ctx, s.tenant.Namespace, fmt.Sprintf("%s-%d", sts.Name, p-1))
	if err != nil {
		return "", err
	}
	for _, o := range all.Items {
		down := ptrValue(o.Spec.Replicas) - o.Status.ReadyReplicas
		if o.Name == sts.Name && nextDown {
			down--
		}
		if down > 0 {
			return fmt.Sprintf("waiting for every server to be ready (%s: %d of %d)", o.Name, o.Status.ReadyReplicas, ptrValue(o.Spec.Replicas)), nil
		}
	}
	if r.Config.Engine == nil || nextDown {
		return "", nil
	}
	err = r.Config.Engine.ClusterHealth(ctx, engine.Endpoint{
		URL: builders.PodURL(s.tenant, sts.Name, p-1, r.Config.ClusterDomain), CA: s.ca,
	}, true)
	if err != nil {
		s.requeueWithin(r.Config.EngineGatePoll)
		return fmt.Sprintf("%s-%d may not restart yet: %s", sts.Name, p-1, err), nil
	}
	return "", nil
}

// serverDown reports whether the pod exists and is not Ready. It reads
// the API server, not the cache: the operator may get and list pods but
// not watch them, and a cached read would start an informer whose watch
// is forbidden (stale answers, and an error logged every few seconds).
func (r *ServerPoolReconciler) serverDown(ctx context.Context, ns, name string) (bool, error) {
	pod := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return !podReady(pod), nil
}

func (r *ServerPoolReconciler) checkTimeout(s *poolScope, since time.Time, pod, why string) {
	timeout := 10 * time.Minute
	if d := s.tenant.Spec.Upgrade.HealthGateTimeout; d != nil {
		timeout = d.Duration
	}
	if r.Config.Now().Sub(since) > timeout {
		s.rollout.failed = fmt.Sprintf("the roll-out is paused at %s for more than %s: %s; it resumes when the tenant is healthy (or revert spec.image)",
			pod, timeout, why)
		return
	}
	s.rollout.message = why
}

// stepSince returns when the partition last moved, recording it the first
// time the step is seen.
func (r *ServerPoolReconciler) stepSince(ctx context.Context, sts *appsv1.StatefulSet, p int32) (time.Time, error) {
	if f := strings.Fields(sts.Annotations[AnnotationRolloutStep]); len(f) == 2 {
		if at, err := time.Parse(time.RFC3339, f[1]); err == nil && f[0] == strconv.Itoa(int(p)) {
			return at, nil
		}
	}
	now := r.Config.Now()
	setStep(sts, p, now)
	if err := r.Client.Update(ctx, sts); err != nil {
		return now, fmt.Errorf("recording the roll-out step of %s: %w", sts.Name, err)
	}
	return now, nil
}

func setStep(sts *appsv1.StatefulSet, p int32, at time.Time) {
	if sts.Annotations == nil {
		sts.Annotations = map[string]string{}
	}
	sts.Annotations[AnnotationRolloutStep] = fmt.Sprintf("%d %s", p, at.UTC().Format(time.RFC3339))
}
