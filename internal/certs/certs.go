// Package certs is the operator's own small CA for tenants with TLS mode
// Operator: a CA per tenant kept in a Secret, and serving certificates it
// issues and renews before they expire. Pure: the clock and randomness are
// passed in.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"time"
)

// Lifetimes. A serving certificate is renewed when a third of its life is
// left, so a stopped operator has a month to come back.
const (
	CALifetime      = 10 * 365 * 24 * time.Hour
	ServingLifetime = 90 * 24 * time.Hour
)

// Pair is a PEM certificate and key.
type Pair struct {
	Cert, Key []byte
}

// NewCA creates a self-signed CA.
func NewCA(commonName string, now time.Time, random io.Reader) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(random),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"strata"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// Issue signs a serving (and client: internode mTLS) certificate for
// dnsNames and ips with the CA.
func Issue(ca Pair, dnsNames []string, ips []net.IP, now time.Time, random io.Reader) (Pair, error) {
	caCert, caKey, err := parse(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("reading CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(random),
		Subject:      pkix.Name{CommonName: dnsNames[0], Organization: []string{"strata"}},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(ServingLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(random, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, err
	}
	return encode(der, key)
}

// RenewAt is when a certificate should be replaced: a third of its life
// before it expires.
func RenewAt(certPEM []byte) (time.Time, error) {
	c, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Add(-life / 3), nil
}

// Valid reports whether a serving certificate is signed by ca, covers
// exactly dnsNames and ips and is not due for renewal at now.
func Valid(serving, ca Pair, dnsNames []string, ips []net.IP, now time.Time) bool {
	c, err := parseCert(serving.Cert)
	if err != nil {
		return false
	}
	caCert, err := parseCert(ca.Cert)
	if err != nil || c.CheckSignatureFrom(caCert) != nil {
		return false
	}
	if _, err := parseKey(serving.Key); err != nil {
		return false
	}
	if !slices.Equal(c.DNSNames, dnsNames) || !slices.EqualFunc(c.IPAddresses, ips, net.IP.Equal) {
		return false
	}
	renew, _ := RenewAt(serving.Cert)
	return now.Before(renew)
}

// ValidCA reports whether a CA pair parses and is far from expiry.
func ValidCA(ca Pair, now time.Time) bool {
	c, _, err := parse(ca)
	if err != nil || !c.IsCA {
		return false
	}
	renew, _ := RenewAt(ca.Cert)
	return now.Before(renew)
}

func serial(random io.Reader) *big.Int {
	n, err := randInt(random)
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func randInt(random io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(random, b); err != nil {
		return nil, err
	}
	return new(big.Int).SetBytes(b), nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}),
	}, nil
}

func parse(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	c, err := parseCert(p.Cert)
	if err != nil {
		return nil, nil, err
	}
	k, err := parseKey(p.Key)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&k.PublicKey) {
		return nil, nil, errors.New("key does not match certificate")
	}
	return c, k, nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(bytes.TrimSpace(data))
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(bytes.TrimSpace(data))
	if b == nil {
		return nil, errors.New("no PEM key")
	}
	return x509.ParseECPrivateKey(b.Bytes)
}
