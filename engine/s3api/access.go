package s3api

import (
	"encoding/xml"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// Authorisation. The root account (and users with its rights) may do
// anything but what its bucket's policy explicitly denies (S3's rule for
// the bucket owner, except managing the policy itself, so a policy never
// locks its owner out). Anyone else, users and anonymous requests alike,
// is judged as AWS combines resource and identity policies:
//
//   - the bucket's side: its policy's decision for the request's actions
//     on its resource; when the policy says nothing of them, its ACL (the
//     object's own for reads of an object and of its ACL);
//   - the principal's side: the user's grants (engine/iam);
//   - an explicit Deny from the bucket's side refuses; otherwise an Allow
//     from either side is enough; otherwise the request is refused.
//
// The public access block shapes the bucket's side: IgnorePublicAcls
// drops public ACL grants, RestrictPublicBuckets makes a public policy
// grant anonymous requests nothing.

// authorize decides whether the request may run, by its operation's rule.
func (r *request) authorize() error {
	switch r.op.access {
	case accessInHandler:
		return nil
	case accessService:
		d := r.identityDecides(s3rules.ActListAllMyBuckets, "arn:aws:s3:::*")
		if r.access == "" || d == s3rules.Deny || r.directoryUser() && d != s3rules.Allow {
			return s3err.AccessDenied
		}
		return nil
	case accessCreate:
		switch d := r.identityDecides(s3rules.ActCreateBucket, s3rules.Resource(r.bucket, "")); {
		case d == s3rules.Deny:
			return s3err.AccessDenied
		case r.directoryUser():
			if d == s3rules.Allow {
				return nil
			}
			return s3err.AccessDenied
		case r.root || d == s3rules.Allow || r.access != "" && r.s.cfg.Users != nil && r.s.cfg.Users.CanCreateBuckets(r.access):
			return nil
		}
		return s3err.AccessDenied
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	actions := r.op.actions
	if r.q("versionId") != "" && len(r.op.versioned) > 0 {
		actions = r.op.versioned
	}
	return r.allowed(bk, r.key, r.q("versionId"), actions, r.op.perm, r.op.objectACL)
}

// policyManagement are the actions the bucket owner keeps whatever its
// policy says.
var policyManagement = map[s3rules.Action]bool{
	s3rules.ActGetBucketPolicy: true, s3rules.ActPutBucketPolicy: true, s3rules.ActDeleteBucketPolicy: true,
}

// allowed decides whether the request may do actions on key of bucket bk
// (key "" for the bucket itself); perm is the ACL permission that would
// grant them, objectACL says the object's own ACL governs.
func (r *request) allowed(bk objlayer.BucketInfo, key, versionID string, actions []s3rules.Action, perm s3rules.Permission, objectACL bool) error {
	policy, broken := r.s.bucketPolicy(bk)
	resource := s3rules.Resource(bk.Name, key)
	if r.directoryUser() {
		return r.allowedAsDirectoryUser(bk, policy, broken, resource, key, versionID, actions, perm, objectACL)
	}
	decide := func(a s3rules.Action) s3rules.Decision {
		if broken {
			// A stored policy that no longer parses grants nothing and
			// denies all but its own management (fail closed).
			return s3rules.Deny
		}
		if policy == nil {
			return s3rules.NoMatch
		}
		return policy.Decide(s3rules.PolicyRequest{Principal: r.access, PrincipalARNs: r.principalARNs(), Action: a, Resource: resource,
			Context: r.conditions(bk.Name, key, versionID)})
	}
	if r.root {
		for _, a := range actions {
			if !policyManagement[a] && decide(a) == s3rules.Deny {
				return s3err.AccessDenied
			}
		}
		return nil
	}
	if len(actions) == 0 {
		// An operation no policy action names (one not implemented): the
		// bucket's owner only, so an anonymous client learns nothing.
		if r.access != "" && r.access == r.s.ownerOf(bk) {
			return nil
		}
		return s3err.AccessDenied
	}
	// The user's identity policies (users-file users may have some): a
	// Deny refuses even in the user's own bucket; Allows for every action
	// are enough.
	ownAllows := r.who.user != ""
	for _, a := range actions {
		switch r.identityDecides(a, resource) {
		case s3rules.Deny:
			return s3err.AccessDenied
		case s3rules.NoMatch:
			ownAllows = false
		}
	}
	restricted := r.access == "" && publicAccessBlock(bk).RestrictPublicBuckets
	ownerManagingPolicy := func(a s3rules.Action) bool { return policyManagement[a] && r.access == r.s.ownerOf(bk) }
	side := s3rules.Allow
	for _, a := range actions {
		d := decide(a)
		if d == s3rules.Allow && restricted {
			d = s3rules.NoMatch // a public policy grants anonymous requests nothing
		}
		switch {
		case d == s3rules.Deny && !ownerManagingPolicy(a):
			return s3err.AccessDenied
		case d == s3rules.NoMatch:
			side = s3rules.NoMatch
		}
	}
	if side == s3rules.NoMatch && r.effectiveACL(bk, key, versionID, objectACL, actions).Allows(r.access, perm) {
		side = s3rules.Allow
	}
	if side == s3rules.Allow || ownAllows || r.identityAllows(bk.Name, actions) {
		return nil
	}
	return s3err.AccessDenied
}

// identityAllows reports whether the user's grants allow every action.
func (r *request) identityAllows(bucket string, actions []s3rules.Action) bool {
	if r.access == "" || r.s.cfg.Users == nil {
		return false
	}
	for _, a := range actions {
		if !r.s.cfg.Users.IdentityAllows(r.access, string(a), bucket) {
			return false
		}
	}
	return true
}

// ownerOf is a bucket's owner (root's for buckets from before owners were
// kept, and for buckets made through POSIX on the gateway).
func (s *Server) ownerOf(bk objlayer.BucketInfo) string {
	if bk.Owner == "" {
		return s.cfg.RootAccess
	}
	return bk.Owner
}

// owns reports whether the account named (its canonical ID or access
// key) owns bk.
func (s *Server) owns(account string, bk objlayer.BucketInfo) bool {
	owner := s.ownerOf(bk)
	if account == owner {
		return true
	}
	id, _, ok := s.ids.Identity(owner)
	return ok && id == account
}

// providerKey is the condition key PROVIDER:name of the request's web
// identity session ("" when it has none: it matches no key).
func (r *request) providerKey(k, name string) string {
	if sess := r.who.session; sess != nil && sess.Provider != "" && k == strings.ToLower(sess.Provider)+":"+name {
		return k
	}
	return "\x00"
}

// publicAccessBlock is a bucket's configuration (all false: none).
func publicAccessBlock(bk objlayer.BucketInfo) s3rules.PublicAccessBlock {
	if p := s3rules.StoredPublicAccessBlock(bk.PublicAccessBlock); p != nil {
		return *p
	}
	return s3rules.PublicAccessBlock{}
}

// policyCache keeps parsed bucket policies by their bytes: every request
// to a bucket with a policy evaluates it.
var policyCache sync.Map // string -> *s3rules.BucketPolicy or policyBroken

type policyBroken struct{}

// bucketPolicy is a bucket's stored policy as evaluated: principals no
// longer known match no request. broken reports a stored policy that no
// longer parses.
func (s *Server) bucketPolicy(bk objlayer.BucketInfo) (p *s3rules.BucketPolicy, broken bool) {
	if len(bk.Policy) == 0 {
		return nil, false
	}
	cacheKey := bk.Name + "\x00" + string(bk.Policy)
	if v, ok := policyCache.Load(cacheKey); ok {
		if _, bad := v.(policyBroken); bad {
			return nil, true
		}
		return v.(*s3rules.BucketPolicy), false
	}
	p, err := s3rules.ParseStoredPolicy(bk.Policy, bk.Name, s.ids, false)
	if err != nil {
		s.cfg.Log.Warn("bucket policy no longer parses; denying what it governed until it is replaced", "bucket", bk.Name, "err", err)
		policyCache.Store(cacheKey, policyBroken{})
		return nil, true
	}
	policyCache.Store(cacheKey, p)
	return p, false
}

// effectiveACL is the ACL that judges a request: none but the owner's
// under BucketOwnerEnforced; the object's own for reads of an object and
// of its ACL (the bucket's when the object is not there: whoever may list
// the bucket learns it is missing, anyone else is refused); the public
// groups' grants dropped under IgnorePublicAcls.
func (r *request) effectiveACL(bk objlayer.BucketInfo, key, versionID string, objectACL bool, actions []s3rules.Action) s3rules.ACL {
	if !s3rules.ACLsEnabled(bk.Ownership) {
		return s3rules.OwnerOnly(r.s.ownerOf(bk))
	}
	acl := r.s.bucketACL(bk)
	if objectACL && key != "" && !r.identityAllows(bk.Name, actions) {
		if o, ok := r.objectACL(bk, key, versionID); ok {
			acl = o
		}
	}
	if publicAccessBlock(bk).IgnorePublicAcls {
		acl = acl.WithoutPublicGrants()
	}
	return acl
}

// bucketACL is a bucket's ACL as kept (its owner's full control when none
// was set).
func (s *Server) bucketACL(bk objlayer.BucketInfo) s3rules.ACL {
	if acl := s3rules.DecodeACL(bk.ACL); acl != nil {
		return *acl
	}
	return s3rules.OwnerOnly(s.ownerOf(bk))
}

// objectACL is the ACL of the version a request reads; ok false when the
// version is not there.
func (r *request) objectACL(bk objlayer.BucketInfo, key, versionID string) (s3rules.ACL, bool) {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return s3rules.ACL{}, false
	}
	h, err := r.s.layer.OpenObjectMeta(r.ctx, bk.Name, key, vid)
	if err != nil {
		return s3rules.OwnerOnly(r.s.ownerOf(bk)), err != nil && !isNotFound(err)
	}
	defer h.Close()
	info := h.Info()
	if info.DeleteMarker {
		return s3rules.ACL{}, false
	}
	return r.s.versionACL(bk, info.Meta), true
}

// versionACL is a version's ACL as kept: its owner's full control when
// none was set, the owner being the bucket's.
func (s *Server) versionACL(bk objlayer.BucketInfo, meta map[string]string) s3rules.ACL {
	if acl := s3rules.DecodeACL([]byte(meta[metaACL])); acl != nil {
		return *acl
	}
	return s3rules.OwnerOnly(s.ownerOf(bk))
}

// conditions is the condition context of the request, for an action on
// key of bucket: its own keys, and the tags of the object it acts on,
// read only when a condition asks.
func (r *request) conditions(bucket, key, versionID string) s3rules.ConditionContext {
	var tagsRead bool
	var existing map[string]string
	header := func(name string) ([]string, bool) {
		if v := r.h(name); v != "" {
			return []string{v}, true
		}
		if r.form != nil {
			if v := r.form.Fields.Get(name); v != "" {
				return []string{v}, true
			}
		}
		return nil, false
	}
	principal := r.access
	return func(k string) ([]string, bool) {
		switch k {
		case "aws:sourceip":
			return []string{r.hr.Client.String()}, true
		case "aws:securetransport":
			return []string{strconv.FormatBool(r.secure())}, true
		case "aws:currenttime":
			return []string{r.now.UTC().Format("2006-01-02T15:04:05Z")}, true
		case "aws:epochtime":
			return []string{strconv.FormatInt(r.now.Unix(), 10)}, true
		case "aws:useragent":
			return header("User-Agent")
		case "aws:referer":
			return header("Referer")
		case "aws:username", "aws:userid":
			if principal == "" {
				return nil, false
			}
			return []string{principal}, true
		case "aws:principalarn":
			if principal == "" {
				return nil, false
			}
			return []string{"arn:aws:iam:::user/" + principal}, true
		case "aws:principaltag/" + strings.TrimPrefix(k, "aws:principaltag/"):
			if sess := r.who.session; sess != nil {
				return sess.Tag(strings.TrimPrefix(k, "aws:principaltag/"))
			}
			return nil, false
		case "sts:authentication":
			// Ceph's key: whether the request is signed with STS session
			// credentials.
			return []string{strconv.FormatBool(r.who.session != nil)}, true
		case "aws:principaltype":
			switch {
			case principal == "":
				return []string{"Anonymous"}, true
			case r.root:
				return []string{"Account"}, true
			}
			return []string{"User"}, true
		case r.providerKey(k, "sub"):
			return []string{r.who.session.Subject}, true
		case r.providerKey(k, "aud"), r.providerKey(k, "app_id"):
			return []string{r.who.session.Audience}, true
		case "s3:prefix", "s3:delimiter", "s3:max-keys":
			if v := r.q(k[len("s3:"):]); v != "" {
				return []string{v}, true
			}
			return nil, false
		case "s3:versionid":
			if versionID == "" {
				return nil, false
			}
			return []string{versionID}, true
		case "s3:x-amz-copy-source":
			if src, srcKey, _, err := parseCopySource(r.h("X-Amz-Copy-Source")); err == nil {
				return []string{src + "/" + srcKey}, true
			}
			return nil, false
		case "s3:signatureversion":
			if principal == "" {
				return nil, false
			}
			if r.has("Signature") || strings.HasPrefix(r.h("Authorization"), "AWS ") {
				return []string{"AWS"}, true
			}
			return []string{"AWS4-HMAC-SHA256"}, true
		case "s3:authtype":
			switch {
			case principal == "":
				return nil, false
			case r.form != nil:
				return []string{"POST"}, true
			case r.has("X-Amz-Signature") || r.has("Signature"):
				return []string{"REST-QUERY-STRING"}, true
			}
			return []string{"REST-HEADER"}, true
		case "s3:locationconstraint":
			return nil, false
		case "s3:requestobjecttagkeys":
			t := r.requestTags()
			if t == nil {
				return nil, false
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			return keys, true
		}
		if name, ok := strings.CutPrefix(k, "s3:"); ok && strings.HasPrefix(name, "x-amz-") {
			return header(name)
		}
		if name, ok := strings.CutPrefix(k, "s3:object-lock-"); ok {
			return header("X-Amz-Object-Lock-" + name)
		}
		if tag, ok := strings.CutPrefix(k, "s3:requestobjecttag/"); ok {
			v, ok := r.requestTags()[tag]
			return []string{v}, ok
		}
		if tag, ok := strings.CutPrefix(k, "s3:existingobjecttag/"); ok {
			if !tagsRead {
				tagsRead, existing = true, r.existingTags(bucket, key, versionID)
			}
			v, ok := existing[tag]
			return []string{v}, ok
		}
		return nil, false
	}
}

// requestTags are the tags a request sets: x-amz-tagging, or the Tagging
// document of a PutObjectTagging (nil when it sets none).
func (r *request) requestTags() map[string]string {
	if v := r.h("X-Amz-Tagging"); v != "" {
		vals, err := url.ParseQuery(v)
		if err != nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range vals {
			out[k] = v[0]
		}
		return out
	}
	if r.form != nil {
		if v := r.form.Fields.Get("tagging"); v != "" {
			var doc s3rules.TaggingDocument
			if xml.Unmarshal([]byte(v), &doc) == nil {
				out := map[string]string{}
				for _, t := range doc.Tags {
					out[t.Key] = t.Value
				}
				return out
			}
		}
	}
	if r.op == nil || r.op.name != "PutObjectTagging" || r.taggingDoc == nil {
		return nil
	}
	return r.taggingDoc
}

// existingTags are the tags of the version an action acts on (none when
// it cannot be read).
func (r *request) existingTags(bucket, key, versionID string) map[string]string {
	if key == "" {
		return nil
	}
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil
	}
	h, err := r.s.layer.OpenObjectMeta(r.ctx, bucket, key, vid)
	if err != nil {
		return nil
	}
	defer h.Close()
	return s3rules.DecodeTagQuery(h.Info().Meta[objlayer.MetaTagging])
}
