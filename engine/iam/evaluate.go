package iam

import (
	"reflect"
	"slices"
	"strings"

	"github.com/versity/versitygw/auth"
)

// A user's grant is an identity policy, not a bucket policy: the front end
// combines it with the bucket's own policy or ACL the way AWS combines IAM
// user policies with resource policies (an explicit Deny from either wins;
// otherwise an Allow from either is enough). Bucket policies and ACLs set
// through S3 therefore stay exactly what their owners wrote, and keep
// working for tenants with users.

// Actions of each policy, as S3 policy action patterns.
var policyActions = map[Policy][]auth.Action{
	PolicyReadWrite: {"s3:*"},
	PolicyReadOnly:  {"s3:Get*", "s3:List*"},
	PolicyWriteOnly: {"s3:PutObject", "s3:PutObjectTagging", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads"},
}

var _ auth.PolicyEvaluator = (*Users)(nil)

// EvaluatePolicy implements auth.PolicyEvaluator: for each resource (an S3
// ARN: a bucket, an object, or "*" for account-level actions such as
// listing buckets) and each action, whether the user's grant allows it.
// Grants never deny; a user without a grant gets no match anywhere.
func (u *Users) EvaluatePolicy(access, _ string, actions []auth.Action, resources []string, _ map[string][]string) (auth.PolicyEvaluation, error) {
	u.mu.RLock()
	usr, ok := u.users[access]
	u.mu.RUnlock()
	decisions := make([][]decision, len(resources))
	for i, res := range resources {
		decisions[i] = make([]decision, len(actions))
		if !ok {
			continue
		}
		for j, a := range actions {
			if usr.allows(a, res, u.ownerOf) {
				decisions[i][j] = decisionAllow
			}
		}
	}
	return evaluation(decisions), nil
}

// Allows reports whether a user's identity policy allows an action on a
// bucket's objects (resource-based grants aside).
func (u *Users) Allows(access string, a auth.Action, bucket string) bool {
	u.mu.RLock()
	usr, ok := u.users[access]
	u.mu.RUnlock()
	return ok && usr.allows(a, auth.ResourceArnPrefix+bucket+"/*", u.ownerOf)
}

// allows reports whether a user's grant covers an action on a resource.
// ownerOf names a bucket's owner (nil: none known).
func (usr User) allows(a auth.Action, resource string, ownerOf func(string) (string, bool)) bool {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(resource, auth.ResourceArnPrefix), "/")
	switch {
	case bucket == "*":
		// Account-level actions: every user may list the buckets it
		// sees (the listing shows only those).
		return a == auth.ListAllMyBucketsAction
	case usr.Policy == PolicyOwner:
		// An account of its own: its buckets are wholly its; others
		// grant it what their ACLs and policies say, evaluated beside.
		if a == auth.CreateBucketAction {
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
		if a.Match(p) {
			return true
		}
	}
	return false
}

// decision is the front end's tri-state policy decision. Its type is
// unexported in versitygw's auth package, so evaluation converts through
// reflection; TestEvaluationMeansWhatWeSay checks, through the front end's
// own VerifyAccess, that the values below keep their meaning.
type decision int

const (
	decisionNoMatch decision = 0
	decisionAllow   decision = 1
)

// evaluation builds the front end's PolicyEvaluation from our decisions.
func evaluation(ds [][]decision) auth.PolicyEvaluation {
	var ev auth.PolicyEvaluation
	field := reflect.ValueOf(&ev).Elem().FieldByName("Decisions")
	rows := reflect.MakeSlice(field.Type(), len(ds), len(ds))
	for i, row := range ds {
		cells := reflect.MakeSlice(field.Type().Elem(), len(row), len(row))
		for j, d := range row {
			cells.Index(j).SetInt(int64(d))
		}
		rows.Index(i).Set(cells)
	}
	field.Set(rows)
	return ev
}

// IdentityAllows reports whether a user's identity policy allows an S3
// action ("s3:GetObject") on a bucket (and key; "" for the bucket
// itself). Grants never deny; "" for the bucket means an account-level
// action (listing buckets).
func (u *Users) IdentityAllows(access, action, bucket string) bool {
	u.mu.RLock()
	usr, ok := u.users[access]
	u.mu.RUnlock()
	res := auth.ResourceArnPrefix + bucket
	if bucket == "" {
		res = auth.ResourceArnPrefix + "*"
	}
	return ok && usr.allows(auth.Action(action), res, u.ownerOf)
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
