package v1alpha1

// Condition types used on Tenant, ServerPool and GatewayPool status. All are
// metav1.Condition entries in status.conditions.
const (
	// ConditionReady is True when the object serves S3 traffic as specified.
	ConditionReady = "Ready"

	// ConditionProgressing is True while the operator is converging the
	// object: creating workloads, scaling, formatting, rolling an upgrade.
	ConditionProgressing = "Progressing"

	// ConditionDegraded is True when the object serves traffic but with less
	// redundancy or capacity than specified (drives offline, pods not ready),
	// or when a spec cannot be realised and the operator has stopped trying.
	ConditionDegraded = "Degraded"

	// ConditionCredentialsReady is True when the root credentials and every
	// user's credentials are present and rendered for the engine.
	ConditionCredentialsReady = "CredentialsReady"

	// ConditionCertificatesReady is True when the TLS serving certificate
	// exists and is valid (or TLS is disabled).
	ConditionCertificatesReady = "CertificatesReady"

	// ConditionStorageReady is True when the pool's storage classes, nodes and
	// erasure layout can meet its spec (placement preflight passed).
	ConditionStorageReady = "StorageReady"

	// ConditionTenantFound is True when the pool's spec.tenantRef names an
	// existing Tenant in the same namespace.
	ConditionTenantFound = "TenantFound"

	// ConditionBucketsReady is True when every bucket in spec.buckets exists
	// (created through the S3 API once the tenant is ready).
	ConditionBucketsReady = "BucketsReady"

	// ConditionWebIdentityReady is True when the issuers of
	// spec.webIdentity are registered with the tenant's STS.
	ConditionWebIdentityReady = "WebIdentityReady"

	// ConditionUpgrading is True while a new image is being rolled out.
	ConditionUpgrading = "Upgrading"
)

