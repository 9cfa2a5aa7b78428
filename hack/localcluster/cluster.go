package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/builders"
)

// runConfig is what the inner process needs; `up` passes it as flags.
type runConfig struct {
	State      string
	Repo       string
	Assets     string
	Images     string // directory of OCI layouts (`make images`)
	ManagerBin string // the operator, taken from its image by `run`
	Nodes      int
	Manifests  []string
	Tenant     string // namespace/name to wait for and expose
	// Bare runs the cluster without the operator process and without
	// applying manifests: for installing the operator with its Helm chart,
	// as a pod running its image (docs/install.md).
	Bare    bool
	APIPort int // host port of the API server listener (fd 3)
	S3Port  int // host port of the S3 listener (fd 4)
	// Expose lists more Services to serve on the host, "namespace/name=port"
	// (fds 5, 6, ... in order), such as a GatewayPool's.
	Expose  []string
	Timeout time.Duration
	// Monitoring also runs prometheus-operator and a Prometheus that
	// scrapes the tenants (images and CRDs from hack/monitoring-images.sh).
	Monitoring bool
	// NodeGrace is how long a node that is down (`localcluster node
	// down`) stays Ready before it is marked Unknown and tainted.
	NodeGrace time.Duration
}

func (c *runConfig) logFile(name string) string { return filepath.Join(c.State, "logs", name) }

func (c *runConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.State, "state-dir", "", "state directory (kubeconfigs, volumes, pods, logs)")
	fs.StringVar(&c.Repo, "repo", ".", "repository root (CRDs, RBAC, manifests)")
	fs.StringVar(&c.Assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "directory with kube-apiserver, etcd, kube-controller-manager, kube-scheduler")
	fs.StringVar(&c.Images, "images", "bin/images", "directory of the OCI image layouts `make images` writes: pods run these images, the operator runs from its image's /manager")
	fs.IntVar(&c.Nodes, "nodes", 4, "number of nodes (each a kubelet, containerd and kube-proxy)")
	fs.Var((*stringList)(&c.Manifests), "manifests", "YAML file or directory to apply once the operator runs (repeatable; default the demo tenant)")
	fs.StringVar(&c.Tenant, "tenant", "default/media", "namespace/name of the Tenant to wait for and expose")
	fs.BoolVar(&c.Bare, "bare", false, "no operator process, no manifests: ready once the cluster runs; install the operator and a tenant with Helm (docs/install.md). The tenant's S3 Service is still exposed once it exists")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "how long to wait for the Tenant to be Ready")
	fs.Var((*stringList)(&c.Expose), "expose", "another Service to serve on 127.0.0.1, namespace/name=port (repeatable; port 0 picks one)")
	fs.DurationVar(&c.NodeGrace, "node-monitor-grace-period", 15*time.Second, "how long after `localcluster node down` the node turns Unknown, gets the unreachable taints and its pods lose Ready (the node lifecycle controller's --node-monitor-grace-period, 40-50 s in Kubernetes)")
	fs.BoolVar(&c.Monitoring, "monitoring", false, "also run prometheus-operator and a Prometheus scraping every tenant through its ServiceMonitor, with its rules (images and CRDs from hack/monitoring-images.sh in --images)")
}

// consolePortName is the tenant Service's port of the web console
// (builders.S3Service with spec.console enabled).
const consolePortName = "console"

