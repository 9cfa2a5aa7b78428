package crd_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/test/testenv"
)

// previousCRDs are the chart's CRDs as of commit 2e37221 (testdata holds
// `git show 2e37221:charts/strata-operator/crds/<file>`): before
// ServerPool spec.decommission and Tenant spec.networkPolicy existed and
// while a user's buckets were optional. A release older than the current
// CRDs, as a cluster upgraded with `helm upgrade` alone keeps them.
const previousCRDs = "testdata/crds-2e37221"

// The objects a user created under the previous CRDs: a tenant with a
// pool of each kind, and one whose user names no buckets (allowed then,
// required now).
const objectsBeforeUpgrade = `
apiVersion: storage.strata.dev/v1alpha1
kind: Tenant
metadata: {name: media}
spec:
  users: [{name: app, secretRef: {name: app-keys}, buckets: [photos]}]
  buckets: [{name: photos, versioning: Enabled}]
---
apiVersion: storage.strata.dev/v1alpha1
kind: ServerPool
metadata: {name: nvme}
spec:
  tenantRef: {name: media}
  servers: 4
  volumesPerServer: 2
  storage: {media: LocalNVMe, storageClassNames: [nvme-local], size: 1Ti}
---
apiVersion: storage.strata.dev/v1alpha1
kind: GatewayPool
metadata: {name: nas}
spec:
  tenantRef: {name: media}
  volume: {claimName: shared-fs}
---
apiVersion: storage.strata.dev/v1alpha1
kind: Tenant
metadata: {name: legacy}
spec:
  users: [{name: app, secretRef: {name: legacy-app-keys}}]
`

