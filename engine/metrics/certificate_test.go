package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// selfSigned is the DER of a self-signed certificate valid until notAfter.
func selfSigned(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemOf(ders ...[]byte) []byte {
	var out []byte
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// TestCertificateExpiry: the gauge is the leaf's notAfter; no file, no
// sample.
func TestCertificateExpiry(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tls.crt")
	reg := prometheus.NewRegistry()
	RegisterCertificate(reg, file, filepath.Join(dir, "ca.crt"))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("without a certificate file: %d samples (%v), want 0", n, err)
	}
	der := selfSigned(t, "strata", time.Date(2031, 5, 17, 12, 0, 0, 0, time.UTC))
	// A chain: the leaf first, as in a kubernetes.io/tls Secret.
	pemBytes := append(pemOf(der), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not parsed")})...)
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

// TestCAExpiry: one gauge per CA of ca.crt, labelled with its fingerprint,
// as the file holds at the scrape: a CA added during a rotation appears,
// one dropped goes; a missing or broken file gives none.
func TestCAExpiry(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	reg := prometheus.NewRegistry()
	RegisterCertificate(reg, filepath.Join(dir, "tls.crt"), caFile)
	old := selfSigned(t, "old CA", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	next := selfSigned(t, "new CA", time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
	const head = `
# HELP strata_tls_ca_expiry_timestamp_seconds When each CA of ca.crt in --certs-dir stops being valid (its notAfter), as Unix seconds; fingerprint is the first 16 hex digits of its SHA-256.
# TYPE strata_tls_ca_expiry_timestamp_seconds gauge
`
	sample := func(der []byte, notAfter string) string {
		sum := sha256.Sum256(der)
		return fmt.Sprintf("strata_tls_ca_expiry_timestamp_seconds{fingerprint=%q} %s\n", hex.EncodeToString(sum[:])[:16], notAfter)
	}
	for _, step := range []struct {
		name string
		file []byte // nil: no file
		want string
	}{
		{"no ca.crt", nil, ""},
		{"one CA", pemOf(old), head + sample(old, "1.893456e+09")},
		{"overlap", pemOf(old, next, old), head + sample(old, "1.893456e+09") + sample(next, "2.0827584e+09")},
		{"old CA dropped", pemOf(next), head + sample(next, "2.0827584e+09")},
		{"cut short", append(pemOf(next), []byte("-----BEGIN CERTIFICATE-----\nMIIB")...), ""},
	} {
		_ = os.Remove(caFile)
		if step.file != nil {
			if err := os.WriteFile(caFile, step.file, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(step.want), "strata_tls_ca_expiry_timestamp_seconds"); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
}
