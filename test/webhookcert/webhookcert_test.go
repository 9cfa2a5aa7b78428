package webhookcert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/webhookcert"
	"github.com/strata-storage/strata/internal/webhooks"
	"github.com/strata-storage/strata/test/testenv"
)

// The operator's own webhook certificate against a real kube-apiserver:
// two replicas (the validating webhooks call one, the mutating webhooks the
// other) issue it into one Secret, write its CA into every webhook, and the
// API server calls both over TLS; then, on a clock the test moves, the
// serving certificate is renewed and the CA replaced with overlap while
// admission calls keep succeeding.
func TestWebhookCertificate(t *testing.T) {
	RegisterFailHandler(Fail)
	// Limits on waiting on a shared 2-core machine, not speed assertions.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	RunSpecs(t, "Webhook certificate suite")
}

const (
	namespace  = "strata-system"
	secretName = "strata-webhook-ca"
	validating = "strata-validating"
	mutating   = "strata-mutating"
)

// Lifetimes short enough that the whole walk, which starts in the past,
// stays valid in real time: the API server checks the certificates with
// its own clock.
var lifetimes = webhookcert.Lifetimes{CA: 6 * time.Hour, Serving: 5 * time.Hour, Overlap: time.Minute}

var (
	env      *envtest.Environment
	k8s      client.Client
	ctx      context.Context
	cancel   context.CancelFunc
	clock    = &movableClock{}
	start    time.Time // the clock's time when the replicas started
	replicas []*replica
)

// movableClock is real time plus an offset the specs set.
type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) Now() time.Time  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *movableClock) Set(t time.Time) { c.offset.Store(int64(time.Until(t))) }

// replica is one operator process as far as webhooks go: a manager with
// the webhook server and a Keeper.
type replica struct {
	name   string
	addr   string // where its webhook server listens
	keeper *webhookcert.Keeper
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))

	var err error
	env, err = testenv.NewEnvironment()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
	}
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}})).To(Succeed())

	replicas = []*replica{{name: "a", addr: freeAddr()}, {name: "b", addr: freeAddr()}}
	installWebhookConfigurations(replicas[0].addr, replicas[1].addr)

	// The walk starts 4h05m in the past, so that the CA rotation (due two
	// thirds into its 6 h) happens a few minutes before the real now.
	start = time.Now().Add(-4*time.Hour - 5*time.Minute)
	clock.Set(start)
	began := time.Now()
	for _, r := range replicas {
		host, port, err := net.SplitHostPort(r.addr)
		Expect(err).NotTo(HaveOccurred())
		var p int
		_, err = fmt.Sscan(port, &p)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		r.keeper, err = webhookcert.New(webhookcert.Config{
			Client:                         c,
			Secret:                         client.ObjectKey{Namespace: namespace, Name: secretName},
			ValidatingWebhookConfiguration: validating,
			MutatingWebhookConfiguration:   mutating,
			DNSNames:                       []string{"strata-webhook.strata-system.svc"},
			IPAddresses:                    []net.IP{net.ParseIP(host)},
			Lifetimes:                      lifetimes,
			Resync:                         100 * time.Millisecond,
			Now:                            clock.Now,
			Log:                            logf.Log.WithName("replica-" + r.name),
		})
		Expect(err).NotTo(HaveOccurred())
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:  scheme,
			Metrics: metricsserver.Options{BindAddress: "0"},
			WebhookServer: webhook.NewServer(webhook.Options{
				Host: host, Port: p, TLSOpts: []func(*tls.Config){r.keeper.TLSOption},
			}),
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(webhooks.Setup(mgr, mgr.GetAPIReader())).To(Succeed())
		Expect(mgr.Add(r.keeper)).To(Succeed())
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(ctx)).To(Succeed())
		}()
	}
	Eventually(func() error {
		for _, r := range replicas {
			if err := r.keeper.Ready(nil); err != nil {
				return fmt.Errorf("replica %s: %w", r.name, err)
			}
		}
		return nil
	}).Should(Succeed())
	fmt.Fprintf(GinkgoWriter, "both replicas ready %v after they started (a fresh Secret, both configurations written)\n", time.Since(began).Round(time.Millisecond))
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

