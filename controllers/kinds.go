package controllers

import (
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/utils/ptr"
)

// What the operator owns of each kind it writes. Everything else (status,
// fields defaulted by the API server or set by other controllers, extra
// labels and annotations) is left alone.

var secretOps = kindOps[*corev1.Secret]{
	same: func(l, d *corev1.Secret) bool {
		return derivative(d.Data, l.Data) && len(d.Data) == len(l.Data) && l.Type == d.Type
	},
	merge: func(l, d *corev1.Secret) { l.Data = d.Data },
}

var configMapOps = kindOps[*corev1.ConfigMap]{
	same:  func(l, d *corev1.ConfigMap) bool { return derivative(d.Data, l.Data) && len(d.Data) == len(l.Data) },
	merge: func(l, d *corev1.ConfigMap) { l.Data = d.Data },
}

var serviceOps = kindOps[*corev1.Service]{
	same: func(l, d *corev1.Service) bool {
		return l.Spec.Type == d.Spec.Type && derivative(d.Spec.Selector, l.Spec.Selector) &&
			len(d.Spec.Ports) == len(l.Spec.Ports) && derivative(d.Spec.Ports, l.Spec.Ports) &&
			l.Spec.PublishNotReadyAddresses == d.Spec.PublishNotReadyAddresses
	},
	merge: func(l, d *corev1.Service) {
		// Keep allocated node ports across updates.
		ports := d.Spec.Ports
		for i := range ports {
			for _, lp := range l.Spec.Ports {
				if lp.Name == ports[i].Name && ports[i].NodePort == 0 && d.Spec.Type != corev1.ServiceTypeClusterIP {
					ports[i].NodePort = lp.NodePort
				}
			}
		}
		l.Spec.Type = d.Spec.Type
		l.Spec.Selector = d.Spec.Selector
		l.Spec.Ports = ports
		l.Spec.PublishNotReadyAddresses = d.Spec.PublishNotReadyAddresses
	},
}

var networkPolicyOps = kindOps[*networkingv1.NetworkPolicy]{
	same:  func(l, d *networkingv1.NetworkPolicy) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *networkingv1.NetworkPolicy) { l.Spec = d.Spec },
}

var statefulSetOps = kindOps[*appsv1.StatefulSet]{
	same: func(l, d *appsv1.StatefulSet) bool {
		return derivative(d.Spec.Replicas, l.Spec.Replicas) && sameTemplate(l, d) &&
			l.Spec.UpdateStrategy.Type == d.Spec.UpdateStrategy.Type
	},
	// Selector, service name, pod management and claim templates are
	// immutable; a changed drive size is applied to the claims themselves.
	// The roll-out partition belongs to the roll-out step (rollout.go): a
	// changed template of running servers starts with every server held
	// back, and the step lets them go one at a time through the health gate.
	merge: func(l, d *appsv1.StatefulSet) {
		partition := rolloutPartition(l)
		changed := !sameTemplate(l, d)
		l.Spec.Replicas = d.Spec.Replicas
		l.Spec.Template = d.Spec.Template
		l.Spec.UpdateStrategy = d.Spec.UpdateStrategy
		l.Spec.PersistentVolumeClaimRetentionPolicy = d.Spec.PersistentVolumeClaimRetentionPolicy
		if ru := l.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			switch {
			case changed && l.Status.Replicas > 0:
				ru.Partition = ptr.To(*d.Spec.Replicas)
			default:
				ru.Partition = ptr.To(min(partition, *d.Spec.Replicas))
			}
		}
	},
}

func sameTemplate(l, d *appsv1.StatefulSet) bool {
	return derivative(d.Spec.Template, l.Spec.Template) &&
		len(d.Spec.Template.Spec.Containers) == len(l.Spec.Template.Spec.Containers)
}

// rolloutPartition is the live partition (0 when none).
func rolloutPartition(s *appsv1.StatefulSet) int32 {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}

var deploymentOps = kindOps[*appsv1.Deployment]{
	same: func(l, d *appsv1.Deployment) bool {
		return (d.Spec.Replicas == nil || derivative(d.Spec.Replicas, l.Spec.Replicas)) &&
			derivative(d.Spec.Template, l.Spec.Template) &&
			len(d.Spec.Template.Spec.Containers) == len(l.Spec.Template.Spec.Containers) &&
			derivative(d.Spec.Strategy, l.Spec.Strategy)
	},
	// A nil desired replica count (autoscaling) leaves the live count to
	// the HorizontalPodAutoscaler.
	merge: func(l, d *appsv1.Deployment) {
		if d.Spec.Replicas != nil {
			l.Spec.Replicas = d.Spec.Replicas
		}
		l.Spec.Template = d.Spec.Template
		l.Spec.Strategy = d.Spec.Strategy
	},
}

// autoscaledDeploymentOps hands d's replica count to a
// HorizontalPodAutoscaler: d is created with it and never updated to it.
func autoscaledDeploymentOps(d *appsv1.Deployment) kindOps[*appsv1.Deployment] {
	ops := deploymentOps
	start := d.Spec.Replicas
	d.Spec.Replicas = nil
	ops.create = func(d *appsv1.Deployment) { d.Spec.Replicas = start }
	return ops
}

var pdbOps = kindOps[*policyv1.PodDisruptionBudget]{
	same:  func(l, d *policyv1.PodDisruptionBudget) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *policyv1.PodDisruptionBudget) { l.Spec = d.Spec },
}

var hpaOps = kindOps[*autoscalingv2.HorizontalPodAutoscaler]{
	same:  func(l, d *autoscalingv2.HorizontalPodAutoscaler) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *autoscalingv2.HorizontalPodAutoscaler) { l.Spec = d.Spec },
}

var certificateOps = kindOps[*cmv1.Certificate]{
	same:  func(l, d *cmv1.Certificate) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *cmv1.Certificate) { l.Spec = d.Spec },
}

var issuerOps = kindOps[*cmv1.Issuer]{
	same:  func(l, d *cmv1.Issuer) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *cmv1.Issuer) { l.Spec = d.Spec },
}

var serviceMonitorOps = kindOps[*monitoringv1.ServiceMonitor]{
	same:  func(l, d *monitoringv1.ServiceMonitor) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *monitoringv1.ServiceMonitor) { l.Spec = d.Spec },
}

var prometheusRuleOps = kindOps[*monitoringv1.PrometheusRule]{
	same:  func(l, d *monitoringv1.PrometheusRule) bool { return derivative(d.Spec, l.Spec) },
	merge: func(l, d *monitoringv1.PrometheusRule) { l.Spec = d.Spec },
}
