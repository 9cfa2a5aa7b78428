package internode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a CA that signs node certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// writeNode writes a node certificate signed by ca (for 127.0.0.1 and
// node.test) and, unless nil, the CA bundle into dir, stamped at, so a
// reload sees a change.
func writeNode(t *testing.T, dir string, ca testCA, bundle []byte, at time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"node.test"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	writeStamped(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), at)
	writeStamped(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), at)
	if bundle != nil {
		writeStamped(t, filepath.Join(dir, "ca.crt"), bundle, at)
	}
}

func writeStamped(t *testing.T, path string, data []byte, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// loadTestTLS loads dir, re-read at every handshake, with roots as the
// system roots (nil: none).
func loadTestTLS(t *testing.T, dir string, roots *x509.CertPool) *TLS {
	t.Helper()
	if roots == nil {
		roots = x509.NewCertPool()
	}
	tl, err := loadTLS(dir, 0, roots)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// handshake connects a client to a server over loopback TCP (net.Pipe is
// unbuffered: a TLS 1.3 server writing session tickets would wait for a
// client that has stopped reading) and reports the client's error, or the
// server's.
func handshake(server, client *tls.Config, serverName string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		srvErr <- tls.Server(conn, server).Handshake()
	}()
	conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	c := client.Clone()
	c.ServerName = serverName
	tc := tls.Client(conn, c)
	if err := tc.Handshake(); err != nil {
		return err
	}
	// TLS 1.3: the server checks the client's certificate after the
	// client's side is done; a read sees its verdict.
	if err := <-srvErr; err != nil {
		return err
	}
	return nil
}

// A CA rotation with overlap works without a restart: nodes trust every CA
// of ca.crt as re-read, leaves move to the new CA while the bundle holds
// both, and once the old CA leaves the bundle its leaves are refused. A
// node that never saw the bundle refuses the new leaves, which is why the
// bundle must reach every node first. Names are checked.
func TestTLSReloadsCertificatesAndCAs(t *testing.T) {
	ca1, ca2 := newTestCA(t, "ca-1"), newTestCA(t, "ca-2")
	serverDir, clientDir, staleDir := t.TempDir(), t.TempDir(), t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	writeNode(t, serverDir, ca1, ca1.pem, t0)
	writeNode(t, clientDir, ca1, ca1.pem, t0)
	writeNode(t, staleDir, ca1, ca1.pem, t0)
	server := loadTestTLS(t, serverDir, nil).Server
	client := loadTestTLS(t, clientDir, nil).Client
	stale := loadTestTLS(t, staleDir, nil).Client
	if err := handshake(server, client, "127.0.0.1"); err != nil {
		t.Fatalf("same CA: %v", err)
	}
	if err := handshake(server, client, "other.example"); err == nil || !strings.Contains(err.Error(), "other.example") {
		t.Fatalf("a wrong server name must be refused: %v", err)
	}
	// A peer from another deployment (another CA) is refused.
	otherDir := t.TempDir()
	writeNode(t, otherDir, ca2, ca2.pem, t0)
	other := loadTestTLS(t, otherDir, nil).Server
	if err := handshake(other, client, "127.0.0.1"); err == nil {
		t.Fatal("a server with another CA's certificate was accepted")
	}

	// Overlap: both nodes trust CA 1 and CA 2, the server's leaf moves to CA 2.
	both := append(append([]byte{}, ca1.pem...), ca2.pem...)
	writeNode(t, clientDir, ca1, both, t0.Add(time.Second))
	writeNode(t, serverDir, ca2, both, t0.Add(time.Second))
	if err := handshake(server, client, "127.0.0.1"); err != nil {
		t.Fatalf("during the overlap, a CA 1 client and a CA 2 server: %v", err)
	}
	if err := handshake(server, stale, "127.0.0.1"); err == nil {
		t.Fatal("a node that trusts only CA 1 accepted a CA 2 leaf")
	}

	// The old CA leaves the bundle: the client, still on a CA 1 leaf, is
	// refused by the server; moved to CA 2, it is accepted.
	writeNode(t, serverDir, ca2, ca2.pem, t0.Add(2*time.Second))
	if err := handshake(server, client, "127.0.0.1"); err == nil {
		t.Fatal("a CA 1 client certificate was accepted after CA 1 left the server's bundle")
	}
	writeNode(t, clientDir, ca2, ca2.pem, t0.Add(2*time.Second))
	if err := handshake(server, client, "127.0.0.1"); err != nil {
		t.Fatalf("both on CA 2: %v", err)
	}

	// A half-written ca.crt keeps the last good pool.
	if err := os.WriteFile(filepath.Join(clientDir, "ca.crt"), []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(clientDir, "ca.crt"), t0.Add(3*time.Second), t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := handshake(server, client, "127.0.0.1"); err != nil {
		t.Fatalf("after a broken ca.crt: %v", err)
	}
}

// Without ca.crt the peers are still verified: the client checks the
// server's chain and name against the system roots (here a given pool) and
// refuses a server they do not vouch for, or one it cannot name; the
// service asks no client certificate. A ca.crt that appears later replaces
// the roots on both sides.
func TestTLSWithoutCAVerifiesAgainstSystemRoots(t *testing.T) {
	public, private := newTestCA(t, "public"), newTestCA(t, "private")
	roots := x509.NewCertPool()
	roots.AddCert(public.cert)
	serverDir, clientDir, otherDir := t.TempDir(), t.TempDir(), t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	writeNode(t, serverDir, public, nil, t0)
	writeNode(t, clientDir, private, nil, t0)
	writeNode(t, otherDir, private, nil, t0)
	server := loadTestTLS(t, serverDir, roots).Server
	client := loadTestTLS(t, clientDir, roots).Client
	other := loadTestTLS(t, otherDir, roots).Server
	if err := handshake(server, client, "node.test"); err != nil {
		t.Fatalf("a server the roots vouch for: %v", err)
	}
	for name, err := range map[string]error{
		"another CA's server": handshake(other, client, "node.test"),
		"a wrong name":        handshake(server, client, "other.test"),
		"no name (an IP)":     handshake(server, client, "127.0.0.1"),
	} {
		if err == nil {
			t.Errorf("%s was accepted without ca.crt", name)
		}
	}
	bare := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if err := handshake(server, bare, "node.test"); err != nil {
		t.Fatalf("without ca.crt the service asked a client certificate: %v", err)
	}

	// ca.crt appears: the client trusts the private CA only, by IP too;
	// the service now requires a client certificate of its CA.
	writeStamped(t, filepath.Join(clientDir, "ca.crt"), private.pem, t0.Add(time.Second))
	writeStamped(t, filepath.Join(serverDir, "ca.crt"), public.pem, t0.Add(time.Second))
	if err := handshake(other, client, "127.0.0.1"); err != nil {
		t.Fatalf("after ca.crt appeared, a server of its CA: %v", err)
	}
	if err := handshake(server, client, "node.test"); err == nil {
		t.Fatal("after ca.crt appeared, the system roots were still trusted")
	}
	if err := handshake(server, bare, "node.test"); err == nil {
		t.Fatal("after ca.crt appeared, the service accepted a client without a certificate")
	}
}
