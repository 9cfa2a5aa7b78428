package controllers_test

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Small builders for the specs: the samples of config/samples, in a
// namespace.

func tenant(ns string) *v1.Tenant {
	return &v1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "media"},
		Spec: v1.TenantSpec{
			Buckets: []v1.BucketSpec{{Name: "photos", Versioning: "Enabled"}},
		},
	}
}

func nvmePool(ns string) *v1.ServerPool {
	return &v1.ServerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nvme"},
		Spec: v1.ServerPoolSpec{
			TenantRef:        v1.TenantReference{Name: "media"},
			Servers:          4,
			VolumesPerServer: 4,
			Storage: v1.StorageSpec{
				Media: v1.MediaLocalNVMe, StorageClassNames: []string{"nvme-local"}, Size: resource.MustParse("100Gi"),
			},
			PodPlacement: v1.PodPlacement{
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi"),
				}},
				NodeSelector: map[string]string{"node-role.strata.dev/storage": "true"},
			},
		},
	}
}

func arrayPool(ns string) *v1.ServerPool {
	p := nvmePool(ns)
	p.Name = "array"
	p.Spec.Storage.Media = v1.MediaArrayLUN
	p.Spec.Storage.StorageClassNames = []string{"array-a-luns", "array-b-luns"}
	return p
}

func gatewayPool(ns string) *v1.GatewayPool {
	return &v1.GatewayPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nas"},
		Spec: v1.GatewayPoolSpec{
			TenantRef: v1.TenantReference{Name: "media"},
			Replicas:  ptr.To[int32](2),
			Autoscaling: &v1.AutoscalingSpec{
				MinReplicas: 2, MaxReplicas: 8, TargetCPUUtilizationPercentage: 70,
			},
			Volume: v1.GatewayVolume{StorageClassName: "cephfs", Size: ptr.To(resource.MustParse("1Ti"))},
		},
	}
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// get fetches an object for Eventually.
func get[T client.Object](obj T, ns, name string) func() (T, error) {
	return func() (T, error) {
		err := k8s.Get(ctx, key(ns, name), obj)
		return obj, err
	}
}

// condition returns a condition's status and reason for Eventually.
func condition(obj client.Object, conds func() []metav1.Condition, typ string) func() (string, error) {
	return func() (string, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return "", err
		}
		c := meta.FindStatusCondition(conds(), typ)
		if c == nil {
			return "", nil
		}
		return string(c.Status) + "/" + c.Reason, nil
	}
}

func tenantCondition(t *v1.Tenant, typ string) func() (string, error) {
	return condition(t, func() []metav1.Condition { return t.Status.Conditions }, typ)
}

func poolCondition(p *v1.ServerPool, typ string) func() (string, error) {
	return condition(p, func() []metav1.Condition { return p.Status.Conditions }, typ)
}

func gatewayCondition(g *v1.GatewayPool, typ string) func() (string, error) {
	return condition(g, func() []metav1.Condition { return g.Status.Conditions }, typ)
}

// markReady sets a StatefulSet's status as its controller would once all
// pods run the current revision.
func markStatefulSetReady(ns, name string) {
	sts := &appsv1.StatefulSet{}
	Eventually(get(sts, ns, name)).Should(Not(BeNil()))
	EventuallyWithOffset(1, func() error {
		if err := k8s.Get(ctx, key(ns, name), sts); err != nil {
			return err
		}
		n := *sts.Spec.Replicas
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		}
		return k8s.Status().Update(ctx, sts)
	}).Should(Succeed())
}

func markDeploymentReady(ns, name string) {
	d := &appsv1.Deployment{}
	EventuallyWithOffset(1, func() error {
		if err := k8s.Get(ctx, key(ns, name), d); err != nil {
			return err
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, ReadyReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
		}
		return k8s.Status().Update(ctx, d)
	}).Should(Succeed())
}

func container(spec corev1.PodSpec) corev1.Container {
	ExpectWithOffset(1, spec.Containers).To(HaveLen(1))
	return spec.Containers[0]
}

// update re-reads obj and applies change until the write does not conflict
// with the operator's own writes.
func update[T client.Object](obj T, change func(T)) {
	EventuallyWithOffset(1, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return k8s.Update(ctx, obj)
	}).Should(Succeed())
}

func metav1ObjectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
