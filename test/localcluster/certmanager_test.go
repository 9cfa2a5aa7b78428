package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-storage/strata/internal/certs"
)

// fakeCertManager does what cert-manager's controller does for the
// Certificates the operator creates (its controller cannot be built here:
// the module proxy refuses cmd/controller): a selfSigned Issuer's
// Certificate becomes a CA, a CA Issuer's Certificate a leaf signed by the
// CA in the issuer's Secret, written with tls.crt, tls.key and ca.crt and
// the secretTemplate's labels. Like cert-manager, it issues when a Secret is
// missing or its names are out of date, and when asked to renew; a renewed
// CA does not re-issue the leaves it signed.
type fakeCertManager struct {
	kc    client.Client
	ns    string
	mu    sync.Mutex
	renew map[string]bool // Certificate names to issue again
}

func (f *fakeCertManager) requestRenewal(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renew[name] = true
}

func (f *fakeCertManager) due(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.renew[name]
	delete(f.renew, name)
	return d
}

func (f *fakeCertManager) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		list := &cmv1.CertificateList{}
		if err := f.kc.List(ctx, list, client.InNamespace(f.ns)); err == nil {
			for i := range list.Items {
				if err := f.reconcile(ctx, &list.Items[i]); err != nil {
					t.Logf("fake cert-manager: %s: %v", list.Items[i].Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (f *fakeCertManager) reconcile(ctx context.Context, c *cmv1.Certificate) error {
	sec := &corev1.Secret{}
	err := f.kc.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: c.Spec.SecretName}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	missing := apierrors.IsNotFound(err)
	if !missing && !f.due(c.Name) && upToDate(sec.Data["tls.crt"], c) {
		return nil
	}
	issuer := &cmv1.Issuer{}
	if err := f.kc.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: c.Spec.IssuerRef.Name}, issuer); err != nil {
		return err
	}
	var pair certs.Pair
	var ca []byte
	switch {
	case issuer.Spec.SelfSigned != nil && c.Spec.IsCA:
		if pair, err = certs.NewCA(c.Spec.CommonName, time.Now(), rand.Reader); err != nil {
			return err
		}
		ca = pair.Cert
	case issuer.Spec.CA != nil:
		caSec := &corev1.Secret{}
		if err := f.kc.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: issuer.Spec.CA.SecretName}, caSec); err != nil {
			return err
		}
		signer := certs.Pair{Cert: caSec.Data["tls.crt"], Key: caSec.Data["tls.key"]}
		var ips []net.IP
		for _, a := range c.Spec.IPAddresses {
			ips = append(ips, net.ParseIP(a))
		}
		if pair, err = certs.Issue(signer, c.Spec.DNSNames, ips, time.Now(), rand.Reader); err != nil {
			return err
		}
		ca = signer.Cert
	default:
		return fmt.Errorf("issuer %s is neither selfSigned (for a CA) nor a CA issuer", issuer.Name)
	}
	sec.Name, sec.Namespace, sec.Type = c.Spec.SecretName, f.ns, corev1.SecretTypeTLS
	if tmpl := c.Spec.SecretTemplate; tmpl != nil {
		sec.Labels = tmpl.Labels
	}
	sec.Data = map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key, "ca.crt": ca}
	if missing {
		return f.kc.Create(ctx, sec)
	}
	return f.kc.Update(ctx, sec)
}

// upToDate reports whether a certificate matches a Certificate's names.
func upToDate(pemData []byte, c *cmv1.Certificate) bool {
	leaf, err := certs.Leaf(pemData)
	if err != nil {
		return false
	}
	if c.Spec.IsCA {
		return leaf.IsCA && leaf.Subject.CommonName == c.Spec.CommonName
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	return slices.Equal(leaf.DNSNames, c.Spec.DNSNames) && slices.Equal(ips, c.Spec.IPAddresses)
}

// installCertManagerCRDs creates cert-manager's CRDs (from its Go module)
// in the cluster.
func installCertManagerCRDs(ctx context.Context, t *testing.T, kc client.Client) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	for _, name := range []string{"cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml", "cert-manager.io_clusterissuers.yaml", "cert-manager.io_certificaterequests.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := kc.Create(ctx, crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	waitFor(ctx, t, time.Minute, func() error {
		return kc.List(ctx, &cmv1.CertificateList{}, client.InNamespace("default"))
	})
}

// signedByCAIn matches certificates signed by the CA in a Secret as it is
// when asked.
func signedByCAIn(ctx context.Context, kc client.Client, ns, secret string) func(*x509.Certificate) bool {
	return func(c *x509.Certificate) bool {
		sec := &corev1.Secret{}
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, sec); err != nil {
			return false
		}
		return certs.ParseBundle(sec.Data["tls.crt"]).Signer(c) != nil
	}
}
