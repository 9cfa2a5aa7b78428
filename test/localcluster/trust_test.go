package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/certs"
)

// trustMonitor checks, many times a second while certificates rotate, the
// invariant the operator's ordering exists for: whenever any pod serves a
// certificate from CA X, every server accepts a client certificate from X
// on its internode port. A server that does not would refuse the peers
// that present one (a split cluster) the moment it opens a new connection.
// Clients alone cannot show this: internode connections are long-lived,
// and a new certificate reaches the clients' bundle before any pod serves
// it.
type trustMonitor struct {
	kc         client.Client
	ns, state  string
	pods       []string // S3 addresses of every pod
	servers    []string // internode addresses of the servers
	mu         sync.Mutex
	known      map[string]certs.Pair // CA pairs by fingerprint
	client     map[string]tls.Certificate
	checks     int
	violations []string
}

func newTrustMonitor(kc client.Client, ns, state string, pods, servers []string) *trustMonitor {
	m := &trustMonitor{kc: kc, ns: ns, state: state, pods: pods, known: map[string]certs.Pair{}, client: map[string]tls.Certificate{}}
	for _, p := range servers {
		host, _, _ := net.SplitHostPort(p)
		m.servers = append(m.servers, net.JoinHostPort(host, fmt.Sprint(builders.InternodePort)))
	}
	return m
}

// learn adds a CA whose key the test knows (its own, or read from the
// operator's and the cert-manager stand-in's Secrets).
func (m *trustMonitor) learn(ca certs.Pair) {
	c, err := certs.Leaf(ca.Cert)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[certs.Fingerprint(c)] = ca
}

func (m *trustMonitor) learnFromSecrets(ctx context.Context) {
	for _, name := range []string{builders.CASecretName("media"), builders.CertManagerCASecretName("media")} {
		sec := &corev1.Secret{}
		if m.kc.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: name}, sec) != nil {
			continue
		}
		m.learn(certs.Pair{Cert: sec.Data["tls.crt"], Key: sec.Data["tls.key"]})
		if len(sec.Data["next.crt"]) > 0 {
			m.learn(certs.Pair{Cert: sec.Data["next.crt"], Key: sec.Data["next.key"]})
		}
	}
}

// run checks until ctx ends.
func (m *trustMonitor) run(ctx context.Context) {
	for ctx.Err() == nil {
		m.learnFromSecrets(ctx)
		m.check()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *trustMonitor) check() {
	issuers := map[string]bool{}
	for _, p := range m.pods {
		leaf, err := served(m.state, p)
		if err != nil {
			continue
		}
		if fp := m.issuerOf(leaf); fp != "" {
			issuers[fp] = true
		}
	}
	for fp := range issuers {
		for _, s := range m.servers {
			err := m.accepts(s, fp)
			m.mu.Lock()
			m.checks++
			if err != nil && len(m.violations) < 20 {
				m.violations = append(m.violations, fmt.Sprintf("%s %s refused a certificate of CA %s while a pod served one: %v",
					time.Now().Format("15:04:05.000"), s, fp[:12], err))
			}
			m.mu.Unlock()
		}
	}
}

func (m *trustMonitor) issuerOf(leaf *x509.Certificate) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for fp, ca := range m.known {
		if certs.ParseBundle(ca.Cert).Signer(leaf) != nil {
			return fp
		}
	}
	return ""
}

// accepts reports whether the server at addr completes a mutual TLS
// handshake with a client certificate of CA fp: over TLS 1.3 a refusal
// arrives as an alert on the first read, an acceptance as the server's
// HTTP/2 settings.
func (m *trustMonitor) accepts(addr, fp string) error {
	cert, err := m.clientCert(fp)
	if err != nil {
		return err
	}
	raw, err := dialInCluster(m.state, addr)
	if err != nil {
		return err
	}
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // the server is not what is checked
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if err := conn.Handshake(); err != nil {
		return err
	}
	if _, err := conn.Read(make([]byte, 1)); err != nil && strings.Contains(err.Error(), "tls:") {
		return err
	}
	return nil
}

func (m *trustMonitor) clientCert(fp string) (tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.client[fp]; ok {
		return c, nil
	}
	leaf, err := certs.Issue(m.known[fp], []string{"trust-monitor"}, nil, time.Now(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	m.client[fp] = c
	return c, nil
}

func (m *trustMonitor) result() (checks int, violations []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checks, append([]string(nil), m.violations...)
}
