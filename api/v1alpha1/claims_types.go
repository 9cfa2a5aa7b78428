package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Claims are how application teams get buckets and credentials without
// touching the Tenant: a BucketClaim and a BucketAccess live in the team's
// namespace, in shapes close to COSI's BucketClaim and BucketAccess (so a
// COSI driver can be put on top), and the Tenant's spec.claims says which
// namespaces may claim from it.

// ClaimsSpec says which namespaces may claim buckets and access from a
// Tenant.
type ClaimsSpec struct {
	// namespaceSelector selects the namespaces whose BucketClaims and
	// BucketAccesses this tenant serves. Unset (the default), no namespace
	// may claim; {} selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ClaimTenantReference names a Tenant in any namespace.
type ClaimTenantReference struct {
	// namespace of the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Namespace string `json:"namespace"`
	// name of the Tenant.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +required
	Name string `json:"name"`
}

// BucketQuota is a bucket's hard quota, enforced by the engine: a write
// that would take the bucket past it is refused with 403 QuotaExceeded.
// +kubebuilder:validation:XValidation:rule="has(self.maxSize) || has(self.maxObjects)",message="a quota needs maxSize, maxObjects or both"
type BucketQuota struct {
	// maxSize is the most the bucket's objects and versions may hold.
	// +optional
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
	// maxObjects is the most objects and versions the bucket may hold
	// (delete markers are not counted).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxObjects *int64 `json:"maxObjects,omitempty"`
}

// BucketClaimSpec asks a Tenant for one bucket.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bucketName) || has(self.bucketName) && self.bucketName == oldSelf.bucketName",message="bucketName is immutable: a claim keeps its bucket"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.objectLock) || has(self.objectLock)",message="objectLock cannot be removed: a bucket's object lock stays on"
type BucketClaimSpec struct {
	// tenantRef names the Tenant the bucket lives in. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenantRef is immutable: a bucket cannot move between tenants"
	// +required
	TenantRef ClaimTenantReference `json:"tenantRef"`

	// bucketName is the bucket's name. Empty: the operator names it
	// NAMESPACE-NAME (shortened with a hash when longer than 63), and
	// status.bucketName says which. Immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	BucketName string `json:"bucketName,omitempty"`

	// versioning of the bucket: Enabled or Suspended; empty leaves it
	// unversioned (object lock turns it on).
	// +optional
	// +kubebuilder:validation:Enum=Enabled;Suspended
	Versioning string `json:"versioning,omitempty"`

	// objectLock creates the bucket with object lock and, optionally, a
	// default retention. It is fixed when the bucket is created.
	// +optional
	ObjectLock *BucketObjectLock `json:"objectLock,omitempty"`

	// quota is the bucket's hard quota.
	// +optional
	Quota *BucketQuota `json:"quota,omitempty"`

	// notifications, when set, is the bucket's event notification
	// configuration, kept by the operator: each rule sends the events it
	// names to one of the Tenant's notification targets
	// (spec.notifications.targets of the Tenant). Unset, the bucket's
	// configuration is left as S3 clients set it
	// (PutBucketNotificationConfiguration); set without rules, it is
	// cleared.
	// +optional
	Notifications *BucketNotifications `json:"notifications,omitempty"`

	// deletionPolicy says what happens to the bucket when the claim is
	// deleted: Retain (the default) leaves it and its objects in the
	// tenant; Delete deletes every object, version and upload, then the
	// bucket (objects under retention keep the claim, and a message says
	// why, until they expire or the policy is set back to Retain).
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// BucketNotifications is a bucket's notification configuration.
type BucketNotifications struct {
	// rules send a bucket's events to the Tenant's targets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Rules []BucketNotificationRule `json:"rules,omitempty"`
}

// BucketNotificationRule sends the events it names, of the objects whose
// keys match its filter, to one target.
type BucketNotificationRule struct {
	// id names the rule in the bucket's configuration (S3's Id); empty:
	// the target's name and the rule's place ("TARGET-N").
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// target is the name of one of the Tenant's notification targets
	// (spec.notifications.targets).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	// +required
	Target string `json:"target"`

	// events are the S3 event names the rule sends (docs/notifications.md
	// says what each means).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Enum="s3:ObjectCreated:*";"s3:ObjectCreated:Put";"s3:ObjectCreated:Post";"s3:ObjectCreated:Copy";"s3:ObjectCreated:CompleteMultipartUpload";"s3:ObjectRemoved:*";"s3:ObjectRemoved:Delete";"s3:ObjectRemoved:DeleteMarkerCreated";"s3:ObjectTagging:*";"s3:ObjectTagging:Put";"s3:ObjectTagging:Delete";"s3:ObjectAcl:Put";"s3:LifecycleExpiration:*";"s3:LifecycleExpiration:Delete";"s3:LifecycleExpiration:DeleteMarkerCreated"
	// +listType=atomic
	// +required
	Events []string `json:"events"`

	// prefix selects the object keys whose events are sent (S3's key
	// filter rule "prefix").
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
	// suffix selects the object keys whose events are sent (S3's key
	// filter rule "suffix").
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Suffix string `json:"suffix,omitempty"`
}

// BucketUsage is what a bucket holds.
type BucketUsage struct {
	// bytes the bucket's objects and versions hold.
	Bytes int64 `json:"bytes"`
	// objects and versions it holds (delete markers not counted).
	Objects int64 `json:"objects"`
	// updated is when the operator read it from the tenant.
	Updated metav1.Time `json:"updated"`
}

// BucketClaimStatus is what the claim got.
type BucketClaimStatus struct {
	// bucketName is the bucket's name in the tenant.
	// +optional
	BucketName string `json:"bucketName,omitempty"`
	// bucketReady is true once the bucket exists as specified (COSI's
	// field).
	// +optional
	BucketReady bool `json:"bucketReady"`
	// endpoint is the tenant's S3 URL inside the cluster.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// usage is what the bucket holds, refreshed every few minutes (the
	// operator's --claims-usage-interval).
	// +optional
	Usage *BucketUsage `json:"usage,omitempty"`
	// observedGeneration is the generation last applied.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BucketClaim asks a Tenant for a bucket from an application's namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bclaim
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenantRef.name`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.status.bucketName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.usage.bytes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BucketClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   BucketClaimSpec   `json:"spec"`
	Status BucketClaimStatus `json:"status,omitempty"`
}

// BucketClaimList is a list of BucketClaims.
// +kubebuilder:object:root=true
type BucketClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BucketClaim `json:"items"`
}

// Access roles of a BucketAccess.
const (
	AccessRead      = "Read"
	AccessWrite     = "Write"
	AccessReadWrite = "ReadWrite"
)

// BucketAccessSpec asks for credentials to buckets claimed in the same
// namespace: static keys in a Secret, or a role a ServiceAccount assumes
// through STS with its projected token (no static key at all).
// +kubebuilder:validation:XValidation:rule="has(self.credentialsSecretName) != has(self.serviceAccountName)",message="set exactly one of credentialsSecretName (static keys in a Secret) and serviceAccountName (a role the ServiceAccount assumes through STS)"
// +kubebuilder:validation:XValidation:rule="has(self.role) != has(self.policy)",message="set exactly one of role (Read, Write or ReadWrite) and policy (an IAM policy document)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.credentialsSecretName) || has(self.credentialsSecretName) && self.credentialsSecretName == oldSelf.credentialsSecretName",message="credentialsSecretName is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.serviceAccountName) || has(self.serviceAccountName) && self.serviceAccountName == oldSelf.serviceAccountName",message="serviceAccountName is immutable"
type BucketAccessSpec struct {
	// bucketClaims are the BucketClaims, in this namespace and of one
	// Tenant, whose buckets the access reaches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +required
	BucketClaims []string `json:"bucketClaims"`

	// role is what the access may do: Read (get, list, head), Write (put,
	// delete, multipart uploads) or ReadWrite.
	// +optional
	// +kubebuilder:validation:Enum=Read;Write;ReadWrite
	Role string `json:"role,omitempty"`

	// policy is an IAM policy document (JSON) instead of a role: its
	// statements may name only s3: actions and only the claimed buckets
	// and their objects as resources.
	// +optional
	// +kubebuilder:validation:MaxLength=6144
	Policy string `json:"policy,omitempty"`

	// credentialsSecretName is the Secret, in this namespace, the operator
	// writes the access's static keys to, with the endpoint, region, CA
	// bundle and bucket names (keys AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION, BUCKET_NAME,
	// BUCKET_NAMES, ca.crt). Annotate the access with
	// storage.strata.dev/rotate-keys (any new value) to rotate them.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`

	// serviceAccountName is the ServiceAccount, in this namespace, that
	// may assume the access's role through STS with a projected token of
	// the tenant's audience: no static key exists. The operator writes
	// what the pod needs (AWS_ROLE_ARN, AWS_ENDPOINT_URL, AWS_REGION,
	// the audience, the bucket names, ca.crt) to a ConfigMap named after
	// the BucketAccess. The Tenant needs spec.webIdentity.serviceAccounts.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// BucketAccessStatus is what the access got.
type BucketAccessStatus struct {
	// accessGranted is true once the credentials or the role exist and
	// reach every claimed bucket (COSI's field).
	// +optional
	AccessGranted bool `json:"accessGranted"`
	// accessKeyID is the static key's ID (the secret is only in the
	// Secret).
	// +optional
	AccessKeyID string `json:"accessKeyID,omitempty"`
	// roleARN is the role the ServiceAccount assumes.
	// +optional
	RoleARN string `json:"roleARN,omitempty"`
	// buckets are the buckets reached.
	// +optional
	// +listType=atomic
	Buckets []string `json:"buckets,omitempty"`
	// tenant is the claims' Tenant, NAMESPACE/NAME.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// rotation is the value of the rotate-keys annotation last acted on.
	// +optional
	Rotation string `json:"rotation,omitempty"`
	// keysRotated is when the keys were last made.
	// +optional
	KeysRotated *metav1.Time `json:"keysRotated,omitempty"`
	// observedGeneration is the generation last applied.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BucketAccess asks for credentials to claimed buckets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=baccess
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.credentialsSecretName`
// +kubebuilder:printcolumn:name="ServiceAccount",type=string,JSONPath=`.spec.serviceAccountName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BucketAccess struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   BucketAccessSpec   `json:"spec"`
	Status BucketAccessStatus `json:"status,omitempty"`
}

// BucketAccessList is a list of BucketAccesses.
// +kubebuilder:object:root=true
type BucketAccessList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BucketAccess `json:"items"`
}
