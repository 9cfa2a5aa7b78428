package s3front

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
)

// Object ACLs on the gateway: it keeps none. Every object is its bucket
// owner's, with full control, which is what S3 answers for buckets whose
// object ownership is BucketOwnerEnforced and what an owner-only ACL says
// anywhere. So reading an object ACL answers that, setting one that says
// exactly that succeeds, and any other grant is refused: 400
// AccessControlListNotSupported where the bucket's ownership disables ACLs
// (as S3 answers), 501 NotImplemented elsewhere. A write never succeeds
// with a grant it did not keep. (The server keeps object ACLs: acl.go,
// aclserve.go.)

// errObjectGrants refuses object ACL grants other than the owner's.
var errObjectGrants = s3err.APIError{
	Code:           "NotImplemented",
	Description:    "Object ACLs other than the bucket owner's full control are not supported.",
	HTTPStatusCode: http.StatusNotImplemented,
}

// ownerOnlyCanned are the canned object ACLs that leave the owner alone
// with full control.
var ownerOnlyCanned = map[string]bool{"": true, "private": true, "bucket-owner-full-control": true}

// grantHeaders are the headers that grant object permissions.
var grantHeaders = []string{"X-Amz-Grant-Full-Control", "X-Amz-Grant-Read", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write", "X-Amz-Grant-Write-Acp"}

// CheckObjectACL refuses a write (PUT, copy, multipart upload, PutObjectAcl)
// whose ACL headers or, for PutObjectAcl, body ask for more than the owner's
// full control. ownership is the bucket's object-ownership setting, owner
// its owner's access key.
func CheckObjectACL(ctx context.Context, ownership, owner string, withBody bool) error {
	rc, ok := frontCtx(ctx)
	if !ok {
		return nil
	}
	var refuse error = errObjectGrants
	if ownership == "" || ownership == string(types.ObjectOwnershipBucketOwnerEnforced) {
		refuse = s3err.GetAPIError(s3err.ErrAclNotSupported)
	}
	h := &rc.Request.Header
	if !ownerOnlyCanned[string(h.Peek("X-Amz-Acl"))] {
		return refuse
	}
	for _, name := range grantHeaders {
		v := string(h.Peek(name))
		if v == "" {
			continue
		}
		if name != "X-Amz-Grant-Full-Control" || !onlyGrantee(v, owner) {
			return refuse
		}
	}
	if withBody && len(rc.Request.Body()) > 0 {
		var acp auth.AccessControlPolicy
		if err := xml.Unmarshal(rc.Request.Body(), &acp); err != nil {
			return s3err.GetAPIError(s3err.ErrMalformedACL)
		}
		for _, g := range acp.AccessControlList.Grants {
			if g.Permission != auth.PermissionFullControl || g.Grantee == nil || g.Grantee.ID != owner {
				return refuse
			}
		}
	}
	return nil
}

// onlyGrantee reports whether a grant header (`id="a", id="b"`) names the
// owner and no one else.
func onlyGrantee(header, owner string) bool {
	for _, g := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(g), "=")
		if !strings.EqualFold(k, "id") || strings.Trim(v, `"`) != owner {
			return false
		}
	}
	return true
}

// ObjectACL is the ACL of every object of a bucket owned by owner.
func ObjectACL(owner string) *s3.GetObjectAclOutput {
	return &s3.GetObjectAclOutput{
		Owner: &types.Owner{ID: &owner, DisplayName: &owner},
		Grants: []types.Grant{{
			Grantee:    &types.Grantee{ID: &owner, DisplayName: &owner, Type: types.TypeCanonicalUser},
			Permission: types.PermissionFullControl,
		}},
	}
}
