package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// kubernetesServiceIP is the `kubernetes` Service's ClusterIP: the first
// address of the service range.
const kubernetesServiceIP = "10.0.0.1"

// writeAPIServerCerts writes the API server's serving certificate, its CA
// and the service-account signing key into dir, in the files envtest would
// otherwise generate (it keeps files it finds). envtest's own certificate
// names only localhost and 127.0.0.1; pods reach the API server as
// https://10.0.0.1 (KUBERNETES_SERVICE_HOST) or kubernetes.default.svc,
// as in-cluster clients such as the operator's pod do, so those are in
// this one. Returns the CA (PEM), which clients and kube-root-ca.crt carry.
func writeAPIServerCerts(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localcluster-apiserver-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesServiceIP), net.ParseIP(nodeNetBridgeAddr)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "localcluster-service-accounts"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	saDER, err := x509.CreateCertificate(rand.Reader, saTmpl, saTmpl, &saKey.PublicKey, saKey)
	if err != nil {
		return nil, err
	}
	// The API server's client certificate towards kubelets (logs, exec,
	// port-forward): the kubelets trust this CA for client certificates.
	kcKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kcTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(4),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	kcDER, err := x509.CreateCertificate(rand.Reader, kcTmpl, caCert, &kcKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"kubelet-client.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kcDER}),
		"kubelet-client.key": pemKey(kcKey),
		"ca.crt":             caPEM,
		"apiserver.crt":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"sa-signer.crt":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: saDER}),
		"apiserver.key":      pemKey(key),
		"sa-signer.key":      pemKey(saKey),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func pemKey(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // a key generated above always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
