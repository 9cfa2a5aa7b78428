package oidc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// issuer is an OIDC issuer over HTTPS: discovery and keys, as the
// Kubernetes API server serves them, behind a bearer token.
type issuer struct {
	srv     *httptest.Server
	key     *ecdsa.PrivateKey
	kid     string
	fetches atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	is.rotate(t, "k1")
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer pod-token" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/openid/v1/jwks"})
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: is.key.Public(), KeyID: is.kid, Algorithm: "ES256", Use: "sig"}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) rotate(t *testing.T, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.key, is.kid = k, kid
}

// token mints a ServiceAccount token as the API server does.
func (is *issuer) token(t *testing.T, iss string, aud []string, exp time.Time) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.Claims{Issuer: iss, Subject: "system:serviceaccount:apps:uploader", Audience: aud,
		Expiry: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(time.Now())}
	k8s := map[string]any{"kubernetes.io": map[string]any{"namespace": "apps",
		"serviceaccount": map[string]string{"name": "uploader", "uid": "u1"}, "pod": map[string]string{"name": "job-1", "uid": "p1"}}}
	raw, err := jwt.Signed(signer).Claims(claims).Claims(k8s).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestVerify(t *testing.T) {
	is := newIssuer(t)
	v := &Verifier{Client: is.srv.Client(), Bearer: func(iss string) string {
		if iss == is.srv.URL {
			return "pod-token"
		}
		return ""
	}}
	ctx := t.Context()
	aud := []string{"sts.strata.dev/ns/tenant"}
	good := is.token(t, is.srv.URL, aud, time.Now().Add(time.Hour))
	if iss, err := Issuer(good); err != nil || iss != is.srv.URL {
		t.Fatalf("Issuer: %q, %v", iss, err)
	}
	c, err := v.Verify(ctx, good, is.srv.URL, aud)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "system:serviceaccount:apps:uploader" || c.Namespace != "apps" || c.ServiceAccount != "uploader" || c.Pod != "job-1" {
		t.Errorf("claims %+v", c)
	}
	for name, c := range map[string]struct {
		token, issuer string
		aud           []string
		want          error
	}{
		"another audience (the API server's)": {is.token(t, is.srv.URL, []string{"https://kubernetes.default.svc"}, time.Now().Add(time.Hour)), is.srv.URL, aud, ErrInvalidToken},
		"expired":                             {is.token(t, is.srv.URL, aud, time.Now().Add(-2*time.Minute)), is.srv.URL, aud, ErrExpired},
		"another issuer claimed":              {is.token(t, "https://elsewhere", aud, time.Now().Add(time.Hour)), is.srv.URL, aud, ErrInvalidToken},
		"altered":                             {good[:len(good)-4] + "AAAA", is.srv.URL, aud, ErrInvalidToken},
		"not a token":                         {"x.y.z", is.srv.URL, aud, ErrInvalidToken},
	} {
		if _, err := v.Verify(ctx, c.token, c.issuer, c.aud); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// Keys rotated at the issuer: a token of the new key makes the
	// verifier fetch again (not more than every few seconds).
	before := is.fetches.Load()
	is.rotate(t, "k2")
	v.now = func() time.Time { return time.Now().Add(refetchAfter + time.Second) }
	if _, err := v.Verify(ctx, is.token(t, is.srv.URL, aud, time.Now().Add(time.Hour)), is.srv.URL, aud); err != nil {
		t.Errorf("a token of a rotated key: %v", err)
	}
	if is.fetches.Load() != before+1 {
		t.Errorf("keys fetched %d times for the rotation, want once", is.fetches.Load()-before)
	}
	// No token for the discovery endpoint: the issuer is unreachable.
	anon := &Verifier{Client: is.srv.Client()}
	if _, err := anon.Verify(ctx, good, is.srv.URL, aud); !errors.Is(err, ErrCommunication) {
		t.Errorf("discovery refused: %v, want ErrCommunication", err)
	}
}

func TestSessionTagsClaim(t *testing.T) {
	for raw, want := range map[string]map[string][]string{
		``: nil,
		`{"principal_tags":{"Department":["Engineering","Marketing"],"Team":"blue"},"transitive_tag_keys":["Team"]}`: {
			"Department": {"Engineering", "Marketing"}, "Team": {"blue"}},
	} {
		got, err := tagsOf(json.RawMessage(raw))
		if err != nil || len(got) != len(want) {
			t.Errorf("%s: %v, %v", raw, got, err)
		}
		for k, v := range want {
			if strings.Join(got[k], ",") != strings.Join(v, ",") {
				t.Errorf("%s: %s = %v, want %v", raw, k, got[k], v)
			}
		}
	}
	many := map[string]string{}
	for i := range maxTags + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	tooMany, _ := json.Marshal(map[string]any{"principal_tags": many})
	for _, raw := range []string{`[]`, `{"principal_tags":{"Department":7}}`, `{"principal_tags":{"Department":[]}}`,
		`{"principal_tags":{"":"x"}}`, `{"principal_tags":{"k":"` + strings.Repeat("v", maxTagValue+1) + `"}}`, string(tooMany)} {
		if _, err := tagsOf(json.RawMessage(raw)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%.80s: %v, want ErrInvalidToken", raw, err)
		}
	}
}
