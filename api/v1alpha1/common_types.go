package v1alpha1

import corev1 "k8s.io/api/core/v1"

// TenantReference names the Tenant a pool belongs to. The Tenant must live in
// the pool's namespace.
type TenantReference struct {
	// name of the Tenant in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
}

// SecretReference names a Secret in the same namespace as the object that
// refers to it.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// PodPlacement is the scheduling and sizing every pool accepts for its pods.
type PodPlacement struct {
	// resources are the CPU and memory requests and limits of each pod's
	// storage container. What is left out is filled in: a server requests
	// 1 CPU and 2Gi and is limited to 4Gi; a gateway requests 500m and
	// 512Mi and is limited to 2Gi (a limit at least the memory request; no
	// CPU limit unless given). The engine sizes itself from its memory
	// limit: the Go runtime's soft limit at 80% of it, and how many
	// requests move large objects at once.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector restricts the pool's pods to nodes with these labels, in
	// addition to the placement the operator computes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the pool's pods run on tainted nodes (for example
	// storage nodes reserved for Strata).
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// priorityClassName of the pool's pods. Storage pods usually deserve a
	// high priority so they are not preempted by ordinary workloads.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// FaultTolerance says how many failures of each kind a pool (or a tenant, its
// weakest pool) survives with reads and writes still working.
type FaultTolerance struct {
	// drives that may fail at once anywhere in the pool.
	// +optional
	Drives int32 `json:"drives"`

	// servers (pods) that may be down at once.
	// +optional
	Servers int32 `json:"servers"`

	// domains (failure domains: nodes, racks, zones, enclosures) that may be
	// lost at once.
	// +optional
	Domains int32 `json:"domains"`

	// backends (storage enclosures or arrays: one per storage class of an
	// NVMeoF or ArrayLUN pool) that may be lost at once. Absent for
	// LocalNVMe, whose drives fail with their node.
	// +optional
	Backends *int32 `json:"backends,omitempty"`
}