var _ = Describe("the operator's webhook certificate", Ordered, func() {
	It("is issued once into the Secret, its CA written into every webhook, and served by both replicas", func() {
		s := secret()
		Expect(s.Data).To(HaveKey("ca.crt"))
		Expect(s.Data).To(HaveKey("ca.key"))
		Expect(s.Data).To(HaveKey("tls.crt"))
		Expect(s.Data).To(HaveKey("tls.key"))
		Expect(s.Data).NotTo(HaveKey("next-ca.crt"))
		Expect(caBundles()).To(HaveEach(Equal(s.Data["ca.crt"])))
		Expect(caBundles()).To(HaveLen(6))
		for _, r := range replicas {
			Expect(served(r)).To(Equal(s.Data["tls.crt"]), "replica %s", r.name)
		}
	})

	It("is what the API server calls both replicas with: a valid Tenant is defaulted, an invalid one refused with the webhook's message", func() {
		// The API server reads webhook configurations through its own
		// informer: the caBundle the replicas saw written takes it a moment.
		Eventually(admissionWorks).Should(Succeed())
		t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "media"}}
		Expect(k8s.Create(ctx, t)).To(Succeed())
		Expect(t.Spec.Expose.Port).NotTo(BeZero(), "the mutating webhook (replica b) did not default expose.port")
	})

	It("renews the serving certificate at two thirds of its life, from the same CA", func() {
		before := secret()
		clock.Set(start.Add(3*time.Hour + 21*time.Minute))
		Eventually(func() []byte { return secret().Data["tls.crt"] }).ShouldNot(Equal(before.Data["tls.crt"]))
		after := secret()
		Expect(after.Data["ca.crt"]).To(Equal(before.Data["ca.crt"]))
		Expect(after.Data).NotTo(HaveKey("next-ca.crt"))
		for _, r := range replicas {
			Eventually(func() []byte { return served(r) }).Should(Equal(after.Data["tls.crt"]), "replica %s", r.name)
		}
		Expect(admissionWorks()).To(Succeed())
	})

	It("replaces the CA with overlap, admission calls succeeding throughout", func() {
		calls := startAdmissionCalls()
		old := secret().Data["ca.crt"]

		By("adding the next CA to every caBundle, the serving certificate still from the old CA")
		clock.Set(start.Add(4*time.Hour + time.Minute))
		Eventually(func() []byte { return secret().Data["next-ca.crt"] }).ShouldNot(BeEmpty())
		next := secret().Data["next-ca.crt"]
		Eventually(caBundles).Should(HaveEach(Equal(concat(old, next))))
		Expect(issuer(secret().Data["tls.crt"])).To(Equal(subject(old)))
		Expect(secret().Data["ca.crt"]).To(Equal(old))
		// The overlap stands for the time the API server takes to load a
		// new caBundle (its informer): give it a moment of real time.
		time.Sleep(2 * time.Second)

		By("switching after the overlap: the next CA signs the serving certificate, the old one stays trusted")
		clock.Set(clock.Now().Add(lifetimes.Overlap + time.Second))
		Eventually(func() []byte { return secret().Data["ca.crt"] }).Should(Equal(next))
		s := secret()
		Expect(s.Data["previous-ca.crt"]).To(Equal(old))
		Expect(s.Data).NotTo(HaveKey("next-ca.crt"))
		Expect(issuer(s.Data["tls.crt"])).To(Equal(subject(next)))
		Expect(caBundles()).To(HaveEach(Equal(concat(old, next))), "the switch leaves the caBundle as it was")
		for _, r := range replicas {
			Eventually(func() []byte { return served(r) }).Should(Equal(s.Data["tls.crt"]), "replica %s", r.name)
		}
		time.Sleep(2 * time.Second)

		By("dropping the old CA from every caBundle after another overlap")
		clock.Set(clock.Now().Add(lifetimes.Overlap + time.Second))
		Eventually(func() []byte { return secret().Data["previous-ca.crt"] }).Should(BeEmpty())
		Eventually(caBundles).Should(HaveEach(Equal(next)))
		time.Sleep(2 * time.Second)

		ok, failures := calls.stop()
		fmt.Fprintf(GinkgoWriter, "%d admission round trips through the rotation\n", ok)
		Expect(failures).To(BeEmpty())
		Expect(ok).To(BeNumerically(">", 20))
		for _, r := range replicas {
			Expect(r.keeper.Ready(nil)).To(Succeed(), "replica %s", r.name)
		}
	})

	It("writes the caBundle again when something empties it", func() {
		want := secret().Data["ca.crt"]
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, vwc)).To(Succeed())
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig.CABundle = nil
		}
		Expect(k8s.Update(ctx, vwc)).To(Succeed())
		Eventually(caBundles).Should(HaveEach(Equal(want)))
		Eventually(admissionWorks).Should(Succeed())
	})

	It("starts again from a new CA when the Secret is deleted", func() {
		old := secret()
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		Eventually(func() []byte { return secret().Data["ca.crt"] }).ShouldNot(Or(BeEmpty(), Equal(old.Data["ca.crt"])))
		fresh := secret()
		Eventually(caBundles).Should(HaveEach(Equal(fresh.Data["ca.crt"])))
		for _, r := range replicas {
			Eventually(func() []byte { return served(r) }).Should(Equal(fresh.Data["tls.crt"]), "replica %s", r.name)
		}
		Eventually(admissionWorks).Should(Succeed())
	})
})

