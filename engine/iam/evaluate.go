package iam

import (
	"slices"
	"strings"
)

// A user's grant is an identity policy, not a bucket policy: the front end
// combines it with the bucket's own policy or ACL the way AWS combines IAM
// user policies with resource policies (an explicit Deny from either wins;
// otherwise an Allow from either is enough). Bucket policies and ACLs set
// through S3 therefore stay exactly what their owners wrote, and keep
// working for tenants with users.

// Actions of each policy, as S3 policy action patterns (a trailing '*'
// matches any rest).
var policyActions = map[Policy][]string{
	PolicyReadWrite: {"s3:*"},
	PolicyReadOnly:  {"s3:Get*", "s3:List*"},
	PolicyWriteOnly: {"s3:PutObject", "s3:PutObjectTagging", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads"},
}

// IdentityAllows reports whether a user's identity policy allows an S3
// action ("s3:GetObject") in a bucket ("bucket", or "bucket/key": the key
// does not matter). Grants never deny; "" for the bucket means an
// account-level action (listing buckets).
func (u *Users) IdentityAllows(access, action, bucket string) bool {
	u.mu.RLock()
	usr, ok := u.users[access]
	u.mu.RUnlock()
	bucket, _, _ = strings.Cut(bucket, "/")
	return ok && usr.allows(action, bucket, u.ownerOf)
}

// allows reports whether a user's grant covers an action in a bucket (""
// for account-level actions). ownerOf names a bucket's owner (nil: none
// known).
func (usr User) allows(action, bucket string, ownerOf func(string) (string, bool)) bool {
	switch {
	case bucket == "":
		// Account-level actions: every user may list the buckets it
		// sees (the listing shows only those).
		return strings.EqualFold(action, "s3:ListAllMyBuckets")
	case usr.Policy == PolicyOwner:
		// An account of its own: its buckets are wholly its; others
		// grant it what their ACLs and policies say, evaluated beside.
		if strings.EqualFold(action, "s3:CreateBucket") {
			return true
		}
		owner, ok := "", false
		if ownerOf != nil {
			owner, ok = ownerOf(bucket)
		}
		return ok && owner == usr.AccessKey
	case len(usr.Buckets) > 0 && !slices.Contains(usr.Buckets, bucket):
		return false
	}
	for _, p := range policyActions[usr.Policy] {
		if actionMatches(action, p) {
			return true
		}
	}
	return false
}

// actionMatches reports whether an action matches a pattern, ignoring
// case as IAM does.
func actionMatches(action, pattern string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return len(action) >= len(prefix) && strings.EqualFold(action[:len(prefix)], prefix)
	}
	return strings.EqualFold(action, pattern)
}

// IsAdmin reports whether a user has root's rights (PolicyAdmin).
func (u *Users) IsAdmin(access string) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	usr, ok := u.users[access]
	return ok && usr.Policy == PolicyAdmin
}

// CanCreateBuckets reports whether a user may create buckets: an admin,
// an owner account, or a user granted every bucket read-write.
func (u *Users) CanCreateBuckets(access string) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	usr, ok := u.users[access]
	return ok && (usr.Policy == PolicyAdmin || usr.Policy == PolicyOwner || usr.Policy == PolicyReadWrite && len(usr.Buckets) == 0)
}

// Secret returns a user's secret key.
func (u *Users) Secret(access string) (string, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	usr, ok := u.users[access]
	return usr.SecretKey, ok
}
