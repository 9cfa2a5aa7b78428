package webhookcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// The keys of the Secret. ca.crt and tls.crt/tls.key carry the names
// cert-manager and kubernetes.io/tls Secrets use, so the usual one-liners
// (`kubectl get secret ... -o jsonpath='{.data.ca\.crt}'`) work here too.
const (
	keyCACert         = "ca.crt"          // the CA that signs the serving certificate
	keyCAKey          = "ca.key"          //
	keyServingCert    = "tls.crt"         // the serving certificate
	keyServingKey     = "tls.key"         //
	keyNextCACert     = "next-ca.crt"     // during a rotation: trusted, signs from the switch on
	keyNextCAKey      = "next-ca.key"     //
	keyPreviousCACert = "previous-ca.crt" // after a switch: still trusted for the overlap
)

// clockSkew backdates every certificate, so that an API server whose clock
// is a little behind ours does not find it not yet valid. issuedAt undoes
// it to recover when a certificate was made.
const clockSkew = 5 * time.Minute

// keyPair is a certificate with its private key, parsed and as PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// material is what the Secret holds. A piece that is missing or does not
// parse is nil, and the rotation steps make it again.
type material struct {
	ca       *keyPair
	serving  *keyPair
	next     *keyPair
	previous *x509.Certificate
}

// parseMaterial reads the Secret's data.
func parseMaterial(data map[string][]byte) material {
	m := material{
		ca:      parseKeyPair(data[keyCACert], data[keyCAKey]),
		serving: parseKeyPair(data[keyServingCert], data[keyServingKey]),
		next:    parseKeyPair(data[keyNextCACert], data[keyNextCAKey]),
	}
	if certs := parseCerts(data[keyPreviousCACert]); len(certs) == 1 {
		m.previous = certs[0]
	}
	return m
}

// data is the Secret's data for m.
func (m material) data() map[string][]byte {
	d := map[string][]byte{}
	if m.ca != nil {
		d[keyCACert], d[keyCAKey] = m.ca.certPEM, m.ca.keyPEM
	}
	if m.serving != nil {
		d[keyServingCert], d[keyServingKey] = m.serving.certPEM, m.serving.keyPEM
	}
	if m.next != nil {
		d[keyNextCACert], d[keyNextCAKey] = m.next.certPEM, m.next.keyPEM
	}
	if m.previous != nil {
		d[keyPreviousCACert] = encodeCert(m.previous.Raw)
	}
	return d
}

// bundle is the caBundle the webhook configurations need: every CA a
// replica may be serving a certificate from, or soon will. Oldest first, so
// the switch, which only renames the two CAs, leaves it as it was.
func (m material) bundle() []byte {
	var b []byte
	for _, c := range []*x509.Certificate{m.previous, m.caCert(), m.nextCert()} {
		if c != nil {
			b = append(b, encodeCert(c.Raw)...)
		}
	}
	return b
}

func (m material) caCert() *x509.Certificate {
	if m.ca == nil {
		return nil
	}
	return m.ca.cert
}

func (m material) nextCert() *x509.Certificate {
	if m.next == nil {
		return nil
	}
	return m.next.cert
}

// tlsCertificate is the serving certificate for crypto/tls.
func (p *keyPair) tlsCertificate() *tls.Certificate {
	return &tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key, Leaf: p.cert}
}

func parseKeyPair(certPEM, keyPEM []byte) *keyPair {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM) // also checks that the key is the certificate's
	if err != nil || len(pair.Certificate) != 1 {
		return nil
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || pair.Leaf == nil {
		return nil
	}
	return &keyPair{cert: pair.Leaf, key: key, certPEM: certPEM, keyPEM: keyPEM}
}

// parseCerts reads every CERTIFICATE block of a PEM bundle; nil if any
// fails to parse.
func parseCerts(b []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil
		}
		certs = append(certs, c)
	}
}

// bundleHas tells whether a caBundle holds cert.
func bundleHas(bundle []byte, cert *x509.Certificate) bool {
	return slices.ContainsFunc(parseCerts(bundle), func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, cert.Raw) })
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// hosts are the names the serving certificate is for.
type hosts struct {
	dnsNames []string
	ips      []net.IP
}

// matches tells whether cert names exactly these hosts.
func (h hosts) matches(cert *x509.Certificate) bool {
	sameIPs := slices.EqualFunc(sortedIPs(cert.IPAddresses), sortedIPs(h.ips), net.IP.Equal)
	return sameIPs && slices.Equal(sorted(cert.DNSNames), sorted(h.dnsNames))
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func sortedIPs(ips []net.IP) []net.IP {
	return slices.SortedFunc(slices.Values(ips), func(a, b net.IP) int { return bytes.Compare(a.To16(), b.To16()) })
}

// newCA makes a self-signed CA valid for lifetime from now.
func newCA(now time.Time, lifetime time.Duration) (*keyPair, error) {
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "strata-operator webhook CA " + now.UTC().Format("2006-01-02T15:04:05Z")},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil)
}

// newServing makes a serving certificate for h signed by ca, valid for
// lifetime from now but never past the CA.
func newServing(ca *keyPair, h hosts, now time.Time, lifetime time.Duration) (*keyPair, error) {
	if len(h.dnsNames) == 0 && len(h.ips) == 0 {
		return nil, fmt.Errorf("a serving certificate needs at least one DNS name or IP address")
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	cn := ""
	if len(h.dnsNames) > 0 {
		cn = h.dnsNames[0]
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     h.dnsNames,
		IPAddresses:  h.ips,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return sign(tmpl, ca)
}

// sign makes a P-256 key and a certificate for it from tmpl, signed by
// parent, or by itself when parent is nil.
func sign(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: encodeCert(der),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never 0
}
