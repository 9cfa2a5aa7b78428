package console

// Single sign-on through an OpenID Connect issuer the tenant trusts for
// web identities: the authorization code flow with PKCE, whose ID token
// the console trades at the process's own STS for a role's temporary
// credentials (AssumeRoleWithWebIdentity). The role's trust policy says
// who may sign in and its permissions what they may do; the console adds
// no authority of its own, as with keys.
//
//  1. The page makes a CSRF token, keeps it in sessionStorage and
//     navigates to /api/oidc/start with only its hash.
//  2. start seals state, nonce, the PKCE verifier and that hash into a
//     short cookie (SameSite=Lax: the issuer's redirect back is a
//     navigation from another site) and redirects to the issuer.
//  3. callback checks the state against the cookie, trades the code for
//     tokens at the issuer (with the verifier), checks the ID token's
//     nonce, asks STS for the role's credentials with the ID token (STS
//     verifies its signature, issuer, audience and expiry) and starts a
//     session bound to the page's CSRF hash.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/singleflight"

	"github.com/strata-storage/strata/engine/oidc"
)

// OIDC is the console's single sign-on, from its flags.
type OIDC struct {
	// Issuer is the OpenID Connect issuer's URL (its tokens' iss); empty:
	// no single sign-on.
	Issuer string
	// ClientID is the console's client at the issuer, which the ID
	// tokens are made for (an audience the tenant accepts for Issuer).
	ClientID string
	// ClientSecret is the client's secret; empty for a public client
	// (PKCE alone).
	ClientSecret string
	// RoleARN is the role assumed with the ID token.
	RoleARN string
	// Scopes asked for; empty: openid profile email.
	Scopes string
	// RedirectURL is the console's callback as the issuer knows it
	// (https://HOST/api/oidc/callback); empty: the page's own host.
	RedirectURL string
}

// Timing of a sign-in through the issuer.
const (
	oidcFlowTTL     = 10 * time.Minute // from start to callback
	oidcDiscoverTTL = 10 * time.Minute // the issuer's endpoints are read again after this
)

// oidcFlow is what start seals for callback.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	CSRFHash string `json:"h"`
	// Redirect is the redirect_uri sent with the authorization request,
	// sent again with the token request (RFC 6749, 4.1.3).
	Redirect string `json:"r"`
	Expires  int64  `json:"x"`
}

// issuerEndpoints are the issuer's endpoints from its discovery document.
type issuerEndpoints struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
}

// issuer reads and caches the issuer's discovery document. One fetch at
// a time, outside the lock; a failed refresh keeps the endpoints read
// before, and a failure with nothing to keep is answered again for a few
// seconds rather than fetched again by every sign-in.
type issuer struct {
	client *http.Client
	url    string
	group  singleflight.Group
	mu     sync.Mutex
	ends   issuerEndpoints
	// fetched is when ends were read; failed when the last fetch failed
	// with nothing read before (err its error).
	fetched, failed time.Time
	err             error
}

// oidcRetryAfter is how long a failed discovery is answered from memory.
const oidcRetryAfter = 5 * time.Second

func (i *issuer) endpoints(ctx context.Context) (issuerEndpoints, error) {
	i.mu.Lock()
	ends, fetched, failed, err := i.ends, i.fetched, i.failed, i.err
	i.mu.Unlock()
	switch {
	case !fetched.IsZero() && time.Since(fetched) < oidcDiscoverTTL:
		return ends, nil
	case fetched.IsZero() && time.Since(failed) < oidcRetryAfter:
		return ends, err
	}
	ch := i.group.DoChan("discover", func() (any, error) {
		// Not the request's context: the fetch serves every sign-in
		// waiting on it.
		fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		e, err := i.discover(fctx)
		i.mu.Lock()
		defer i.mu.Unlock()
		switch {
		case err == nil:
			i.ends, i.fetched, i.err = e, time.Now(), nil
		case !i.fetched.IsZero():
			// Keep what was read: the issuer's endpoints seldom move.
			i.fetched = time.Now().Add(oidcRetryAfter - oidcDiscoverTTL)
			return i.ends, nil
		default:
			i.failed, i.err = time.Now(), err
		}
		return e, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return issuerEndpoints{}, res.Err
		}
		return res.Val.(issuerEndpoints), nil
	case <-ctx.Done():
		return issuerEndpoints{}, ctx.Err()
	}
}

