package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantSpec describes one S3 object store: its identity, users, buckets,
// TLS, exposure, monitoring and lifecycle. Its capacity comes from the
// ServerPools and GatewayPools whose spec.tenantRef names it.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.tls.mode == 'External' || !has(self.tls.secretRef)",message="tls.secretRef is only used with tls.mode External; remove it or set mode: External"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.tls.mode != 'External' || has(self.tls.secretRef)",message="tls.mode External needs tls.secretRef naming a kubernetes.io/tls Secret with tls.crt and tls.key"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.tls.mode == 'CertManager' || !has(self.tls.issuerRef)",message="tls.issuerRef is only used with tls.mode CertManager; remove it or set mode: CertManager"
// +kubebuilder:validation:XValidation:rule="!has(self.credentials) || !has(self.credentials.secretRef) || !has(self.users) || self.users.all(u, u.secretRef.name != self.credentials.secretRef.name)",message="a user's secretRef may not be the root credentials Secret; give each user a Secret of its own"
type TenantSpec struct {
	// image is the strata engine image every ServerPool and GatewayPool of
	// this tenant runs. Changing it starts a rolling upgrade, gated on
	// cluster health. Empty means the operator's default image
	// (--default-strata-image).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// imagePullPolicy for the strata image.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +kubebuilder:default=IfNotPresent
	ImagePullPolicy string `json:"imagePullPolicy,omitempty"`

	// imagePullSecrets name Secrets used to pull the strata image.
	// +optional
	// +listType=atomic
	ImagePullSecrets []SecretReference `json:"imagePullSecrets,omitempty"`

	// credentials of the tenant's root user.
	// +optional
	Credentials CredentialsSpec `json:"credentials,omitempty"`

	// users are S3 users besides root, each with its own keys and policy.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Users []UserSpec `json:"users,omitempty"`

	// buckets the operator creates once the tenant is Ready. It never deletes
	// a bucket that is removed from this list.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Buckets []BucketSpec `json:"buckets,omitempty"`

	// tls configures HTTPS for S3 and for traffic between servers.
	// +optional
	// +kubebuilder:default={mode: Operator}
	TLS TLSSpec `json:"tls,omitempty"`

	// expose configures the Service clients use to reach the tenant.
	// +optional
	// +kubebuilder:default={type: ClusterIP}
	Expose ExposeSpec `json:"expose,omitempty"`

	// monitoring configures Prometheus scraping and alerting.
	// +optional
	// +kubebuilder:default={serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// upgrade configures how a new image is rolled out.
	// +optional
	// +kubebuilder:default={strategy: Rolling}
	Upgrade UpgradeSpec `json:"upgrade,omitempty"`

	// networkPolicy restricts what reaches the tenant's servers: the
	// internode port only from the tenant's own servers, the S3 port from
	// s3From (anywhere when empty). It takes effect where the cluster runs
	// a NetworkPolicy controller.
	// +optional
	// +kubebuilder:default={enabled: true}
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// deletionPolicy says what happens to data when the Tenant is deleted.
	// Retain keeps every PersistentVolumeClaim (and so the data) and the
	// credential Secrets; Delete removes them.
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeletionPolicy is what happens to a tenant's data when the Tenant goes.
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps PVCs and credential Secrets.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete removes PVCs and generated Secrets.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// CredentialsSpec locates the root user's keys.
type CredentialsSpec struct {
	// secretRef names a Secret with keys accessKey and secretKey. When
	// absent the operator generates <tenant>-root-credentials once and never
	// overwrites it. When it names a Secret that does not exist, the tenant
	// waits (condition CredentialsReady=False) rather than inventing keys.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// UserSpec is one S3 user of the tenant.
type UserSpec struct {
	// name identifies the user in IAM and in logs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.@+=-]+$`
	// +required
	Name string `json:"name"`

	// secretRef names a Secret with keys accessKey and secretKey.
	// +required
	SecretRef SecretReference `json:"secretRef"`

	// policy grants the user access: readonly (list and get), readwrite
	// (also put and delete), writeonly (put only, for ingest agents), or
	// admin (also bucket administration).
	// +optional
	// +kubebuilder:validation:Enum=readonly;readwrite;writeonly;admin
	// +kubebuilder:default=readwrite
	Policy UserPolicy `json:"policy,omitempty"`

	// buckets the policy applies to, by name; ["*"] means every bucket,
	// present and future. Required, so that access to every bucket is
	// always written down.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.exists(b, b == '*') || self.size() == 1",message="buckets: \"*\" (every bucket) cannot be listed with bucket names"
	Buckets []string `json:"buckets"`
}

// UserPolicy is a canned access policy.
type UserPolicy string

// BucketSpec is a bucket the operator creates.
type BucketSpec struct {
	// name of the bucket, following S3 naming rules: 3-63 characters of
	// lowercase letters, digits, dots and hyphens, starting and ending with
	// a letter or digit.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="bucket names may not contain two adjacent dots"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+\\\\.[0-9]+\\\\.[0-9]+\\\\.[0-9]+$')",message="bucket names may not look like an IP address"
	// +required
	Name string `json:"name"`

	// versioning state of the bucket. Empty leaves it unversioned. A bucket
	// that was once Enabled can only be Suspended, never unversioned again
	// (an S3 rule).
	// +optional
	// +kubebuilder:validation:Enum=Enabled;Suspended
	Versioning string `json:"versioning,omitempty"`
}

// TLSMode says where the tenant's serving certificate comes from.
// +kubebuilder:validation:Enum=CertManager;Operator;External;Disabled
type TLSMode string

const (
	// TLSCertManager asks cert-manager for a Certificate from issuerRef (or
	// the chart's self-signed CA issuer).
	TLSCertManager TLSMode = "CertManager"
	// TLSOperator lets the operator run a small CA of its own in a Secret and
	// rotate the serving certificate before it expires.
	TLSOperator TLSMode = "Operator"
	// TLSExternal uses a kubernetes.io/tls Secret the user maintains.
	TLSExternal TLSMode = "External"
	// TLSDisabled serves plain HTTP (tests and service meshes only).
	TLSDisabled TLSMode = "Disabled"
)

// TLSSpec configures certificates for S3 and internode traffic.
type TLSSpec struct {
	// mode selects the certificate source.
	// +optional
	// +kubebuilder:default=Operator
	Mode TLSMode `json:"mode,omitempty"`

	// issuerRef is the cert-manager Issuer or ClusterIssuer (mode
	// CertManager). Empty uses the issuer installed with the operator chart.
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`

	// secretRef names a kubernetes.io/tls Secret (mode External). It must
	// cover the tenant Service names and the headless wildcard.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`

	// dnsNames are extra subject alternative names (an ingress host, say)
	// added to generated certificates.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	DNSNames []string `json:"dnsNames,omitempty"`

	// ipAddresses are extra IP subject alternative names added to generated
	// certificates: 127.0.0.1 for a kubectl port-forward, a fixed load
	// balancer address. The S3 Service's external IPs and load balancer
	// ingress IPs are added without being listed here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a))",message="tls.ipAddresses must hold IPv4 or IPv6 addresses such as 127.0.0.1"
	IPAddresses []string `json:"ipAddresses,omitempty"`
}

// CertificateStatus describes the certificate the tenant's pods serve.
type CertificateStatus struct {
	// notAfter is when the serving certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// renewal says what a certificate rotation in progress waits for; empty
	// when none is.
	// +optional
	Renewal string `json:"renewal,omitempty"`

	// trustedCAs are the CAs of the trust bundle (Secret <tenant>-tls key
	// ca.crt, ConfigMap <tenant>-ca-bundle), with when each expires. During a
	// CA rotation there are two.
	// +optional
	// +listType=atomic
	TrustedCAs []TrustedCA `json:"trustedCAs,omitempty"`
}

// TrustedCA is one CA of the trust bundle.
type TrustedCA struct {
	// subject of the CA certificate.
	Subject string `json:"subject"`
	// sha256 fingerprint of the CA certificate (hex).
	SHA256 string `json:"sha256"`
	// notAfter is when the CA expires.
	NotAfter metav1.Time `json:"notAfter"`
	// publishedAt is when the CA joined the trust bundle; certificates it
	// signed are served no sooner than the operator's --ca-overlap later.
	// +optional
	PublishedAt *metav1.Time `json:"publishedAt,omitempty"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`

	// kind of the issuer.
	// +optional
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	Kind string `json:"kind,omitempty"`

	// group of the issuer; cert-manager.io unless an external issuer is used.
	// +optional
	// +kubebuilder:default=cert-manager.io
	Group string `json:"group,omitempty"`
}

// ExposeSpec configures the tenant's S3 Service.
type ExposeSpec struct {
	// type of the S3 Service.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	Type string `json:"type,omitempty"`

	// port the S3 Service listens on. Defaults to 443 with TLS, 80 without.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// annotations added to the S3 Service (load balancer settings, say).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MonitoringSpec configures Prometheus integration. Objects are only created
// when the prometheus-operator CRDs exist in the cluster.
type MonitoringSpec struct {
	// serviceMonitor scrapes /strata/metrics of every server and gateway
	// pod with the bearer token of Secret <tenant>-metrics-token (generated
	// once, owned by the Tenant; the pods re-read it when it is rotated),
	// and labels every series tenant=<name>.
	// +optional
	// +kubebuilder:default={enabled: true}
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`

	// prometheusRule installs the tenant's alerts: drives offline, erasure
	// sets below full redundancy, write quorum at risk, pods and peers
	// down, heal backlog growing or stalled, capacity over 80% and 90%,
	// certificate expiring within 14 days, S3 5xx ratio and p99 latency,
	// decommission stuck (docs/monitoring.md).
	// +optional
	// +kubebuilder:default={enabled: true}
	PrometheusRule PrometheusRuleSpec `json:"prometheusRule,omitempty"`
}

// NetworkPolicySpec configures the NetworkPolicy of a tenant's servers.
type NetworkPolicySpec struct {
	// enabled creates the NetworkPolicy.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// s3From are the peers allowed to reach the S3 port (pods, namespaces
	// or address blocks, as in a NetworkPolicy rule); empty: anywhere.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	S3From []networkingv1.NetworkPolicyPeer `json:"s3From,omitempty"`
}

// ServiceMonitorSpec configures the tenant's ServiceMonitor.
type ServiceMonitorSpec struct {
	// enabled creates a ServiceMonitor.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// interval between scrapes, a Prometheus duration such as 30s or 1m.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	Interval string `json:"interval,omitempty"`

	// labels added to the ServiceMonitor so a Prometheus selects it.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PrometheusRuleSpec configures the tenant's alerting rules.
type PrometheusRuleSpec struct {
	// enabled creates a PrometheusRule.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// labels added to the PrometheusRule so a Prometheus selects it.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// UpgradeStrategy says how a new image is rolled out.
// +kubebuilder:validation:Enum=Rolling;OnDelete
type UpgradeStrategy string

const (
	// UpgradeRolling replaces one server at a time, each step gated on
	// cluster health.
	UpgradeRolling UpgradeStrategy = "Rolling"
	// UpgradeOnDelete changes the template only; pods take the new image
	// when someone deletes them.
	UpgradeOnDelete UpgradeStrategy = "OnDelete"
)

// UpgradeSpec configures image roll-outs.
type UpgradeSpec struct {
	// strategy of the roll-out.
	// +optional
	// +kubebuilder:default=Rolling
	Strategy UpgradeStrategy `json:"strategy,omitempty"`

	// healthGateTimeout is how long one step may wait for the restarted pod
	// to be ready and the tenant to regain write quorum before the roll-out
	// pauses with condition Upgrading=False, reason HealthGateFailed.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(s|m|h))+$`
	HealthGateTimeout *metav1.Duration `json:"healthGateTimeout,omitempty"`
}

// TenantPhase summarises a tenant's state in one word.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Degraded;Upgrading;Deleting
type TenantPhase string

const (
	// TenantPending: waiting for pools, credentials or certificates.
	TenantPending TenantPhase = "Pending"
	// TenantProvisioning: workloads are being created or formatted.
	TenantProvisioning TenantPhase = "Provisioning"
	// TenantReady: every pool serves traffic as specified.
	TenantReady TenantPhase = "Ready"
	// TenantDegraded: traffic is served with reduced redundancy.
	TenantDegraded TenantPhase = "Degraded"
	// TenantUpgrading: a new image is rolling out.
	TenantUpgrading TenantPhase = "Upgrading"
	// TenantDeleting: the finalizer is running.
	TenantDeleting TenantPhase = "Deleting"
)

// TenantStatus is what the operator observed of a tenant.
type TenantStatus struct {
	// phase summarises the conditions in one word.
	// +optional
	Phase TenantPhase `json:"phase,omitempty"`

	// conditions: Ready, Progressing, Degraded, CredentialsReady,
	// CertificatesReady, Upgrading.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// currentImage is the image every pod runs; during an upgrade, the old one.
	// +optional
	CurrentImage string `json:"currentImage,omitempty"`

	// targetImage is the image being rolled out, when it differs from currentImage.
	// +optional
	TargetImage string `json:"targetImage,omitempty"`

	// upgrade reports the progress of a roll-out.
	// +optional
	Upgrade *UpgradeProgress `json:"upgrade,omitempty"`

	// endpoints where the tenant is reached.
	// +optional
	Endpoints TenantEndpoints `json:"endpoints,omitempty"`

	// pools of the tenant, in the order they joined it.
	// +optional
	// +listType=atomic
	Pools []TenantPoolStatus `json:"pools,omitempty"`

	// capacity of the tenant, read from the engine's admin API.
	// +optional
	Capacity *TenantCapacity `json:"capacity,omitempty"`

	// faultTolerance is that of the tenant's weakest ServerPool.
	// +optional
	FaultTolerance *FaultTolerance `json:"faultTolerance,omitempty"`

	// credentialsSecret names the Secret holding the root credentials
	// (generated or referenced).
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`

	// certificate the pods serve, when TLS is on.
	// +optional
	Certificate *CertificateStatus `json:"certificate,omitempty"`
}

// UpgradeProgress counts the pods of a roll-out.
type UpgradeProgress struct {
	// updated pods run the target image and are ready.
	Updated int32 `json:"updated"`
	// total pods to update.
	Total int32 `json:"total"`
	// current names the pod being replaced, if any.
	// +optional
	Current string `json:"current,omitempty"`
}

// TenantEndpoints are the URLs of a tenant.
type TenantEndpoints struct {
	// s3 is the in-cluster URL of the server pools' S3 Service.
	// +optional
	S3 string `json:"s3,omitempty"`

	// gateways are the URLs of the GatewayPools' Services.
	// +optional
	// +listType=atomic
	Gateways []string `json:"gateways,omitempty"`
}

// TenantPoolStatus summarises one pool.
type TenantPoolStatus struct {
	// name of the pool.
	Name string `json:"name"`
	// kind of the pool: ServerPool or GatewayPool.
	// +kubebuilder:validation:Enum=ServerPool;GatewayPool
	Kind string `json:"kind"`
	// ready is true when the pool's Ready condition is True.
	Ready bool `json:"ready"`
	// tolerates is the ServerPool's fault tolerance.
	// +optional
	Tolerates *FaultTolerance `json:"tolerates,omitempty"`
}

// TenantCapacity is the usable and used space across pools.
type TenantCapacity struct {
	// raw is the sum of all drive sizes.
	// +optional
	Raw *resource.Quantity `json:"raw,omitempty"`
	// usable is raw less erasure parity.
	// +optional
	Usable *resource.Quantity `json:"usable,omitempty"`
	// used is what objects (with parity) occupy.
	// +optional
	Used *resource.Quantity `json:"used,omitempty"`
}

// Tenant is one S3 object store: identity, users, TLS, exposure and
// lifecycle. ServerPools and GatewayPools provide its capacity.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tenant,categories=strata
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.currentImage`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoints.s3`
// +kubebuilder:printcolumn:name="Tolerates",type=integer,JSONPath=`.status.faultTolerance.domains`,description="Failure domains the weakest pool survives"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired tenant.
	// +required
	Spec TenantSpec `json:"spec"`

	// status is what the operator observed.
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}
