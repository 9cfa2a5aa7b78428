package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// podTrouble is why a pool's pods cannot start, as the kubelet says it:
// the reason a pool's Ready condition takes (ImagePullFailed or
// ContainerStartFailed) and a message naming the pods. Zero when no pod
// is stuck.
type podTrouble struct {
	reason, message string
}

// waitingReasons sorts the kubelet's reasons for a container that waits
// into the two a user acts on differently: the image (fix the reference
// or the pull Secrets) and the container (its configuration or its
// process). ContainerCreating and PodInitializing are progress.
var waitingReasons = map[string]string{
	"ErrImagePull":               v1.ReasonImagePullFailed,
	"ImagePullBackOff":           v1.ReasonImagePullFailed,
	"InvalidImageName":           v1.ReasonImagePullFailed,
	"ErrImageNeverPull":          v1.ReasonImagePullFailed,
	"RegistryUnavailable":        v1.ReasonImagePullFailed,
	"SignatureValidationFailed":  v1.ReasonImagePullFailed,
	"CreateContainerConfigError": v1.ReasonContainerStartFailed,
	"CreateContainerError":       v1.ReasonContainerStartFailed,
	"RunContainerError":          v1.ReasonContainerStartFailed,
	"PreStartHookError":          v1.ReasonContainerStartFailed,
	"PostStartHookError":         v1.ReasonContainerStartFailed,
	"CrashLoopBackOff":           v1.ReasonContainerStartFailed,
}

// maxTroubledPods bounds how many pods a message names.
const maxTroubledPods = 3

// observePodTrouble finds the pods whose containers wait for a reason in
// waitingReasons. An image problem outranks a container problem (a pod
// that cannot pull never gets to start).
func observePodTrouble(pods []corev1.Pod) podTrouble {
	type stuck struct{ pod, what string }
	found := map[string][]stuck{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			reason, ok := waitingReasons[w.Reason]
			if !ok {
				continue
			}
			what := w.Reason
			if w.Message != "" {
				what += ": " + w.Message
			}
			found[reason] = append(found[reason], stuck{pod: p.Name, what: fmt.Sprintf("container %s: %s", cs.Name, what)})
			break // one line a pod
		}
	}
	for _, reason := range []string{v1.ReasonImagePullFailed, v1.ReasonContainerStartFailed} {
		list := found[reason]
		if len(list) == 0 {
			continue
		}
		sort.Slice(list, func(i, j int) bool { return list[i].pod < list[j].pod })
		var lines []string
		for _, s := range list[:min(len(list), maxTroubledPods)] {
			lines = append(lines, fmt.Sprintf("pod %s %s", s.pod, s.what))
		}
		if more := len(list) - maxTroubledPods; more > 0 {
			lines = append(lines, fmt.Sprintf("and %d more pod(s)", more))
		}
		return podTrouble{reason: reason, message: strings.Join(lines, "; ")}
	}
	return podTrouble{}
}

// readPodTrouble lists a pool's pods (uncached) and observes them; waiting
// says whether any pod is not ready, to look at again later (the kubelet's
// back-off changes no status the pools watch). A pool whose pods do not
// exist yet is woken by its workload's status when they are created.
func readPodTrouble(ctx context.Context, r client.Reader, namespace string, selector map[string]string) (_ podTrouble, waiting bool, _ error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(selector)); err != nil {
		return podTrouble{}, false, fmt.Errorf("listing the pool's pods: %w", err)
	}
	for i := range list.Items {
		if !podReady(&list.Items[i]) {
			waiting = true
		}
	}
	return observePodTrouble(list.Items), waiting, nil
}
