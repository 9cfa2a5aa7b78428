package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServerPoolSpec describes servers x volumesPerServer drives of the
// erasure-coded strata server. All ServerPools of a tenant form one
// namespace: new objects go to the pool with the most free space, reads find
// an object wherever it is. Adding a ServerPool is how a tenant grows; a
// pool's shape never changes after creation.
// +kubebuilder:validation:XValidation:rule="self.servers * self.volumesPerServer >= 4",message="a ServerPool needs at least 4 drives (servers x volumesPerServer) to erasure-code objects"
// +kubebuilder:validation:XValidation:rule="self.erasure.setSize == 0 || (self.servers * self.volumesPerServer) % self.erasure.setSize == 0",message="erasure.setSize must divide the pool's drive count (servers x volumesPerServer) so every set is full; use 0 to let the operator choose"
// +kubebuilder:validation:XValidation:rule="self.erasure.setSize == 0 || self.erasure.setSize <= self.servers * self.volumesPerServer",message="erasure.setSize cannot exceed the pool's drive count (servers x volumesPerServer)"
// +kubebuilder:validation:XValidation:rule="!has(self.topology.domains) || size(self.topology.domains) == 0 || self.servers % size(self.topology.domains) == 0",message="servers must be a multiple of the number of topology.domains so every domain runs the same number of servers"
// +kubebuilder:validation:XValidation:rule="!has(self.topology.domains) || size(self.topology.domains) == 0 || self.topology.tolerate.domains < size(self.topology.domains)",message="topology.tolerate.domains must be smaller than the number of topology.domains: a pool cannot survive losing all its domains"
// +kubebuilder:validation:XValidation:rule="self.servers > 1 || (has(self.topology.domains) && size(self.topology.domains) > 0) || self.topology.tolerate.domains == 0",message="a single-server pool has one failure domain and cannot survive losing it: set topology.tolerate.domains to 0 or use more servers"
// +kubebuilder:validation:XValidation:rule="!has(self.topology.tolerate.drives) || self.topology.tolerate.drives < self.servers * self.volumesPerServer",message="topology.tolerate.drives must be smaller than the pool's drive count"
// +kubebuilder:validation:XValidation:rule="!has(self.topology.tolerate.servers) || self.topology.tolerate.servers < self.servers",message="topology.tolerate.servers must be smaller than servers: a pool cannot survive losing all its servers"
type ServerPoolSpec struct {
	// tenantRef names the Tenant this pool serves. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantRef is immutable: a pool cannot move between tenants"
	TenantRef TenantReference `json:"tenantRef"`

	// servers is the number of server pods. Immutable: grow a tenant by
	// adding a ServerPool.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="servers is immutable: add another ServerPool to the tenant to grow it"
	Servers int32 `json:"servers"`

	// volumesPerServer is the number of drives (PersistentVolumeClaims) each
	// server mounts. Immutable.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumesPerServer is immutable: add another ServerPool to the tenant to grow it"
	VolumesPerServer int32 `json:"volumesPerServer"`

	// erasure fixes the erasure layout. Zero values let the operator derive
	// it from the media and drive count. Immutable: objects are encoded with
	// it once the pool is formatted.
	// +optional
	// +kubebuilder:default={setSize: 0, parity: 0}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="erasure is immutable: the pool's data is already encoded with this layout"
	Erasure ErasureSpec `json:"erasure,omitempty"`

	// storage describes the drives.
	// +required
	Storage StorageSpec `json:"storage"`

	// topology says which failures the pool must survive and how its servers
	// are spread across failure domains.
	// +optional
	// +kubebuilder:default={failureDomainKey: "kubernetes.io/hostname", tolerate: {domains: 1}}
	Topology TopologySpec `json:"topology,omitempty"`

	// decommission drains the pool: the engine stops placing new objects on
	// it and moves its objects (every version, metadata intact) to the
	// tenant's other pools. status.poolState turns Draining, then
	// Decommissioned; the ServerPool can then be deleted without losing
	// anything. Setting it back to false before the drain ends cancels it
	// (what moved stays moved). Refused for a tenant's only pool that takes
	// new objects.
	// +optional
	Decommission bool `json:"decommission,omitempty"`

	PodPlacement `json:",inline"`
}

