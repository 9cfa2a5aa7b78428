package s3api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/iamapi"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// The tenant's IAM directory (docs/iam.md): its users sign S3 requests
// with keys made through the IAM API, which this front end serves on the
// same port. A directory user acts for its account (what it creates is
// the account's, as an IAM user's is its AWS account's), with exactly
// what its identity policies allow and nothing its own or the bucket's
// policy denies; ACLs, which name accounts, grant it nothing of their
// own. Users of the users file may be given identity policies too: a
// Deny there binds them even in their own buckets, an Allow adds to
// their grant.

// Directory is the tenant's IAM directory (engine/iam.Directory).
type Directory interface {
	// Secret returns an active key's secret and whom it signs for.
	Secret(ctx context.Context, access string) (secret string, owner iam.KeyOwner, ok bool)
	// IdentityPolicies returns the documents that decide a user's
	// requests: its own inline and attached ones and its groups'.
	IdentityPolicies(account, user string) []string
	// RolePolicies returns a role's; Get finds an entity (a session's role
	// must still be the one it was made for).
	RolePolicies(account, role string) []string
	Get(kind iam.Kind, account, name string) (iam.Entity, error)
}

// principal is who a request acts as in IAM's terms.
type principal struct {
	// account is the IAM account ("" the tenant's).
	account string
	// user names the user whose identity policies apply ("": none).
	user string
	// directory: a key of the directory (a user's, or an account root's
	// made through the IAM API); a directory user's policies are its only
	// grants.
	directory bool
	// accountRoot: the account's root itself.
	accountRoot bool
	// session is the STS session whose credentials signed the request.
	session *iam.Session
}

// principalOf is the principal an authenticated key acts as.
func (s *Server) principalOf(ctx context.Context, access string) principal {
	switch {
	case access == "":
		return principal{}
	case access == s.cfg.RootAccess:
		return principal{accountRoot: true}
	case s.cfg.Users != nil:
		if _, ok := s.cfg.Users.Secret(access); ok {
			if account, root := s.cfg.Users.AccountOf(access); root {
				return principal{account: account, accountRoot: true}
			}
			if s.cfg.Directory == nil || s.cfg.Users.IsAdmin(access) {
				return principal{}
			}
			id, _, _ := s.cfg.Users.Identity(access)
			return principal{user: id}
		}
	}
	if s.cfg.Directory == nil {
		return principal{}
	}
	_, owner, ok := s.cfg.Directory.Secret(ctx, access)
	if !ok {
		return principal{}
	}
	return principal{account: owner.Account, user: owner.User, directory: true, accountRoot: owner.User == ""}
}

// accountRoot is the access key an account's requests own and act with
// (the tenant's root for the tenant's account).
func (s *Server) accountRoot(account string) (string, bool) {
	if account == "" {
		return s.cfg.RootAccess, true
	}
	if s.cfg.Users == nil {
		return "", false
	}
	return s.cfg.Users.RootOf(account)
}

// declaredUser returns the access key of the users-file user a session
// of GetSessionToken acts as.
func (s *Server) declaredUser(sess *iam.Session) (string, bool) {
	if sess.User == "" || sess.Account != "" || sess.Role != "" || s.cfg.Users == nil {
		return "", false
	}
	return s.cfg.Users.AccessOf(sess.User)
}

// directoryUser reports a request of a directory user or of a role's
// session, whose identity policies are its only grants.
func (r *request) directoryUser() bool {
	return r.who.directory && (r.who.user != "" || r.who.session != nil && r.who.session.Role != "")
}

// maxIAMRequest bounds an IAM or STS request's form (IAM's largest
// document is 10,240 characters; the form escapes it).
const maxIAMRequest = 64 << 10

var (
	opIAM = &operation{name: "IAM", access: accessInHandler}
	opSTS = &operation{name: "STS", access: accessInHandler}
)

