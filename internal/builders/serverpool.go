package builders

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/placement"
)

// ServerTerminationGrace lets a server finish in-flight requests and flush
// before it stops.
const ServerTerminationGrace = 120

// ServerStatefulSet is one StatefulSet of a ServerPool: group g of its
// placement, one claim template per drive index, `strata server` reading the
// tenant's topology file.
func ServerStatefulSet(t *v1.Tenant, p *v1.ServerPool, g placement.Group, claims []placement.Claim, e Engine) *appsv1.StatefulSet {
	name := StatefulSetName(t.Name, p.Name, g.Suffix)
	selector := GroupSelector(t.Name, p.Name, g.Suffix)
	labels := merge(TenantLabels(t.Name), selector)

	var dataMounts []corev1.VolumeMount
	var templates []corev1.PersistentVolumeClaim
	for _, c := range claims {
		dataMounts = append(dataMounts, corev1.VolumeMount{Name: c.Name, MountPath: "/" + c.Name})
		pvc := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: merge(TenantLabels(t.Name), PoolSelector(t.Name, p.Name, ComponentServer))},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: p.Spec.Storage.Size}},
			},
		}
		if c.StorageClassName != "" {
			pvc.Spec.StorageClassName = ptr.To(c.StorageClassName)
		}
		templates = append(templates, pvc)
	}
	vols, _ := e.volumes()
	vols = append(vols, corev1.Volume{Name: "topology", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: TopologyConfigMapName(t.Name)},
	}}})
	mounts := make([]corev1.VolumeMount, 0, len(dataMounts)+1)
	mounts = append(mounts, dataMounts...)
	mounts = append(mounts, corev1.VolumeMount{Name: "topology", MountPath: TopologyMountPath, ReadOnly: true})
	args := []string{"server", "--address", fmt.Sprintf(":%d", S3Port), "--topology", TopologyFile}
	if e.TLSSecret == "" {
		// tls.mode Disabled: the user chose plain internode traffic too.
		args = append(args, "--insecure-internode", "--admin-over-http")
	}
	keyVols, keyMounts, keyEnv := e.encryptionKeys()
	vols = append(vols, keyVols...)
	mounts = append(mounts, keyMounts...)
	if t.Spec.WebIdentity.ServiceAccounts {
		vols = append(vols, apiAccessVolume())
		mounts = append(mounts, corev1.VolumeMount{Name: apiAccessVolumeName, MountPath: APIAccessMountPath, ReadOnly: true})
	}
	args = append(args, ConsoleArgs(t)...)
	ssoArgs, ssoVols, ssoMounts := ConsoleOIDC(t)
	args = append(args, ssoArgs...)
	vols = append(vols, ssoVols...)
	mounts = append(mounts, ssoMounts...)
	c := e.container(args, mounts, p.Spec.PodPlacement, ServerSizing)
	c.Ports = append(c.Ports, consoleContainerPort(t)...)
	c.Env = append(c.Env, keyEnv...)
	if env, ok := oidcAudiencesEnv(t.Spec.WebIdentity.Providers); ok {
		c.Env = append(c.Env, env)
	}

	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(g.Replicas)),
			ServiceName:         HeadlessServiceName(t.Name),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy:      serverUpdateStrategy(t),
			// Claims outlive the StatefulSet; the pool's finalizer deletes
			// them only under deletionPolicy Delete.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: templates,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: e.podAnnotations()},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{c},
					Volumes:                       vols,
					SecurityContext:               podSecurity(),
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](ServerTerminationGrace),
					ImagePullSecrets:              e.PullSecrets,
					NodeSelector:                  p.Spec.NodeSelector,
					Tolerations:                   p.Spec.Tolerations,
					PriorityClassName:             p.Spec.PriorityClassName,
					Affinity:                      g.Affinity,
					TopologySpreadConstraints:     g.TopologySpreadConstraints,
				},
			},
		},
	}
}

// EnvOIDCAudiences is engine/server.EnvOIDCAudiences: the client IDs the
// tenant accepts per issuer (an IAM account's provider of that issuer
// listing no client IDs of its own accepts these).
const EnvOIDCAudiences = "STRATA_OIDC_AUDIENCES"

// oidcAudiencesEnv is spec.webIdentity.providers as the servers read them.
func oidcAudiencesEnv(providers []v1.OIDCProviderSpec) (corev1.EnvVar, bool) {
	if len(providers) == 0 {
		return corev1.EnvVar{}, false
	}
	m := make(map[string][]string, len(providers))
	for _, p := range providers {
		m[p.URL] = p.ClientIDs
	}
	data, _ := json.Marshal(m) // keys sorted: the pod template stays the same
	return corev1.EnvVar{Name: EnvOIDCAudiences, Value: string(data)}, true
}

// APIAccessMountPath is where a pod's ServiceAccount token and the
// cluster's CA are, as the kubelet's automount places them.
const APIAccessMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

const apiAccessVolumeName = "kube-api-access"

// apiAccessVolume is the token and CA a server reads the cluster's token
// issuer with (its discovery and keys are served to authenticated
// ServiceAccounts only), mounted only for tenants with
// spec.webIdentity.serviceAccounts: the servers' pods otherwise hold no
// token at all (the automount stays off).
func apiAccessVolume() corev1.Volume {
	return corev1.Volume{Name: apiAccessVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		},
	}}}
}

// ServerPDB lets voluntary disruptions (drains, upgrades of nodes) take down
// at most as many servers as the pool's layout survives with writes
// working; 0 when it survives none.
func ServerPDB(t *v1.Tenant, p *v1.ServerPool, writeServers int) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: ServerPoolName(t.Name, p.Name), Namespace: p.Namespace,
			Labels: merge(TenantLabels(t.Name), PoolSelector(t.Name, p.Name, ComponentServer)),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(max(writeServers, 0)))),
			Selector:       &metav1.LabelSelector{MatchLabels: PoolSelector(t.Name, p.Name, ComponentServer)},
		},
	}
}

// serverUpdateStrategy: Rolling replaces one server at a time (highest
// ordinal first); OnDelete changes the template only, and pods take it when
// someone deletes them.
func serverUpdateStrategy(t *v1.Tenant) appsv1.StatefulSetUpdateStrategy {
	if t.Spec.Upgrade.Strategy == v1.UpgradeOnDelete {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	return appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
	}
}
