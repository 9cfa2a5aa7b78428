package internode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/strata-storage/strata/engine/certfiles"
)

// TLS is a node's internode TLS: the configurations of its service
// (Server) and of its clients of the peers (Client), over the certificate
// and the trust bundle of a certificate directory, both re-read when their
// files change, so renewed certificates and a rotated CA take effect
// without a restart; connections already open keep working.
//
// Peers are always verified. With ca.crt, each side verifies the other's
// certificate against it (mutual TLS; every CA of the bundle is trusted).
// Without, the client verifies the server's certificate and name against
// the system roots (a publicly-trusted certificate), and the service asks
// no client certificate: a client certificate cannot be checked against a
// name, so the system roots would accept anyone's, and the requests'
// signatures authenticate the peer anyway. A ca.crt that appears later is
// used from then on.
type TLS struct {
	Server, Client *tls.Config
	cert           *certfiles.Reloaded[*tls.Certificate]
	trust          *certfiles.Trust
}

// LoadTLS reads tls.crt, tls.key and ca.crt (when present) from dir,
// checking them for a change every interval (0: certfiles.DefaultInterval).
func LoadTLS(dir string, interval time.Duration) (*TLS, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		// No system roots: without a ca.crt no peer verifies, which is
		// what a peer that cannot be verified must get.
		roots = x509.NewCertPool()
	}
	return loadTLS(dir, certfiles.Interval(interval), roots)
}

// loadTLS is LoadTLS with the roots used without ca.crt given.
func loadTLS(dir string, interval time.Duration, roots *x509.CertPool) (*TLS, error) {
	t := &TLS{
		cert:  certfiles.NewKeyPair(filepath.Join(dir, certfiles.CertFile), filepath.Join(dir, certfiles.KeyFile), interval),
		trust: certfiles.NewTrust(filepath.Join(dir, certfiles.CAFile), interval, roots),
	}
	if _, err := t.cert.Get(); err != nil {
		return nil, fmt.Errorf("internode TLS: %w", err)
	}
	if _, err := t.trust.Get(); err != nil {
		return nil, fmt.Errorf("internode TLS: %w", err)
	}
	t.Server, t.Client = t.serverConfig(), t.clientConfig()
	return t, nil
}

// Certificate is the leaf this node presents now.
func (t *TLS) Certificate() *x509.Certificate {
	c, _ := t.cert.Get() // never fails once loaded
	return certfiles.Leaf(c)
}

// Trust is the bundle peers are verified against now.
func (t *TLS) Trust() *certfiles.Trust { return t.trust }

func (t *TLS) serverConfig() *tls.Config {
	server := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.cert.Get() },
		NextProtos:     []string{"h2", "http/1.1"},
	}
	// Each handshake takes the bundle as of then.
	server.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := server.Clone()
		c.GetConfigForClient = nil
		if b, _ := t.trust.Get(); b.FromCAFile() {
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, b.Pool
		}
		return c, nil
	}
	return server
}

func (t *TLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.cert.Get() },
		// Verification is verifyPeer's, against the bundle as of the
		// handshake; crypto/tls's own would use a pool fixed at start.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			b, _ := t.trust.Get()
			return verifyPeer(cs, b)
		},
	}
}

// verifyPeer checks the server's chain against the bundle and its name, as
// crypto/tls would with RootCAs set. The name is the one the client sent as
// SNI: crypto/tls sends none for an IP address, so a peer addressed by IP
// (tests on loopback; clusters name their peers) is verified as holding a
// certificate of the deployment's CA (ca.crt), not as holding that IP.
// Against the system roots a certificate without a name proves nothing
// (anyone can hold a publicly-trusted one), so such a peer is refused.
func verifyPeer(cs tls.ConnectionState, b certfiles.Bundle) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("internode TLS: the peer sent no certificate")
	}
	if cs.ServerName == "" && !b.FromCAFile() {
		return errors.New("internode TLS: a peer addressed by IP cannot be verified against the system roots; give ca.crt in --certs-dir, or address peers by name")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: b.Pool, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("internode TLS: %w", err)
	}
	return nil
}