// parseExpose splits "namespace/name[:portname]=port"; without a port
// name, the Service's first port is served.
func parseExpose(e string) (svc, portName string, port int, err error) {
	svc, hostPort, ok := strings.Cut(e, "=")
	p, perr := strconv.Atoi(hostPort)
	svc, portName, _ = strings.Cut(svc, ":")
	if !ok || perr != nil || p < 0 || p > 65535 || !strings.Contains(svc, "/") {
		return "", "", 0, fmt.Errorf("--expose %q: want namespace/service[:portname]=port", e)
	}
	return svc, portName, p, nil
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// info is what `up` prints and tests read (state-dir/info.json).
type info struct {
	Status     string `json:"status"` // starting, ready, failed
	Message    string `json:"message,omitempty"`
	Kubeconfig string `json:"kubeconfig"`
	S3URL      string `json:"s3URL"`
	CAFile     string `json:"caFile,omitempty"`
	AccessKey  string `json:"accessKey,omitempty"`
	SecretKey  string `json:"secretKey,omitempty"`
	Tenant     string `json:"tenant"`
	Bare       bool   `json:"bare,omitempty"`
	Logs       string `json:"logs"`
	ReadyAfter string `json:"readyAfter,omitempty"`
	// Exposed maps "namespace/name" of the --expose Services to their URLs.
	Exposed  map[string]string `json:"exposed,omitempty"`
	InnerPID int               `json:"innerPID"`
	// PrometheusURL is Prometheus' HTTP API on the host (--monitoring).
	PrometheusURL string `json:"prometheusURL,omitempty"`
	// ConsoleURL is the tenant's web console on the host (when its
	// spec.console enables it; the connection closes otherwise).
	ConsoleURL string `json:"consoleURL,omitempty"`
}

func writeInfo(state string, in info) error {
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(state, "info.json"), data, 0o600)
}

