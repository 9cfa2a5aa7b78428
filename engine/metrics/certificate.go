package metrics

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/certfiles"
)

// certificateCollector reports when the serving certificate and the CAs
// of ca.crt expire. It reads the files at each scrape: the listeners
// reload the same files when they change (--certs-reload-interval), so a
// renewal or a rotated CA shows up without a restart and without a second
// copy of the reload logic.
type certificateCollector struct {
	certFile, caFile string
	expiry, caExpiry *prometheus.Desc
}

// RegisterCertificate registers the expiry of the first certificate in
// certFile (the leaf of tls.crt) and of every CA in caFile (ca.crt, which
// may be missing).
func RegisterCertificate(reg prometheus.Registerer, certFile, caFile string) {
	reg.MustRegister(&certificateCollector{
		certFile: certFile, caFile: caFile,
		expiry: prometheus.NewDesc("strata_tls_certificate_expiry_timestamp_seconds",
			"When the serving certificate (tls.crt in --certs-dir) stops being valid (its notAfter), as Unix seconds.", nil, nil),
		caExpiry: prometheus.NewDesc("strata_tls_ca_expiry_timestamp_seconds",
			"When each CA of ca.crt in --certs-dir stops being valid (its notAfter), as Unix seconds; fingerprint is the first 16 hex digits of its SHA-256.",
			[]string{"fingerprint"}, nil),
	})
}

func (c *certificateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.expiry
	ch <- c.caExpiry
}

func (c *certificateCollector) Collect(ch chan<- prometheus.Metric) {
	// Between a kubelet's swap of the files and the next scrape a file may
	// briefly be missing: no sample rather than a wrong one.
	if cert, err := leafCertificate(c.certFile); err == nil {
		ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
	}
	for fingerprint, ca := range caCertificates(c.caFile) {
		ch <- prometheus.MustNewConstMetric(c.caExpiry, prometheus.GaugeValue, float64(ca.NotAfter.Unix()), fingerprint)
	}
}

// caCertificates are the certificates of a bundle by fingerprint (a CA
// listed twice is one series); none when it is missing or does not parse.
func caCertificates(file string) map[string]*x509.Certificate {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	cas, err := certfiles.ParseCertificates(data)
	if err != nil {
		return nil
	}
	out := map[string]*x509.Certificate{}
	for _, ca := range cas {
		sum := sha256.Sum256(ca.Raw)
		out[hex.EncodeToString(sum[:])[:16]] = ca
	}
	return out
}

// leafCertificate parses the first CERTIFICATE block of a PEM file.
func leafCertificate(file string) (*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("no certificate in " + file)
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}
