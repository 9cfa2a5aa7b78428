package s3front

import (
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"

	"github.com/versity/versitygw/s3api"

	"github.com/strata-storage/strata/engine/certfiles"
)

// ServedCertificate tells which certificate the S3 listener presents now:
// it asks the listener's own certificate store (versitygw's, loaded at
// start and again at each reload), so it reports what clients get, not
// what the files hold.
type ServedCertificate struct {
	get atomic.Pointer[func(*tls.ClientHelloInfo) (*tls.Certificate, error)]
}

// Leaf is the certificate served now; nil before the listener is set up,
// or without TLS.
func (s *ServedCertificate) Leaf() *x509.Certificate {
	if s == nil {
		return nil
	}
	get := s.get.Load()
	if get == nil {
		return nil
	}
	c, err := (*get)(nil)
	if err != nil {
		return nil
	}
	return certfiles.Leaf(c)
}

// observe is the option that hands s the listener's certificate store;
// it must come after versitygw's own TLS option, which embedgw puts ahead
// of ours.
func (s *ServedCertificate) observe() s3api.Option {
	return func(srv *s3api.S3ApiServer) {
		if srv.CertStorage == nil {
			return
		}
		get := srv.CertStorage.GetCertificate
		s.get.Store(&get)
	}
}
