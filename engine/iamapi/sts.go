package iamapi

// The STS Query API (2011-06-15) on the S3 port: AssumeRole,
// GetSessionToken and GetCallerIdentity. Credentials it issues are
// stateless sessions (engine/iam.Sessions): the token carries the
// session, sealed.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/oidc"
	"github.com/strata-storage/strata/engine/s3rules"
)

// STSVersion is the API version STS clients send.
const STSVersion = "2011-06-15"

const stsXmlns = "https://sts.amazonaws.com/doc/2011-06-15/"

// Session lengths, STS's.
const (
	minSession        = 900 * time.Second
	maxSessionToken   = 129600 * time.Second
	maxRootSession    = time.Hour
	maxSessionPolicy  = 2048
	defaultSessionLen = time.Hour
)

// STS serves the STS API over the directory's roles and users.
type STS struct {
	IAM      *Handler
	Sessions *iam.Sessions
	// Web verifies web identity tokens (nil: AssumeRoleWithWebIdentity
	// is refused).
	Web *oidc.Verifier
	// Audiences are the client IDs the tenant accepts for an issuer
	// (spec.webIdentity.providers): an account's provider of that issuer
	// that lists no client IDs of its own accepts these, and one of
	// another issuer accepts no token.
	Audiences map[string][]string
}

// Serve runs the STS action a form names and writes its answer.
func (s *STS) Serve(ctx context.Context, w http.ResponseWriter, form url.Values, c Caller, requestID string) {
	res, err := s.run(ctx, form, c)
	answer(w, stsXmlns, form.Get("Action"), res, err, requestID)
}

func (s *STS) run(ctx context.Context, form url.Values, c Caller) (any, error) {
	name := form.Get("Action")
	if name == "" {
		return nil, errMissingAction
	}
	if v := form.Get("Version"); v != STSVersion {
		return nil, validation("Version %q is not the STS API's (%s)", v, STSVersion)
	}
	p := params{form: form, action: name}
	switch name {
	case "GetCallerIdentity":
		return s.callerIdentity(c)
	case "AssumeRole":
		return s.assumeRole(ctx, p, c)
	case "GetSessionToken":
		return s.sessionToken(p, c)
	case "AssumeRoleWithWebIdentity":
		return s.assumeRoleWithWebIdentity(ctx, p)
	}
	return nil, &apiError{code: "InvalidAction", status: http.StatusBadRequest,
		msg: fmt.Sprintf("Could not find operation %s for version %s (see docs/iam.md for the actions served)", name, STSVersion)}
}

// identity is the caller as GetCallerIdentity names it.
func (s *STS) identity(c Caller) (userID, arn string) {
	h := s.IAM
	acct := h.accountID(c)
	switch {
	case c.Session != nil && c.Session.Role != "":
		return c.Session.RoleID + ":" + c.Session.Name,
			fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", acct, c.Session.Role, c.Session.Name)
	case c.User != "":
		if u, err := h.Dir.Get(iam.KindUser, c.Account, c.User); err == nil {
			return u.ID, h.arn(c, u)
		}
		return c.User, fmt.Sprintf("arn:aws:iam::%s:user/%s", acct, c.User)
	}
	return acct, fmt.Sprintf("arn:aws:iam::%s:root", acct)
}

func (s *STS) callerIdentity(c Caller) (any, error) {
	id, arn := s.identity(c)
	return struct {
		UserID  string `xml:"UserId"`
		Account string `xml:"Account"`
		Arn     string `xml:"Arn"`
	}{id, s.IAM.accountID(c), arn}, nil
}

// duration is DurationSeconds within [900 s, limit], default an hour.
func duration(p params, limit time.Duration) (time.Duration, error) {
	n, err := p.optInt("DurationSeconds")
	if err != nil {
		return 0, err
	}
	d := time.Duration(n) * time.Second
	switch {
	case n == 0:
		return min(defaultSessionLen, limit), nil
	case d < minSession || d > limit:
		return 0, validation("DurationSeconds must be %d to %d seconds", int(minSession.Seconds()), int(limit.Seconds()))
	}
	return d, nil
}

type xmlCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

