package admin

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
)

// TestAdminAuthentication: SigV4 by the root credentials is served, over
// plain HTTP only when allowed; a wrong secret, an old signature, another
// path than the one signed, or a body are refused; HTTP Basic is served
// over TLS only.
func TestAdminAuthentication(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	strict := authenticated(ok, "root", "secret", false, newLockout())
	lax := authenticated(ok, "root", "secret", true, newLockout())
	req := func(path string, mutate func(*http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, adminapi.Prefix+path, nil)
		mutate(r)
		return r
	}
	signed := func(secret string, at time.Time) func(*http.Request) {
		return func(r *http.Request) {
			if err := adminapi.Sign(r, "root", secret, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	overTLS := func(m func(*http.Request)) func(*http.Request) {
		return func(r *http.Request) { m(r); r.TLS = &tls.ConnectionState{} }
	}
	basic := func(r *http.Request) { r.SetBasicAuth("root", "secret") }
	for _, c := range []struct {
		name string
		h    http.Handler
		r    *http.Request
		want int
	}{
		{"signed, over TLS", strict, req("info", overTLS(signed("secret", time.Now()))), 200},
		{"signed, plain HTTP refused", strict, req("info", signed("secret", time.Now())), 403},
		{"signed, plain HTTP allowed", lax, req("info", signed("secret", time.Now())), 200},
		{"wrong secret", lax, req("info", signed("guess", time.Now())), 401},
		{"signed 20 minutes ago", lax, req("info", signed("secret", time.Now().Add(-20*time.Minute))), 401},
		{"another path than signed", lax, func() *http.Request {
			r := req("info", signed("secret", time.Now()))
			r.URL.Path = adminapi.Prefix + "pools/pool-0/decommission"
			return r
		}(), 401},
		{"a body", lax, func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, adminapi.Prefix+"heal", strings.NewReader("x"))
			signed("secret", time.Now())(r)
			return r
		}(), 401},
		{"basic over TLS", strict, req("info", overTLS(basic)), 200},
		{"basic over plain HTTP", lax, req("info", basic), 401},
		{"nothing", lax, req("info", func(*http.Request) {}), 401},
	} {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, c.r)
		if w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, strings.TrimSpace(w.Body.String()), c.want)
		}
	}
}
