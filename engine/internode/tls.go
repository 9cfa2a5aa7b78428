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

// reloaded is a value loaded from files and loaded again when the first
// of them changes (cert-manager and kubelet replace Secret files in place),
// checked at most every interval. A load that fails keeps the last good
// value: a half-written Secret must not cut the cluster off.
type reloaded[T any] struct {
	file     string // whose modification time says when to reload
	interval time.Duration
	load     func() (T, error)
	mu       sync.Mutex
	val      T
	ok       bool
	stamp    time.Time
	checked  time.Time
}

func (r *reloaded[T]) get() (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok && time.Since(r.checked) < r.interval {
		return r.val, nil
	}
	r.checked = time.Now()
	fi, err := os.Stat(r.file)
	if err == nil && r.ok && fi.ModTime().Equal(r.stamp) {
		return r.val, nil
	}
	var v T
	if err == nil {
		v, err = r.load()
	}
	if err != nil {
		if r.ok {
			return r.val, nil
		}
		return v, err
	}
	r.val, r.ok, r.stamp = v, true, fi.ModTime()
	return r.val, nil
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
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	src := &reloaded[*tls.Certificate]{file: certFile, interval: interval, load: func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		return &cert, err
	}}
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
		// Verification is verifyPeer's, against the CA pool as of the
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
	// During a CA rotation ca.crt holds the old and the new CA: every
	// certificate in it is trusted.
	cas := &reloaded[*x509.CertPool]{file: caFile, interval: interval, load: func() (*x509.CertPool, error) {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("internode TLS: %s holds no certificate", caFile)
		}
		return pool, nil
	}}
	pool, err := cas.get()
	if err != nil {
		return nil, nil, err
	}
	server.ClientAuth = tls.RequireAndVerifyClientCert
	server.ClientCAs = pool
	server.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := server.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs, _ = cas.get() // never fails once loaded
		return c, nil
	}
	client.VerifyConnection = func(cs tls.ConnectionState) error {
		pool, _ := cas.get()
		return verifyPeer(cs, pool)
	}
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
