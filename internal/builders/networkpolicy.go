package builders

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// InternodePort is the servers' internode port: the engine's default
// (`strata server --internode-port`), which the operator never changes.
const InternodePort = 9001

// NetworkPolicyName names a tenant's server NetworkPolicy.
func NetworkPolicyName(t *v1.Tenant) string { return t.Name + "-servers" }

// NetworkPolicyEnabled reports whether the tenant wants its NetworkPolicy
// (the default).
func NetworkPolicyEnabled(t *v1.Tenant) bool {
	return t.Spec.NetworkPolicy.Enabled == nil || *t.Spec.NetworkPolicy.Enabled
}

// ServerNetworkPolicy admits, to every server pod of the tenant, the
// internode port from the tenant's own server pods only and the S3 port
// from spec.networkPolicy.s3From (anywhere when empty). Other ports are
// closed to ingress.
func ServerNetworkPolicy(t *v1.Tenant) *networkingv1.NetworkPolicy {
	port := func(p int) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(int32(p)))}}
	}
	servers := metav1.LabelSelector{MatchLabels: ServerSelector(t.Name)}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName(t), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: servers,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: port(S3Port), From: t.Spec.NetworkPolicy.S3From},
				{Ports: port(InternodePort), From: []networkingv1.NetworkPolicyPeer{{PodSelector: &servers}}},
			},
		},
	}
	if t.Spec.Console.Enabled {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: port(ConsolePort), From: t.Spec.NetworkPolicy.S3From})
	}
	return np
}