// queryService names the Query API a request is for: a POST to / signed
// for the service iam or sts ("" for S3's requests).
func (s *Server) queryService(r *request) string {
	if s.cfg.IAM == nil || r.hr.Method != http.MethodPost || r.hr.URL.Path != "/" {
		return ""
	}
	switch svc := s3sig.Service(r.hr.Request); {
	case svc == "iam", svc == "sts" && s.cfg.STS != nil:
		return svc
	case svc == "" && s.cfg.STS != nil && r.hr.Header.Get("Authorization") == "" && !r.has("X-Amz-Signature") &&
		strings.HasPrefix(r.hr.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		// An unsigned form: STS's AssumeRoleWithWebIdentity, whose
		// token is its credential (S3 has no unsigned POST to /).
		return "sts-web"
	}
	return ""
}

// serveQuery authenticates an IAM or STS request over its whole form,
// says who sent it, and lets engine/iamapi run it; errors answer in the
// Query protocol's XML.
func (r *request) serveQuery(service string) {
	r.op = opIAM
	fail := func(err error) { iamapi.WriteError(r.w, err, r.hr.ID) }
	if service != "iam" {
		r.op = opSTS
		fail = func(err error) { iamapi.WriteSTSError(r.w, err, r.hr.ID) }
	}
	if r.hr.ContentLength > maxIAMRequest {
		fail(iamapi.Error("ValidationError", http.StatusBadRequest, "the request is larger than 64 KiB"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.hr.Body, maxIAMRequest+1))
	if err != nil || len(body) > maxIAMRequest {
		fail(iamapi.Error("ValidationError", http.StatusBadRequest, "the request body could not be read whole within 64 KiB"))
		return
	}
	r.bodyRead = true
	if service == "sts-web" {
		form, err := url.ParseQuery(string(body))
		if err != nil || form.Get("Action") != "AssumeRoleWithWebIdentity" {
			fail(iamapi.Error("MissingAuthenticationToken", http.StatusForbidden, "Request is missing Authentication Token"))
			return
		}
		r.s.cfg.STS.Serve(r.ctx, r.w, form, iamapi.Caller{}, r.hr.ID)
		return
	}
	keys, err := r.sessionSecrets()
	if err != nil {
		fail(queryAuthError(err, service))
		return
	}
	a, err := s3sig.VerifyService(r.hr.Request, body, service, keys, r.s.sigOptions())
	if err != nil {
		fail(queryAuthError(err, service))
		return
	}
	r.setIdentity(a, keys.session)
	form, err := url.ParseQuery(string(body))
	if err != nil {
		fail(iamapi.Error("MalformedQueryString", http.StatusBadRequest, "the form could not be parsed"))
		return
	}
	c := iamapi.Caller{Account: r.who.account, Root: r.who.accountRoot, Admin: r.root || r.who.accountRoot,
		User: r.who.user, Session: r.who.session}
	if !c.Admin {
		c.Allows = func(action, resource string) bool {
			return r.identityDecides(s3rules.Action(action), resource) == s3rules.Allow
		}
	}
	if service == "sts" {
		r.s.cfg.STS.Serve(r.ctx, r.w, form, c, r.hr.ID)
		return
	}
	r.s.cfg.IAM.Serve(r.ctx, r.w, form, c, r.hr.ID)
}

// queryAuthError is an authentication failure as IAM and STS answer it.
func queryAuthError(err error, service string) error {
	e, ok := s3err.As(err)
	if !ok {
		return err
	}
	switch e.Code {
	case s3err.InvalidAccessKeyID.Code, s3err.InvalidToken.Code:
		return iamapi.Error("InvalidClientTokenId", http.StatusForbidden, "The security token included in the request is invalid.")
	case s3err.ExpiredToken.Code:
		code := "ExpiredToken"
		if service == "sts" {
			code = "ExpiredTokenException"
		}
		return iamapi.Error(code, http.StatusBadRequest, "The security token included in the request is expired")
	case s3err.SignatureDoesNotMatch.Code:
		return iamapi.Error("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")
	}
	return iamapi.Error(e.Code, e.Status, e.Message)
}

// identityDecides is what the principal's identity policies say of an
// action on a resource: an explicit Deny in any wins, then an Allow. A
// stored policy that no longer parses denies (fail closed).
func (r *request) identityDecides(action s3rules.Action, resource string) s3rules.Decision {
	d := s3rules.NoMatch
	if r.root || r.s.cfg.Directory == nil {
		return d
	}
	var docs []string
	switch sess := r.who.session; {
	case sess != nil && sess.Role != "":
		docs = r.s.cfg.Directory.RolePolicies(sess.Account, sess.Role)
	case r.who.user != "":
		docs = r.s.cfg.Directory.IdentityPolicies(r.who.account, r.who.user)
	default:
		return d
	}
	if len(docs) == 0 {
		return d // most users of the users file: nothing to evaluate
	}
	req := s3rules.PolicyRequest{Action: action, Resource: resource, Context: r.conditions(bucketOf(resource), "", "")}
	d = r.s.decideAll(docs, req)
	if sess := r.who.session; sess != nil && len(sess.Policies) > 0 && d == s3rules.Allow {
		// A session policy narrows: what it does not allow, the session
		// may not do.
		d = r.s.decideAll(sess.Policies, req)
	}
	return d
}

// decideAll is what a set of identity policies says of a request: an
// explicit Deny in any wins, then an Allow. A stored policy that no
// longer parses denies (fail closed).
func (s *Server) decideAll(docs []string, req s3rules.PolicyRequest) s3rules.Decision {
	d := s3rules.NoMatch
	for _, doc := range docs {
		p, err := s.identityPolicy(doc)
		if err != nil {
			return s3rules.Deny
		}
		switch p.Decide(req) {
		case s3rules.Deny:
			return s3rules.Deny
		case s3rules.Allow:
			d = s3rules.Allow
		}
	}
	return d
}

// bucketOf is the bucket an S3 resource ARN names ("" for others).
func bucketOf(resource string) string {
	rest, ok := strings.CutPrefix(resource, "arn:aws:s3:::")
	if !ok {
		return ""
	}
	b, _, _ := strings.Cut(rest, "/")
	return b
}

// identityPolicy parses an identity policy once per distinct document.
func (s *Server) identityPolicy(doc string) (*s3rules.BucketPolicy, error) {
	if v, ok := s.identityPolicies.Load(doc); ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(*s3rules.BucketPolicy), nil
	}
	p, err := s3rules.ParseIdentityPolicy([]byte(doc))
	if err != nil {
		s.identityPolicies.Store(doc, err)
		return nil, err
	}
	s.identityPolicies.Store(doc, p)
	return p, nil
}

// CheckIdentityPolicy validates an inline policy as the IAM API stores
// it: what this front end will evaluate.
func CheckIdentityPolicy(doc string) error {
	return policyMessage(s3rules.ParseIdentityPolicy([]byte(doc)))
}

// CheckTrustPolicy validates a role's trust policy as the IAM API stores
// it: what AssumeRole will evaluate.
func CheckTrustPolicy(doc string) error { return policyMessage(s3rules.ParseTrustPolicy([]byte(doc))) }

// policyMessage is a parse's refusal as IAM words it: S3's message alone.
func policyMessage(_ *s3rules.BucketPolicy, err error) error {
	var e *s3err.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}

// allowedAsDirectoryUser decides an S3 request of a directory user or a
// role's session: a Deny from the bucket's policy or the principal's own
// refuses. In the bucket's own account, every action then needs an Allow
// from either side; from another account, from both (the bucket's policy
// or, failing that, its ACL granting the caller's account), as AWS rules
// requests across accounts.
func (r *request) allowedAsDirectoryUser(bk objlayer.BucketInfo, policy *s3rules.BucketPolicy, broken bool, resource, key, versionID string,
	actions []s3rules.Action, perm s3rules.Permission, objectACL bool) error {
	if len(actions) == 0 {
		return s3err.AccessDenied
	}
	cross := r.who.account != r.s.accountOfBucket(bk)
	needACL := false
	for _, a := range actions {
		bucketSide := s3rules.NoMatch
		switch {
		case broken:
			bucketSide = s3rules.Deny
		case policy != nil:
			req := s3rules.PolicyRequest{Principal: r.access, PrincipalARNs: r.principalARNs(), Action: a,
				Resource: resource, Context: r.conditions(bk.Name, key, versionID)}
			bucketSide = policy.Decide(req)
			if sess := r.who.session; bucketSide == s3rules.Allow && sess != nil && len(sess.Policies) > 0 {
				// As AWS's: an Allow naming the session itself stands;
				// one naming its role (or account) is narrowed by the
				// session's policies like the role's own.
				req.PrincipalARNs = sessionARNs(r.principalAccount(), sess)
				if policy.Decide(req) != s3rules.Allow && r.s.decideAll(sess.Policies, req) != s3rules.Allow {
					bucketSide = s3rules.NoMatch
				}
			}
		}
		own := r.identityDecides(a, resource)
		switch {
		case bucketSide == s3rules.Deny || own == s3rules.Deny:
			return s3err.AccessDenied
		case cross && own != s3rules.Allow:
			return s3err.AccessDenied
		case cross && bucketSide != s3rules.Allow:
			needACL = true
		case !cross && bucketSide != s3rules.Allow && own != s3rules.Allow:
			return s3err.AccessDenied
		}
	}
	if needACL && !r.effectiveACL(bk, key, versionID, objectACL, actions).Allows(r.access, perm) {
		return s3err.AccessDenied
	}
	return nil
}

// accountOfBucket is the IAM account a bucket belongs to: its owner's,
// when the owner is an account's root; the tenant's otherwise.
func (s *Server) accountOfBucket(bk objlayer.BucketInfo) string {
	if s.cfg.Users == nil {
		return ""
	}
	account, _ := s.cfg.Users.AccountOf(s.ownerOf(bk))
	return account
}

// principalAccount is the account the request's principal acts in, as its
// ARNs name it.
func (r *request) principalAccount() string {
	if r.who.account != "" {
		return r.who.account
	}
	return r.s.cfg.Account
}

// sessionARNs name a role session as policies may: STS's ARN of it, and
// Ceph's, which names it under iam.
func sessionARNs(acct string, sess *iam.Session) []string {
	return []string{fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", acct, sess.Role, sess.Name),
		fmt.Sprintf("arn:aws:iam::%s:assumed-role/%s/%s", acct, sess.Role, sess.Name)}
}

// principalARNs name the request's principal as policies may: its own
// ARN (a user's, a role session's and its role's), its account's root ARN
// and its account's ID.
func (r *request) principalARNs() []string {
	if r.access == "" {
		return nil
	}
	acct := r.principalAccount()
	arns := make([]string, 0, 5)
	switch sess := r.who.session; {
	case sess != nil && sess.Role != "":
		arns = append(arns, sessionARNs(acct, sess)...)
		if role, err := r.s.cfg.Directory.Get(iam.KindRole, sess.Account, sess.Role); err == nil {
			arns = append(arns, fmt.Sprintf("arn:aws:iam::%s:role%s%s", acct, role.Path, role.Name))
		}
	case r.who.user != "":
		path := "/"
		if r.s.cfg.Directory != nil {
			if u, err := r.s.cfg.Directory.Get(iam.KindUser, r.who.account, r.who.user); err == nil {
				path = u.Path
			}
		}
		arns = append(arns, fmt.Sprintf("arn:aws:iam::%s:user%s%s", acct, path, r.who.user))
	}
	arns = append(arns, fmt.Sprintf("arn:aws:iam::%s:root", acct))
	if acct != "" {
		arns = append(arns, acct)
	}
	return arns
}