// installWebhookConfigurations creates the generated configurations
// (config/webhook/manifests.yaml) as the chart would, under test names,
// with the validating webhooks calling the replica at vAddr and the
// mutating ones the replica at mAddr, and no caBundle.
func installWebhookConfigurations(vAddr, mAddr string) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml"))
	Expect(err).NotTo(HaveOccurred())
	url := func(addr string, svc *admissionregistrationv1.ServiceReference) *string {
		u := "https://" + addr + *svc.Path
		return &u
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var head metav1.TypeMeta
		Expect(yaml.Unmarshal([]byte(doc), &head)).To(Succeed())
		switch head.Kind {
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			Expect(yaml.Unmarshal([]byte(doc), c)).To(Succeed())
			c.Name = validating
			for i := range c.Webhooks {
				cc := &c.Webhooks[i].ClientConfig
				cc.URL, cc.Service = url(vAddr, cc.Service), nil
			}
			Expect(k8s.Create(ctx, c)).To(Succeed())
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(yaml.Unmarshal([]byte(doc), c)).To(Succeed())
			c.Name = mutating
			for i := range c.Webhooks {
				cc := &c.Webhooks[i].ClientConfig
				cc.URL, cc.Service = url(mAddr, cc.Service), nil
			}
			Expect(k8s.Create(ctx, c)).To(Succeed())
		}
	}
}

func secret() *corev1.Secret {
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secretName}, s); err != nil {
		return &corev1.Secret{}
	}
	return s
}

// caBundles lists the caBundle of every webhook of both configurations.
func caBundles() [][]byte {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: validating}, vwc)).To(Succeed())
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: mutating}, mwc)).To(Succeed())
	var b [][]byte
	for _, w := range vwc.Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	for _, w := range mwc.Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	return b
}

// served is the certificate a replica's webhook server presents, as PEM.
func served(r *replica) []byte {
	conn, err := tls.Dial("tcp", r.addr, &tls.Config{InsecureSkipVerify: true}) // the certificate is what is looked at, not checked
	if err != nil {
		return nil
	}
	defer conn.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: conn.ConnectionState().PeerCertificates[0].Raw})
}

func concat(pems ...[]byte) []byte { return bytes.Join(pems, nil) }

func parse(p []byte) *x509.Certificate {
	block, _ := pem.Decode(p)
	Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return c
}

func issuer(p []byte) string  { return parse(p).Issuer.String() }
func subject(p []byte) string { return parse(p).Subject.String() }

// admissionWorks makes one round trip through each replica: a valid
// Tenant (dry run) defaulted by the mutating webhook, and a name too long
// refused by the validating webhook with its own message.
func admissionWorks() error {
	t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: "probe"}}
	if err := k8s.Create(ctx, t, client.DryRunAll); err != nil {
		return fmt.Errorf("a valid Tenant: %w", err)
	}
	if t.Spec.Expose.Port == 0 {
		return fmt.Errorf("a valid Tenant was not defaulted")
	}
	long := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "tenants", Name: strings.Repeat("t", webhooks.MaxTenantName+1)}}
	switch err := k8s.Create(ctx, long, client.DryRunAll); {
	case err == nil:
		return fmt.Errorf("a Tenant name too long was accepted")
	case !strings.Contains(err.Error(), fmt.Sprintf("Tenant names are limited to %d characters", webhooks.MaxTenantName)):
		return fmt.Errorf("a Tenant name too long: want the webhook's refusal, got: %w", err)
	}
	return nil
}

// admissionCalls runs admissionWorks in a loop until stopped.
type admissionCalls struct {
	done     chan struct{}
	wg       sync.WaitGroup
	ok       int
	failures []string
}

func startAdmissionCalls() *admissionCalls {
	a := &admissionCalls{done: make(chan struct{})}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			select {
			case <-a.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := admissionWorks(); err != nil {
				a.failures = append(a.failures, time.Now().Format(time.StampMilli)+": "+err.Error())
			} else {
				a.ok++
			}
		}
	}()
	return a
}

func (a *admissionCalls) stop() (int, []string) {
	close(a.done)
	a.wg.Wait()
	return a.ok, a.failures
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
