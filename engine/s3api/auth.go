package s3api

import (
	"context"
	"crypto/subtle"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3sig"
)

// secrets are the keys a request may be signed with: root's, the users
// file's, and the IAM directory's.
type secrets struct {
	s   *Server
	ctx context.Context
}

func (k secrets) Secret(access string) (string, bool) {
	if subtle.ConstantTimeCompare([]byte(access), []byte(k.s.cfg.RootAccess)) == 1 {
		return k.s.cfg.RootSecret, true
	}
	if k.s.cfg.Users != nil {
		if secret, ok := k.s.cfg.Users.Secret(access); ok {
			return secret, true
		}
	}
	if k.s.cfg.Directory != nil {
		secret, _, ok := k.s.cfg.Directory.Secret(k.ctx, access)
		return secret, ok
	}
	return "", false
}

func (s *Server) sigOptions() s3sig.Options {
	return s3sig.Options{Region: s.cfg.Region, Now: s.cfg.Now}
}

// authenticate establishes who sent the request, from its headers and
// query alone (a form upload's signature is in its body: postObject
// checks it). Requests whose document body is too big are refused first,
// before anything else is done for them.
func (r *request) authenticate() error {
	if !r.op.data && r.hr.ContentLength > r.s.cfg.MaxDocument {
		return errTooBig(r.s.cfg.MaxDocument)
	}
	if exp := r.q("X-Amz-Expires"); strings.HasPrefix(exp, "-") && r.has("X-Amz-Signature") {
		// A URL made to expire before it was signed has expired (S3
		// answers 403, as for any expired URL, not a parameter error).
		return s3err.AccessDenied.With("Request has expired")
	}
	a, err := s3sig.Verify(r.hr.Request, secrets{r.s, r.ctx}, r.s.sigOptions())
	if err != nil {
		return err
	}
	r.setIdentity(a)
	return nil
}

// setIdentity records who the request was authenticated as.
func (r *request) setIdentity(a *s3sig.Auth) {
	r.auth = a
	r.access = a.AccessKey
	r.drainable = a.AccessKey != ""
	r.root = a.AccessKey != "" && (a.AccessKey == r.s.cfg.RootAccess || r.s.cfg.Users != nil && r.s.cfg.Users.IsAdmin(a.AccessKey))
	if r.dirUser = r.s.directoryUser(r.ctx, a.AccessKey); r.dirUser != "" {
		// A directory user acts for the account: what it creates is
		// the account's; what it may do, its policies say (iam.go).
		r.access = r.s.cfg.RootAccess
	}
}