// discover reads the issuer's discovery document and checks it: it names
// the issuer exactly, and over https when the issuer is (the client's
// secret goes to the token endpoint).
func (i *issuer) discover(ctx context.Context) (issuerEndpoints, error) {
	var e issuerEndpoints
	if err := i.getJSON(ctx, strings.TrimSuffix(i.url, "/")+"/.well-known/openid-configuration", &e); err != nil {
		return e, err
	}
	if e.Issuer != i.url {
		return e, fmt.Errorf("the issuer's discovery document names issuer %q, not %q", e.Issuer, i.url)
	}
	if e.Authorization == "" || e.Token == "" {
		return e, errors.New("the issuer's discovery document names no authorization or token endpoint")
	}
	if strings.HasPrefix(i.url, "https://") && (!strings.HasPrefix(e.Authorization, "https://") || !strings.HasPrefix(e.Token, "https://")) {
		return e, errors.New("the issuer's discovery document names an endpoint that is not https")
	}
	return e, nil
}

func (i *issuer) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return i.do(req, out)
}

func (i *issuer) do(req *http.Request, out any) error {
	resp, err := i.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		return fmt.Errorf("%s %s: %s %s %s", req.Method, req.URL.Redacted(), resp.Status, e.Error, e.Description)
	}
	return json.Unmarshal(body, out)
}

// oidcCookie is the flow's cookie name.
func (c *Console) oidcCookie() string {
	if c.sessions.secure {
		return "__Host-strata-oidc"
	}
	return "strata-oidc"
}

// consoleConfig is what the sign-in page needs before anyone signs in.
type consoleConfig struct {
	// SSO names the issuer's host when single sign-on is set up.
	SSO string `json:"sso,omitempty"`
}

func (c *Console) config(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	var cc consoleConfig
	if c.issuer != nil {
		if u, err := url.Parse(c.cfg.OIDC.Issuer); err == nil {
			cc.SSO = u.Host
		}
	}
	writeJSON(w, http.StatusOK, cc)
}

// Patterns: a CSRF token's hash as the page sends it, an OAuth error
// code, and what an STS session name may not hold.
var (
	csrfHashPattern  = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	oauthErrorCode   = regexp.MustCompile(`^[a-z_]{1,40}$`)
	notInSessionName = regexp.MustCompile(`[^\w+=,.@-]`)
)

