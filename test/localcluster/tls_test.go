package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/certs"
)

// TestCertificateRotationUnderLoad renews and rotates the demo tenant's
// certificates while clients write and read over HTTPS, in mode Operator,
// then External (the test acting as the user who maintains the Secret),
// then CertManager (the test acting as cert-manager's controller): in each
// a renewal under the same CA, then a CA rotation. Every request must
// succeed, no pod may restart, and every pod (four servers, two gateways)
// must end up serving the new certificate. The clients trust what the tenant publishes
// (ConfigMap media-ca-bundle), re-read every two seconds as a client that
// mounts the ConfigMap would, and open a connection per request so every
// request verifies the certificate served at that moment.
func TestCertificateRotationUnderLoad(t *testing.T) {
	assets, imagesDir := prerequisites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, assets, imagesDir, "--manifests", "hack/localcluster/demo", "--manifests", "hack/localcluster/demo-gateway")
	kc := kubeClient(t, c.in.Kubeconfig)
	ns := "default"
	pods := tenantPods(ctx, t, kc, builders.TenantLabels("media"), 6)
	servers := tenantPods(ctx, t, kc, builders.ServerSelector("media"), 4)
	restarts := restartCounts(ctx, t, kc)

	trust := &trustSource{}
	refresh := func() error {
		cm := &corev1.ConfigMap{}
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: builders.TrustBundleName("media")}, cm); err != nil {
			return err
		}
		return trust.set([]byte(cm.Data["ca.crt"]))
	}
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	load := startLoad(ctx, t, c.in, "rotation", trust.verify, refresh)
	mon := newTrustMonitor(kc, ns, c.state, pods, servers)
	monCtx, stopMon := context.WithCancel(ctx)
	monDone := make(chan struct{})
	go func() { defer close(monDone); mon.run(monCtx) }()
	defer func() { stopMon(); <-monDone }()

	step := func(name string, act func(), target func(*x509.Certificate) bool, bundle int) {
		t.Helper()
		start := time.Now()
		act()
		waitFor(ctx, t, 4*time.Minute, func() error { return everyPodServes(c.state, pods, target) })
		waitFor(ctx, t, 2*time.Minute, func() error { return bundleHas(ctx, kc, ns, bundle) })
		t.Logf("%s: every pod serves the new certificate after %s; %s", name, time.Since(start).Round(time.Second), load.figures())
	}

	// Mode Operator: a renewal (the operator issues a new certificate when
	// the one it keeps is gone), then a CA rotation on request.
	before := servedLeaf(t, c.state, pods[0])
	step("operator renewal", func() {
		patchSecret(ctx, t, kc, ns, "media-ca", func(d map[string][]byte) { delete(d, "leaf.crt"); delete(d, "leaf.key") })
	}, func(c *x509.Certificate) bool { return !c.Equal(before) && c.Issuer.String() == before.Issuer.String() }, 1)
	fromOperatorCA := signedByCAIn(ctx, kc, ns, builders.CASecretName("media"))
	step("operator CA rotation", func() {
		patchTenant(ctx, t, kc, ns, func(tn *v1.Tenant) {
			if tn.Annotations == nil {
				tn.Annotations = map[string]string{}
			}
			tn.Annotations[v1.AnnotationRotateCA] = "e2e"
		})
	}, func(c *x509.Certificate) bool {
		return fromOperatorCA(c) && c.Issuer.String() != before.Issuer.String()
	}, 1)

	// Mode External: the user's Secret, from a CA of the user's.
	names := append(builders.DNSNames(&v1.Tenant{ObjectMeta: metaOf(ns, "media")}, []string{"nas"}, "cluster.local"), "localhost")
	caA := mustCA(t, "user CA A")
	mon.learn(caA)
	leafA := mustLeaf(t, caA, names)
	user := &corev1.Secret{ObjectMeta: metaOf(ns, "media-user-tls"), Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": leafA.Cert, "tls.key": leafA.Key, "ca.crt": caA.Cert}}
	step("switch to External", func() {
		if err := kc.Create(ctx, user); err != nil {
			t.Fatal(err)
		}
		patchTenant(ctx, t, kc, ns, func(tn *v1.Tenant) {
			tn.Spec.TLS = v1.TLSSpec{Mode: v1.TLSExternal, SecretRef: &v1.SecretReference{Name: user.Name}, DNSNames: []string{"localhost"}}
		})
	}, issuedBy("user CA A"), 1)
	leafA2 := mustLeaf(t, caA, names)
	step("External renewal", func() {
		patchSecret(ctx, t, kc, ns, user.Name, func(d map[string][]byte) { d["tls.crt"], d["tls.key"] = leafA2.Cert, leafA2.Key })
	}, func(c *x509.Certificate) bool { return certEquals(c, leafA2.Cert) }, 1)
	caB := mustCA(t, "user CA B")
	mon.learn(caB)
	leafB := mustLeaf(t, caB, names)
	step("External CA rotation", func() {
		// What a user's tooling does at once: the new CA and a certificate
		// from it; the operator holds the certificate until the new CA is
		// trusted everywhere.
		patchSecret(ctx, t, kc, ns, user.Name, func(d map[string][]byte) {
			d["tls.crt"], d["tls.key"], d["ca.crt"] = leafB.Cert, leafB.Key, caB.Cert
		})
	}, issuedBy("user CA B"), 1)

	// Mode CertManager: the tenant's own CA chain, issued by a stand-in
	// for cert-manager's controller.
	installCertManagerCRDs(ctx, t, kc)
	cm := &fakeCertManager{kc: kc, ns: ns, renew: map[string]bool{}}
	cmCtx, stopCM := context.WithCancel(ctx)
	defer stopCM()
	go cm.run(cmCtx, t)
	fromCMCA := signedByCAIn(ctx, kc, ns, builders.CertManagerCASecretName("media"))
	step("switch to CertManager", func() {
		patchTenant(ctx, t, kc, ns, func(tn *v1.Tenant) {
			tn.Spec.TLS = v1.TLSSpec{Mode: v1.TLSCertManager, DNSNames: []string{"localhost"}}
		})
	}, fromCMCA, 1)
	cmLeaf := servedLeaf(t, c.state, pods[0])
	step("CertManager renewal", func() { cm.requestRenewal("media") },
		func(c *x509.Certificate) bool { return !c.Equal(cmLeaf) && fromCMCA(c) }, 1)
	step("CertManager CA rotation", func() {
		cm.requestRenewal(builders.CAIssuerName("media"))
		// cert-manager renews a leaf on its own schedule, not when its CA
		// changes: here the next renewal comes once the new CA is out.
		waitFor(ctx, t, time.Minute, func() error { return bundleHas(ctx, kc, ns, 2) })
		cm.requestRenewal("media")
	}, fromCMCA, 1)

	stopMon()
	<-monDone
	checks, violations := mon.result()
	t.Logf("trust: %d checks that every server trusts the CA of every certificate served, %d violations", checks, len(violations))
	if len(violations) > 0 {
		t.Errorf("a pod served a certificate some server did not trust: %v", violations)
	}
	if checks < 100 {
		t.Errorf("only %d trust checks ran", checks)
	}
	total, failed, attempts, errs := load.stop()
	t.Logf("load: %d requests, %d failed; %d attempts failed before the SDK's retries", total, failed, attempts)
	if failed > 0 || attempts > 0 {
		t.Errorf("requests failed during the rotations: %d (attempts: %d); first errors: %v", failed, attempts, errs)
	}
	if total < 100 {
		t.Errorf("only %d requests ran: the load did not run through the rotations", total)
	}
	if after := restartCounts(ctx, t, kc); fmt.Sprint(after) != fmt.Sprint(restarts) {
		t.Errorf("pods restarted: %v -> %v", restarts, after)
	}
	c.down(t, c.in.S3URL)
}

