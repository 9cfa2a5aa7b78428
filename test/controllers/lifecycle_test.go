package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

var _ = Describe("a pool's life", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("reports an image roll-out as Upgrading with progress, and OnDelete leaves pods to the user", func() {
		t := tenant(ns)
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(k8s.Create(ctx, nvmePool(ns))).To(Succeed())
		Expect(k8s.Create(ctx, gatewayPool(ns))).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{}) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nas"), &appsv1.Deployment{}) }).Should(Succeed())
		markStatefulSetReady(ns, "media-nvme")
		markDeploymentReady(ns, "media-nas")
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			return t.Status.CurrentImage, err
		}).Should(Equal(image))

		update(t, func(t *v1.Tenant) { t.Spec.Image = "registry.example/strata:next" })
		sts := &appsv1.StatefulSet{}
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.Template.Spec.Containers[0].Image, err
		}).Should(Equal("registry.example/strata:next"))
		Eventually(tenantCondition(t, v1.ConditionUpgrading)).Should(Equal("True/RollingUpdate"))
		Expect(t.Status.Upgrade).To(Equal(&v1.UpgradeProgress{Updated: 0, Total: 6}), "4 servers and 2 gateways, none updated")
		// The StatefulSet controller rolls the servers as the health gate
		// lets it; the Deployment controller the gateways.
		Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(0)))
		Eventually(simulateStatefulSet(ns, "media-nvme")).Should(Equal(int32(0)))
		markDeploymentReady(ns, "media-nas")
		Eventually(tenantCondition(t, v1.ConditionUpgrading)).Should(Equal("False/Reconciled"))
		Expect(t.Status.CurrentImage).To(Equal("registry.example/strata:next"))
		Expect(t.Status.Upgrade).To(BeNil())

		update(t, func(t *v1.Tenant) { t.Spec.Upgrade.Strategy = v1.UpgradeOnDelete })
		Eventually(func() (appsv1.StatefulSetUpdateStrategyType, error) {
			err := k8s.Get(ctx, key(ns, "media-nvme"), sts)
			return sts.Spec.UpdateStrategy.Type, err
		}).Should(Equal(appsv1.OnDeleteStatefulSetStrategyType))
	})

	It("runs one StatefulSet per explicit domain, pinned to its nodes", func() {
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		sp := nvmePool(ns)
		sp.Spec.Topology = v1.TopologySpec{
			FailureDomainKey: "topology.kubernetes.io/zone",
			Domains:          []v1.FailureDomain{{Name: "a", Value: "zone-a"}, {Name: "b", Value: "zone-b"}},
			Tolerate:         v1.ToleranceSpec{Domains: new(int32), Servers: 1},
		}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Eventually(poolCondition(sp, v1.ConditionStorageReady)).Should(Equal("True/Reconciled"))
		Expect(sp.Status.Layout.DrivesPerDomain).To(ConsistOf(
			v1.DomainDrives{Domain: "zone-a", Drives: 8}, v1.DomainDrives{Domain: "zone-b", Drives: 8}))
		for _, d := range []string{"a", "b"} {
			sts := &appsv1.StatefulSet{}
			Eventually(func() error { return k8s.Get(ctx, key(ns, "media-nvme-"+d), sts) }).Should(Succeed())
			Expect(*sts.Spec.Replicas).To(Equal(int32(2)))
			term := sts.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
			Expect(term.MatchExpressions[0].Values).To(ConsistOf("zone-" + d))
		}
		Expect(k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{})).NotTo(Succeed())
	})

	It("grows drives when the class allows it, and says so when it does not", func() {
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		ar, nv := arrayPool(ns), nvmePool(ns)
		Expect(k8s.Create(ctx, ar)).To(Succeed())
		Expect(k8s.Create(ctx, nv)).To(Succeed())
		for _, name := range []string{"media-array", "media-nvme"} {
			Eventually(func() error { return k8s.Get(ctx, key(ns, name), &appsv1.StatefulSet{}) }).Should(Succeed())
		}
		// Bound claims, as the StatefulSet controller and a provisioner
		// would have made them.
		claim := func(pool, class string) *corev1.PersistentVolumeClaim {
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data0-media-" + pool + "-0",
					Labels: builders.PoolSelector("media", pool, builders.ComponentServer)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &class,
					VolumeName:       "pv-" + ns + "-" + pool,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}},
				},
			}
			Expect(k8s.Create(ctx, pvc)).To(Succeed())
			pvc.Status.Phase = corev1.ClaimBound
			pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}
			Expect(k8s.Status().Update(ctx, pvc)).To(Succeed())
			return pvc
		}
		arrayClaim, nvmeClaim := claim("array", "array-a-luns"), claim("nvme", "nvme-local")

		update(ar, func(p *v1.ServerPool) { p.Spec.Storage.Size = resource.MustParse("200Gi") })
		update(nv, func(p *v1.ServerPool) { p.Spec.Storage.Size = resource.MustParse("200Gi") })
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, arrayClaim.Name), arrayClaim)
			q := arrayClaim.Spec.Resources.Requests[corev1.ResourceStorage]
			return q.String(), err
		}).Should(Equal("200Gi"))
		Eventually(eventsFor(ns, "array")).Should(ContainElement("DriveExpanding"))

		Eventually(poolCondition(nv, v1.ConditionStorageReady)).Should(Equal("False/ExpansionNotAllowed"))
		Expect(poolCondition(nv, v1.ConditionDegraded)()).To(Equal("True/ExpansionNotAllowed"))
		Expect(k8s.Get(ctx, key(ns, nvmeClaim.Name), nvmeClaim)).To(Succeed())
		q := nvmeClaim.Spec.Resources.Requests[corev1.ResourceStorage]
		Expect(q.String()).To(Equal("100Gi"))
		Expect(k8s.Get(ctx, key(ns, "media-nvme"), &appsv1.StatefulSet{})).To(Succeed(), "a running pool keeps running")
	})
})
