package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayPoolSpec describes stateless strata gateways exporting one shared
// POSIX filesystem (a ReadWriteMany volume: NFS, CephFS, BeeGFS, a cluster
// filesystem on array LUNs) as S3, under the tenant's credentials and
// certificates. Any replica serves any request.
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.replicas) || (self.replicas >= self.autoscaling.minReplicas && self.replicas <= self.autoscaling.maxReplicas)",message="replicas must lie between autoscaling.minReplicas and autoscaling.maxReplicas (or be omitted when autoscaling is set)"
type GatewayPoolSpec struct {
	// tenantRef names the Tenant whose credentials and certificates the
	// gateways use. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantRef is immutable: a pool cannot move between tenants"
	TenantRef TenantReference `json:"tenantRef"`

	// replicas is the number of gateway pods. With autoscaling set the
	// HorizontalPodAutoscaler owns the count and this field is only the
	// starting point.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling runs a HorizontalPodAutoscaler on CPU utilisation.
	// +optional
	Autoscaling *AutoscalingSpec `json:"autoscaling,omitempty"`

	// volume is the shared filesystem the gateways export. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volume is immutable: the gateways' data lives on it; create a new GatewayPool for another filesystem"
	Volume GatewayVolume `json:"volume"`

	// posix configures how S3 metadata is kept on the filesystem.
	// +optional
	// +kubebuilder:default={metadata: xattr}
	Posix PosixSpec `json:"posix,omitempty"`

	PodPlacement `json:",inline"`
}

// AutoscalingSpec bounds a GatewayPool's HorizontalPodAutoscaler.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas"
type AutoscalingSpec struct {
	// minReplicas is the floor of the autoscaler.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	MinReplicas int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the ceiling of the autoscaler.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilizationPercentage is the average CPU use, in percent of
	// the request, the autoscaler aims for.
	// +optional
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercentage int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// GatewayVolume is either an existing ReadWriteMany claim or a template for
// one the operator creates.
// +kubebuilder:validation:XValidation:rule="has(self.claimName) != (has(self.storageClassName) || has(self.size))",message="volume needs either claimName (an existing ReadWriteMany PVC) or storageClassName and size (a PVC the operator creates), not both"
// +kubebuilder:validation:XValidation:rule="has(self.claimName) || (has(self.storageClassName) && has(self.size))",message="a volume the operator creates needs both storageClassName and size"
type GatewayVolume struct {
	// claimName of an existing ReadWriteMany PersistentVolumeClaim.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// storageClassName of a ReadWriteMany class for a claim the operator
	// creates.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	StorageClassName string `json:"storageClassName,omitempty"`

	// size of a claim the operator creates.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="volume.size must be larger than zero, for example 10Ti"
	Size *resource.Quantity `json:"size,omitempty"`
}

// PosixMetadata says where object metadata is kept on the filesystem.
// +kubebuilder:validation:Enum=xattr;sidecar
type PosixMetadata string

const (
	// PosixXattr keeps metadata in user extended attributes.
	PosixXattr PosixMetadata = "xattr"
	// PosixSidecar keeps metadata in hidden sidecar files, for filesystems
	// without user xattrs.
	PosixSidecar PosixMetadata = "sidecar"
)

// PosixSpec configures the gateway's use of the filesystem.
type PosixSpec struct {
	// metadata storage: xattr, or sidecar for filesystems without user
	// extended attributes.
	// +optional
	// +kubebuilder:default=xattr
	Metadata PosixMetadata `json:"metadata,omitempty"`
}

// GatewayPoolStatus is what the operator observed of a gateway pool.
type GatewayPoolStatus struct {
	// conditions: Ready, Progressing, Degraded, TenantFound.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// replicas is the number of gateway pods (the scale subresource reads it).
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas counts ready gateway pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// selector is the label selector of the gateway pods, for the scale
	// subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// endpoint is the in-cluster URL of the pool's Service.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// GatewayPool is a set of stateless strata gateways exporting a shared
// filesystem as S3 for the Tenant named in spec.tenantRef.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=gwpool,categories=strata
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantRef.name`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired gateway pool.
	// +required
	Spec GatewayPoolSpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status GatewayPoolStatus `json:"status,omitempty"`
}

// GatewayPoolList is a list of GatewayPools.
// +kubebuilder:object:root=true
type GatewayPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayPool `json:"items"`
}
