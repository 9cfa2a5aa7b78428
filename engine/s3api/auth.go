package s3api

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3sig"
)

// secrets are the keys a request may be signed with: root's, the users
// file's, and the IAM directory's.
type secrets struct {
	s   *Server
	ctx context.Context
	// session is the request's STS session (its token opened), whose
	// access key signs with its secret.
	session *iam.Session
}

func (k secrets) Secret(access string) (string, bool) {
	if k.session != nil && access == k.session.AccessKey {
		return k.session.Secret, true
	}
	if subtle.ConstantTimeCompare([]byte(access), []byte(k.s.cfg.RootAccess)) == 1 {
		return k.s.cfg.RootSecret, true
	}
	if k.s.cfg.Users != nil {
		if secret, ok := k.s.cfg.Users.Secret(access); ok {
			return secret, true
		}
	}
	if k.s.cfg.Directory != nil {
		secret, owner, ok := k.s.cfg.Directory.Secret(k.ctx, access)
		if ok && owner.Account != "" {
			// An account's keys sign while its root is in the users file.
			_, ok = k.s.accountRoot(owner.Account)
		}
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
	keys, err := r.sessionSecrets()
	if err != nil {
		return err
	}
	a, err := s3sig.Verify(r.hr.Request, keys, r.s.sigOptions())
	if err != nil {
		return err
	}
	r.setIdentity(a, keys.session)
	return nil
}

// sessionSecrets are the keys the request may be signed with, its STS
// session's included when it carries a session token (header, or a
// presigned URL's query): a token that is no session of this tenant's is
// InvalidToken, one past its expiry ExpiredToken, one whose role was
// deleted (or deleted and made again) since InvalidToken.
func (r *request) sessionSecrets() (secrets, error) {
	token := r.h("X-Amz-Security-Token")
	if token == "" {
		token = r.q("X-Amz-Security-Token")
	}
	return r.withSession(token)
}

// withSession are the keys a request may be signed with, a session
// token's ("": none) among them.
func (r *request) withSession(token string) (secrets, error) {
	keys := secrets{s: r.s, ctx: r.ctx}
	if token == "" {
		return keys, nil
	}
	if r.s.cfg.Sessions == nil {
		return keys, s3err.InvalidToken
	}
	sess, err := r.s.cfg.Sessions.Open(token)
	switch {
	case errors.Is(err, iam.ErrTokenExpired):
		return keys, s3err.ExpiredToken
	case err != nil:
		return keys, s3err.InvalidToken
	}
	if sess.Role != "" {
		role, err := r.s.cfg.Directory.Get(iam.KindRole, sess.Account, sess.Role)
		if err != nil || role.ID != sess.RoleID {
			return keys, s3err.InvalidToken.With("The role this session was made for no longer exists.")
		}
	}
	keys.session = &sess
	return keys, nil
}

// setIdentity records who the request was authenticated as.
func (r *request) setIdentity(a *s3sig.Auth, session *iam.Session) {
	r.auth = a
	r.access = a.AccessKey
	r.drainable = a.AccessKey != ""
	r.root = a.AccessKey != "" && (a.AccessKey == r.s.cfg.RootAccess || r.s.cfg.Users != nil && r.s.cfg.Users.IsAdmin(a.AccessKey))
	r.who = r.s.principalOf(r.ctx, a.AccessKey)
	if sess := session; sess != nil && sess.AccessKey == a.AccessKey {
		r.who = principal{account: sess.Account, user: sess.User, directory: true,
			accountRoot: sess.Role == "" && sess.User == "", session: sess}
		r.root = false
		if access, ok := r.s.declaredUser(sess); ok {
			// A users-file user's session acts as the user itself.
			r.access, r.who.directory = access, false
			r.root = r.s.cfg.Users.IsAdmin(access)
		}
	}
	if r.who.directory {
		// A directory key acts for its account: what it creates is the
		// account's; what a user may do, its policies say (iam.go).
		r.access, _ = r.s.accountRoot(r.who.account)
		r.root = r.who.accountRoot && r.who.account == ""
	}
}