func credentials(sess iam.Session, token string) xmlCredentials {
	return xmlCredentials{sess.AccessKey, sess.Secret, token, isoTime(sess.Expires)}
}

// roleNamed finds the role an ARN names (arn:aws:iam::ACCOUNT:role/PATH/NAME):
// its account (the tenant's own ID is "") and the role. A role this
// server does not know makes it refresh the directory first, as an
// unknown access key does: a role made through another server is
// assumable here at once.
func (s *STS) roleNamed(ctx context.Context, arn string) (iam.Entity, error) {
	rest, ok := strings.CutPrefix(arn, "arn:aws:iam::")
	acct, role, ok2 := strings.Cut(rest, ":role/")
	if !ok || !ok2 || role == "" {
		return iam.Entity{}, validation("%s is not a role's ARN", arn)
	}
	if acct == s.IAM.Account {
		acct = ""
	}
	name := role[strings.LastIndex(role, "/")+1:]
	r, err := s.IAM.Dir.Get(iam.KindRole, acct, name)
	if err != nil {
		if rerr := s.IAM.Dir.Refresh(ctx); rerr == nil {
			r, err = s.IAM.Dir.Get(iam.KindRole, acct, name)
		}
	}
	if err != nil || s.IAM.arnOf(acct, r) != arn {
		return iam.Entity{}, &apiError{code: "AccessDenied", status: http.StatusForbidden, msg: "Not authorized to perform sts:AssumeRole: no role " + arn}
	}
	return r, nil
}

func (s *STS) assumeRole(ctx context.Context, p params, c Caller) (any, error) {
	arn, err := p.req("RoleArn")
	if err != nil {
		return nil, err
	}
	name, err := p.req("RoleSessionName")
	if err != nil {
		return nil, err
	}
	if err := checkSessionName(name); err != nil {
		return nil, err
	}
	role, err := s.roleNamed(ctx, arn)
	if err != nil {
		return nil, err
	}
	if err := s.trusts(role, arn, c); err != nil {
		return nil, err
	}
	d, err := duration(p, time.Duration(role.MaxSessionDuration)*time.Second)
	if err != nil {
		return nil, err
	}
	sess := iam.Session{Account: role.Account, Role: role.Name, RoleID: role.ID, Name: name}
	if sess.Policies, err = s.sessionPolicies(p); err != nil {
		return nil, err
	}
	res, err := s.issue(role, &sess, d)
	if err != nil {
		return nil, err
	}
	return res, nil
}

type xmlAssumedRole struct {
	ID  string `xml:"AssumedRoleId"`
	Arn string `xml:"Arn"`
}

// roleResult is AssumeRole's answer, and the start of
// AssumeRoleWithWebIdentity's.
type roleResult struct {
	Credentials      xmlCredentials `xml:"Credentials"`
	User             xmlAssumedRole `xml:"AssumedRoleUser"`
	PackedPolicySize int            `xml:"PackedPolicySize"`
}

// issue makes a role's session and its answer.
func (s *STS) issue(role iam.Entity, sess *iam.Session, d time.Duration) (roleResult, error) {
	token, err := s.Sessions.Issue(sess, d)
	if err != nil {
		return roleResult{}, err
	}
	packed := 0
	for _, doc := range sess.Policies {
		packed += len(doc)
	}
	return roleResult{Credentials: credentials(*sess, token),
		User: xmlAssumedRole{role.ID + ":" + sess.Name,
			fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", s.IAM.accountOf(role.Account), role.Name, sess.Name)},
		PackedPolicySize: packed * 100 / maxSessionPolicy}, nil
}

func checkSessionName(name string) error {
	if len(name) < 2 || len(name) > 64 || strings.TrimFunc(name, sessionNameRune) != "" {
		return validation("RoleSessionName must be 2 to 64 letters, digits and +=,.@_-")
	}
	return nil
}

func sessionNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+=,.@_-", r)
}

