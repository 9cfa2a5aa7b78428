package controllers_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// What CEL cannot check, the webhooks do, with messages that say what to
// change.
var _ = Describe("webhooks", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("defaults expose.port from the TLS mode", func() {
		t := tenant(ns)
		t.Spec.TLS.Mode = v1.TLSDisabled
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(t.Spec.Expose.Port).To(Equal(int32(80)))
	})

	It("labels pools with their tenant and keeps gateway replicas within autoscaling", func() {
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		sp := nvmePool(ns)
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Expect(sp.Labels).To(HaveKeyWithValue(builders.LabelTenant, "media"))
		gp := gatewayPool(ns)
		gp.Spec.Replicas = nil // the CRD default (2) lies below minReplicas
		gp.Spec.Autoscaling.MinReplicas = 3
		Expect(k8s.Create(ctx, gp)).To(Succeed())
		Expect(*gp.Spec.Replicas).To(Equal(int32(3)))
	})

	It("refuses a pool name used by the other pool kind of the same tenant", func() {
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
		Expect(k8s.Create(ctx, nvmePool(ns))).To(Succeed())
		gp := gatewayPool(ns)
		gp.Name = "nvme"
		err := k8s.Create(ctx, gp)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("ServerPool nvme already serves Tenant media; pool names must be unique within a tenant"))
	})

	It("warns, but accepts, a pool whose Tenant does not exist yet", func() {
		var warnings []string
		cfg := rest.CopyConfig(env.Config)
		cfg.WarningHandler = warningRecorder{&warnings}
		c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Create(ctx, nvmePool(ns))).To(Succeed())
		Expect(strings.Join(warnings, "\n")).To(ContainSubstring(`Tenant "media" does not exist in namespace ` + ns + " yet"))
	})

	It("refuses names whose StatefulSets would be too long", func() {
		sp := nvmePool(ns)
		sp.Name = strings.Repeat("p", 50)
		err := k8s.Create(ctx, sp)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("Kubernetes allows 52: shorten the pool, tenant or domain names"))
	})

	It("has no image on pools: the field is unknown and strict validation refuses it", func() {
		sp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "storage.strata.dev/v1alpha1", "kind": "ServerPool",
			"metadata": map[string]any{"name": "imaged", "namespace": ns},
			"spec": map[string]any{
				"tenantRef": map[string]any{"name": "media"}, "servers": int64(4), "volumesPerServer": int64(4),
				"image":   "strata:other",
				"storage": map[string]any{"media": "LocalNVMe", "storageClassNames": []any{"nvme-local"}, "size": "1Ti"},
			},
		}}
		err := k8s.Create(ctx, sp, client.FieldValidation("Strict"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`unknown field "spec.image"`))
	})
})

// setPoolState records the engine's state of a pool as the controller
// would from the admin API (the pools here have no servers to ask).
func setPoolState(p *v1.ServerPool, state string) {
	EventuallyWithOffset(1, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status.PoolState = state
		return k8s.Status().Update(ctx, p)
	}).Should(Succeed())
}

func gone(obj client.Object) func() bool {
	return func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
}

// Deleting a ServerPool whose drives may hold objects would make them
// unreadable; the webhook refuses it with the way out, and the controller
// keeps such a pool running when a deletion gets past the webhook.
var _ = Describe("deleting a ServerPool that may hold objects", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		Expect(k8s.Create(ctx, tenant(ns))).To(Succeed())
	})

	It("is refused until the engine has decommissioned the pool", func() {
		p := nvmePool(ns)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		setPoolState(p, v1.PoolStateActive)
		err := k8s.Delete(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), fmt.Sprint(err))
		Expect(err.Error()).To(And(ContainSubstring("may hold objects of Tenant media"),
			ContainSubstring("POST /strata/admin/v1/pools/nvme/decommission"), ContainSubstring(v1.AnnotationDeleteWithData+"=true")))
		Consistently(gone(p)).WithTimeout(time.Second).Should(BeFalse())

		setPoolState(p, v1.PoolStateDraining)
		Expect(apierrors.IsForbidden(k8s.Delete(ctx, p))).To(BeTrue())
		setPoolState(p, v1.PoolStateDecommissioned)
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		Eventually(gone(p)).Should(BeTrue())
	})

	It("goes with its data when annotated delete-with-data, and a pool that never ran goes at once", func() {
		p := nvmePool(ns)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		setPoolState(p, v1.PoolStateActive)
		update(p, func(p *v1.ServerPool) {
			p.Annotations = map[string]string{v1.AnnotationDeleteWithData: "true"}
		})
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		Eventually(gone(p)).Should(BeTrue())

		fresh := nvmePool(ns)
		fresh.Name = "fresh"
		Expect(k8s.Create(ctx, fresh)).To(Succeed())
		Expect(k8s.Delete(ctx, fresh)).To(Succeed())
		Eventually(gone(fresh)).Should(BeTrue())
	})

	It("keeps running, Degraded with the reason, when the deletion got past the webhook, until its Tenant goes", func() {
		p := nvmePool(ns)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		setPoolState(p, v1.PoolStateActive)
		Eventually(get(&appsv1.StatefulSet{}, ns, "media-nvme")).Should(Not(BeNil()))
		// A namespace being deleted gets past the webhook (its Tenant is
		// deleted with it); envtest runs no namespace controller, so the
		// Tenant stays and the controller has to hold the pool.
		Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		Eventually(poolCondition(p, v1.ConditionDegraded)).Should(Equal("True/" + v1.ReasonDeletionRefused))
		Consistently(gone(p)).WithTimeout(2 * time.Second).Should(BeFalse())
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, key(ns, "media-nvme"), sts)).To(Succeed())
		Expect(sts.DeletionTimestamp.IsZero()).To(BeTrue(), "the pool's servers keep running")

		Expect(k8s.Delete(ctx, &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "media"}})).To(Succeed())
		Eventually(gone(p)).Should(BeTrue())
	})
})

type warningRecorder struct{ into *[]string }

func (w warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	*w.into = append(*w.into, text)
}
