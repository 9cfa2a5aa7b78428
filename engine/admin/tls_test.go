package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
)

// tlsReporter is a process whose TLS is info.
type tlsReporter struct{ info adminapi.TLSInfo }

func (r tlsReporter) Info(context.Context) adminapi.Info { return adminapi.Info{} }
func (r tlsReporter) TLS() adminapi.TLSInfo              { return r.info }

// getTLS asks a handler over r for GET tls, signed by the root keys.
func getTLS(t *testing.T, r Informer) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, adminapi.Prefix+"tls", nil)
	if err := adminapi.Sign(req, "root", "secret", time.Now()); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	Handler(r, nil, "root", "secret", true).ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET tls: %d %s", w.Code, w.Body)
	}
	return strings.TrimSpace(w.Body.String())
}

func testCertificate(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTLSEndpoint: without TLS, GET tls is {}; with it, each certificate
// by the SHA-256 of its DER (lowercase hex), subject, issuer, notAfter and
// the DER itself; a missing leaf is left out.
func TestTLSEndpoint(t *testing.T) {
	if got := getTLS(t, tlsReporter{adminapi.NewTLSInfo(nil, nil, nil)}); got != "{}" {
		t.Fatalf("without TLS: %s, want {}", got)
	}
	leaf, ca := testCertificate(t, "leaf"), testCertificate(t, "ca")
	var got adminapi.TLSInfo
	if err := json.Unmarshal([]byte(getTLS(t, tlsReporter{adminapi.NewTLSInfo(leaf, nil, []*x509.Certificate{ca})})), &got); err != nil {
		t.Fatal(err)
	}
	want := adminapi.CertInfo{SHA256: fmt.Sprintf("%x", sha256.Sum256(leaf.Raw)), Subject: "CN=leaf", Issuer: "CN=leaf", NotAfter: leaf.NotAfter, DER: leaf.Raw}
	switch {
	case got.Certificate == nil || got.Certificate.SHA256 != want.SHA256 || got.Certificate.Subject != want.Subject ||
		got.Certificate.Issuer != want.Issuer || !got.Certificate.NotAfter.Equal(want.NotAfter) || string(got.Certificate.DER) != string(want.DER):
		t.Fatalf("certificate %+v, want %+v", got.Certificate, want)
	case got.InternodeCertificate != nil:
		t.Fatalf("an internode certificate where there is none: %+v", got.InternodeCertificate)
	case len(got.TrustedCAs) != 1 || got.TrustedCAs[0].SHA256 != fmt.Sprintf("%x", sha256.Sum256(ca.Raw)):
		t.Fatalf("trusted CAs %+v, want the one CA", got.TrustedCAs)
	}
}
