package internode

import (
	"crypto/tls"
	"crypto/x509"
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
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             time.Time
	checked           time.Time
}

func (c *certSource) get() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < 10*time.Second {
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

// TLSConfigs returns the internode server and client TLS configurations
// from a certificate directory (tls.crt, tls.key, and ca.crt when present):
// both sides present the node's certificate, and with a CA each side
// verifies the other's (mutual TLS).
func TLSConfigs(dir string) (server, client *tls.Config, err error) {
	src := &certSource{certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	if _, err := src.get(); err != nil {
		return nil, nil, fmt.Errorf("internode TLS: %w", err)
	}
	var pool *x509.CertPool
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err == nil {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, nil, fmt.Errorf("internode TLS: %s holds no certificate", filepath.Join(dir, "ca.crt"))
		}
	}
	server = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return src.get() },
		NextProtos:     []string{"h2", "http/1.1"},
	}
	client = &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return src.get() },
		RootCAs:              pool,
	}
	if pool != nil {
		server.ClientCAs = pool
		server.ClientAuth = tls.RequireAndVerifyClientCert
	} else {
		// Without a CA the peers cannot be verified by certificate; the
		// requests' signatures still authenticate them.
		client.InsecureSkipVerify = true
	}
	return server, client, nil
}