// ErasureSpec is a pool's erasure layout.
// +kubebuilder:validation:XValidation:rule="self.setSize == 0 || self.parity <= self.setSize / 2",message="erasure.parity may be at most half of erasure.setSize (more parity than data cannot keep write quorum)"
type ErasureSpec struct {
	// setSize is the number of drives in one erasure set (2-16). Every object
	// is striped over one set. 0 lets the operator choose the largest size
	// that stripes evenly over the servers.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="self == 0 || (self >= 2 && self <= 16)",message="erasure.setSize must be 0 (automatic) or between 2 and 16"
	SetSize int32 `json:"setSize"`

	// parity is the number of parity shards per object (drives of a set that
	// may fail). 0 uses the media default: about a quarter of the set, at
	// least 2, for LocalNVMe and NVMeoF; 1 for ArrayLUN, whose LUNs are
	// already RAID/DDP-protected.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	Parity int32 `json:"parity"`
}

// Media is the kind of block storage behind a pool's drives.
// +kubebuilder:validation:Enum=LocalNVMe;NVMeoF;ArrayLUN
type Media string

const (
	// MediaLocalNVMe: drives inside the server's node (local PVs). A node is
	// a failure domain; one server per node.
	MediaLocalNVMe Media = "LocalNVMe"
	// MediaNVMeoF: namespaces of a JBOF reached over NVMe-oF. An enclosure is
	// usually a failure domain.
	MediaNVMeoF Media = "NVMeoF"
	// MediaArrayLUN: LUNs of a RAID/DDP-protected array exposed by a CSI
	// driver. The array protects against drive failure already.
	MediaArrayLUN Media = "ArrayLUN"
)

// StorageSpec describes a pool's drives.
type StorageSpec struct {
	// media is the kind of storage; it sets parity defaults and placement
	// rules. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.media is immutable: create a new ServerPool for other media"
	Media Media `json:"media"`

	// storageClassNames provision the drives. With several classes, drive i
	// of every server uses class i mod n (one class per enclosure or array,
	// say). Immutable: StatefulSet volume templates cannot change.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.storageClassNames is immutable: create a new ServerPool for other classes"
	StorageClassNames []string `json:"storageClassNames"`

	// size of each drive. It may grow (when the storage classes allow
	// volume expansion) but never shrink.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="storage.size must be larger than zero, for example 1Ti"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="storage.size can grow but never shrink"
	Size resource.Quantity `json:"size"`
}

// TopologySpec spreads a pool over failure domains.
type TopologySpec struct {
	// failureDomainKey is the node label whose values are failure domains:
	// kubernetes.io/hostname, topology.kubernetes.io/zone, or a rack or
	// enclosure label of your own.
	// +optional
	// +kubebuilder:default="kubernetes.io/hostname"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	FailureDomainKey string `json:"failureDomainKey,omitempty"`

	// domains, when set, lists the failure domains explicitly: the operator
	// runs one StatefulSet per domain, pinned to nodes whose
	// failureDomainKey label has the domain's value, so every server's domain
	// is known. Empty spreads servers with topology spread constraints.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="topology.domains is immutable: servers and their data are already placed in these domains"
	Domains []FailureDomain `json:"domains,omitempty"`

	// tolerate is the failure the pool must survive with reads and writes
	// working. The operator refuses a layout that cannot give it.
	// +optional
	// +kubebuilder:default={domains: 1}
	Tolerate ToleranceSpec `json:"tolerate,omitempty"`
}

// FailureDomain is one explicit failure domain of a pool.
type FailureDomain struct {
	// name of the domain, used in the names of its StatefulSet and pods.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// value of the failureDomainKey label on the domain's nodes; defaults to
	// name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
}

