package s3front

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
)

// A bucket's public access block (?publicAccessBlock, served like
// ?encryption: subresource.go) and its four settings, each enforced:
//
//   - BlockPublicAcls: a request that would grant the public (AllUsers or
//     AuthenticatedUsers) through an ACL, on the bucket or an object, is
//     refused with AccessDenied before anything is stored;
//   - IgnorePublicAcls: public grants of the bucket's ACL grant nothing
//     (the ACL the front end evaluates has them removed; GetBucketAcl
//     still shows them);
//   - BlockPublicPolicy: a bucket policy that grants the public is refused;
//   - RestrictPublicBuckets: a public policy grants anonymous requests
//     nothing (the bucket's own users keep what it grants them).

// publicAccessBlock is the stored configuration (JSON in BucketInfo).
type publicAccessBlock struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration" json:"-"`
	XMLNS                 string   `xml:"xmlns,attr,omitempty" json:"-"`
	BlockPublicAcls       bool     `xml:"BlockPublicAcls" json:"blockPublicAcls,omitempty"`
	IgnorePublicAcls      bool     `xml:"IgnorePublicAcls" json:"ignorePublicAcls,omitempty"`
	BlockPublicPolicy     bool     `xml:"BlockPublicPolicy" json:"blockPublicPolicy,omitempty"`
	RestrictPublicBuckets bool     `xml:"RestrictPublicBuckets" json:"restrictPublicBuckets,omitempty"`
}

var errNoPublicAccessBlock = s3err.APIError{Code: "NoSuchPublicAccessBlockConfiguration",
	Description: "The public access block configuration was not found", HTTPStatusCode: http.StatusNotFound}

func blockedBy(setting string) s3err.APIError {
	return s3err.APIError{Code: "AccessDenied", HTTPStatusCode: http.StatusForbidden,
		Description: "Access Denied: the bucket's public access block (" + setting + ") refuses public access."}
}

// bucketPublicAccessBlock is a bucket's configuration (nil: none).
func bucketPublicAccessBlock(bk objlayer.BucketInfo) *publicAccessBlock {
	if len(bk.PublicAccessBlock) == 0 {
		return nil
	}
	var p publicAccessBlock
	if json.Unmarshal(bk.PublicAccessBlock, &p) != nil {
		// Unreadable: treat every setting as on rather than open the bucket.
		return &publicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
	}
	return &p
}

// publicAccessBlocker is a backend that keeps public access blocks.
type publicAccessBlocker interface {
	PutPublicAccessBlock(ctx context.Context, bucket string, doc []byte) error
	GetPublicAccessBlock(ctx context.Context, bucket string) ([]byte, error)
	DeletePublicAccessBlock(ctx context.Context, bucket string) error
}

// publicACLChecker refuses requests that BlockPublicAcls blocks.
type publicACLChecker interface {
	checkPublicACLRequest(ctx context.Context, c fiber.Ctx) *s3err.APIError
}

func servePublicAccessBlock(be backend.Backend, pab publicAccessBlocker, acls publicACLChecker, iam auth.IAMService) fiber.Handler {
	takeOver := serveSubresourceDoc(be, iam, subresourceDoc{
		query: "publicAccessBlock", getAction: auth.GetBucketPublicAccessBlockAction, putAction: auth.PutBucketPublicAccessBlockAction,
		get: pab.GetPublicAccessBlock, put: pab.PutPublicAccessBlock, del: pab.DeletePublicAccessBlock,
	})
	return func(c fiber.Ctx) error {
		if err := acls.checkPublicACLRequest(c.RequestCtx(), c); err != nil {
			return writeError(c, err)
		}
		return takeOver(c)
	}
}

// PutPublicAccessBlock stores a bucket's public access block.
func (b *Backend) PutPublicAccessBlock(ctx context.Context, bucket string, doc []byte) error {
	var p publicAccessBlock
	if err := xml.Unmarshal(doc, &p); err != nil || p.XMLName.Local != "PublicAccessBlockConfiguration" {
		return s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	stored, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.PublicAccessBlock = stored })
}

