package adminapi

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"time"
)

// TLSInfo is what a process's TLS stack holds right now, as last loaded
// (not a fresh read of the files): a process that reports a CA verifies
// with it, and one that reports a leaf presents it. The operator asks
// every pod before it moves leaves to a new CA (does every pod trust it?)
// and before it drops an old CA (does any pod still present a leaf of
// it?). Without TLS every field is empty.
type TLSInfo struct {
	// Certificate is the leaf the S3 listener serves right now (after its
	// last reload).
	Certificate *CertInfo `json:"certificate,omitempty"`
	// InternodeCertificate is the leaf internode connections present
	// (server only).
	InternodeCertificate *CertInfo `json:"internodeCertificate,omitempty"`
	// TrustedCAs are the CAs this process verifies peers against right
	// now (the ca.crt it last loaded); empty when it has none.
	TrustedCAs []CertInfo `json:"trustedCAs,omitempty"`
}

// CertInfo identifies a certificate.
type CertInfo struct {
	// SHA256 is the lowercase hex SHA-256 of the certificate's DER.
	SHA256   string    `json:"sha256"`
	Subject  string    `json:"subject"`
	Issuer   string    `json:"issuer"`
	NotAfter time.Time `json:"notAfter"`
	// DER is the certificate itself (base64 in JSON), so a client can
	// check which CA signed a leaf: an old and a new CA often share their
	// subject, so Issuer does not tell them apart.
	DER []byte `json:"der,omitempty"`
}

// NewTLSInfo describes an S3 leaf, an internode leaf and trusted CAs; a
// nil leaf is left out.
func NewTLSInfo(s3, internode *x509.Certificate, cas []*x509.Certificate) TLSInfo {
	info := TLSInfo{Certificate: certInfo(s3), InternodeCertificate: certInfo(internode)}
	for _, c := range cas {
		info.TrustedCAs = append(info.TrustedCAs, *certInfo(c))
	}
	return info
}

func certInfo(c *x509.Certificate) *CertInfo {
	if c == nil {
		return nil
	}
	return &CertInfo{SHA256: sha256Hex(c.Raw), Subject: c.Subject.String(), Issuer: c.Issuer.String(), NotAfter: c.NotAfter.UTC(), DER: c.Raw}
}

func sha256Hex(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
