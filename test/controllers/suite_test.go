package controllers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/controllers"
	"github.com/strata-storage/strata/internal/engine"
	"github.com/strata-storage/strata/internal/webhooks"
	"github.com/strata-storage/strata/test/testenv"
)

// The reconcilers and webhooks run in-process against a real kube-apiserver
// and etcd. Nothing else runs: no kube-controller-manager, no kubelet. So
// StatefulSets never get pods, and the specs set workload status (and create
// the claims a StatefulSet controller would) where a story needs them.
func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	// The machine is shared and small: give convergence room. These are
	// limits on waiting, not assertions about speed.
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	RunSpecs(t, "Controllers suite")
}

const image = "registry.example/strata:test"

var (
	env    *envtest.Environment
	k8s    client.Client
	ctx    context.Context
	cancel context.CancelFunc
	// cfg reaches the API server as its admin.
	cfg    *rest.Config
	fakeEn = &recordingEngine{}
	clock  = &testClock{}
)

// testClock is the operator's clock: the real time plus an offset a spec
// may move forward (and must reset).
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *testClock) Reset()                  { c.offset.Store(0) }

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(certmanagerv1.AddToScheme(scheme))
	utilruntime.Must(monitoringv1.AddToScheme(scheme))

	var err error
	env, err = testenv.NewEnvironment()
	Expect(err).NotTo(HaveOccurred())
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "webhook", "manifests.yaml")},
	}
	cfg, err = env.Start()
	if err != nil {
		_ = env.Stop()
	}
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	wh := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
		}),
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.Setup(ctx, mgr, controllers.Config{
		DefaultImage:  image,
		ClusterDomain: "cluster.local",
		// --monitoring-labels; a Tenant's own labels win.
		MonitoringLabels: map[string]string{"release": "kube-prometheus-stack", "team": "storage"},
		Engine:           fakeEn,
		Issuer:           controllers.ClusterIssuer(cfg),
		Random:           rand.Reader,
		Now:              clock.Now,
		CAOverlap:        3 * time.Second,
		EngineRefresh:    time.Hour,
		RolloutPoll:      200 * time.Millisecond,
		PodPoll:          200 * time.Millisecond,
		// Claims read their bucket's usage this often.
		ClaimsUsageInterval: time.Second,
		// Claimed and declared buckets are applied again this often.
		BucketsResync: 10 * time.Second,
	})).To(Succeed())
	Expect(webhooks.Setup(mgr, mgr.GetAPIReader())).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	// Cluster facts shared by every spec: four storage nodes and the
	// storage classes of the samples.
	for i := range 4 {
		name := "storage-" + string(rune('a'+i))
		Expect(k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname:           name,
			"node-role.strata.dev/storage": "true",
			"topology.kubernetes.io/zone":  "zone-" + string(rune('a'+i%2)),
		}}})).To(Succeed())
	}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	yes := true
	for _, sc := range []storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "nvme-local"}, Provisioner: "local.csi.example", VolumeBindingMode: &wffc},
		{ObjectMeta: metav1.ObjectMeta{Name: "array-a-luns"}, Provisioner: "array.csi.example", VolumeBindingMode: &wffc, AllowVolumeExpansion: &yes},
		{ObjectMeta: metav1.ObjectMeta{Name: "array-b-luns"}, Provisioner: "array.csi.example", VolumeBindingMode: &wffc, AllowVolumeExpansion: &yes},
		{ObjectMeta: metav1.ObjectMeta{Name: "immediate-local"}, Provisioner: "local.csi.example", VolumeBindingMode: &immediate},
		{ObjectMeta: metav1.ObjectMeta{Name: "cephfs"}, Provisioner: "cephfs.csi.example", VolumeBindingMode: &immediate},
	} {
		Expect(k8s.Create(ctx, &sc)).To(Succeed())
	}
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// recordingEngine stands in for a running tenant: it records bucket
// creations and answers Info with drive states set by a spec. The real HTTP
// client is exercised against a real `strata server` in engine_test.go.
type recordingEngine struct {
	mu      sync.Mutex
	info    engine.Info
	buckets map[string][]engine.Bucket // by endpoint URL
	// routes send a tenant's calls to a real engine: the real HTTP client
	// with the in-cluster URL replaced by a local address.
	routes map[string]string
	// closed gates: pod URL prefix -> the engine's refusal
	closed map[string]error
	gated  []string // pod URLs asked, in order
	// claimCalls records the claims' calls not routed to a real engine.
	claimCalls []string
	keys       int
}

func (e *recordingEngine) ClusterHealth(ctx context.Context, ep engine.Endpoint, maintenance bool) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.ClusterHealth(ctx, local, maintenance)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gated = append(e.gated, ep.URL)
	for prefix, err := range e.closed {
		if strings.HasPrefix(ep.URL, prefix) {
			return err
		}
	}
	return nil
}

// closeGate makes the engine refuse maintenance of pods whose URL starts
// with prefix; a nil err opens it again.
func (e *recordingEngine) closeGate(prefix string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed == nil {
		e.closed = map[string]error{}
	}
	if err == nil {
		delete(e.closed, prefix)
		return
	}
	e.closed[prefix] = err
}

