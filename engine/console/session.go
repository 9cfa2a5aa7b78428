package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// A session is the signed-in person's credentials, kept in a cookie the
// console seals (AES-256-GCM) with a key derived from the root secret: every
// server of a tenant shares that secret, so a session opened through one
// pod is good on the others behind the same Service, and nothing is kept
// server-side. The secret never reaches the browser's scripts (the cookie
// is HttpOnly) nor any URL or log.
type session struct {
	AccessKey    string `json:"a"`
	SecretKey    string `json:"s"`
	SessionToken string `json:"t,omitempty"`
	// Name is who signed in through single sign-on, for the page.
	Name string `json:"w,omitempty"`
	// CSRFHash is the SHA-256 of the token every request must carry in
	// the X-Strata-CSRF header. The page holds the token itself: handed
	// to it in the sign-in answer, or made by the page before it sets out
	// to the identity provider (only its hash travels then).
	CSRFHash string `json:"h"`
	// Expires is when the session ends, whatever the browser does with
	// the cookie.
	Expires int64 `json:"x"`
}

var errNoSession = errors.New("console: not signed in, or the session expired")

// sessions seals and opens session cookies.
type sessions struct {
	aead   cipher.AEAD
	ttl    time.Duration
	secure bool
	now    func() time.Time
}

// cookieName has the __Host- prefix over TLS: the browser then takes the
// cookie only when Secure, from this host, for the whole path, so no other
// host of the domain can set or shadow it.
func (s *sessions) cookieName() string {
	if s.secure {
		return "__Host-strata-console"
	}
	return "strata-console"
}

func newSessions(rootSecret string, ttl time.Duration, secure bool) (*sessions, error) {
	if rootSecret == "" {
		return nil, errors.New("console: the root secret key is needed to seal sessions")
	}
	key, err := hkdf.Key(sha256.New, []byte(rootSecret), nil, "strata console sessions v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sessions{aead: aead, ttl: ttl, secure: secure, now: time.Now}, nil
}

// seal encrypts v, bound to the cookie name (a value sealed for one
// cookie does not open as another).
func (s *sessions) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// unseal opens the request's cookie name into v.
func (s *sessions) unseal(r *http.Request, name string, v any) bool {
	c, err := r.Cookie(name)
	if err != nil {
		return false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(sealed) < s.aead.NonceSize() {
		return false
	}
	nonce, box := sealed[:s.aead.NonceSize()], sealed[s.aead.NonceSize():]
	plain, err := s.aead.Open(nil, nonce, box, []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

// open returns the request's session, or errNoSession.
func (s *sessions) open(r *http.Request) (session, error) {
	var ses session
	if !s.unseal(r, s.cookieName(), &ses) || s.now().Unix() >= ses.Expires {
		return session{}, errNoSession
	}
	return ses, nil
}

// maxCookie bounds the sealed cookie: browsers drop cookies past about
// 4 KiB silently (a sign-in that works, then every call signed out).
const maxCookie = 3800

var errCookieTooLarge = errors.New("console: these credentials do not fit in a browser cookie (a session token with long session policies or tags); use shorter ones")

// newCSRF makes a CSRF token and its hash.
func newCSRF() (token, hash string) {
	token = randomToken()
	return token, csrfHash(token)
}

// csrfHash is the hash a session keeps of its CSRF token.
func csrfHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// start seals a session into a cookie: ses with its expiry, which is the
// session TTL from now or until, when that is earlier (temporary
// credentials that end sooner).
func (s *sessions) start(w http.ResponseWriter, ses session, until time.Time) (session, error) {
	end := s.now().Add(s.ttl)
	if !until.IsZero() && until.Before(end) {
		end = until
	}
	ses.Expires = end.Unix()
	value, err := s.seal(s.cookieName(), ses)
	if err != nil {
		return session{}, err
	}
	if len(value) > maxCookie {
		return session{}, errCookieTooLarge
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: value,
		Path: "/", MaxAge: max(1, int(end.Sub(s.now()).Seconds())), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
	return ses, nil
}

// end clears the cookie.
func (s *sessions) end(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
}

// fromPage refuses a request that does not carry the session's CSRF
// token, or that the browser says comes from another site, or whose
// Origin names another host. The token is handed to the page once, at
// sign-in, and kept in its per-origin sessionStorage: a cookie planted by a
// page of another port of the same host (which cookies do not tell apart)
// holds another session whose token the console's page does not have, so
// its requests are refused instead of acting in the planted session.
// Origin's host is compared, not its scheme, so a TLS-terminating proxy in
// front of a plain-HTTP console does not refuse the page's own requests.
func (s *sessions) fromPage(r *http.Request, ses session) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get("X-Strata-CSRF")
	return got != "" && ses.CSRFHash != "" && subtle.ConstantTimeCompare([]byte(csrfHash(got)), []byte(ses.CSRFHash)) == 1
}

// sameOrigin is false for a request the browser marks as from another
// site (Sec-Fetch-Site) or whose Origin names another host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}