// trustSource is the clients' CA pool, replaced as the bundle changes.
type trustSource struct{ pool atomic.Pointer[x509.CertPool] }

func (s *trustSource) set(pemData []byte) error {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		return errors.New("the trust bundle holds no certificate")
	}
	s.pool.Store(p)
	return nil
}

// verify checks the server's chain against the pool of the moment.
func (s *trustSource) verify(cs tls.ConnectionState) error {
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: s.pool.Load(), Intermediates: inter, DNSName: cs.ServerName})
	return err
}

func kubeClient(t *testing.T, kubeconfig string) client.Client {
	ctrllog.SetLogger(logr.Discard()) // the client logs nothing the test needs
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, add := range []func(*kruntime.Scheme) error{v1.AddToScheme, cmv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// tenantPods are the S3 addresses (pod IP:port) of the tenant's pods with
// the labels, want of them.
func tenantPods(ctx context.Context, t *testing.T, kc client.Client, labels map[string]string, want int) []string {
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, net.JoinHostPort(p.Status.PodIP, fmt.Sprint(builders.S3Port)))
	}
	sort.Strings(out)
	if len(out) != want {
		t.Fatalf("want %d pods labelled %v, got %v", want, labels, out)
	}
	return out
}

func restartCounts(ctx context.Context, t *testing.T, kc client.Client) map[string]int32 {
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.MatchingLabels{builders.LabelInstance: "media"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name+"/"+string(p.UID)] += cs.RestartCount
		}
	}
	return out
}

