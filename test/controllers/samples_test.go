package controllers_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/test/testenv"
)

// `kubectl apply -k config/samples` on a cluster with the samples' storage
// classes and labelled nodes: every object appears, and once the workloads
// report ready the tenant is Ready with its buckets.
var _ = Describe("config/samples", func() {
	It("produce the full set of objects and a Ready tenant", func() {
		ns := newNamespace()
		dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
		var kust struct {
			Resources []string `json:"resources"`
		}
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(data, &kust)).To(Succeed())
		for _, f := range kust.Resources {
			data, err := os.ReadFile(filepath.Join(dir, f))
			Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed(), f)
			obj.SetNamespace(ns)
			Expect(k8s.Create(ctx, obj)).To(Succeed(), f)
		}

		By("creating every object")
		for _, name := range []string{"media-media-nvme", "media-media-array"} {
			Eventually(func() error { return k8s.Get(ctx, key(ns, name), &appsv1.StatefulSet{}) }).Should(Succeed(), name)
			Eventually(func() error { return k8s.Get(ctx, key(ns, name), &policyv1.PodDisruptionBudget{}) }).Should(Succeed(), name)
		}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-media-nas"), &appsv1.Deployment{}) }).Should(Succeed())
		Eventually(func() error {
			return k8s.Get(ctx, key(ns, "media-media-nas"), &autoscalingv2.HorizontalPodAutoscaler{})
		}).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-media-nas"), &policyv1.PodDisruptionBudget{}) }).Should(Succeed())
		for _, svc := range []string{"media", "media-hl", "media-media-nas"} {
			Eventually(func() error { return k8s.Get(ctx, key(ns, svc), &corev1.Service{}) }).Should(Succeed(), svc)
		}
		for _, sec := range []string{"media-root-credentials", "media-iam", "media-tls", "media-ca"} {
			Eventually(func() error { return k8s.Get(ctx, key(ns, sec), &corev1.Secret{}) }).Should(Succeed(), sec)
		}
		cm := &corev1.ConfigMap{}
		Eventually(func() (bool, error) {
			err := k8s.Get(ctx, key(ns, "media-topology"), cm)
			return builders.PoolInTopology(cm, "media-nvme") && builders.PoolInTopology(cm, "media-array"), err
		}).Should(BeTrue())
		iam := &corev1.Secret{}
		Expect(k8s.Get(ctx, key(ns, "media-iam"), iam)).To(Succeed())
		Expect(string(iam.Data["iam.json"])).To(ContainSubstring(`"accessKey":"APPSAMPLEACCESSKEY01"`))

		By("reporting Ready once the workloads are")
		markStatefulSetReady(ns, "media-media-nvme")
		markStatefulSetReady(ns, "media-media-array")
		markDeploymentReady(ns, "media-media-nas")
		t := &v1.Tenant{}
		t.Namespace, t.Name = ns, "media"
		Eventually(tenantCondition(t, v1.ConditionReady)).Should(Equal("True/Reconciled"))
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).Should(Equal("True/Reconciled"))
		Expect(t.Status.Phase).To(Equal(v1.TenantReady))
		Expect(t.Status.Pools).To(HaveLen(3))
		Expect(t.Status.FaultTolerance.Domains).To(Equal(int32(1)))
	})
})