// cmdRun is the cluster itself. `up` starts it in new network and mount
// namespaces with the host listeners as fds 3 (API server) and 4 (S3).
func cmdRun(args []string) error {
	var c runConfig
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.flags(fs)
	fs.IntVar(&c.APIPort, "api-port", 0, "host port of fd 3")
	fs.IntVar(&c.S3Port, "s3-port", 0, "host port of fd 4")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, msg string, _ ...any) {
		log.Debug("client-go", "msg", msg, "error", err)
	}}
	apiLn, err := net.FileListener(os.NewFile(3, "api"))
	if err != nil {
		return fmt.Errorf("API server listener: %w", err)
	}
	s3Ln, err := net.FileListener(os.NewFile(4, "s3"))
	if err != nil {
		return fmt.Errorf("S3 listener: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	started := time.Now()
	in := info{
		Status: "starting", Tenant: c.Tenant, Bare: c.Bare, Logs: filepath.Join(c.State, "logs"),
		Kubeconfig: filepath.Join(c.State, "kubeconfig"),
		S3URL:      fmt.Sprintf("https://localhost:%d", c.S3Port),
		InnerPID:   os.Getpid(),
	}
	fail := func(err error) error {
		in.Status, in.Message = "failed", err.Error()
		_ = writeInfo(c.State, in)
		return err
	}
	if err := writeInfo(c.State, in); err != nil {
		return err
	}
	// Pods run the images `make images` built; the operator is the
	// strata-operator image's own binary.
	store, err := newImageStore(c.Images, c.State)
	if err != nil {
		return fail(err)
	}
	opImage, err := store.resolve(operatorImageRef())
	if err != nil {
		return fail(err)
	}
	c.ManagerBin = filepath.Join(opImage.rootfs, opImage.entry[0])
	var monitoring monitoringImages
	if c.Monitoring {
		if monitoring, err = resolveMonitoringImages(store); err != nil {
			return fail(err)
		}
	}

	if err := setupClusterNetwork(ctx); err != nil {
		return fail(fmt.Errorf("cluster network: %w", err))
	}
	// Names for everything in this mount namespace (the operator, the
	// control plane) come from the cluster DNS, up before the operator.
	if err := useClusterDNS(c.State); err != nil {
		return fail(err)
	}

	cp, err := startControlPlane(ctx, &c)
	if err != nil {
		return fail(err)
	}
	defer cp.stop()
	go exposeAddress(apiLn, cp.apiURL.Host)
	defer apiLn.Close()
	if err := writeKubeconfig(in.Kubeconfig, cp.admin, fmt.Sprintf("https://127.0.0.1:%d", c.APIPort)); err != nil {
		return fail(err)
	}
	log.Info("control plane up", "apiserver", cp.apiURL.Host, "after", time.Since(started).Round(time.Millisecond))

	cfg := *cp.admin
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return fail(err)
	}
	kubelets, err := startKubeletCluster(ctx, log, &c, cp, cs, store)
	if kubelets != nil {
		defer kubelets.stop()
	}
	if err != nil {
		return fail(err)
	}
	if err := ensureStorageClasses(ctx, cs); err != nil {
		return fail(err)
	}

	factory := informers.NewSharedInformerFactory(cs, 0)
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	scInf := factory.Storage().V1().StorageClasses()
	prov := &provisioner{
		log: log.With("component", "provisioner"), cs: cs, root: filepath.Join(c.State, "volumes"),
		claims: pvcInf.Lister(), volumes: pvInf.Lister(), classes: scInf.Lister(),
	}
	proxy := newServiceProxy(log.With("component", "proxy"), svcInf.Lister(), sliceInf.Lister())
	defer proxy.close()

	kicks := newKicker()
	onChange := func(which string) cache.ResourceEventHandler {
		f := func(any) { kicks.kick(which) }
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: f}
	}
	for inf, which := range map[cache.SharedIndexInformer]string{
		svcInf.Informer(): "net", sliceInf.Informer(): "net",
		pvcInf.Informer(): "storage", pvInf.Informer(): "storage", scInf.Informer(): "storage",
	} {
		if _, err := inf.AddEventHandler(onChange(which)); err != nil {
			return fail(err)
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fail(fmt.Errorf("cache of %v did not sync", typ))
		}
	}
	go kicks.loop(ctx, map[string]func(){
		// The cluster namespace's own processes (the operator, the
		// control plane) reach Services through the harness's proxy.
		"net":     proxy.sync,
		"storage": func() { prov.sync(ctx) },
	})
	requests := &nodeRequests{log: log.With("component", "nodes"), dir: nodesDir(c.State),
		act: func(ctx context.Context, node, action string) error { return kubelets.act(ctx, cs, node, action) }}
	go requests.run(ctx)
	if c.Monitoring {
		// Before the operator: Prometheus comes up while the tenant does.
		if err := startMonitoring(ctx, &cfg, monitoring); err != nil {
			return fail(fmt.Errorf("monitoring: %w", err))
		}
		log.Info("prometheus-operator and Prometheus created", "namespace", monitoringNamespace)
	}
	var opExited <-chan struct{} // nil (never) without the operator process
	if !c.Bare {
		op, err := startOperator(ctx, &c, cp, cs)
		if err != nil {
			return fail(err)
		}
		defer op.stop(15 * time.Second)
		opExited = op.exited()
	}

	ns, name, _ := strings.Cut(c.Tenant, "/")
	go exposeService(s3Ln, proxy, ns, builders.S3ServiceName(name), "")
	defer s3Ln.Close()
	for i, e := range c.Expose {
		svc, portName, port, err := parseExpose(e)
		if err != nil {
			return fail(err)
		}
		ln, err := net.FileListener(os.NewFile(uintptr(5+i), svc))
		if err != nil {
			return fail(fmt.Errorf("listener of %s: %w", svc, err))
		}
		defer ln.Close()
		sns, sname, _ := strings.Cut(svc, "/")
		go exposeService(ln, proxy, sns, sname, portName)
		if portName == consolePortName {
			in.ConsoleURL = fmt.Sprintf("https://localhost:%d", port)
			continue
		}
		if svc == prometheusService {
			in.PrometheusURL = fmt.Sprintf("http://localhost:%d", port)
			continue
		}
		if in.Exposed == nil {
			in.Exposed = map[string]string{}
		}
		in.Exposed[svc] = fmt.Sprintf("https://localhost:%d", port)
	}

	if c.Bare {
		in.Status, in.ReadyAfter = "ready", time.Since(started).Round(time.Second).String()
		_ = writeInfo(c.State, in)
		log.Info("cluster ready (bare: no operator, no manifests)", "after", in.ReadyAfter)
		<-ctx.Done()
		log.Info("stopping")
		return nil
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = storagev1alpha1.AddToScheme(scheme)
	kc, err := client.New(&cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(err)
	}
	manifests := c.Manifests
	if len(manifests) == 0 {
		manifests = []string{filepath.Join(c.Repo, "hack", "localcluster", "demo")}
	}
	if err := applyManifests(ctx, kc, manifests); err != nil {
		return fail(err)
	}
	log.Info("manifests applied", "after", time.Since(started).Round(time.Millisecond))

	go func() {
		waitCtx, cancel := context.WithTimeout(ctx, c.Timeout)
		defer cancel()
		err := waitTenant(waitCtx, kc, ns, name, &in, c.State)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			_ = fail(fmt.Errorf("tenant %s not Ready after %s: %w (see %s)", c.Tenant, c.Timeout, err, in.Logs))
			return
		}
		if c.Monitoring {
			log.Info("tenant ready; waiting for Prometheus", "tenant", c.Tenant, "after", time.Since(started).Round(time.Second))
			if err := waitPrometheus(waitCtx, &cfg); err != nil {
				_ = fail(fmt.Errorf("%w (see %s)", err, in.Logs))
				return
			}
		}
		if _, err := proxy.port(ns, builders.S3ServiceName(name), consolePortName); err != nil {
			in.ConsoleURL = "" // the Tenant has no console
		}
		in.Status, in.ReadyAfter = "ready", time.Since(started).Round(time.Second).String()
		_ = writeInfo(c.State, in)
		log.Info("tenant ready", "tenant", c.Tenant, "after", in.ReadyAfter)
	}()

	select {
	case <-ctx.Done():
		log.Info("stopping")
	case <-opExited:
		log.Error("the operator exited", "log", c.logFile("operator.log"))
		_ = fail(errors.New("the operator exited; see " + c.logFile("operator.log")))
		<-ctx.Done()
	}
	return nil
}