// dialInCluster connects to addr from inside the cluster's network
// namespace (the pods' addresses exist only there): the socket is created
// by a thread that has joined it, and keeps it after the thread leaves.
func dialInCluster(state, addr string) (net.Conn, error) {
	pid, err := os.ReadFile(filepath.Join(state, "pid"))
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer own.Close()
	target, err := os.Open("/proc/" + strings.TrimSpace(string(pid)) + "/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	conn, dialErr := net.DialTimeout("tcp", addr, 3*time.Second)
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked and dies with the goroutine rather than
		// run other goroutines in the cluster's namespace.
		return nil, fmt.Errorf("leaving the cluster's network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

// served is the leaf a pod presents on addr (read, not trusted).
func served(state, addr string) (*x509.Certificate, error) {
	raw, err := dialInCluster(state, addr)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // reads the certificate only
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if err := conn.Handshake(); err != nil {
		return nil, err
	}
	return conn.ConnectionState().PeerCertificates[0], nil
}

func servedLeaf(t *testing.T, state, addr string) *x509.Certificate {
	c, err := served(state, addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func everyPodServes(state string, pods []string, target func(*x509.Certificate) bool) error {
	for _, p := range pods {
		c, err := served(state, p)
		if err != nil {
			return err
		}
		if !target(c) {
			return fmt.Errorf("%s still serves %s (issuer %s)", p, c.SerialNumber, c.Issuer.CommonName)
		}
	}
	return nil
}

func bundleHas(ctx context.Context, kc client.Client, ns string, n int) error {
	cm := &corev1.ConfigMap{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: builders.TrustBundleName("media")}, cm); err != nil {
		return err
	}
	if got := certs.ParseBundle([]byte(cm.Data["ca.crt"])); len(got) != n {
		return fmt.Errorf("the trust bundle holds %d CAs, want %d", len(got), n)
	}
	return nil
}

func issuedBy(cn string) func(*x509.Certificate) bool {
	return func(c *x509.Certificate) bool { return c.Issuer.CommonName == cn }
}

func certEquals(c *x509.Certificate, pemData []byte) bool {
	want, err := certs.Leaf(pemData)
	return err == nil && c.Equal(want)
}

func patchSecret(ctx context.Context, t *testing.T, kc client.Client, ns, name string, edit func(map[string][]byte)) {
	sec := &corev1.Secret{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	edit(sec.Data)
	if err := kc.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
}

// patchTenant edits the Tenant, again on a conflict with the operator's
// own writes.
func patchTenant(ctx context.Context, t *testing.T, kc client.Client, ns string, edit func(*v1.Tenant)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tn := &v1.Tenant{}
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media"}, tn); err != nil {
			return err
		}
		edit(tn)
		return kc.Update(ctx, tn)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustCA(t *testing.T, cn string) certs.Pair {
	ca, err := certs.NewCA(cn, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustLeaf(t *testing.T, ca certs.Pair, names []string) certs.Pair {
	leaf, err := certs.Issue(ca, names, nil, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func metaOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
