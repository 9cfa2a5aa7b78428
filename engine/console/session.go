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
	// CSRF is the token every request that changes something must carry
	// in the X-Strata-CSRF header; the page learns it from /api/session.
	CSRF string `json:"c"`
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

// open returns the request's session, or errNoSession.
func (s *sessions) open(r *http.Request) (session, error) {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return session{}, errNoSession
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(sealed) < s.aead.NonceSize() {
		return session{}, errNoSession
	}
	nonce, box := sealed[:s.aead.NonceSize()], sealed[s.aead.NonceSize():]
	plain, err := s.aead.Open(nil, nonce, box, []byte(s.cookieName()))
	if err != nil {
		return session{}, errNoSession
	}
	var ses session
	if json.Unmarshal(plain, &ses) != nil || s.now().Unix() >= ses.Expires {
		return session{}, errNoSession
	}
	return ses, nil
}

// maxCookie bounds the sealed cookie: browsers drop cookies past about
// 4 KiB silently (a sign-in that works, then every call signed out).
const maxCookie = 3800

var errCookieTooLarge = errors.New("console: these credentials do not fit in a browser cookie (a session token with long session policies or tags); use shorter ones")

// start seals a new session for the credentials into a cookie.
func (s *sessions) start(w http.ResponseWriter, access, secret, token string) (session, error) {
	csrf := make([]byte, 18)
	_, _ = rand.Read(csrf)
	ses := session{AccessKey: access, SecretKey: secret, SessionToken: token,
		CSRF: base64.RawURLEncoding.EncodeToString(csrf), Expires: s.now().Add(s.ttl).Unix()}
	plain, err := json.Marshal(ses)
	if err != nil {
		return session{}, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(s.cookieName()))
	value := base64.RawURLEncoding.EncodeToString(sealed)
	if len(value) > maxCookie {
		return session{}, errCookieTooLarge
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: value,
		Path: "/", MaxAge: int(s.ttl.Seconds()), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteStrictMode})
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
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	got := r.Header.Get("X-Strata-CSRF")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ses.CSRF)) == 1
}