// trusts decides whether the caller may assume the role: its trust
// policy must allow the caller, and when it does so only by the caller's
// account (its root ARN or ID, or "*"), the caller's own policies must
// allow sts:AssumeRole on the role too, as IAM's rule for principals of
// an account that trusts itself.
func (s *STS) trusts(role iam.Entity, roleARN string, c Caller) error {
	denied := &apiError{code: "AccessDenied", status: http.StatusForbidden,
		msg: fmt.Sprintf("User is not authorized to perform: sts:AssumeRole on resource: %s", roleARN)}
	trust, err := s3rules.ParseTrustPolicy([]byte(role.Trust))
	if err != nil {
		return denied
	}
	_, callerARN := s.identity(c)
	acct := s.IAM.accountID(c)
	req := s3rules.PolicyRequest{Action: "sts:AssumeRole", PrincipalARNs: []string{callerARN},
		Context: func(string) ([]string, bool) { return nil, false }}
	switch trust.Decide(req) {
	case s3rules.Deny:
		return denied
	case s3rules.Allow:
		return nil
	}
	req.PrincipalARNs = []string{fmt.Sprintf("arn:aws:iam::%s:root", acct), acct}
	if trust.Decide(req) == s3rules.Allow && c.Account == role.Account &&
		(c.Admin || c.Allows != nil && c.Allows("sts:AssumeRole", roleARN)) {
		return nil
	}
	return denied
}

// sessionPolicies are the Policy and PolicyArns of a request, checked:
// what narrows the session below its role's policies.
func (s *STS) sessionPolicies(p params) ([]string, error) {
	var docs []string
	if doc := p.opt("Policy"); doc != "" {
		if len(doc) > maxSessionPolicy {
			return nil, &apiError{code: "PackedPolicyTooLarge", status: http.StatusBadRequest, msg: "the session policy is larger than 2048 characters"}
		}
		if s.IAM.CheckPolicy != nil {
			if err := s.IAM.CheckPolicy(doc); err != nil {
				return nil, fmt.Errorf("%w: %w", iam.ErrMalformedPolicy, err)
			}
		}
		docs = append(docs, doc)
	}
	for i := 1; ; i++ {
		arn := p.opt(fmt.Sprintf("PolicyArns.member.%d.arn", i))
		if arn == "" {
			return docs, nil
		}
		doc, ok := iam.ManagedPolicy(arn)
		if !ok {
			return nil, validation("policy %s does not exist or is not attachable", arn)
		}
		docs = append(docs, doc)
	}
}

func (s *STS) sessionToken(p params, c Caller) (any, error) {
	if c.Session != nil {
		return nil, &apiError{code: "AccessDenied", status: http.StatusForbidden, msg: "Cannot call GetSessionToken with session credentials"}
	}
	limit := maxSessionToken
	if c.User == "" {
		limit = maxRootSession
	}
	d, err := duration(p, limit)
	if err != nil {
		return nil, err
	}
	sess := iam.Session{Account: c.Account, User: c.User}
	token, err := s.Sessions.Issue(&sess, d)
	if err != nil {
		return nil, err
	}
	return struct {
		Credentials xmlCredentials `xml:"Credentials"`
	}{credentials(sess, token)}, nil
}

// webError is a verifier's error as STS answers it.
func webError(err error) error {
	switch {
	case errors.Is(err, oidc.ErrExpired):
		return &apiError{code: "ExpiredTokenException", status: http.StatusBadRequest, msg: "Token expired: the web identity token's time is past"}
	case errors.Is(err, oidc.ErrCommunication):
		return &apiError{code: "IDPCommunicationError", status: http.StatusBadRequest, msg: err.Error()}
	}
	return &apiError{code: "InvalidIdentityToken", status: http.StatusBadRequest, msg: err.Error()}
}