// oidcStart begins a sign-in: it answers the issuer's authorization URL,
// which the page then navigates to. A JSON POST from the console's own
// page, as a sign-in with keys is (another site can neither send it
// without a preflight the console never answers nor read the answer), so
// no other page can start a flow bound to a CSRF token it chose.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.issuer == nil {
		writeError(w, http.StatusNotFound, "NotFound", "single sign-on is not set up on this console")
		return
	}
	if !fromOwnPage(r) {
		writeError(w, http.StatusForbidden, "CSRF", "start the sign-in from the console's own page")
		return
	}
	var req struct {
		CSRFHash string `json:"csrfHash"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if !csrfHashPattern.MatchString(req.CSRFHash) {
		writeError(w, http.StatusBadRequest, "MissingParameter", "csrfHash must be the SHA-256 of the page's CSRF token, base64url without padding")
		return
	}
	redirect, err := c.redirectURL(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "WrongHost", err.Error())
		return
	}
	ends, err := c.issuer.endpoints(r.Context())
	if err != nil {
		c.cfg.Log.Warn("console: the OIDC issuer's discovery failed", "issuer", c.cfg.OIDC.Issuer, "err", err)
		writeError(w, http.StatusBadGateway, "IssuerUnavailable", "the identity provider could not be reached: "+err.Error())
		return
	}
	flow := oidcFlow{State: randomToken(), Nonce: randomToken(), Verifier: randomToken() + randomToken(), CSRFHash: req.CSRFHash,
		Redirect: redirect, Expires: c.sessions.now().Add(oidcFlowTTL).Unix()}
	value, err := c.sessions.seal(c.oidcCookie(), flow)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	// One flow a browser: a second tab's start replaces the first's, whose
	// callback is then refused as not the one this browser started.
	http.SetCookie(w, &http.Cookie{Name: c.oidcCookie(), Value: value, Path: "/", MaxAge: int(oidcFlowTTL.Seconds()),
		HttpOnly: true, Secure: c.sessions.secure, SameSite: http.SameSiteLaxMode})
	challenge := sha256.Sum256([]byte(flow.Verifier))
	scopes := c.cfg.OIDC.Scopes
	if scopes == "" {
		scopes = "openid profile email"
	}
	q := url.Values{"response_type": {"code"}, "client_id": {c.cfg.OIDC.ClientID}, "redirect_uri": {redirect},
		"scope": {scopes}, "state": {flow.State}, "nonce": {flow.Nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"}}
	sep := "?"
	if strings.Contains(ends.Authorization, "?") {
		sep = "&"
	}
	writeJSON(w, http.StatusOK, map[string]string{"url": ends.Authorization + sep + q.Encode()})
}

// redirectURL is the callback the issuer sends the browser back to: the
// configured one, whose host must be the one the browser names (the flow's
// cookie and the page's token stay with that host), or the page's own
// host, https unless the console serves plain HTTP and no TLS-terminating
// proxy says otherwise (X-Forwarded-Proto).
func (c *Console) redirectURL(r *http.Request) (string, error) {
	if u := c.cfg.OIDC.RedirectURL; u != "" {
		p, err := url.Parse(u)
		if err != nil || p.Host != r.Host {
			return "", fmt.Errorf("this console's single sign-on comes back to %s: open the console there", u)
		}
		return u, nil
	}
	scheme := "http"
	if c.sessions.secure || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/api/oidc/callback", nil
}

// oidcCallback finishes a sign-in: it always ends with the browser back
// on the console's page, signed in or with a reason in the fragment
// (#oidc-error=CODE; the detail goes to the log, never a token).
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.issuer == nil {
		writeError(w, http.StatusNotFound, "NotFound", "single sign-on is not set up on this console")
		return
	}
	var flow oidcFlow
	ok := c.sessions.unseal(r, c.oidcCookie(), &flow)
	// The flow's cookie serves one callback.
	http.SetCookie(w, &http.Cookie{Name: c.oidcCookie(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: c.sessions.secure, SameSite: http.SameSiteLaxMode})
	fail := func(code string, err error) {
		c.cfg.Log.Info("console single sign-on refused", "reason", code, "err", err, "client", r.RemoteAddr)
		http.Redirect(w, r, "/#oidc-error="+url.QueryEscape(code), http.StatusSeeOther)
	}
	q := r.URL.Query()
	switch {
	case !ok || c.sessions.now().Unix() >= flow.Expires:
		fail("expired", errors.New("no sign-in started in this browser in the last 10 minutes"))
		return
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) != 1:
		fail("state", errors.New("the state does not match the sign-in this browser started"))
		return
	case q.Get("error") != "":
		fail(issuerErrorCode(q.Get("error")), errors.New(q.Get("error")+": "+q.Get("error_description")))
		return
	case q.Get("code") == "":
		fail("issuer", errors.New("the issuer sent no code"))
		return
	}
	idToken, claims, err := c.exchange(r, q.Get("code"), flow)
	if err != nil {
		fail("issuer", err)
		return
	}
	creds, err := c.assumeRole(r.Context(), idToken, claims.sessionName())
	if err != nil {
		code := "sts"
		var api smithy.APIError
		if errors.As(err, &api) {
			code = "sts-" + api.ErrorCode()
		}
		fail(code, err)
		return
	}
	ses := session{AccessKey: aws.ToString(creds.AccessKeyId), SecretKey: aws.ToString(creds.SecretAccessKey),
		SessionToken: aws.ToString(creds.SessionToken), CSRFHash: flow.CSRFHash,
		Name: claims.sessionName() + " (role " + c.cfg.OIDC.RoleARN[strings.LastIndex(c.cfg.OIDC.RoleARN, "/")+1:] + ")"}
	if _, err := c.sessions.start(w, ses, aws.ToTime(creds.Expiration)); err != nil {
		fail("session", err)
		return
	}
	c.cfg.Log.Info("console sign-in", "accessKey", ses.AccessKey, "role", c.cfg.OIDC.RoleARN, "subject", claims.Subject, "client", r.RemoteAddr)
	http.Redirect(w, r, "/#signed-in", http.StatusSeeOther)
}

// issuerErrorCode keeps an issuer's error code when it is one of OAuth's
// (letters and underscores), so the page can say it.
func issuerErrorCode(e string) string {
	if oauthErrorCode.MatchString(e) {
		return "issuer-" + e
	}
	return "issuer"
}

// idClaims are the ID token's claims the console reads.
type idClaims struct {
	Subject  string `json:"sub"`
	Nonce    string `json:"nonce"`
	Username string `json:"preferred_username"`
	Email    string `json:"email"`
}

// sessionName is the STS session's name: who signed in, in the
// characters STS allows.
func (cl idClaims) sessionName() string {
	name := cl.Username
	if name == "" {
		name = cl.Email
	}
	if name == "" {
		name = cl.Subject
	}
	name = notInSessionName.ReplaceAllString(name, "-")
	if len(name) > 64 {
		name = name[:64]
	}
	for len(name) < 2 {
		name += "-"
	}
	return name
}

// exchange trades the code for tokens at the issuer's token endpoint and
// checks the ID token's nonce. The token came straight from the issuer
// over the client's connection, so its signature is left to STS, which
// verifies it against the issuer's keys before it trusts a claim.
func (c *Console) exchange(r *http.Request, code string, flow oidcFlow) (string, idClaims, error) {
	var claims idClaims
	ends, err := c.issuer.endpoints(r.Context())
	if err != nil {
		return "", claims, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {flow.Redirect},
		"client_id": {c.cfg.OIDC.ClientID}, "code_verifier": {flow.Verifier}}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, ends.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return "", claims, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.cfg.OIDC.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(c.cfg.OIDC.ClientID), url.QueryEscape(c.cfg.OIDC.ClientSecret))
	}
	var tokens struct {
		IDToken string `json:"id_token"`
	}
	if err := c.issuer.do(req, &tokens); err != nil {
		return "", claims, err
	}
	if tokens.IDToken == "" {
		return "", claims, errors.New("the issuer's answer holds no ID token (is openid among the scopes?)")
	}
	if err := oidc.UnverifiedClaims(tokens.IDToken, &claims); err != nil {
		return "", claims, fmt.Errorf("the ID token's claims: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(claims.Nonce), []byte(flow.Nonce)) != 1 {
		return "", claims, errors.New("the ID token's nonce is not the one this sign-in sent")
	}
	return tokens.IDToken, claims, nil
}

// assumeRole asks the process's own STS for the role's credentials with
// the ID token, for as long as a session lasts (the role may allow less:
// then its default hour).
func (c *Console) assumeRole(ctx context.Context, idToken, name string) (*types.Credentials, error) {
	cl := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(c.s3URL()),
		HTTPClient: &http.Client{Transport: c.transport, Timeout: 30 * time.Second}})
	in := &sts.AssumeRoleWithWebIdentityInput{RoleArn: aws.String(c.cfg.OIDC.RoleARN), RoleSessionName: aws.String(name),
		WebIdentityToken: aws.String(idToken), DurationSeconds: aws.Int32(int32(min(max(c.cfg.SessionTTL, 15*time.Minute), 12*time.Hour).Seconds()))}
	out, err := cl.AssumeRoleWithWebIdentity(ctx, in)
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationError" {
		in.DurationSeconds = nil
		out, err = cl.AssumeRoleWithWebIdentity(ctx, in)
	}
	if err != nil {
		return nil, err
	}
	if out.Credentials == nil {
		return nil, errors.New("STS answered no credentials")
	}
	return out.Credentials, nil
}

// randomToken is 144 random bits, base64url.
func randomToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