// ToleranceSpec is a failure a pool must survive.
type ToleranceSpec struct {
	// domains that may be lost at once: 1 (the default) keeps a pool
	// serving with one node (or rack, zone, enclosure) down; 0 accepts that
	// losing one stops it.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	Domains *int32 `json:"domains,omitempty"`

	// servers that may be down at once (beyond what domains implies).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	Servers int32 `json:"servers,omitempty"`

	// drives that may fail at once anywhere in the pool.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=256
	Drives int32 `json:"drives,omitempty"`
}

// ServerPoolStatus is what the operator observed of a pool.
type ServerPoolStatus struct {
	// conditions: Ready, Progressing, Degraded, TenantFound, StorageReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// readyServers counts server pods that are ready.
	// +optional
	ReadyServers int32 `json:"readyServers"`

	// updatedServers counts server pods running the tenant's target image.
	// +optional
	UpdatedServers int32 `json:"updatedServers,omitempty"`

	// drives counts drives by state, read from the engine's admin API.
	// +optional
	Drives DriveCounts `json:"drives,omitempty"`

	// poolState is the engine's state of this pool, read from its admin
	// API: Active (takes new objects), Draining (its objects are moving to
	// the tenant's other pools) or Decommissioned (empty: deleting the
	// ServerPool loses nothing). Set once the pool's servers have run.
	// +optional
	PoolState string `json:"poolState,omitempty"`

	// layout is the erasure layout the operator computed.
	// +optional
	Layout *ErasureLayout `json:"layout,omitempty"`

	// tolerates is what the computed layout survives.
	// +optional
	Tolerates *FaultTolerance `json:"tolerates,omitempty"`
}

// DriveCounts counts a pool's drives by state.
type DriveCounts struct {
	// online drives answer and are in sync.
	Online int32 `json:"online"`
	// offline drives do not answer.
	Offline int32 `json:"offline"`
	// healing drives are being rebuilt from parity.
	Healing int32 `json:"healing"`
}

// ErasureLayout is a pool's computed erasure layout.
type ErasureLayout struct {
	// sets is the number of erasure sets.
	Sets int32 `json:"sets"`
	// setSize is the number of drives per set.
	SetSize int32 `json:"setSize"`
	// parity shards per object.
	Parity int32 `json:"parity"`
	// drivesPerDomain is, per failure domain, how many drives it holds.
	// +optional
	// +listType=map
	// +listMapKey=domain
	DrivesPerDomain []DomainDrives `json:"drivesPerDomain,omitempty"`
}

// DomainDrives is the drive count of one failure domain.
type DomainDrives struct {
	// domain is the failureDomainKey value.
	Domain string `json:"domain"`
	// drives in that domain.
	Drives int32 `json:"drives"`
}

// ServerPool is a set of erasure-coded strata servers with their drives,
// serving the Tenant named in spec.tenantRef.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=spool,categories=strata
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantRef.name`
// +kubebuilder:printcolumn:name="Servers",type=integer,JSONPath=`.spec.servers`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyServers`
// +kubebuilder:printcolumn:name="Drives",type=integer,JSONPath=`.spec.volumesPerServer`,description="Drives per server"
// +kubebuilder:printcolumn:name="Media",type=string,JSONPath=`.spec.storage.media`
// +kubebuilder:printcolumn:name="Layout",type=string,JSONPath=`.status.layout.sets`,description="Erasure sets"
// +kubebuilder:printcolumn:name="Parity",type=integer,JSONPath=`.status.layout.parity`
// +kubebuilder:printcolumn:name="Tolerates",type=integer,JSONPath=`.status.tolerates.domains`,description="Failure domains the pool survives"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.poolState`,description="The engine's state of the pool: Active, Draining or Decommissioned"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServerPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired pool.
	// +required
	Spec ServerPoolSpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status ServerPoolStatus `json:"status,omitempty"`
}

// ServerPoolList is a list of ServerPools.
// +kubebuilder:object:root=true
type ServerPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerPool `json:"items"`
}
