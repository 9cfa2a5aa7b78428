package s3front

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
)

// How the bucket policy's decisions reach the front end's access check.
// It reads "the bucket policy" through GetBucketPolicy and evaluates it
// with its own matcher, for the actions and resources of the request it
// checks (a copy checks its source's bucket too, a multi-object delete
// every key). So while it evaluates, GetBucketPolicy answers a document
// made of this package's decisions for that request: one statement per
// action and resource the request needs that the policy allows or denies
// (Principal "*": the principal was already matched), or no policy when
// the policy says nothing of the request, which lets the bucket's ACL
// decide, as S3 combines the two.
//
// The root account is not checked by the front end at all; S3 subjects
// even the bucket owner to an explicit Deny in its bucket policy, except
// for managing the policy itself. rootDenied does that, from the ACL
// lookup the front end makes before every bucket and object call.

// synthesized is a statement of the document given to the front end.
type synthesized struct {
	Effect    string   `json:"Effect"`
	Principal string   `json:"Principal"`
	Action    []string `json:"Action"`
	Resource  []string `json:"Resource"`
}

// policyFor is the bucket policy the front end evaluates for the request
// in ctx (see above).
func (b *Backend) policyFor(ctx context.Context, bk objlayer.BucketInfo) ([]byte, error) {
	none := s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
	p, broken := b.evaluatedPolicy(bk)
	rc, ok := frontCtx(ctx)
	if (p == nil && !broken) || !ok {
		return nil, none
	}
	principal, root := requester(ctx)
	restricted := false
	if pab := bucketPublicAccessBlock(bk); pab != nil && pab.RestrictPublicBuckets && anonymousEvaluation(ctx) {
		restricted = true // a public policy grants anonymous requests nothing
	}
	var stmts []synthesized
	for _, a := range requestActions(rc) {
		if a.bucket != bk.Name {
			continue
		}
		d := policyDeny // a stored policy that no longer parses grants nothing and denies all
		if p != nil {
			d = p.decide(policyRequest{principal: principal, action: string(a.action), resource: a.resource(),
				context: b.requestConditions(ctx, rc, principal, root, a)})
		}
		if d == policyNoMatch || d == policyAllow && restricted {
			continue
		}
		if d == policyAllow && strings.ContainsAny(a.key, "*?") {
			// The front end matches resources as patterns: an Allow for a
			// key named with * or ? would also cover other keys of the
			// same request (a multi-object delete). Such a key is granted
			// by identity policies and ACLs only; a Deny may cover more
			// than its own key, which only refuses more.
			continue
		}
		effect := "Allow"
		if d == policyDeny {
			effect = "Deny"
		}
		stmts = append(stmts, synthesized{Effect: effect, Principal: "*", Action: []string{string(a.action)}, Resource: []string{a.resource()}})
	}
	if len(stmts) == 0 {
		return nil, none
	}
	return json.Marshal(struct {
		Version   string        `json:"Version"`
		Statement []synthesized `json:"Statement"`
	}{"2012-10-17", stmts})
}

// evaluatedPolicy is a bucket's stored policy as evaluated: principals no
// longer known match no request (a removed user's Deny still denies
// anyone else it names nothing new). broken reports a stored policy that
// no longer parses at all, which then denies everything but its own
// management (fail closed).
func (b *Backend) evaluatedPolicy(bk objlayer.BucketInfo) (p *bucketPolicy, broken bool) {
	if len(bk.Policy) == 0 {
		return nil, false
	}
	p, err := parseBucketPolicyWith(bk.Policy, bk.Name, b.ids(), false)
	if err != nil {
		if b.log != nil {
			b.log.Warn("bucket policy no longer parses; denying what it governed until it is replaced", "bucket", bk.Name, "err", err)
		}
		return nil, true
	}
	return p, false
}

// policyManagement are the actions the bucket owner keeps whatever its
// policy says (so a policy can never lock its owner out).
var policyManagement = map[auth.Action]bool{
	auth.GetBucketPolicyAction: true, auth.PutBucketPolicyAction: true, auth.DeleteBucketPolicyAction: true,
}

// rootDenied refuses a request of the root account that the bucket's
// policy explicitly denies (S3's rule for the bucket owner).
func (b *Backend) rootDenied(ctx context.Context, bk objlayer.BucketInfo) error {
	principal, root := requester(ctx)
	rc, ok := frontCtx(ctx)
	if !root || !ok || len(bk.Policy) == 0 {
		return nil
	}
	p, broken := b.evaluatedPolicy(bk)
	for _, a := range requestActions(rc) {
		if a.bucket != bk.Name || policyManagement[a.action] {
			continue
		}
		if broken || p.decide(policyRequest{principal: principal, action: string(a.action), resource: a.resource(),
			context: b.requestConditions(ctx, rc, principal, root, a)}) == policyDeny {
			return s3err.GetAPIError(s3err.ErrAccessDenied)
		}
	}
	return nil
}

// servePolicy answers GET ?policy (the document as stored) and PUT ?policy
// (checked by this package's parser, refused under BlockPublicPolicy when
// public).
func (b *Backend) servePolicy(c fiber.Ctx, op ownCall, bk objlayer.BucketInfo) error {
	if op.get {
		if len(bk.Policy) == 0 {
			return s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
		}
		c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
		return c.Status(http.StatusOK).Send(bk.Policy)
	}
	doc := clone(c.Body())
	p, err := parseBucketPolicy(doc, bk.Name, b.ids())
	if err != nil {
		return err
	}
	if pab := bucketPublicAccessBlock(bk); pab != nil && pab.BlockPublicPolicy && p.public() {
		return blockedBy("BlockPublicPolicy")
	}
	if err := b.setBucket(c.RequestCtx(), bk.Name, func(bk *objlayer.BucketInfo) { bk.Policy = doc }); err != nil {
		return err
	}
	return answerEmpty(c, http.StatusNoContent)
}

// servePolicyStatus answers GET ?policyStatus: whether the policy is public.
func (b *Backend) servePolicyStatus(c fiber.Ctx, bk objlayer.BucketInfo) error {
	if len(bk.Policy) == 0 {
		return s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
	}
	p, _ := b.evaluatedPolicy(bk)
	public := "false"
	if p != nil && p.public() {
		public = "true"
	}
	c.Response().Header.SetContentType(fiber.MIMEApplicationXML)
	return c.Status(http.StatusOK).Send([]byte(`<?xml version="1.0" encoding="UTF-8"?>` +
		`<PolicyStatus xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsPublic>` + public + `</IsPublic></PolicyStatus>`))
}