// helm upgrade never touches CRDs, so docs/install.md has users apply the
// chart's crds/ with `kubectl apply --server-side --force-conflicts` first.
// This is that upgrade, through the same server-side apply, on an API
// server of its own that starts with the previous CRDs as `helm install`
// created them.
var _ = Describe("upgrading the CRDs from a previous release with server-side apply", Ordered, func() {
	var (
		upgradeEnv *envtest.Environment
		c          client.Client
		ns         string
	)

	BeforeAll(func() {
		upgradeEnv = &envtest.Environment{}
		cfg, err := upgradeEnv.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(upgradeEnv.Stop()).To(Succeed()) })
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
		Expect(v1.AddToScheme(scheme)).To(Succeed())
		c, err = client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		By("creating the previous CRDs as helm install does (a create by field manager helm)")
		for _, crd := range readCRDs(previousCRDs, 3) {
			Expect(c.Create(ctx, crd, client.FieldOwner("helm"))).To(Succeed(), crd.Name)
		}
		waitEstablished(c)
		ns = "upgrade"
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		for _, obj := range decodeAll(objectsBeforeUpgrade) {
			obj.SetNamespace(ns)
			Expect(c.Create(ctx, obj)).To(Succeed(), "%s %s under the previous CRDs", obj.GetKind(), obj.GetName())
		}
		By("the previous CRDs really are older: they prune spec.decommission")
		old := &unstructured.Unstructured{}
		old.SetGroupVersionKind(testenv.GVK("ServerPool"))
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nvme"}, old)).To(Succeed())
		Expect(unstructured.SetNestedField(old.Object, true, "spec", "decommission")).To(Succeed())
		Expect(c.Update(ctx, old)).To(Succeed())
		_, found, _ := unstructured.NestedFieldNoCopy(old.Object, "spec", "decommission")
		Expect(found).To(BeFalse(), "the previous ServerPool CRD already knows spec.decommission: pick an older revision")
	})

	current := func() []*apiextensionsv1.CustomResourceDefinition {
		return readCRDs(filepath.Join(testenv.RepoRoot(), "charts", "strata-operator", "crds"), 5) // BucketClaim and BucketAccess are new
	}
	apply := func(crd *apiextensionsv1.CustomResourceDefinition, opts ...client.ApplyOption) error {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		Expect(err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{Object: u}
		obj.SetAPIVersion("apiextensions.k8s.io/v1")
		obj.SetKind("CustomResourceDefinition")
		unstructured.RemoveNestedField(obj.Object, "status")
		unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
		// kubectl apply --server-side applies as field manager "kubectl".
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), append(opts, client.FieldOwner("kubectl"))...)
	}

	It("conflicts with the fields helm owns unless forced (hence --force-conflicts)", func() {
		var tenants *apiextensionsv1.CustomResourceDefinition
		for _, crd := range current() {
			if crd.Spec.Names.Plural == "tenants" { // changed since the previous release
				tenants = crd
			}
		}
		err := apply(tenants)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "want a conflict, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`conflict with "helm"`))
	})

	It("replaces the previous CRDs when forced, keeping every object readable", func() {
		for _, crd := range current() {
			Expect(apply(crd, client.ForceOwnership)).To(Succeed(), crd.Name)
		}
		waitEstablished(c)
		for _, crd := range current() {
			live := &apiextensionsv1.CustomResourceDefinition{}
			Expect(c.Get(ctx, client.ObjectKey{Name: crd.Name}, live)).To(Succeed())
			Expect(live.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties).
				To(HaveLen(len(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties)), "%s has the current schema", crd.Name)
		}

		By("reading every object through the current Go types")
		tenant := &v1.Tenant{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media"}, tenant)).To(Succeed())
		Expect(tenant.Spec.Users).To(HaveLen(1))
		Expect(tenant.Spec.Buckets[0].Versioning).To(Equal("Enabled"))
		// Defaults of fields new in the current CRDs apply to objects
		// stored before them, when they are read.
		Expect(tenant.Spec.NetworkPolicy.Enabled).To(HaveValue(BeTrue()))
		pool := &v1.ServerPool{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nvme"}, pool)).To(Succeed())
		Expect(pool.Spec.Servers).To(BeEquivalentTo(4))
		Expect(pool.Spec.Decommission).To(BeFalse())
		gw := &v1.GatewayPool{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nas"}, gw)).To(Succeed())
		Expect(gw.Spec.Volume.ClaimName).To(Equal("shared-fs"))
		lists := []client.ObjectList{&v1.TenantList{}, &v1.ServerPoolList{}, &v1.GatewayPoolList{}}
		for _, l := range lists {
			Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		}
		Expect(lists[0].(*v1.TenantList).Items).To(HaveLen(2))
	})

	It("accepts fields new in the current CRDs on the objects made before", func() {
		pool := &v1.ServerPool{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nvme"}, pool)).To(Succeed())
		pool.Spec.Decommission = true
		Expect(c.Update(ctx, pool)).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		Expect(pool.Spec.Decommission).To(BeTrue(), "spec.decommission was pruned")

		tenant := &v1.Tenant{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media"}, tenant)).To(Succeed())
		tenant.Spec.NetworkPolicy.Enabled = new(bool)
		Expect(c.Update(ctx, tenant)).To(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(tenant), tenant)).To(Succeed())
		Expect(tenant.Spec.NetworkPolicy.Enabled).To(HaveValue(BeFalse()))
	})

	It("keeps an object the current CRDs would refuse editable until the offending field changes (validation ratcheting)", func() {
		legacy := &v1.Tenant{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, legacy)).To(Succeed())
		Expect(legacy.Spec.Users[0].Buckets).To(BeEmpty())
		legacy.Spec.Image = "ghcr.io/strata-storage/strata:0.2.0"
		Expect(c.Update(ctx, legacy)).To(Succeed(), "an edit elsewhere in the spec")

		legacy.Spec.Users[0].Policy = "readonly"
		err := c.Update(ctx, legacy)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want the user refused, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.users[0].buckets: Required value"))
		legacy.Spec.Users[0].Buckets = []string{"*"}
		Expect(c.Update(ctx, legacy)).To(Succeed())
	})
})

// readCRDs decodes every CRD file of dir.
func readCRDs(dir string, n int) []*apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).To(HaveLen(n), dir)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(data, crd)).To(Succeed(), f)
		crds = append(crds, crd)
	}
	return crds
}

// decodeAll splits a multi-document YAML into objects.
func decodeAll(docs string) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		obj := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		objs = append(objs, obj)
	}
	return objs
}

func waitEstablished(c client.Client) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		for _, plural := range []string{"tenants", "serverpools", "gatewaypools"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: plural + "." + v1.GroupVersion.Group}, crd)).To(Succeed())
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue &&
					crd.Status.AcceptedNames.Kind != "" {
					established = true
				}
			}
			g.Expect(established).To(BeTrue(), plural)
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
