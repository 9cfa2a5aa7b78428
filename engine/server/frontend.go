package server

import (
	"crypto/x509"

	"github.com/strata-storage/strata/engine/s3api"
	"github.com/strata-storage/strata/engine/s3front"
)

// The S3 front ends a node may serve, while Strata's own (engine/s3api)
// replaces versitygw's (engine/s3front).
const (
	FrontEndStrata    = "strata"
	FrontEndVersitygw = "versitygw"
)

// servedCert is the certificate the S3 listener serves, by front end.
type servedCert struct {
	strata *s3api.ServedCertificate
	vgw    *s3front.ServedCertificate
}

func newServedCert(frontEnd string) servedCert {
	if frontEnd == FrontEndStrata {
		return servedCert{strata: &s3api.ServedCertificate{}}
	}
	return servedCert{vgw: &s3front.ServedCertificate{}}
}

// Leaf is the certificate served now (nil without TLS).
func (s servedCert) Leaf() *x509.Certificate {
	if s.strata != nil {
		return s.strata.Leaf()
	}
	return s.vgw.Leaf()
}
