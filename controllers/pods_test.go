package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

func waitingPod(name string, reasons ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, r := range reasons {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  "strata",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: r, Message: "said " + r}},
		})
	}
	return p
}

func TestObservePodTrouble(t *testing.T) {
	deleted := waitingPod("media-nvme-9", "ImagePullBackOff")
	deleted.DeletionTimestamp = &metav1.Time{}
	initStuck := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "media-nvme-5"}}
	initStuck.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}

	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		reason   string
		contains []string
		omits    []string
	}{
		{name: "starting pods are progress", pods: []corev1.Pod{waitingPod("a", "ContainerCreating"), waitingPod("b", "PodInitializing"), waitingPod("c")}},
		{name: "a terminating pod is not reported", pods: []corev1.Pod{deleted}},
		{name: "image pull back-off", pods: []corev1.Pod{waitingPod("media-nvme-1", "ImagePullBackOff"), waitingPod("media-nvme-0")},
			reason: v1.ReasonImagePullFailed, contains: []string{"pod media-nvme-1 container strata: ImagePullBackOff: said ImagePullBackOff"}, omits: []string{"media-nvme-0"}},
		{name: "the image outranks the container", pods: []corev1.Pod{waitingPod("b", "CreateContainerConfigError"), waitingPod("a", "InvalidImageName")},
			reason: v1.ReasonImagePullFailed, contains: []string{"pod a container strata: InvalidImageName"}, omits: []string{"pod b"}},
		{name: "a container that cannot start", pods: []corev1.Pod{waitingPod("g-1", "CrashLoopBackOff"), waitingPod("g-0", "CreateContainerConfigError")},
			reason: v1.ReasonContainerStartFailed, contains: []string{"pod g-0 container strata: CreateContainerConfigError: said CreateContainerConfigError; pod g-1 container strata: CrashLoopBackOff"}},
		{name: "init containers count", pods: []corev1.Pod{initStuck},
			reason: v1.ReasonImagePullFailed, contains: []string{"pod media-nvme-5 container init: ErrImagePull"}},
		{name: "at most three pods named", pods: []corev1.Pod{waitingPod("p4", "ErrImagePull"), waitingPod("p3", "ErrImagePull"),
			waitingPod("p2", "ErrImagePull"), waitingPod("p1", "ErrImagePull"), waitingPod("p0", "ErrImagePull")},
			reason: v1.ReasonImagePullFailed, contains: []string{"pod p0 ", "pod p2 ", "and 2 more pod(s)"}, omits: []string{"pod p3", "pod p4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := observePodTrouble(tc.pods)
			if got.reason != tc.reason {
				t.Fatalf("reason %q, want %q (message %q)", got.reason, tc.reason, got.message)
			}
			for _, s := range tc.contains {
				if !strings.Contains(got.message, s) {
					t.Errorf("message %q lacks %q", got.message, s)
				}
			}
			for _, s := range tc.omits {
				if strings.Contains(got.message, s) {
					t.Errorf("message %q names %q", got.message, s)
				}
			}
		})
	}
}
