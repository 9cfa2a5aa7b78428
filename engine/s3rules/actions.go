package s3rules

// Action is an S3 action as policies name it ("s3:GetObject").
type Action string

// The S3 actions policies may name.
const (
	ActGetBucketAcl                       Action = "s3:GetBucketAcl"
	ActCreateBucket                       Action = "s3:CreateBucket"
	ActPutBucketAcl                       Action = "s3:PutBucketAcl"
	ActDeleteBucket                       Action = "s3:DeleteBucket"
	ActPutBucketVersioning                Action = "s3:PutBucketVersioning"
	ActGetBucketVersioning                Action = "s3:GetBucketVersioning"
	ActPutBucketPolicy                    Action = "s3:PutBucketPolicy"
	ActGetBucketPolicy                    Action = "s3:GetBucketPolicy"
	ActDeleteBucketPolicy                 Action = "s3:DeleteBucketPolicy"
	ActAbortMultipartUpload               Action = "s3:AbortMultipartUpload"
	ActListMultipartUploadParts           Action = "s3:ListMultipartUploadParts"
	ActListBucketMultipartUploads         Action = "s3:ListBucketMultipartUploads"
	ActPutObject                          Action = "s3:PutObject"
	ActGetObject                          Action = "s3:GetObject"
	ActGetObjectVersion                   Action = "s3:GetObjectVersion"
	ActDeleteObject                       Action = "s3:DeleteObject"
	ActDeleteObjectVersion                Action = "s3:DeleteObjectVersion"
	ActGetObjectAcl                       Action = "s3:GetObjectAcl"
	ActGetObjectVersionAcl                Action = "s3:GetObjectVersionAcl"
	ActGetObjectAttributes                Action = "s3:GetObjectAttributes"
	ActGetObjectVersionAttributes         Action = "s3:GetObjectVersionAttributes"
	ActPutObjectAcl                       Action = "s3:PutObjectAcl"
	ActPutObjectVersionAcl                Action = "s3:PutObjectVersionAcl"
	ActRestoreObject                      Action = "s3:RestoreObject"
	ActGetBucketTagging                   Action = "s3:GetBucketTagging"
	ActPutBucketTagging                   Action = "s3:PutBucketTagging"
	ActGetObjectTagging                   Action = "s3:GetObjectTagging"
	ActGetObjectVersionTagging            Action = "s3:GetObjectVersionTagging"
	ActPutObjectTagging                   Action = "s3:PutObjectTagging"
	ActPutObjectVersionTagging            Action = "s3:PutObjectVersionTagging"
	ActDeleteObjectTagging                Action = "s3:DeleteObjectTagging"
	ActDeleteObjectVersionTagging         Action = "s3:DeleteObjectVersionTagging"
	ActListBucketVersions                 Action = "s3:ListBucketVersions"
	ActListBucket                         Action = "s3:ListBucket"
	ActGetBucketObjectLockConfiguration   Action = "s3:GetBucketObjectLockConfiguration"
	ActPutBucketObjectLockConfiguration   Action = "s3:PutBucketObjectLockConfiguration"
	ActGetObjectLegalHold                 Action = "s3:GetObjectLegalHold"
	ActPutObjectLegalHold                 Action = "s3:PutObjectLegalHold"
	ActGetObjectRetention                 Action = "s3:GetObjectRetention"
	ActPutObjectRetention                 Action = "s3:PutObjectRetention"
	ActBypassGovernanceRetention          Action = "s3:BypassGovernanceRetention"
	ActPutBucketOwnershipControls         Action = "s3:PutBucketOwnershipControls"
	ActGetBucketOwnershipControls         Action = "s3:GetBucketOwnershipControls"
	ActPutBucketCORS                      Action = "s3:PutBucketCORS"
	ActGetBucketCORS                      Action = "s3:GetBucketCORS"
	ActPutAnalyticsConfiguration          Action = "s3:PutAnalyticsConfiguration"
	ActGetAnalyticsConfiguration          Action = "s3:GetAnalyticsConfiguration"
	ActPutEncryptionConfiguration         Action = "s3:PutEncryptionConfiguration"
	ActGetEncryptionConfiguration         Action = "s3:GetEncryptionConfiguration"
	ActPutIntelligentTieringConfiguration Action = "s3:PutIntelligentTieringConfiguration"
	ActGetIntelligentTieringConfiguration Action = "s3:GetIntelligentTieringConfiguration"
	ActPutInventoryConfiguration          Action = "s3:PutInventoryConfiguration"
	ActGetInventoryConfiguration          Action = "s3:GetInventoryConfiguration"
	ActPutLifecycleConfiguration          Action = "s3:PutLifecycleConfiguration"
	ActGetLifecycleConfiguration          Action = "s3:GetLifecycleConfiguration"
	ActPutBucketLogging                   Action = "s3:PutBucketLogging"
	ActGetBucketLogging                   Action = "s3:GetBucketLogging"
	ActPutBucketRequestPayment            Action = "s3:PutBucketRequestPayment"
	ActGetBucketRequestPayment            Action = "s3:GetBucketRequestPayment"
	ActPutMetricsConfiguration            Action = "s3:PutMetricsConfiguration"
	ActGetMetricsConfiguration            Action = "s3:GetMetricsConfiguration"
	ActPutReplicationConfiguration        Action = "s3:PutReplicationConfiguration"
	ActGetReplicationConfiguration        Action = "s3:GetReplicationConfiguration"
	ActReplicateObject                    Action = "s3:ReplicateObject"
	ActReplicateDelete                    Action = "s3:ReplicateDelete"
	ActReplicateTags                      Action = "s3:ReplicateTags"
	ActPutBucketPublicAccessBlock         Action = "s3:PutBucketPublicAccessBlock"
	ActGetBucketPublicAccessBlock         Action = "s3:GetBucketPublicAccessBlock"
	ActPutBucketNotification              Action = "s3:PutBucketNotification"
	ActGetBucketNotification              Action = "s3:GetBucketNotification"
	ActPutAccelerateConfiguration         Action = "s3:PutAccelerateConfiguration"
	ActGetAccelerateConfiguration         Action = "s3:GetAccelerateConfiguration"
	ActPutBucketWebsite                   Action = "s3:PutBucketWebsite"
	ActGetBucketWebsite                   Action = "s3:GetBucketWebsite"
	ActDeleteBucketWebsite                Action = "s3:DeleteBucketWebsite"
	ActGetBucketPolicyStatus              Action = "s3:GetBucketPolicyStatus"
	ActGetBucketLocation                  Action = "s3:GetBucketLocation"
	ActListAllMyBuckets                   Action = "s3:ListAllMyBuckets"
)

