package certfiles

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
	"testing"
	"time"
)

func testCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestTrustFollowsTheFile: without ca.crt the fallback roots; a ca.crt
// that appears is loaded, every CA of it; one that does not parse (cut
// short, garbage) keeps the last good bundle; one removed gives the
// fallback back.
func TestTrustFollowsTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	fallback := x509.NewCertPool()
	trust := NewTrust(file, 0, fallback)
	names := func() []string {
		t.Helper()
		b, err := trust.Get()
		if err != nil {
			t.Fatal(err)
		}
		if !b.FromCAFile() && b.Pool != fallback {
			t.Fatal("without ca.crt, not the fallback pool")
		}
		var out []string
		for _, c := range b.CAs {
			out = append(out, c.Subject.CommonName)
		}
		return out
	}
	at := time.Now().Add(-time.Minute)
	write := func(data []byte) {
		t.Helper()
		at = at.Add(time.Second)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("without ca.crt: %q", got)
	}
	ca1, ca2 := testCA(t, "ca-1"), testCA(t, "ca-2")
	write(append(append([]byte{}, ca1...), ca2...))
	if got := names(); len(got) != 2 || got[0] != "ca-1" || got[1] != "ca-2" {
		t.Fatalf("after ca.crt appeared: %q", got)
	}
	for _, broken := range [][]byte{append(append([]byte{}, ca2...), ca1[:len(ca1)/2]...), []byte("not PEM")} {
		write(broken)
		if got := names(); len(got) != 2 {
			t.Fatalf("after %q: %q, want the last good bundle", broken, got)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("after ca.crt was removed: %q", got)
	}
}

// TestReloadedWaitsForTheInterval: within the interval the file is not
// looked at.
func TestReloadedWaitsForTheInterval(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	loads := 0
	r := NewReloaded(file, time.Hour, func() (int, error) { loads++; return loads, nil })
	for range 3 {
		if v, err := r.Get(); err != nil || v != 1 {
			t.Fatalf("Get = %d, %v; want the first load", v, err)
		}
		if err := os.WriteFile(file, []byte{byte(loads)}, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