// assumeRoleWithWebIdentity trades a token of an OIDC provider the role's
// account registered (a Kubernetes ServiceAccount's, among others) for a
// session of the role, when the role's trust policy admits the provider
// on the token's claims. The request is not signed: the token is the
// credential.
func (s *STS) assumeRoleWithWebIdentity(ctx context.Context, p params) (any, error) {
	if s.Web == nil {
		return nil, &apiError{code: "InvalidAction", status: http.StatusBadRequest, msg: "this tenant verifies no web identities"}
	}
	v := make([]string, 3)
	for i, f := range []string{"RoleArn", "RoleSessionName", "WebIdentityToken"} {
		var err error
		if v[i], err = p.req(f); err != nil {
			return nil, err
		}
	}
	arn, name, token := v[0], v[1], v[2]
	if err := checkSessionName(name); err != nil {
		return nil, err
	}
	role, err := s.roleNamed(ctx, arn)
	if err != nil {
		return nil, err
	}
	issuer, err := oidc.Issuer(token)
	if err != nil {
		return nil, webError(err)
	}
	provider, err := s.IAM.Dir.Provider(role.Account, issuer)
	if err != nil {
		return nil, webError(fmt.Errorf("%w: no OpenIDConnect provider found in the role's account for %s", oidc.ErrInvalidToken, issuer))
	}
	audiences := provider.ClientIDs
	if len(audiences) == 0 {
		audiences = s.Audiences[issuer]
	}
	if len(audiences) == 0 {
		// Any audience would do: a token the issuer made for another
		// service could be replayed here (docs/iam.md).
		return nil, webError(fmt.Errorf("%w: the OpenIDConnect provider %s lists no client IDs (audiences), and the tenant names none for it", oidc.ErrInvalidToken, issuer))
	}
	claims, err := s.Web.Verify(ctx, token, issuer, audiences)
	if err != nil {
		return nil, webError(err)
	}
	audience := ""
	for _, a := range claims.Audience {
		if slices.Contains(audiences, a) {
			audience = a
			break
		}
	}
	name0 := iam.ProviderName(issuer)
	providerARN := fmt.Sprintf("arn:aws:iam::%s:oidc-provider/%s", s.IAM.accountOf(role.Account), name0)
	values := map[string]string{"sub": claims.Subject, "aud": audience, "app_id": audience, "azp": claims.AuthorizedParty}
	trust, err := s3rules.ParseTrustPolicy([]byte(role.Trust))
	denied := &apiError{code: "AccessDenied", status: http.StatusForbidden,
		msg: fmt.Sprintf("Not authorized to perform sts:AssumeRoleWithWebIdentity on %s", arn)}
	if err != nil {
		return nil, denied
	}
	req := s3rules.PolicyRequest{Action: "sts:AssumeRoleWithWebIdentity", PrincipalARNs: []string{providerARN},
		Context: func(k string) ([]string, bool) {
			if tag, ok := strings.CutPrefix(k, "aws:requesttag/"); ok {
				return iam.TagValues(claims.Tags, tag)
			}
			if k == "aws:tagkeys" && len(claims.Tags) > 0 {
				return slices.Sorted(maps.Keys(claims.Tags)), true
			}
			prefix, key, ok := strings.Cut(k, strings.ToLower(name0)+":")
			if !ok || prefix != "" || values[key] == "" {
				return nil, false
			}
			return []string{values[key]}, true
		}}
	if trust.Decide(req) != s3rules.Allow {
		return nil, denied
	}
	// A token carrying session tags needs the trust's sts:TagSession too,
	// as AWS's STS asks.
	if len(claims.Tags) > 0 {
		req.Action = "sts:TagSession"
		if trust.Decide(req) != s3rules.Allow {
			denied.msg = fmt.Sprintf("Not authorized to perform sts:TagSession on %s: the web identity token carries session tags", arn)
			return nil, denied
		}
	}
	d, err := duration(p, time.Duration(role.MaxSessionDuration)*time.Second)
	if err != nil {
		return nil, err
	}
	sess := iam.Session{Account: role.Account, Role: role.Name, RoleID: role.ID, Name: name,
		Provider: name0, Subject: claims.Subject, Audience: audience, TokenTags: claims.Tags}
	if claims.Namespace != "" {
		sess.Tags = map[string]string{"kubernetes-namespace": claims.Namespace, "kubernetes-service-account": claims.ServiceAccount}
		if claims.Pod != "" {
			sess.Tags["kubernetes-pod-name"] = claims.Pod
		}
	}
	if sess.Policies, err = s.sessionPolicies(p); err != nil {
		return nil, err
	}
	res, err := s.issue(role, &sess, d)
	if err != nil {
		return nil, err
	}
	return struct {
		roleResult
		Subject  string `xml:"SubjectFromWebIdentityToken"`
		Provider string `xml:"Provider"`
		Audience string `xml:"Audience"`
	}{res, claims.Subject, name0, audience}, nil
}