// operatorImageRef is the operator image of this release.
func operatorImageRef() string { return buildinfo.OperatorRepository + ":" + buildinfo.Version }

// startOperator runs the operator image's binary as the user the operator's generated
// ClusterRole is bound to, so missing RBAC rules show up here too.
func startOperator(ctx context.Context, c *runConfig, cp *controlPlane, cs kubernetes.Interface) (*process, error) {
	const user = "strata-operator"
	if err := applyYAMLFile(ctx, cs, filepath.Join(c.Repo, "config", "rbac", "role.yaml")); err != nil {
		return nil, err
	}
	if err := bindClusterRole(ctx, cs, "strata-operator", "manager", user); err != nil {
		return nil, err
	}
	ucfg, err := cp.addUser(user)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.State, "kube", "operator.kubeconfig")
	if err := writeKubeconfig(kubeconfig, ucfg, ucfg.Host); err != nil {
		return nil, err
	}
	op := newProcess("operator", c.ManagerBin, []string{
		"--kubeconfig=" + kubeconfig,
		"--enable-webhooks=false",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:8081",
		"--engine-refresh=20s",
		// A CA rotation shows its overlap without waiting a day.
		"--ca-overlap=5s",
	}, c.logFile("operator.log"))
	if err := op.start(nil); err != nil {
		return nil, err
	}
	return op, nil
}

// applyYAMLFile creates the ClusterRole of config/rbac/role.yaml (the one
// document kind it needs to read without a dynamic client).
func applyYAMLFile(ctx context.Context, cs kubernetes.Interface, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitTenant waits for the Tenant's Ready condition, then records the root
// keys and the CA the S3 clients need.
func waitTenant(ctx context.Context, kc client.Client, ns, name string, in *info, state string) error {
	var t storagev1alpha1.Tenant
	var last string
	for {
		err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &t)
		if err == nil {
			c := meta.FindStatusCondition(t.Status.Conditions, storagev1alpha1.ConditionReady)
			if c != nil && c.Status == metav1.ConditionTrue {
				break
			}
			if c != nil {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		select {
		case <-ctx.Done():
			if last != "" {
				return errors.New(last)
			}
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	var root corev1.Secret
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: builders.RootSecretName(&t)}, &root); err != nil {
		return fmt.Errorf("root credentials: %w", err)
	}
	in.AccessKey = string(root.Data[builders.AccessKeyKey])
	in.SecretKey = string(root.Data[builders.SecretKeyKey])
	if tlsName := builders.TLSSecretName(&t); tlsName != "" {
		var s corev1.Secret
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: tlsName}, &s); err != nil {
			return fmt.Errorf("TLS secret: %w", err)
		}
		in.CAFile = filepath.Join(state, "ca.crt")
		if err := os.WriteFile(in.CAFile, s.Data["ca.crt"], 0o644); err != nil {
			return err
		}
	} else {
		in.S3URL = strings.Replace(in.S3URL, "https://", "http://", 1)
		for k, v := range in.Exposed {
			in.Exposed[k] = strings.Replace(v, "https://", "http://", 1)
		}
		in.ConsoleURL = strings.Replace(in.ConsoleURL, "https://", "http://", 1)
	}
	return nil
}
