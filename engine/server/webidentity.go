package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/oidc"
)

// The pod's own ServiceAccount credentials, as the kubelet mounts them.
const (
	podTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	podCAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// EnvOIDCCAFile names a PEM bundle of CAs the web identity issuers'
// certificates may chain to, besides the system's and the cluster's.
const EnvOIDCCAFile = "STRATA_OIDC_CA_FILE"

// EnvOIDCAudiences names, as a JSON object, the client IDs the tenant
// accepts per web identity issuer ({"https://issuer": ["client-id"]}): an
// IAM account's OpenIDConnect provider of that issuer that lists no
// client IDs of its own accepts these (the operator sets it from the
// Tenant's spec.webIdentity.providers).
const EnvOIDCAudiences = "STRATA_OIDC_AUDIENCES"

// webAudiences reads EnvOIDCAudiences.
func webAudiences(getenv func(string) string) (map[string][]string, error) {
	v := strings.TrimSpace(getenv(EnvOIDCAudiences))
	if v == "" {
		return nil, nil
	}
	var m map[string][]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("%s: a JSON object of issuer URLs to lists of client IDs, e.g. {\"https://issuer.example\": [\"my-app\"]}: %w", EnvOIDCAudiences, err)
	}
	for issuer, ids := range m {
		u, err := url.Parse(issuer)
		if err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
			return nil, fmt.Errorf("%s: %q is not an issuer URL (https://HOST/...)", EnvOIDCAudiences, issuer)
		}
		if len(ids) == 0 || slices.Contains(ids, "") {
			return nil, fmt.Errorf("%s: issuer %s needs at least one client ID, none empty", EnvOIDCAudiences, issuer)
		}
	}
	return m, nil
}

// webVerifier verifies web identity tokens for STS. The Kubernetes API
// server serves its issuer's discovery and keys to authenticated
// ServiceAccounts only (ClusterRole system:service-account-issuer-discovery),
// so the pod's own token goes with requests to the API server's in-cluster
// names, and to no other host.
func webVerifier(getenv func(string) string) *oidc.Verifier {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	for _, f := range []string{podCAFile, getenv(EnvOIDCCAFile)} {
		if pem, err := os.ReadFile(f); f != "" && err == nil {
			roots.AppendCertsFromPEM(pem)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	apiHost := getenv("KUBERNETES_SERVICE_HOST")
	return &oidc.Verifier{
		Client: &http.Client{Transport: transport, Timeout: 15 * time.Second},
		Bearer: func(issuer string) string {
			u, err := url.Parse(issuer)
			if err != nil || u.Scheme != "https" || !apiServerHost(u.Hostname(), apiHost) {
				return ""
			}
			token, err := os.ReadFile(podTokenFile)
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(token))
		},
	}
}

// apiServerHost reports a name or address of the cluster's API server.
func apiServerHost(host, serviceHost string) bool {
	switch host {
	case "kubernetes", "kubernetes.default", "kubernetes.default.svc":
		return true
	}
	if strings.HasPrefix(host, "kubernetes.default.svc.") {
		return true
	}
	return serviceHost != "" && net.ParseIP(host) != nil && host == serviceHost
}
