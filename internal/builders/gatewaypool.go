package builders

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// GatewayDataPath is where the shared filesystem is mounted.
const GatewayDataPath = "/data"

// GatewayClaim is the claim name a GatewayPool mounts.
func GatewayClaim(t *v1.Tenant, g *v1.GatewayPool) string {
	if g.Spec.Volume.ClaimName != "" {
		return g.Spec.Volume.ClaimName
	}
	return GatewayClaimName(t.Name, g.Name)
}

// GatewayPVC is the ReadWriteMany claim created for a GatewayPool without
// volume.claimName; nil when the pool names an existing claim. Like server
// drives, it carries no owner reference: deletionPolicy decides its fate.
func GatewayPVC(t *v1.Tenant, g *v1.GatewayPool) *corev1.PersistentVolumeClaim {
	if g.Spec.Volume.ClaimName != "" || g.Spec.Volume.Size == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayClaimName(t.Name, g.Name), Namespace: g.Namespace,
			Labels: merge(TenantLabels(t.Name), PoolSelector(t.Name, g.Name, ComponentGateway)),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: ptr.To(g.Spec.Volume.StorageClassName),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *g.Spec.Volume.Size}},
		},
	}
}

// GatewayDeployment runs `strata gateway` on the shared claim. Rollouts
// never drop below the current count (maxUnavailable 0). With autoscaling
// the replica count is the HPA's: the reconciler sets it only on create.
func GatewayDeployment(t *v1.Tenant, g *v1.GatewayPool, e Engine) *appsv1.Deployment {
	selector := PoolSelector(t.Name, g.Name, ComponentGateway)
	labels := merge(TenantLabels(t.Name), selector)
	args := []string{"gateway", "--address", fmt.Sprintf(":%d", S3Port), "--root", GatewayDataPath}
	if g.Spec.Posix.Metadata == v1.PosixSidecar {
		args = append(args, "--posix-metadata", string(v1.PosixSidecar))
	}
	if e.TLSSecret == "" {
		args = append(args, "--admin-over-http") // tls.mode Disabled
	}
	args = append(args, ConsoleArgs(t)...)
	c := e.container(args, []corev1.VolumeMount{{Name: "data", MountPath: GatewayDataPath}}, g.Spec.PodPlacement, GatewaySizing)
	c.Ports = append(c.Ports, consoleContainerPort(t)...)
	vols, _ := e.volumes()
	vols = append(vols, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: GatewayClaim(t, g)},
	}})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayName(t.Name, g.Name), Namespace: g.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: GatewayReplicas(g),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: e.podAnnotations()},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{c},
					Volumes:                       vols,
					SecurityContext:               podSecurity(),
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](60),
					ImagePullSecrets:              e.PullSecrets,
					NodeSelector:                  g.Spec.NodeSelector,
					Tolerations:                   g.Spec.Tolerations,
					PriorityClassName:             g.Spec.PriorityClassName,
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
					}},
				},
			},
		},
	}
}

// GatewayReplicas is the starting replica count: spec.replicas, else the
// autoscaler's minimum, else 2.
func GatewayReplicas(g *v1.GatewayPool) *int32 {
	switch {
	case g.Spec.Replicas != nil:
		return ptr.To(*g.Spec.Replicas)
	case g.Spec.Autoscaling != nil && g.Spec.Autoscaling.MinReplicas > 0:
		return ptr.To(g.Spec.Autoscaling.MinReplicas)
	}
	return ptr.To[int32](2)
}

// GatewayHPA scales the gateways on CPU; nil without spec.autoscaling.
func GatewayHPA(t *v1.Tenant, g *v1.GatewayPool) *autoscalingv2.HorizontalPodAutoscaler {
	a := g.Spec.Autoscaling
	if a == nil {
		return nil
	}
	minReplicas := a.MinReplicas
	if minReplicas == 0 {
		minReplicas = 2
	}
	target := a.TargetCPUUtilizationPercentage
	if target == 0 {
		target = 70
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayName(t.Name, g.Name), Namespace: g.Namespace,
			Labels: merge(TenantLabels(t.Name), PoolSelector(t.Name, g.Name, ComponentGateway)),
		},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: GatewayName(t.Name, g.Name)},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    a.MaxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(target)},
				},
			}},
		},
	}
}

// GatewayPDB keeps all but one gateway through voluntary disruptions.
func GatewayPDB(t *v1.Tenant, g *v1.GatewayPool) *policyv1.PodDisruptionBudget {
	selector := PoolSelector(t.Name, g.Name, ComponentGateway)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayName(t.Name, g.Name), Namespace: g.Namespace, Labels: merge(TenantLabels(t.Name), selector)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}
