package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCertificateExpiry: the gauge is the leaf's notAfter; no file, no
// sample.
func TestCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tls.crt")
	reg := prometheus.NewRegistry()
	RegisterCertificate(reg, file)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("without a certificate file: %d samples (%v), want 0", n, err)
	}
	notAfter := time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	// A chain: the leaf first, as in a kubernetes.io/tls Secret.
	pemBytes := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not parsed")})...)
	if err := os.WriteFile(file, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP strata_tls_certificate_expiry_timestamp_seconds When the serving certificate (tls.crt in --certs-dir) stops being valid (its notAfter), as Unix seconds.
# TYPE strata_tls_certificate_expiry_timestamp_seconds gauge
strata_tls_certificate_expiry_timestamp_seconds 1.9367856e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
