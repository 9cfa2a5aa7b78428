package controllers_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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

type warningRecorder struct{ into *[]string }

func (w warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	*w.into = append(*w.into, text)
}