// Condition reasons. Each says, in one word, why a condition has its status.
const (
	// ReasonReconciled: the operator applied the spec and found it healthy.
	ReasonReconciled = "Reconciled"

	// ReasonCreating: workloads or dependencies are being created.
	ReasonCreating = "Creating"

	// ReasonWaitingForTenant: the pool's Tenant does not exist yet; the pool
	// starts when it appears.
	ReasonWaitingForTenant = "WaitingForTenant"

	// ReasonWaitingForPods: pods exist but not all are ready.
	ReasonWaitingForPods = "WaitingForPods"

	// ReasonImagePullFailed: a pod's node cannot pull the image (no such
	// repository or tag, no access, an invalid reference: the kubelet's
	// ErrImagePull, ImagePullBackOff, InvalidImageName). The message names
	// the pods and what their kubelet said; fix spec.image or the pull
	// Secrets.
	ReasonImagePullFailed = "ImagePullFailed"

	// ReasonContainerStartFailed: a pod has its image but its container
	// cannot be created or keeps failing (CreateContainerConfigError,
	// CreateContainerError, RunContainerError, CrashLoopBackOff). The
	// message names the pods and what their kubelet said.
	ReasonContainerStartFailed = "ContainerStartFailed"

	// ReasonSecretMissing: a referenced Secret does not exist or lacks keys.
	// The operator never invents replacement credentials.
	ReasonSecretMissing = "SecretMissing"

	// ReasonCertificateInvalid: the certificate offered for the tenant (an
	// External Secret, or one cert-manager wrote) cannot serve it; the
	// message says why. Pods keep the last good certificate.
	ReasonCertificateInvalid = "CertificateInvalid"

	// ReasonCertificateExpiring: the certificate the pods serve expires in
	// less than 14 days and has not been renewed.
	ReasonCertificateExpiring = "CertificateExpiring"

	// ReasonCertManagerMissing: TLS mode CertManager was asked for but the
	// cert-manager CRDs are not installed.
	ReasonCertManagerMissing = "CertManagerMissing"

	// ReasonStorageClassMissing: a named StorageClass does not exist.
	ReasonStorageClassMissing = "StorageClassMissing"

	// ReasonBindingModeImmediate: a local-media StorageClass binds volumes
	// before scheduling; it must use WaitForFirstConsumer.
	ReasonBindingModeImmediate = "BindingModeImmediate"

	// ReasonNoMatchingNodes: no nodes carry the labels the pool's topology
	// needs.
	ReasonNoMatchingNodes = "NoMatchingNodes"

	// ReasonInsufficientCapacity: the storage class reports less capacity
	// than the pool asks for.
	ReasonInsufficientCapacity = "InsufficientCapacity"

	// ReasonToleranceUnreachable: no erasure layout of this pool on these
	// failure domains survives spec.topology.tolerate.
	ReasonToleranceUnreachable = "ToleranceUnreachable"

	// ReasonExpansionNotAllowed: storage.size grew but a storage class does
	// not allow volume expansion; the drives keep their size.
	ReasonExpansionNotAllowed = "ExpansionNotAllowed"

	// ReasonDrivesOffline: some drives do not answer; data is served from
	// parity.
	ReasonDrivesOffline = "DrivesOffline"

	// ReasonHealing: drives are being rebuilt from parity.
	ReasonHealing = "Healing"

	// ReasonDeletionRefused: the ServerPool was deleted while it may hold
	// objects; it keeps running until it is decommissioned, its Tenant is
	// deleted, or it is annotated AnnotationDeleteWithData.
	ReasonDeletionRefused = "DeletionRefused"

	// ReasonDraining: the engine is moving the pool's objects to the
	// tenant's other pools (spec.decommission, or started through the
	// admin API).
	ReasonDraining = "Draining"

	// ReasonDecommissioned: the pool is empty; deleting it loses nothing.
	ReasonDecommissioned = "Decommissioned"

	// ReasonRollingUpdate: pods are being replaced one at a time.
	ReasonRollingUpdate = "RollingUpdate"

	// ReasonHealthGateFailed: an upgrade step did not regain cluster health
	// within spec.upgrade.healthGateTimeout; the rollout is paused.
	ReasonHealthGateFailed = "HealthGateFailed"

	// ReasonBucketCreateFailed: the S3 API refused or did not answer a
	// bucket creation; the operator retries.
	ReasonBucketCreateFailed = "BucketCreateFailed"

	// ReasonWebIdentityFailed: the cluster's token issuer could not be
	// read, or the tenant's IAM API refused or did not answer a provider's
	// registration; the operator retries.
	ReasonWebIdentityFailed = "WebIdentityFailed"

	// ReasonTenantNotFound: a claim's spec.tenantRef names no Tenant.
	ReasonTenantNotFound = "TenantNotFound"

	// ReasonNamespaceNotAllowed: the claim's namespace is not selected by
	// the Tenant's spec.claims.namespaceSelector.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"

	// ReasonClaimInvalid: the claim cannot be realised as written (a
	// bucket name taken by another claim, a policy naming other buckets,
	// claims of different tenants); the message says what to change.
	ReasonClaimInvalid = "ClaimInvalid"

	// ReasonClaimFailed: the tenant refused or did not answer; the
	// operator retries.
	ReasonClaimFailed = "ClaimFailed"

	// ReasonWaitingForClaim: a BucketAccess names a BucketClaim that does
	// not exist or whose bucket is not ready yet.
	ReasonWaitingForClaim = "WaitingForClaim"

	// ReasonWaitingForTopology: the pool's layout is decided and the tenant's
	// topology file does not list it yet; servers start once it does.
	ReasonWaitingForTopology = "WaitingForTopology"

	// ReasonClaimMissing: a GatewayPool's volume.claimName does not exist.
	ReasonClaimMissing = "ClaimMissing"

	// ReasonPlacementRefused: placement preflight failed; see StorageReady.
	ReasonPlacementRefused = "PlacementRefused"

	// ReasonDeleting: the object is being deleted and its finalizer runs.
	ReasonDeleting = "Deleting"
)

// AnnotationDeleteWithData on a ServerPool, set to "true", lets it be
// deleted while it may still hold objects (they become unreadable; with
// deletionPolicy Retain its claims are kept).
const AnnotationDeleteWithData = "storage.strata.dev/delete-with-data"

// Pool states the engine reports (ServerPool status.poolState).
const (
	PoolStateActive         = "Active"
	PoolStateDraining       = "Draining"
	PoolStateDecommissioned = "Decommissioned"
)

// AnnotationRotateCA on a Tenant in TLS mode Operator starts a CA rotation
// now (a suspected key compromise, a drill) rather than when the CA is a
// third of its life from expiry. Each new value starts one rotation; the
// sequence is the scheduled one (docs/tls.md).
const AnnotationRotateCA = "storage.strata.dev/rotate-ca"
