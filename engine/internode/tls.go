package internode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certSource serves a certificate from files, re-read when they change
// (cert-manager renews them in place).
type certSource struct {
	certFile, keyFile string
	interval          time.Duration // between checks for a change
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             time.Time
	checked           time.Time
}

func (c *certSource) get() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < c.interval {
		return c.cert, nil
	}
	c.checked = time.Now()
	fi, err := os.Stat(c.certFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil
		}
		return nil, err
	}
	if c.cert != nil && fi.ModTime().Equal(c.stamp) {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // keep serving the old one
		}
		return nil, err
	}
	c.cert, c.stamp = &cert, fi.ModTime()
	return c.cert, nil
}

// caSource serves the CA pool from ca.crt, re-read when the file changes:
// during a CA rotation the file holds the old and the new CA, and every
// certificate in it is trusted. A file that goes missing or stops parsing
// keeps the last good pool (a half-written Secret must not cut the
// cluster off).
type caSource struct {
	file     string
	interval time.Duration
	mu       sync.Mutex
	pool     *x509.CertPool
	stamp    time.Time
	checked  time.Time
}

func (c *caSource) get() *x509.CertPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < c.interval {
		return c.pool
	}
	c.checked = time.Now()
	fi, err := os.Stat(c.file)
	if err != nil || fi.ModTime().Equal(c.stamp) {
		return c.pool
	}
	data, err := os.ReadFile(c.file)
	if err != nil {
		return c.pool
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return c.pool
	}
	c.pool, c.stamp = pool, fi.ModTime()
	return c.pool
}

// reloadInterval is how often the certificate files are checked for a
// change.
const reloadInterval = 10 * time.Second

// TLSConfigs returns the internode server and client TLS configurations
// from a certificate directory (tls.crt, tls.key, and ca.crt when present):
// both sides present the node's certificate, and with a CA each side
// verifies the other's (mutual TLS). All three files are re-read when they
// change, so renewed certificates and a rotated CA take effect without a
// restart; connections already open keep working.
func TLSConfigs(dir string) (server, client *tls.Config, err error) {
	return tlsConfigs(dir, reloadInterval)
}

func tlsConfigs(dir string, interval time.Duration) (server, client *tls.Config, err error) {
	src := &certSource{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), interval: interval}
	if _, err := src.get(); err != nil {
		return nil, nil, fmt.Errorf("internode TLS: %w", err)
	}
	server = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return src.get() },
		NextProtos:     []string{"h2", "http/1.1"},
	}
	client = &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return src.get() },
		// Verification is VerifyPeer's, against the CA pool as of the
		// handshake; crypto/tls's own would use a pool fixed at start.
		InsecureSkipVerify: true,
	}
	caFile := filepath.Join(dir, "ca.crt")
	if _, statErr := os.Stat(caFile); errors.Is(statErr, os.ErrNotExist) {
		// Without a CA the peers cannot be verified by certificate (only
		// with --insecure-internode); the requests' signatures still
		// authenticate them.
		return server, client, nil
	}
	cas := &caSource{file: caFile, interval: interval}
	if cas.get() == nil {
		return nil, nil, fmt.Errorf("internode TLS: %s holds no certificate", caFile)
	}
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = cas.get()
	server.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := server.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = cas.get()
		return c, nil
	}
	client.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPeer(cs, cas.get()) }
	return server, client, nil
}

// verifyPeer checks the server's chain against pool and its name, as
// crypto/tls would with RootCAs set. The name is the one the client sent as
// SNI: crypto/tls sends none for an IP address, so a peer addressed by IP
// (tests on loopback; clusters name their peers) is verified as holding a
// certificate of the deployment's CA, not as holding that IP.
func verifyPeer(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("internode TLS: the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("internode TLS: %w", err)
	}
	return nil
}
