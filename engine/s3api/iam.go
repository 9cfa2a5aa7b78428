package s3api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/strata-storage/strata/engine/iamapi"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// The tenant's IAM directory (docs/iam.md): its users sign S3 requests
// with keys made through the IAM API, which this front end serves on the
// same port. A directory user acts for the tenant's account (what it
// creates is the account's, as an IAM user's is its AWS account's), with
// exactly what its identity policies allow and nothing its own or the
// bucket's policy denies; ACLs, which name accounts, grant it nothing of
// their own.

// Directory is the tenant's IAM directory (engine/iam.Directory).
type Directory interface {
	// Secret returns an active key's secret and its user's name.
	Secret(ctx context.Context, access string) (secret, user string, ok bool)
	// Policies returns a user's inline policy documents.
	Policies(user string) []string
}

// maxIAMRequest bounds an IAM request's form (IAM's largest document is
// 10,240 characters; the form escapes it).
const maxIAMRequest = 64 << 10

var opIAM = &operation{name: "IAM", access: accessInHandler}

// iamRequest reports whether a request is one of the IAM API's: a POST to
// / signed for the service iam.
func (s *Server) iamRequest(r *request) bool {
	return s.cfg.IAM != nil && r.hr.Method == http.MethodPost && r.hr.URL.Path == "/" && s3sig.Service(r.hr.Request) == "iam"
}

// serveIAM authenticates an IAM request over its whole form, says who sent
// it, and lets engine/iamapi run it; errors answer in IAM's XML.
func (r *request) serveIAM() {
	r.op = opIAM
	fail := func(err error) { iamapi.WriteError(r.w, err, r.hr.ID) }
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
	a, err := s3sig.VerifyService(r.hr.Request, body, "iam", secrets{r.s, r.ctx}, r.s.sigOptions())
	if err != nil {
		fail(iamAuthError(err))
		return
	}
	r.setIdentity(a)
	form, err := url.ParseQuery(string(body))
	if err != nil {
		fail(iamapi.Error("MalformedQueryString", http.StatusBadRequest, "the form could not be parsed"))
		return
	}
	c := iamapi.Caller{Admin: r.root, User: r.dirUser}
	if r.dirUser != "" {
		c.Allows = func(action, resource string) bool {
			return r.identityDecides(s3rules.Action(action), resource) == s3rules.Allow
		}
	}
	r.s.cfg.IAM.Serve(r.ctx, r.w, form, c, r.hr.ID)
}

// iamAuthError is an authentication failure as IAM answers it.
func iamAuthError(err error) error {
	e, ok := s3err.As(err)
	if !ok {
		return err
	}
	switch e.Code {
	case s3err.InvalidAccessKeyID.Code:
		return iamapi.Error("InvalidClientTokenId", http.StatusForbidden, "The security token included in the request is invalid.")
	case s3err.SignatureDoesNotMatch.Code:
		return iamapi.Error("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")
	}
	return iamapi.Error(e.Code, e.Status, e.Message)
}

// directoryUser names the directory user an authenticated key belongs to
// ("" for root, users of the users file and anonymous requests).
func (s *Server) directoryUser(ctx context.Context, access string) string {
	if s.cfg.Directory == nil || access == "" || access == s.cfg.RootAccess {
		return ""
	}
	if s.cfg.Users != nil {
		if _, ok := s.cfg.Users.Secret(access); ok {
			return ""
		}
	}
	_, user, ok := s.cfg.Directory.Secret(ctx, access)
	if !ok {
		return ""
	}
	return user
}

// identityDecides is what the directory user's identity policies say of
// an action on a resource: an explicit Deny in any wins, then an Allow. A
// stored policy that no longer parses denies (fail closed).
func (r *request) identityDecides(action s3rules.Action, resource string) s3rules.Decision {
	d := s3rules.NoMatch
	for _, doc := range r.s.cfg.Directory.Policies(r.dirUser) {
		p, err := r.s.identityPolicy(doc)
		if err != nil {
			return s3rules.Deny
		}
		switch p.Decide(s3rules.PolicyRequest{Action: action, Resource: resource, Context: r.conditions(bucketOf(resource), "", "")}) {
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
	_, err := s3rules.ParseIdentityPolicy([]byte(doc))
	var e *s3err.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}

// allowedAsDirectoryUser decides an S3 request of a directory user: a
// Deny from the bucket's policy or the user's own refuses; otherwise
// every action needs an Allow from either.
func (r *request) allowedAsDirectoryUser(policy *s3rules.BucketPolicy, broken bool, resource, bucket, key, versionID string, actions []s3rules.Action) error {
	if len(actions) == 0 {
		return s3err.AccessDenied
	}
	for _, a := range actions {
		bucketSide := s3rules.NoMatch
		switch {
		case broken:
			bucketSide = s3rules.Deny
		case policy != nil:
			bucketSide = policy.Decide(s3rules.PolicyRequest{Principal: r.auth.AccessKey, Action: a, Resource: resource,
				Context: r.conditions(bucket, key, versionID)})
		}
		own := r.identityDecides(a, resource)
		if bucketSide == s3rules.Deny || own == s3rules.Deny || bucketSide != s3rules.Allow && own != s3rules.Allow {
			return s3err.AccessDenied
		}
	}
	return nil
}
