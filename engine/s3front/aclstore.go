package s3front

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
)

// The server's ACLs: where they live, who owns what, and the ACL the
// front end's access checks evaluate for a request (effectiveACL).

// requester is the principal a request was authenticated as ("" when it
// is anonymous or not a front end request) and whether it is root.
func requester(ctx context.Context) (access string, root bool) {
	rc, ok := frontCtx(ctx)
	if !ok {
		return "", false
	}
	acct, _ := rc.UserValue(string(utils.ContextKeyAccount)).(auth.Account)
	root, _ = rc.UserValue(string(utils.ContextKeyIsRoot)).(bool)
	return acct.Access, root
}

// ids are the tenant's identities (access keys as IDs without users).
func (b *Backend) ids() Identities {
	if b.identities != nil {
		return b.identities
	}
	return accessKeyIDs{root: b.rootAccess}
}

// owner is how ACLs and listings name an access key.
func (b *Backend) owner(access string) *types.Owner {
	id, name := named(access, b.ids())
	return &types.Owner{ID: &id, DisplayName: &name}
}

// storedBucketACL is a bucket's ACL as kept (its owner's full control when
// none was set).
func (b *Backend) storedBucketACL(bk objlayer.BucketInfo) auth.ACL {
	if acl := decodeACL(bk.ACL); acl != nil {
		return *acl
	}
	return ownerOnly(b.ownerOf(bk))
}

// objectACLOf is a version's ACL as kept: its owner's full control when
// none was set, the owner being the bucket's.
func (b *Backend) objectACLOf(bk objlayer.BucketInfo, meta map[string]string) auth.ACL {
	if acl := decodeACL([]byte(meta[metaACL])); acl != nil {
		return *acl
	}
	return ownerOnly(b.ownerOf(bk))
}

// objectACLOnWrite sets, in the metadata of a version a request writes
// (PUT, copy, multipart upload), the ACL and owner the request and the
// bucket's object ownership give it:
//
//   - BucketOwnerEnforced: the bucket's owner owns it and ACLs are off; a
//     request asking for any ACL but bucket-owner-full-control is refused
//     with AccessControlListNotSupported;
//   - BucketOwnerPreferred: the bucket's owner owns it when the request
//     says bucket-owner-full-control, else its writer;
//   - ObjectWriter, or no ownership controls: its writer owns it.
//
// A version owned by its bucket's owner with an owner-only ACL keeps
// nothing (what a version without metaACL means).
func (b *Backend) objectACLOnWrite(ctx context.Context, bk objlayer.BucketInfo, meta map[string]string) error {
	delete(meta, metaACL) // never carried over from a copy's source
	rc, ok := frontCtx(ctx)
	if !ok {
		return nil
	}
	bucketOwner := b.ownerOf(bk)
	req := readACLRequest(rc.Request.Header.Peek, nil)
	if !aclsEnabled(bk.Ownership) {
		// Only what gives the bucket's owner full control, which it has:
		// bucket-owner-full-control, or the same as a grant (S3's rule).
		acl, err := req.build(aclTarget{object: true, owner: bucketOwner, bucketOwner: bucketOwner}, b.ids())
		ok := err == nil && (acl == nil || onlyOwnerFullControl(*acl) && (req.canned == "" || req.canned == "bucket-owner-full-control"))
		if !ok {
			return s3err.GetAPIError(s3err.ErrAclNotSupported)
		}
		return nil
	}
	owner, _ := requester(ctx)
	if owner == "" || bk.Ownership == string(types.ObjectOwnershipBucketOwnerPreferred) && req.canned == "bucket-owner-full-control" {
		owner = bucketOwner
	}
	acl, err := req.build(aclTarget{object: true, owner: owner, bucketOwner: bucketOwner}, b.ids())
	if err != nil {
		return err
	}
	if acl == nil {
		a := ownerOnly(owner)
		acl = &a
	}
	if owner != bucketOwner || !onlyOwnerFullControl(*acl) {
		meta[metaACL] = string(encodeACL(*acl))
	}
	return nil
}

// effectiveACL is the ACL the front end evaluates for the request in ctx
// (its access checks read it through GetBucketAcl): the object's own for
// reads of an object and of its ACL, the bucket's otherwise, each as ACLs
// grant in S3:
//
//   - none but the bucket owner's when its ownership is BucketOwnerEnforced;
//   - the public groups' grants dropped under IgnorePublicAcls;
//   - AuthenticatedUsers' grants given to the principal that signed the
//     request (the front end knows only AllUsers and named principals).
func (b *Backend) effectiveACL(ctx context.Context, bk objlayer.BucketInfo) auth.ACL {
	if !aclsEnabled(bk.Ownership) {
		return ownerOnly(b.ownerOf(bk))
	}
	acl := b.storedBucketACL(bk)
	access, root := requester(ctx)
	if rc, ok := frontCtx(ctx); ok && !root {
		if key, version, ok := objectACLRequest(rc); ok && !b.grantedByIdentity(access, bk.Name, rc) {
			acl = b.objectACLFor(ctx, bk, key, version)
		}
	}
	if p := bucketPublicAccessBlock(bk); p != nil && p.IgnorePublicAcls {
		acl.Grantees = dropGroups(acl.Grantees, groupAllUsers, groupAuthUsers)
	}
	var out []auth.Grantee
	for _, g := range acl.Grantees {
		if g.Type == types.TypeGroup && g.Access == groupAuthUsers {
			if access != "" {
				out = append(out, auth.Grantee{Permission: g.Permission, Access: access, Type: types.TypeCanonicalUser})
			}
			continue
		}
		out = append(out, g)
	}
	acl.Grantees = out
	return acl
}

