package s3front

import (
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

// Calls the server serves itself rather than through the front end's
// controllers: GET and PUT ?acl of a bucket or an object, a CreateBucket
// that sets an ACL (acl.go says why), and GET and PUT ?policy and GET
// ?policyStatus (policy.go says why). Strata, like S3 before 2023, gives a
// bucket created without an ownership setting none, so ACLs work;
// BucketOwnerEnforced is one request away.
//
// A request is authenticated by the front end's own verifiers (signature,
// presigned URL, anonymous access to public resources), called here in
// the order its routes call them, then authorised by its access check
// (auth.VerifyAccess) against the ACL and policy decision that govern it.

// ownCaller is a backend that serves calls itself (the server's Backend).
type ownCaller interface {
	serveOwnCall(c fiber.Ctx, op ownCall, acct auth.Account, isRoot bool) error
	toS3(err error, bucket string) error
}

// ownCall is one call served here.
type ownCall struct {
	bucket, key string
	get         bool // a GET; else a PUT
	create      bool // CreateBucket with an ACL
	policy      bool // ?policy
	status      bool // ?policyStatus
	metric      string
	action      auth.Action
	permission  auth.Permission
}

// ownCallOf recognises the calls served here.
func ownCallOf(c fiber.Ctx) (ownCall, bool) {
	path, err := url.PathUnescape(string(c.Request().URI().PathOriginal()))
	if err != nil {
		return ownCall{}, false
	}
	bucket, key := splitBucketPath(path)
	if bucket == "" {
		return ownCall{}, false
	}
	op := ownCall{bucket: strings.Clone(bucket), key: strings.Clone(key)}
	q := c.RequestCtx().QueryArgs()
	switch m := c.Method(); {
	case key == "" && q.Has("policy") && (m == http.MethodGet || m == http.MethodPut):
		op.get, op.policy = m == http.MethodGet, true
		op.metric, op.action, op.permission = metrics.ActionPutBucketPolicy, auth.PutBucketPolicyAction, auth.PermissionWrite
		if op.get {
			op.metric, op.action, op.permission = metrics.ActionGetBucketPolicy, auth.GetBucketPolicyAction, auth.PermissionRead
		}
		return op, true
	case key == "" && q.Has("policyStatus") && m == http.MethodGet:
		op.get, op.status = true, true
		op.metric, op.action, op.permission = metrics.ActionGetBucketPolicyStatus, auth.GetBucketPolicyStatusAction, auth.PermissionRead
		return op, true
	case q.Has("acl") && (m == http.MethodGet || m == http.MethodPut):
		op.get = m == http.MethodGet
		switch {
		case key == "" && op.get:
			op.metric, op.action, op.permission = metrics.ActionGetBucketAcl, auth.GetBucketAclAction, auth.PermissionReadAcp
		case key == "":
			op.metric, op.action, op.permission = metrics.ActionPutBucketAcl, auth.PutBucketAclAction, auth.PermissionWriteAcp
		case op.get:
			op.metric, op.action, op.permission = metrics.ActionGetObjectAcl, auth.GetObjectAclAction, auth.PermissionReadAcp
		default:
			op.metric, op.action, op.permission = metrics.ActionPutObjectAcl, auth.PutObjectAclAction, auth.PermissionWriteAcp
		}
		return op, true
	case m == http.MethodPut && key == "" && len(q.QueryString()) == 0 && hasACLHeaders(c.Request().Header.Peek):
		op.create = true
		op.metric, op.action, op.permission = metrics.ActionCreateBucket, auth.CreateBucketAction, auth.PermissionWrite
		return op, true
	}
	return ownCall{}, false
}

// serveOwnCalls serves the calls of a backend that serves some itself.
func serveOwnCalls(be backend.Backend, k ownCaller, root middlewares.RootUserConfig, iam auth.IAMService, region string) fiber.Handler {
	return func(c fiber.Ctx) error {
		op, ok := ownCallOf(c)
		if !ok {
			return c.Next()
		}
		// The front end's routes see the path decoded (its signature
		// checks encode it again).
		if p, err := url.PathUnescape(string(c.Request().URI().PathOriginal())); err == nil {
			c.Path(p)
		}
		// What the front end's middlewares that run after this one would
		// have set up.
		utils.ContextKeyRegion.Set(c, region)
		utils.ContextKeyRootAccessKey.Set(c, root.Access)
		utils.ContextKeyAccount.Set(c, auth.Account{})
		utils.ContextKeyIsRoot.Set(c, false)
		verify := []fiber.Handler{
			middlewares.BucketObjectNameValidator(),
			middlewares.AuthorizePublicBucketAccess(be, op.metric, op.action, op.permission, region, false),
			middlewares.VerifyPresignedV4Signature(root, iam, region, false),
			middlewares.VerifyV4Signature(root, iam, region, false, true, false),
		}
		if !op.get {
			verify = append(verify, middlewares.VerifyChecksums(false, false, false))
		}
		for _, h := range verify {
			if err := h(c); err != nil {
				return writeS3Error(c, err)
			}
		}
		acct, _ := utils.ContextKeyAccount.Get(c).(auth.Account)
		isRoot, _ := utils.ContextKeyIsRoot.Get(c).(bool)
		if err := k.serveOwnCall(c, op, acct, isRoot); err != nil {
			return writeS3Error(c, k.toS3(err, op.bucket))
		}
		return nil
	}
}

// writeS3Error answers an error as S3 does (an internal error when it is
// not an S3 one).
func writeS3Error(c fiber.Ctx, err error) error {
	var s3e s3err.S3Error
	if !errors.As(err, &s3e) {
		s3e = s3err.GetAPIError(s3err.ErrInternalError)
	}
	base := s3e.BaseError()
	return writeError(c, &base)
}

// serveOwnCall authorises and serves one call.
func (b *Backend) serveOwnCall(c fiber.Ctx, op ownCall, acct auth.Account, isRoot bool) error {
	ctx := c.RequestCtx()
	if op.create {
		if err := auth.VerifyCreateBucketAccess(c, b.iamService, isRoot, acct, op.bucket); err != nil {
			return err
		}
		return b.createBucketWithACL(c, op.bucket, acct.Access)
	}
	bk, err := b.pool.StatBucket(ctx, op.bucket)
	if err != nil {
		return err
	}
	if err := b.rootDenied(ctx, bk); err != nil {
		return err
	}
	if !utils.ContextKeyPublicBucket.IsSet(c) {
		if err := auth.VerifyAccess(c, b, auth.AccessOptions{
			Acl: b.effectiveACL(ctx, bk), AclPermission: op.permission, IsRoot: isRoot, Acc: acct,
			Bucket: op.bucket, Object: op.key, Actions: []auth.Action{op.action}, Iam: b.iamService,
		}); err != nil {
			return err
		}
	}
	switch {
	case op.policy:
		return b.servePolicy(c, op, bk)
	case op.status:
		return b.servePolicyStatus(c, bk)
	}
	version := string(ctx.QueryArgs().Peek("versionId"))
	var current auth.ACL
	if op.key == "" {
		current = b.storedBucketACL(bk)
	} else {
		h, _, err := b.openVersion(ctx, op.bucket, op.key, version, false)
		if err != nil {
			return err
		}
		current = b.objectACLOf(bk, h.Info().Meta)
		if v := writtenVersionID(h.Info().VersionID); v != nil && version != "" {
			c.Set("X-Amz-Version-Id", *v)
		}
	}
	if op.get {
		c.Response().Header.SetContentType(fiber.MIMEApplicationXML)
		return c.Status(http.StatusOK).Send(renderACL(current, b.ids()))
	}
	target := aclTarget{object: op.key != "", owner: current.Owner, bucketOwner: b.ownerOf(bk)}
	acl, err := readACLRequest(c.Request().Header.Peek, c.Body()).build(target, b.ids())
	switch {
	case err != nil:
		return err
	case acl == nil:
		return s3err.GetAPIError(s3err.ErrMissingSecurityHeader)
	case op.key == "":
		err = b.setBucketACL(ctx, op.bucket, *acl)
	default:
		err = b.setObjectACL(ctx, bk, op.key, version, *acl)
	}
	if err != nil {
		return err
	}
	return answerEmpty(c, http.StatusOK)
}

// createBucketWithACL creates a bucket whose CreateBucket sets an ACL.
func (b *Backend) createBucketWithACL(c fiber.Ctx, bucket, creator string) error {
	h := &c.Request().Header
	ownership := types.ObjectOwnership(h.Peek("X-Amz-Object-Ownership"))
	switch ownership {
	case "", types.ObjectOwnershipBucketOwnerEnforced, types.ObjectOwnershipBucketOwnerPreferred, types.ObjectOwnershipObjectWriter:
	default:
		return s3err.GetInvalidArgObjectOwnership(string(ownership))
	}
	acl, err := readACLRequest(h.Peek, nil).build(aclTarget{owner: creator}, b.ids())
	if err != nil {
		return err
	}
	if ownership == types.ObjectOwnershipBucketOwnerEnforced && !onlyOwnerFullControl(*acl) {
		return s3err.GetAPIError(s3err.ErrInvalidBucketAclWithObjectOwnership)
	}
	var conf s3response.CreateBucketConfiguration
	if body := c.Body(); len(body) > 0 {
		if xml.Unmarshal(body, &conf) != nil {
			return s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		if lc := conf.LocationConstraint; lc != nil && (*lc != b.region || *lc == "us-east-1") {
			return s3err.GetInvalidLocationConstraintErr(*lc)
		}
	}
	lock := strings.EqualFold(string(h.Peek("X-Amz-Bucket-Object-Lock-Enabled")), "true")
	err = b.createBucket(c.RequestCtx(), &s3.CreateBucketInput{
		Bucket: &bucket, ObjectOwnership: ownership, ObjectLockEnabledForBucket: &lock,
		CreateBucketConfiguration: &types.CreateBucketConfiguration{Tags: conf.TagSet},
	}, creator, encodeACL(*acl))
	if err != nil {
		return err
	}
	c.Set("Location", "/"+bucket)
	return answerEmpty(c, http.StatusOK)
}

// ownershipAsked is the object ownership a CreateBucket request named
// ("" when it named none: no ownership controls, ACLs on).
func ownershipAsked(ctx context.Context) (types.ObjectOwnership, bool) {
	rc, ok := frontCtx(ctx)
	if !ok {
		return "", false
	}
	return types.ObjectOwnership(rc.Request.Header.Peek("X-Amz-Object-Ownership")), true
}