func (e *recordingEngine) gatedURLs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.gated...)
}

// route sends calls for tenant URLs of namespace ns to a local engine.
func (e *recordingEngine) route(ns, localURL string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.routes == nil {
		e.routes = map[string]string{}
	}
	e.routes["."+ns+".svc."] = localURL
}

func (e *recordingEngine) real(ep engine.Endpoint) (engine.Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for part, url := range e.routes {
		if strings.Contains(ep.URL, part) {
			ep.URL = url
			return ep, true
		}
	}
	return ep, false
}

func (e *recordingEngine) Info(ctx context.Context, ep engine.Endpoint) (engine.Info, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.Info(ctx, local)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info, nil
}

func (e *recordingEngine) TLS(ctx context.Context, ep engine.Endpoint) (engine.TLSInfo, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.TLS(ctx, local)
	}
	return engine.TLSInfo{}, nil
}

func (e *recordingEngine) EnsureBuckets(ctx context.Context, ep engine.Endpoint, b []engine.Bucket) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.EnsureBuckets(ctx, local, b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.buckets == nil {
		e.buckets = map[string][]engine.Bucket{}
	}
	e.buckets[ep.URL] = append(e.buckets[ep.URL], b...)
	return nil
}

func (e *recordingEngine) EnsureOIDCProviders(ctx context.Context, ep engine.Endpoint, p []engine.OIDCProvider) ([]string, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.EnsureOIDCProviders(ctx, local, p)
	}
	arns := make([]string, len(p))
	for i, pr := range p {
		arns[i] = "arn:aws:iam:::oidc-provider/" + strings.TrimPrefix(pr.URL, "https://")
	}
	return arns, nil
}

// The claims' calls go to a routed real engine; otherwise they succeed
// and are recorded as claimCalls ("bucket NAME", "principal NAME", ...).
func (e *recordingEngine) record(call string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.claimCalls = append(e.claimCalls, call)
}

func (e *recordingEngine) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.claimCalls...)
}

func (e *recordingEngine) EnsureClaimBucket(ctx context.Context, ep engine.Endpoint, b engine.ClaimBucket) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.EnsureClaimBucket(ctx, local, b)
	}
	e.record("bucket " + b.Name)
	return nil
}

func (e *recordingEngine) BucketUsage(ctx context.Context, ep engine.Endpoint, bucket string) (engine.Usage, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.BucketUsage(ctx, local, bucket)
	}
	return engine.Usage{}, nil
}

func (e *recordingEngine) DeleteClaimBucket(ctx context.Context, ep engine.Endpoint, bucket, owner string) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.DeleteClaimBucket(ctx, local, bucket, owner)
	}
	e.record("delete bucket " + bucket)
	return nil
}

func (e *recordingEngine) EnsurePrincipal(ctx context.Context, ep engine.Endpoint, p engine.Principal) (string, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.EnsurePrincipal(ctx, local, p)
	}
	e.record("principal " + p.Name)
	if p.Trust != "" {
		return "arn:aws:iam:::role" + p.Path + p.Name, nil
	}
	return "arn:aws:iam:::user" + p.Path + p.Name, nil
}

func (e *recordingEngine) CreateAccessKey(ctx context.Context, ep engine.Endpoint, user, keep string) (engine.AccessKey, error) {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.CreateAccessKey(ctx, local, user, keep)
	}
	e.record("key " + user)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keys++
	return engine.AccessKey{ID: fmt.Sprintf("AKIARECORDED%08d", e.keys), Secret: fmt.Sprintf("recorded-secret-%d", e.keys)}, nil
}

func (e *recordingEngine) DeleteAccessKeys(ctx context.Context, ep engine.Endpoint, user, keep string) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.DeleteAccessKeys(ctx, local, user, keep)
	}
	return nil
}

func (e *recordingEngine) DeletePrincipal(ctx context.Context, ep engine.Endpoint, name string, role bool) error {
	if local, ok := e.real(ep); ok {
		return engine.HTTPClient{}.DeletePrincipal(ctx, local, name, role)
	}
	e.record("delete principal " + name)
	return nil
}

func (e *recordingEngine) setInfo(info engine.Info) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.info = info
}

func (e *recordingEngine) bucketsAt(url string) []engine.Bucket {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Bucket(nil), e.buckets[url]...)
}

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// eventNotesFor lists the Events recorded about an object as
// "reason note".
func eventNotesFor(ns, name string) func() []string {
	return eventsAbout(ns, name, func(e eventsv1.Event) string { return e.Reason + " " + e.Note })
}

// eventsFor lists the reasons of the Events recorded about an object.
func eventsFor(ns, name string) func() []string {
	return eventsAbout(ns, name, func(e eventsv1.Event) string { return e.Reason })
}

// eventsAbout lists what show says of each Event recorded about an object.
func eventsAbout(ns, name string, show func(eventsv1.Event) string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name {
				out = append(out, show(e))
			}
		}
		return out
	}
}
