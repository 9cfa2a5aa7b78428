package iam

// STS sessions are stateless: the session token is the session itself
// (who it acts as, its secret, its expiry, its session policy), sealed
// with a key derived from the tenant's master key, so that any server
// checks any session without having seen it made and nothing is stored
// per session (docs/iam.md).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Session is what a set of temporary credentials acts as.
type Session struct {
	AccessKey string    `json:"a"`
	Secret    string    `json:"s"`
	Expires   time.Time `json:"e"`
	Account   string    `json:"acct,omitempty"`
	// A role's session: the role's name and ID (the role must still be
	// the same one when the session is used) and the session's name.
	Role   string `json:"r,omitempty"`
	RoleID string `json:"rid,omitempty"`
	Name   string `json:"n,omitempty"`
	// A user's session (GetSessionToken): the user ("" the account's
	// root).
	User string `json:"u,omitempty"`
	// Policies are the session policies, narrowing what the role allows.
	Policies []string `json:"p,omitempty"`
	// A web identity's session: its provider (the issuer's URL without
	// its scheme), subject and audience, for policy conditions
	// (PROVIDER:sub, PROVIDER:aud).
	Provider string `json:"iss,omitempty"`
	Subject  string `json:"sub,omitempty"`
	Audience string `json:"aud,omitempty"`
	// Tags are the session's principal tags (aws:PrincipalTag/KEY): for a
	// Kubernetes ServiceAccount, kubernetes-namespace,
	// kubernetes-service-account and kubernetes-pod-name, as EKS names
	// them.
	Tags map[string]string `json:"tags,omitempty"`
	// TokenTags are the session tags the web identity token carried
	// (oidc.TagsClaim), a value a list when the issuer's attribute is.
	TokenTags map[string][]string `json:"ttags,omitempty"`
}

// Tag returns the values of the session's principal tag key (keys
// compare without case, as AWS's do).
func (s *Session) Tag(key string) ([]string, bool) {
	for k, v := range s.Tags {
		if strings.EqualFold(k, key) {
			return []string{v}, true
		}
	}
	return TagValues(s.TokenTags, key)
}

// TagValues returns the values of tags' key, compared without case.
func TagValues(tags map[string][]string, key string) ([]string, bool) {
	for k, v := range tags {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

// sessionInfo makes session keys differ from the directory's.
const sessionInfo = "strata STS session tokens"

// Session token errors.
var (
	ErrTokenInvalid = errors.New("the security token included in the request is invalid")
	ErrTokenExpired = errors.New("the provided token has expired")
)

// Sessions issue and open session tokens.
type Sessions struct {
	seal sealer
	now  func() time.Time
}

// NewSessions seals tokens with keys derived from the tenant's master
// keys.
func NewSessions(keys MasterKeys) *Sessions {
	return &Sessions{seal: sealer{keys: keys, info: sessionInfo}, now: time.Now}
}

// Issue fills in a session's access key and secret (ASIA..., as STS's)
// and expiry, and returns its token.
func (s *Sessions) Issue(sess *Session, d time.Duration) (string, error) {
	sess.AccessKey = "ASIA" + randomString(idAlphabet, 16)
	sess.Secret = newSecretKey()
	sess.Expires = s.now().Add(d).UTC().Truncate(time.Second)
	plain, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	sealed, keyID, err := s.seal.seal(plain, sessionInfo)
	if err != nil {
		return "", fmt.Errorf("sealing a session: %w", err)
	}
	return keyID + "." + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Open returns a token's session: ErrTokenInvalid when it is no token of
// this tenant's, ErrTokenExpired when it is past its expiry.
func (s *Sessions) Open(token string) (Session, error) {
	keyID, b64, ok := strings.Cut(token, ".")
	if !ok {
		return Session{}, ErrTokenInvalid
	}
	sealed, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return Session{}, ErrTokenInvalid
	}
	plain, err := s.seal.open(sealed, keyID, sessionInfo)
	if err != nil {
		return Session{}, ErrTokenInvalid
	}
	var sess Session
	if err := json.Unmarshal(plain, &sess); err != nil {
		return Session{}, ErrTokenInvalid
	}
	if !s.now().Before(sess.Expires) {
		return Session{}, ErrTokenExpired
	}
	return sess, nil
}
