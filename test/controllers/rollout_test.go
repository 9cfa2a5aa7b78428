package controllers_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// simulateStatefulSet does what the StatefulSet controller and kubelet
// would: pods at or above the partition run the new revision and are ready.
func simulateStatefulSet(ns, name string) func() (int32, error) {
	return func() (int32, error) {
		return setStatefulSetStatus(ns, name, simulatedStatus)
	}
}

// setStatefulSetStatus writes the status status gives a StatefulSet and
// returns its partition. Like the StatefulSet controller, it retries when
// the operator wrote the object between its read and its write.
func setStatefulSetStatus(ns, name string, status func(*appsv1.StatefulSet)) (int32, error) {
	var partition int32
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := k8s.Get(ctx, key(ns, name), sts); err != nil {
			return err
		}
		status(sts)
		partition = 0
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = *ru.Partition
		}
		return k8s.Status().Update(ctx, sts)
	})
	if err != nil {
		return -1, err
	}
	return partition, nil
}

// simulatedStatus is the status of a StatefulSet whose pods are all ready,
// those above the partition updated.
func simulatedStatus(sts *appsv1.StatefulSet) {
	n, p := *sts.Spec.Replicas, int32(0)
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		p = *ru.Partition
	}
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n,
		UpdatedReplicas: n - p, CurrentReplicas: p, CurrentRevision: "old", UpdateRevision: "new",
	}
	if p == 0 {
		sts.Status.CurrentRevision, sts.Status.CurrentReplicas = "new", n
	}
}

// servingPool creates the tenant t and its pool nvme, and plays the
// StatefulSet controller until the pool is Ready.
func servingPool(t *v1.Tenant) *v1.ServerPool {
	ns := t.Namespace
	Expect(k8s.Create(ctx, t)).To(Succeed())
	sp := nvmePool(ns)
	Expect(k8s.Create(ctx, sp)).To(Succeed())
	Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
	Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(0)))
	Eventually(poolCondition(sp, v1.ConditionReady)).Should(Equal("True/Reconciled"))
	return sp
}

var _ = Describe("a health-gated roll-out", func() {
	It("restarts one server at a time, only when the tenant keeps write quorum without it", func() {
		ns := newNamespace()
		t := tenant(ns)
		t.Spec.Upgrade = v1.UpgradeSpec{Strategy: v1.UpgradeRolling, HealthGateTimeout: &metav1.Duration{Duration: 3 * time.Second}}
		sp := servingPool(t)

		By("holding every server back when the image changes")
		pod1 := "https://media-nvme-1.media-hl." + ns + ".svc.cluster.local:9000"
		fakeEn.closeGate(pod1, errors.New("412 Precondition Failed: set 0 would lose write quorum"))
		DeferCleanup(func() { fakeEn.closeGate(pod1, nil) })
		update(t, func(t *v1.Tenant) { t.Spec.Image = "registry.example/strata:next" })
		sts := &appsv1.StatefulSet{}
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Spec.Containers[0].Image, err
		}).Should(Equal("registry.example/strata:next"))

		By("letting servers 3 and 2 go through the gate, and stopping at 1, whose engine refuses")
		Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(2)))
		Consistently(simulateStatefulSet(ns, "media-nvme")).WithTimeout(time.Second).Should(Equal(int32(2)))
		Eventually(poolCondition(sp, v1.ConditionUpgrading)).Should(Equal("False/HealthGateFailed"))
		Expect(sp.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("set 0 would lose write quorum"))))
		Eventually(tenantCondition(t, v1.ConditionUpgrading)).Should(Equal("False/HealthGateFailed"))
		Eventually(eventsFor(ns, "nvme")).Should(ContainElements("RolloutStep", "HealthGateFailed"))
		Eventually(eventsFor(ns, "media")).Should(ContainElements(v1.ReasonRollingUpdate, v1.ReasonHealthGateFailed))
		Expect(fakeEn.gatedURLs()).To(ContainElement("https://media-nvme-3.media-hl." + ns + ".svc.cluster.local:9000"))

		By("resuming when the engine allows it")
		fakeEn.closeGate(pod1, nil)
		Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(0)))
		Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(0))) // status after the last step
		Eventually(tenantCondition(t, v1.ConditionUpgrading)).Should(Equal("False/Reconciled"))
		Expect(t.Status.CurrentImage).To(Equal("registry.example/strata:next"))
		Eventually(poolCondition(sp, v1.ConditionUpgrading)).Should(Equal("False/Reconciled"))
		// The tenant's Events tell the roll-out: started, paused, done.
		Eventually(eventNotesFor(ns, "media")).Should(ContainElement(HavePrefix(v1.ReasonReconciled + " Upgrading: ")))
	})
})

// notReadyPod creates server pod name with condition Ready=False, as a pod
// whose image does not start.
func notReadyPod(ns, name string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "strata", Image: "registry.example/strata:broken"}}}}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
}

// stuckStatefulSet reports the StatefulSet with one server not ready and
// none updated, and returns its partition.
func stuckStatefulSet(ns, name string) func() (int32, error) {
	return func() (int32, error) {
		return setStatefulSetStatus(ns, name, func(sts *appsv1.StatefulSet) {
			n := *sts.Spec.Replicas
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n - 1, AvailableReplicas: n - 1,
				CurrentReplicas: n, CurrentRevision: "broken", UpdateRevision: "reverted"}
		})
	}
}

var _ = Describe("a roll-out reverted after its image did not start", func() {
	It("replaces the server that is down first, and only that one", func() {
		ns := newNamespace()
		t := tenant(ns)
		servingPool(t)

		By("holding the roll-out while a server other than the next one is down")
		notReadyPod(ns, "media-nvme-1")
		update(t, func(t *v1.Tenant) { t.Spec.Image = "registry.example/strata:reverted" })
		Eventually(stuckStatefulSet(ns, "media-nvme")).Should(Equal(int32(4)))
		Consistently(stuckStatefulSet(ns, "media-nvme")).WithTimeout(2 * time.Second).Should(Equal(int32(4)))

		By("restarting the next server when it is the one down, without asking its engine")
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "media-nvme-1"}})).To(Succeed())
		notReadyPod(ns, "media-nvme-3")
		pod3 := "https://media-nvme-3.media-hl." + ns + ".svc.cluster.local:9000"
		fakeEn.closeGate(pod3, errors.New("connection refused"))
		DeferCleanup(func() { fakeEn.closeGate(pod3, nil) })
		Eventually(stuckStatefulSet(ns, "media-nvme")).Should(Equal(int32(3)))
	})
})
