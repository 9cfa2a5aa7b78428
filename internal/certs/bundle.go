package certs

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Bundle is a trust bundle: CA certificates in the order they were added,
// each at most once.
type Bundle []*x509.Certificate

// ParseBundle reads every certificate of a PEM bundle, skipping blocks that
// are not certificates or do not parse (a bundle a user wrote by hand may
// carry comments or keys by mistake; what parses is still trusted).
func ParseBundle(data []byte) Bundle {
	var b Bundle
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return b
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			b = b.With(c)
		}
	}
}

// PEM encodes the bundle; nil when it is empty.
func (b Bundle) PEM() []byte {
	var out bytes.Buffer
	for _, c := range b {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// Has reports whether c is in the bundle.
func (b Bundle) Has(c *x509.Certificate) bool {
	for _, x := range b {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// With returns the bundle with c appended unless it is there already.
func (b Bundle) With(c *x509.Certificate) Bundle {
	if c == nil || b.Has(c) {
		return b
	}
	return append(b, c)
}

// Signer is the CA of the bundle that signed c, or nil.
func (b Bundle) Signer(c *x509.Certificate) *x509.Certificate {
	for _, ca := range b {
		if bytes.Equal(c.RawIssuer, ca.RawSubject) && c.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}

// Fingerprint is the lowercase hex SHA-256 of a certificate's DER, as the
// engine's admin API reports it.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// Leaf parses the first certificate of a PEM chain.
func Leaf(chain []byte) (*x509.Certificate, error) { return parseCert(chain) }

// Check says why a serving certificate cannot be used by a tenant (nil when
// it can): the key must match, the certificate must be valid now, cover
// every name of names (a "*." name is checked with a sample pod name) and
// ip, and chain to a CA of cas (to the system roots when cas is empty).
// Every problem is named, so a user can fix them all at once.
func Check(p Pair, cas Bundle, names []string, ips []net.IP, now time.Time) error {
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return fmt.Errorf("tls.crt and tls.key do not form a key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls.crt: %w", err)
	}
	var problems []string
	switch {
	case now.After(leaf.NotAfter):
		problems = append(problems, "it expired at "+leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		problems = append(problems, "it is not valid before "+leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if missing := uncovered(leaf, names, ips); len(missing) > 0 {
		problems = append(problems, "it does not cover "+strings.Join(missing, ", "))
	}
	if err := chains(leaf, kp.Certificate[1:], cas, now); err != nil {
		problems = append(problems, err.Error())
	}
	if !clientAuth(leaf) {
		problems = append(problems, "its extended key usage lacks clientAuth, which servers need to authenticate to each other")
	}
	if len(problems) > 0 {
		return errors.New("the certificate in tls.crt cannot serve this tenant: " + strings.Join(problems, "; "))
	}
	return nil
}

// clientAuth reports whether the certificate may authenticate a client (no
// extended key usage means any).
func clientAuth(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func uncovered(leaf *x509.Certificate, names []string, ips []net.IP) []string {
	var missing []string
	for _, n := range names {
		probe := n
		if rest, ok := strings.CutPrefix(n, "*."); ok {
			probe = "pod-0." + rest
		}
		if leaf.VerifyHostname(probe) != nil {
			missing = append(missing, n)
		}
	}
	for _, ip := range ips {
		if leaf.VerifyHostname(ip.String()) != nil {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

func chains(leaf *x509.Certificate, rest [][]byte, cas Bundle, now time.Time) error {
	opts := x509.VerifyOptions{CurrentTime: now, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, der := range rest {
		if c, err := x509.ParseCertificate(der); err == nil {
			opts.Intermediates.AddCert(c)
		}
	}
	where := "the system roots (the Secret has no ca.crt)"
	if len(cas) > 0 {
		opts.Roots = x509.NewCertPool()
		for _, c := range cas {
			opts.Roots.AddCert(c)
		}
		where = "ca.crt"
	}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("it does not chain to %s (%w)", where, err)
	}
	return nil
}
