package metrics

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

// certificateCollector reports when the serving certificate expires. It
// reads the certificate file at each scrape: the listener reloads the same
// file when it changes (--certs-reload-interval), so a renewal shows up
// without a restart and without a second copy of the reload logic.
type certificateCollector struct {
	file   string
	expiry *prometheus.Desc
}

// RegisterCertificate registers the expiry of the first certificate in
// certFile (the leaf of tls.crt).
func RegisterCertificate(reg prometheus.Registerer, certFile string) {
	reg.MustRegister(&certificateCollector{
		file: certFile,
		expiry: prometheus.NewDesc("strata_tls_certificate_expiry_timestamp_seconds",
			"When the serving certificate (tls.crt in --certs-dir) stops being valid (its notAfter), as Unix seconds.", nil, nil),
	})
}

func (c *certificateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.expiry }

func (c *certificateCollector) Collect(ch chan<- prometheus.Metric) {
	cert, err := leafCertificate(c.file)
	if err != nil {
		// Between a kubelet's swap of the files and the next scrape the
		// file may briefly be missing: no sample rather than a wrong one.
		return
	}
	ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
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
