package testcerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/adminclient"
)

// Fingerprint is the lowercase hex SHA-256 of the DER of the first
// certificate of a PEM file.
func Fingerprint(t testing.TB, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}

// Replace copies tls.key, tls.crt and ca.crt of src over dst's, as a
// rotated Secret would land: the key first, so a reload never pairs a new
// certificate with the old key (the other way round it fails, and the
// last good pair stays until the next check).
func Replace(t testing.TB, src, dst string) {
	t.Helper()
	for _, name := range []string{"tls.key", "tls.crt", "ca.crt"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Break overwrites dir's tls.crt with a certificate whose key is not
// tls.key, and cuts ca.crt short: files a reload must refuse.
func Break(t testing.TB, dir string) {
	t.Helper()
	other := t.TempDir()
	Write(t, other)
	cert, err := os.ReadFile(filepath.Join(other, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ca = append(ca, "-----BEGIN CERTIFICATE-----\nMIIB"...)
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
}

// AskTLS returns GET /strata/admin/v1/tls of the process at addr (https),
// signed by the root keys, trusting the CAs of the ca.crt of dirs.
func AskTLS(t testing.TB, addr, access, secret string, dirs ...string) func() (adminapi.TLSInfo, error) {
	t.Helper()
	var bundle []byte
	for _, dir := range dirs {
		ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, ca...)
	}
	c, err := adminclient.New("https://"+addr, adminclient.Options{AccessKey: access, SecretKey: secret, CA: bundle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return func() (adminapi.TLSInfo, error) { return c.TLS(context.Background()) }
}

// WaitTLS asks a process's TLS (GET /strata/admin/v1/tls) until it
// reports the leaf and the CA of dir (the leaf for internode too when
// internode), and fails the test if it has not within 20 s.
func WaitTLS(t testing.TB, ask func() (adminapi.TLSInfo, error), dir string, internode bool) adminapi.TLSInfo {
	t.Helper()
	leaf, ca := Fingerprint(t, filepath.Join(dir, "tls.crt")), Fingerprint(t, filepath.Join(dir, "ca.crt"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := ask()
		why := err
		if err == nil {
			why = mismatch(info, leaf, ca, internode)
		}
		if why == nil {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET tls never reported the certificates of %s: %v", dir, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mismatch says how info differs from a leaf and a CA fingerprint.
func mismatch(info adminapi.TLSInfo, leaf, ca string, internode bool) error {
	var cas []string
	for _, c := range info.TrustedCAs {
		cas = append(cas, c.SHA256)
	}
	switch {
	case sha(info.Certificate) != leaf:
		return fmt.Errorf("S3 leaf %q, want %s", sha(info.Certificate), leaf)
	case internode && sha(info.InternodeCertificate) != leaf:
		return fmt.Errorf("internode leaf %q, want %s", sha(info.InternodeCertificate), leaf)
	case !internode && info.InternodeCertificate != nil:
		return fmt.Errorf("an internode leaf %s where there is no internode service", sha(info.InternodeCertificate))
	case len(cas) != 1 || cas[0] != ca:
		return fmt.Errorf("trusted CAs %q, want only %s", cas, ca)
	}
	return nil
}

func sha(c *adminapi.CertInfo) string {
	if c == nil {
		return ""
	}
	return c.SHA256
}