// objectACLFor is the ACL of the version a request reads. For a version
// that is not there it is the bucket's: whoever may list the bucket
// learns that it is missing (404), anyone else is refused (403), as in S3.
// Other failures give the owner alone (the request then fails on its own).
func (b *Backend) objectACLFor(ctx context.Context, bk objlayer.BucketInfo, key, version string) auth.ACL {
	h, _, err := b.openVersion(ctx, bk.Name, key, version, false)
	var s3e s3err.APIError
	switch {
	case errors.Is(err, objlayer.ErrObjectNotFound) || errors.As(err, &s3e) && (s3e.Code == "NoSuchKey" || s3e.Code == "NoSuchVersion"):
		return b.storedBucketACL(bk)
	case err != nil:
		return ownerOnly(b.ownerOf(bk))
	}
	return b.objectACLOf(bk, h.Info().Meta)
}

// grantedByIdentity reports whether the requester's identity policy
// already allows the request's object read, which no ACL can then change
// (so the object's record need not be read for its ACL).
func (b *Backend) grantedByIdentity(access, bucket string, rc *fasthttp.RequestCtx) bool {
	g, ok := b.access.(identityGrants)
	if !ok || access == "" {
		return false
	}
	action := auth.GetObjectAction
	if rc.QueryArgs().Has("acl") {
		action = auth.GetObjectAclAction
		if string(rc.Method()) == http.MethodPut {
			action = auth.PutObjectAclAction
		}
	}
	return g.Allows(access, action, bucket)
}

// identityGrants is an Access that can tell what a user's identity policy
// allows (iam.Users).
type identityGrants interface {
	Allows(access string, action auth.Action, bucket string) bool
}

// objectACLRequest reports whether a request is governed by an object's
// ACL rather than its bucket's: a GET or HEAD of an object (or of its
// attributes), and GET or PUT of an object's ACL; with the key and the
// version it names.
func objectACLRequest(rc *fasthttp.RequestCtx) (key, version string, ok bool) {
	_, key = splitBucketPath(decodedPath(rc))
	if key == "" {
		return "", "", false
	}
	q := rc.QueryArgs()
	switch m := string(rc.Method()); {
	case q.Has("acl"):
		ok = m == http.MethodGet || m == http.MethodPut
	case m == http.MethodGet || m == http.MethodHead:
		ok = true
		for _, sub := range []string{"tagging", "retention", "legal-hold", "uploadId", "torrent", "select", "restore"} {
			ok = ok && !q.Has(sub)
		}
	}
	return key, string(q.Peek("versionId")), ok
}

// decodedPath is a request's path with its escapes decoded (the front
// end's routes see it so, after a middleware that runs after ours).
func decodedPath(rc *fasthttp.RequestCtx) string {
	if p, err := url.PathUnescape(string(rc.Request.URI().PathOriginal())); err == nil {
		return p
	}
	return string(rc.Path())
}

func dropGroups(gs []auth.Grantee, groups ...string) []auth.Grantee {
	var out []auth.Grantee
	for _, g := range gs {
		drop := false
		for _, name := range groups {
			drop = drop || g.Type == types.TypeGroup && g.Access == name
		}
		if !drop {
			out = append(out, g)
		}
	}
	return out
}

// setBucketACL stores a bucket's ACL, where its ownership allows ACLs and
// BlockPublicAcls does not refuse it.
func (b *Backend) setBucketACL(ctx context.Context, bucket string, acl auth.ACL) error {
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return err
	}
	if !aclsEnabled(bk.Ownership) {
		return s3err.GetAPIError(s3err.ErrAclNotSupported)
	}
	if p := bucketPublicAccessBlock(bk); p != nil && p.BlockPublicAcls && grantsPublic(acl) {
		return blockedBy("BlockPublicAcls")
	}
	doc := encodeACL(acl)
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.ACL = doc })
}

// setObjectACL replaces a version's ACL (its owner stays).
func (b *Backend) setObjectACL(ctx context.Context, bk objlayer.BucketInfo, key, version string, acl auth.ACL) error {
	if !aclsEnabled(bk.Ownership) {
		return s3err.GetAPIError(s3err.ErrAclNotSupported)
	}
	if p := bucketPublicAccessBlock(bk); p != nil && p.BlockPublicAcls && grantsPublic(acl) {
		return blockedBy("BlockPublicAcls")
	}
	vid, err := parseVersionID(version)
	if err != nil {
		return err
	}
	bucketOwner := b.ownerOf(bk)
	_, err = b.pool.UpdateObjectMeta(ctx, bk.Name, key, vid, func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		if acl.Owner == bucketOwner && onlyOwnerFullControl(acl) {
			delete(m, metaACL)
		} else {
			m[metaACL] = string(encodeACL(acl))
		}
		return m
	})
	if errors.Is(err, objlayer.ErrObjectNotFound) && vid != nil {
		return s3err.GetNoSuchVersionErr(key, version)
	}
	return err
}