// Actions lists every action a policy may name (patterns are checked
// against them).
var Actions = []Action{
	ActGetBucketAcl, ActCreateBucket, ActPutBucketAcl, ActDeleteBucket, ActPutBucketVersioning,
	ActGetBucketVersioning, ActPutBucketPolicy, ActGetBucketPolicy, ActDeleteBucketPolicy,
	ActAbortMultipartUpload, ActListMultipartUploadParts, ActListBucketMultipartUploads, ActPutObject,
	ActGetObject, ActGetObjectVersion, ActDeleteObject, ActDeleteObjectVersion, ActGetObjectAcl,
	ActGetObjectVersionAcl, ActGetObjectAttributes, ActGetObjectVersionAttributes, ActPutObjectAcl,
	ActPutObjectVersionAcl, ActRestoreObject, ActGetBucketTagging, ActPutBucketTagging, ActGetObjectTagging,
	ActGetObjectVersionTagging, ActPutObjectTagging, ActPutObjectVersionTagging, ActDeleteObjectTagging,
	ActDeleteObjectVersionTagging, ActListBucketVersions, ActListBucket, ActGetBucketObjectLockConfiguration,
	ActPutBucketObjectLockConfiguration, ActGetObjectLegalHold, ActPutObjectLegalHold, ActGetObjectRetention,
	ActPutObjectRetention, ActBypassGovernanceRetention, ActPutBucketOwnershipControls,
	ActGetBucketOwnershipControls, ActPutBucketCORS, ActGetBucketCORS, ActPutAnalyticsConfiguration,
	ActGetAnalyticsConfiguration, ActPutEncryptionConfiguration, ActGetEncryptionConfiguration,
	ActPutIntelligentTieringConfiguration, ActGetIntelligentTieringConfiguration, ActPutInventoryConfiguration,
	ActGetInventoryConfiguration, ActPutLifecycleConfiguration, ActGetLifecycleConfiguration,
	ActPutBucketLogging, ActGetBucketLogging, ActPutBucketRequestPayment, ActGetBucketRequestPayment,
	ActPutMetricsConfiguration, ActGetMetricsConfiguration, ActPutReplicationConfiguration,
	ActGetReplicationConfiguration, ActReplicateObject, ActReplicateDelete, ActReplicateTags, ActPutBucketPublicAccessBlock, ActGetBucketPublicAccessBlock,
	ActPutBucketNotification, ActGetBucketNotification, ActPutAccelerateConfiguration,
	ActGetAccelerateConfiguration, ActPutBucketWebsite, ActGetBucketWebsite, ActDeleteBucketWebsite,
	ActGetBucketPolicyStatus, ActGetBucketLocation, ActListAllMyBuckets,
}
