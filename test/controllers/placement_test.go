package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Placement preflight (issue 7): a pool the cluster cannot host gets
// StorageReady=False and Degraded=True with the reason, an Event, and no
// StatefulSet; fixing the cluster lets it start.
var _ = Describe("placement preflight", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
	})

	refused := func(sp *v1.ServerPool, reason, says string) {
		Eventually(poolCondition(sp, v1.ConditionStorageReady)).Should(Equal("False/" + reason))
		Expect(poolCondition(sp, v1.ConditionDegraded)()).To(Equal("True/" + reason))
		Expect(poolCondition(sp, v1.ConditionReady)()).To(Equal("False/" + reason))
		Expect(sp.Status.Conditions).To(ContainElement(And(
			HaveField("Type", v1.ConditionStorageReady), HaveField("Message", ContainSubstring(says)))))
		Eventually(eventsFor(ns, sp.Name)).Should(ContainElement(reason))
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(ns, "media-"+sp.Name), &appsv1.StatefulSet{}))
		}).Should(BeTrue(), "nothing is half-created")
	}

	It("refuses a missing StorageClass and starts once it exists", func() {
		sp := nvmePool(ns)
		sp.Spec.Storage.StorageClassNames = []string{"nvme-later-" + ns}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		refused(sp, v1.ReasonStorageClassMissing, "does not exist")

		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		Expect(k8s.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nvme-later-" + ns},
			Provisioner: "local.csi.example", VolumeBindingMode: &wffc})).To(Succeed())
		Eventually(poolCondition(sp, v1.ConditionStorageReady)).Should(Equal("True/Reconciled"))
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
	})

	It("refuses a local class that binds immediately", func() {
		sp := nvmePool(ns)
		sp.Spec.Storage.StorageClassNames = []string{"immediate-local"}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		refused(sp, v1.ReasonBindingModeImmediate, "WaitForFirstConsumer")
	})

	It("refuses when no nodes match the pool's selector", func() {
		sp := nvmePool(ns)
		sp.Spec.NodeSelector = map[string]string{"node-role.strata.dev/storage": "fast"}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		refused(sp, v1.ReasonNoMatchingNodes, "node-role.strata.dev/storage=fast")
	})

	It("refuses drives larger than CSIStorageCapacity reports", func() {
		class := "capped-" + ns
		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		Expect(k8s.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Provisioner: "local.csi.example", VolumeBindingMode: &wffc})).To(Succeed())
		Expect(k8s.Create(ctx, &storagev1.CSIStorageCapacity{
			ObjectMeta:       metav1.ObjectMeta{Namespace: ns, Name: "cap"},
			StorageClassName: class,
			NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: "storage-a"}},
			Capacity:         ptr.To(resource.MustParse("50Gi")),
		})).To(Succeed())
		sp := nvmePool(ns)
		sp.Spec.Storage.StorageClassNames = []string{class}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		refused(sp, v1.ReasonInsufficientCapacity, "at most 50Gi")
	})

	It("refuses a layout that cannot meet tolerate, saying what would", func() {
		sp := nvmePool(ns)
		sp.Spec.Erasure = v1.ErasureSpec{SetSize: 16, Parity: 2}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		refused(sp, v1.ReasonToleranceUnreachable, "erasure {setSize: 16, parity: 4} would meet it")
		Expect(sp.Status.Layout).To(BeNil())
	})

	It("gives the ArrayLUN sample a different layout than the LocalNVMe one, and reports the weakest", func() {
		nv, ar := nvmePool(ns), arrayPool(ns)
		Expect(k8s.Create(ctx, nv)).To(Succeed())
		Expect(k8s.Create(ctx, ar)).To(Succeed())
		Eventually(poolCondition(ar, v1.ConditionStorageReady)).Should(Equal("True/Reconciled"))
		Eventually(poolCondition(nv, v1.ConditionStorageReady)).Should(Equal("True/Reconciled"))
		Expect(ar.Status.Layout).To(Equal(&v1.ErasureLayout{Sets: 4, SetSize: 4, Parity: 1}))
		Expect(nv.Status.Layout).To(Equal(&v1.ErasureLayout{Sets: 1, SetSize: 16, Parity: 4}))
		Expect(ar.Status.Tolerates).To(Equal(&v1.FaultTolerance{Drives: 1, Servers: 1, Domains: 1, Backends: ptr.To[int32](0)}))
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-array"), sts) }).Should(Succeed())
		Expect(*sts.Spec.VolumeClaimTemplates[1].Spec.StorageClassName).To(Equal("array-b-luns"))
		Expect(sts.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))

		t := &v1.Tenant{}
		Eventually(func() (*v1.FaultTolerance, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.FaultTolerance, err
		}).Should(Equal(&v1.FaultTolerance{Drives: 1, Servers: 1, Domains: 1, Backends: ptr.To[int32](0)}))
	})
})