// GetPublicAccessBlock answers a bucket's public access block document.
func (b *Backend) GetPublicAccessBlock(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	p := bucketPublicAccessBlock(bk)
	if p == nil {
		return nil, errNoPublicAccessBlock
	}
	p.XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
	return marshalDoc(p), nil
}

// DeletePublicAccessBlock removes it (a success when there is none).
func (b *Backend) DeletePublicAccessBlock(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.PublicAccessBlock = nil })
}

// Public grantees of S3 ACLs, as headers and documents name them.
var publicGrantees = []string{"http://acs.amazonaws.com/groups/global/AllUsers", "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"}

// checkPublicACLRequest refuses, under BlockPublicAcls, a PUT that would
// grant the public through an ACL: a public canned ACL or grant header on
// a bucket or object write, or an ACL document naming a public group.
func (b *Backend) checkPublicACLRequest(ctx context.Context, c fiber.Ctx) *s3err.APIError {
	if c.Method() != http.MethodPut {
		return nil
	}
	h := &c.Request().Header
	public := false
	switch types.BucketCannedACL(h.Peek("X-Amz-Acl")) {
	case types.BucketCannedACLPublicRead, types.BucketCannedACLPublicReadWrite, types.BucketCannedACLAuthenticatedRead:
		public = true
	}
	for _, name := range []string{"X-Amz-Grant-Read", "X-Amz-Grant-Write", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write-Acp", "X-Amz-Grant-Full-Control"} {
		for _, g := range publicGrantees {
			public = public || bytes.Contains(h.Peek(name), []byte(g))
		}
	}
	isACL := c.RequestCtx().QueryArgs().Has("acl")
	if !public && !isACL {
		return nil
	}
	bucket, _ := splitBucketPath(c.Path())
	if bucket == "" {
		return nil
	}
	bk, err := b.pool.StatBucket(ctx, bucket)
	if errors.Is(err, objlayer.ErrBucketNotFound) {
		return nil // the front end answers for a missing bucket
	}
	if err != nil {
		e := s3err.GetAPIError(s3err.ErrInternalError)
		return &e
	}
	p := bucketPublicAccessBlock(bk)
	if p == nil || !p.BlockPublicAcls {
		return nil
	}
	if !public && isACL {
		body := c.Body() // an ACL document: small, bounded by the guard
		for _, g := range publicGrantees {
			public = public || bytes.Contains(body, []byte(g))
		}
	}
	if public {
		e := blockedBy("BlockPublicAcls")
		return &e
	}
	return nil
}

// checkPublicPolicy refuses, under BlockPublicPolicy, a policy that grants
// the public.
func checkPublicPolicy(bk objlayer.BucketInfo, policy []byte) error {
	p := bucketPublicAccessBlock(bk)
	if p == nil || !p.BlockPublicPolicy {
		return nil
	}
	// The front end parsed and checked the policy before the backend sees
	// it; one that does not parse here is treated as public.
	if doc, err := auth.ParsePolicyDocument(policy); err != nil || doc.IsPublic() {
		return blockedBy("BlockPublicPolicy")
	}
	return nil
}

// anonymousEvaluation reports whether ctx is the front end's evaluation of
// an anonymous request (no signature of any kind).
func anonymousEvaluation(ctx context.Context) bool {
	rc, ok := frontCtx(ctx)
	if !ok {
		return false
	}
	return len(rc.Request.Header.Peek("Authorization")) == 0 && !rc.QueryArgs().Has("X-Amz-Signature") &&
		!rc.QueryArgs().Has("Signature")
}

// aclEvaluation reports whether ctx is a request the front end evaluates
// the bucket ACL for (any request but GET ?acl, which shows it).
func aclEvaluation(ctx context.Context) bool {
	rc, ok := frontCtx(ctx)
	if !ok {
		return false
	}
	return string(rc.Method()) != http.MethodGet || !rc.QueryArgs().Has("acl")
}
