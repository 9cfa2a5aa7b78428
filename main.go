// Command manager is the Strata operator: it reconciles Tenants, ServerPools
// and GatewayPools into running object stores.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/controllers"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/engine"
	"github.com/strata-storage/strata/internal/webhookcert"
	"github.com/strata-storage/strata/internal/webhooks"
)

// newScheme registers every API the operator reads or writes: Kubernetes
// built-ins (core, apps, policy, autoscaling, ...), Strata, cert-manager and
// the prometheus-operator's monitoring types. Registering a type does not
// require its CRD to be installed; controllers discover that at run time.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(storagev1alpha1.AddToScheme(s))
	utilruntime.Must(certmanagerv1.AddToScheme(s))
	utilruntime.Must(monitoringv1.AddToScheme(s))
	return s
}

type options struct {
	metricsAddr          string
	secureMetrics        bool
	probeAddr            string
	leaderElect          bool
	leaderElectionNS     string
	webhookCertDir       string
	webhookPort          int
	webhookCertSecret    string
	webhookService       string
	validatingWebhooks   string
	mutatingWebhooks     string
	enableHTTP2          bool
	defaultStrataImage   string
	monitoringLabels     string
	maxConcurrentReconcs int
	clusterDomain        string
	defaultIssuer        string
	caOverlap            time.Duration
	defaultIssuerKind    string
	enableWebhooks       bool
	engineRefresh        time.Duration
	claimsUsageInterval  time.Duration
	bucketsResync        time.Duration
	watchNamespaces      string
}

func parseFlags() (options, zap.Options) {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"Address of the metrics endpoint (HTTPS with authentication by default); 0 disables it.")
	flag.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS and require a token allowed to get /metrics (TokenReview + SubjectAccessReview).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz probes.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so only one operator replica reconciles at a time.")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "",
		"Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "",
		"Directory with tls.crt and tls.key for the webhook server (cert-manager mounts them); empty uses the controller-runtime default. Not with --webhook-cert-secret.")
	flag.IntVar(&o.webhookPort, "webhook-port", webhook.DefaultPort, "Port of the webhook server.")
	flag.StringVar(&o.webhookCertSecret, "webhook-cert-secret", "",
		"Issue, rotate and serve the webhook certificate without cert-manager: a self-signed CA and a serving certificate for --webhook-service, kept in this Secret "+
			"of the Service's namespace, the CA written into --validating-webhook-configuration and --mutating-webhook-configuration. Empty: certificate files (--webhook-cert-dir).")
	flag.StringVar(&o.webhookService, "webhook-service", "",
		"NAMESPACE/NAME of the webhook Service the API server calls, with --webhook-cert-secret: the certificate is for NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.<cluster-domain>.")
	flag.StringVar(&o.validatingWebhooks, "validating-webhook-configuration", "",
		"With --webhook-cert-secret: the ValidatingWebhookConfiguration whose webhooks get the CA bundle.")
	flag.StringVar(&o.mutatingWebhooks, "mutating-webhook-configuration", "",
		"With --webhook-cert-secret: the MutatingWebhookConfiguration whose webhooks get the CA bundle.")
	flag.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"Serve metrics and webhooks over HTTP/2 (off by default: HTTP/2 rapid-reset CVE-2023-44487).")
	flag.StringVar(&o.defaultStrataImage, "default-strata-image", buildinfo.EngineImage(),
		"Engine image for Tenants that do not set spec.image.")
	flag.IntVar(&o.maxConcurrentReconcs, "max-concurrent-reconciles", 2, "Reconciles run in parallel per kind.")
	flag.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "DNS domain of the cluster, for Service and pod names.")
	flag.StringVar(&o.defaultIssuer, "default-issuer", "",
		"cert-manager issuer for Tenants with tls.mode CertManager and no tls.issuerRef; empty gives each such Tenant a CA of its own through cert-manager (docs/tls.md).")
	flag.DurationVar(&o.caOverlap, "ca-overlap", 24*time.Hour,
		"How long a new CA is in a Tenant's trust bundle (ConfigMap <tenant>-ca-bundle) before certificates it signed are served, so clients can fetch it (docs/tls.md).")
	flag.StringVar(&o.defaultIssuerKind, "default-issuer-kind", "ClusterIssuer", "Kind of --default-issuer: Issuer or ClusterIssuer.")
	flag.BoolVar(&o.enableWebhooks, "enable-webhooks", true,
		"Serve the defaulting and validating webhooks (with tls.crt and tls.key from --webhook-cert-dir, or a certificate of the operator's own with --webhook-cert-secret).")
	flag.StringVar(&o.watchNamespaces, "watch-namespaces", os.Getenv("WATCH_NAMESPACE"),
		"Comma-separated namespaces whose Tenants and pools the operator manages (default $WATCH_NAMESPACE, which OLM sets; empty: every namespace). "+
			"With a list, the operator needs write access in those namespaces only.")
	flag.StringVar(&o.monitoringLabels, "monitoring-labels", "",
		"Labels added to every Tenant's ServiceMonitor and PrometheusRule, as k=v,k2=v2 (e.g. release=kube-prometheus-stack, what that chart's Prometheus selects); a Tenant's own spec.monitoring labels win.")
	flag.DurationVar(&o.engineRefresh, "engine-refresh", time.Minute, "How often running tenants' admin API is read for drive states and capacity.")
	flag.DurationVar(&o.claimsUsageInterval, "claims-usage-interval", 5*time.Minute,
		"How often a BucketClaim's usage is read from its tenant (status changes only when the figures do).")
	flag.DurationVar(&o.bucketsResync, "buckets-resync", 10*time.Minute,
		"How often the settings of claimed and declared buckets (versioning, object lock, quota, notifications, ...) are applied again when nothing changed, undoing changes made to them through S3.")
	zo := zap.Options{Development: false}
	zo.BindFlags(flag.CommandLine)
	flag.Parse()
	return o, zo
}

// checkImage refuses a --default-strata-image that is no image reference,
// as the Tenant CRD refuses such a spec.image: every Tenant without one
// would roll out an image no kubelet can pull.
func checkImage(image string) error {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return fmt.Errorf("--default-strata-image %q: %w (want a reference such as ghcr.io/strata-storage/strata:0.1.0)", image, err)
	}
	return nil
}

func main() {
	o, zo := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zo)))
	log := ctrl.Log.WithName("setup")
	if err := run(o); err != nil {
		log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(o options) error {
	log := ctrl.Log.WithName("setup")
	log.Info("starting strata operator", "version", buildinfo.String(), "defaultStrataImage", o.defaultStrataImage, "watchNamespaces", o.watchNamespaces)
	if err := checkImage(o.defaultStrataImage); err != nil {
		return err
	}

	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := newScheme()
	webhookTLSOpts := tlsOpts
	var webhookCert *webhookcert.Keeper
	if o.enableWebhooks && o.webhookCertSecret != "" {
		if webhookCert, err = newWebhookCertKeeper(cfg, scheme, o); err != nil {
			return err
		}
		webhookTLSOpts = append(slices.Clone(tlsOpts), webhookCert.TLSOption)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOptions(splitNamespaces(o.watchNamespaces)),
		// Secrets are read straight from the API server when needed and
		// watched as metadata only: caching every Secret of the cluster
		// would cost memory and widen what a heap dump could leak.
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Controller:              ctrlconfig.Controller{MaxConcurrentReconciles: o.maxConcurrentReconcs},
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "strata-operator.storage.strata.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
		// Stepping down quickly on shutdown lets a new leader start at once.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    o.webhookPort,
			CertDir: o.webhookCertDir,
			TLSOpts: webhookTLSOpts,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	monLabels, err := labels.ConvertSelectorToLabelsMap(o.monitoringLabels)
	if err != nil {
		return fmt.Errorf("--monitoring-labels: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, controllers.Config{
		MonitoringLabels:    monLabels,
		DefaultImage:        o.defaultStrataImage,
		ClusterDomain:       o.clusterDomain,
		DefaultIssuer:       cmmeta.IssuerReference{Name: o.defaultIssuer, Kind: o.defaultIssuerKind, Group: "cert-manager.io"},
		Engine:              engine.HTTPClient{Timeout: 5 * time.Second},
		Issuer:              controllers.ClusterIssuer(cfg),
		Random:              rand.Reader,
		Now:                 time.Now,
		EngineRefresh:       o.engineRefresh,
		ClaimsUsageInterval: o.claimsUsageInterval,
		BucketsResync:       o.bucketsResync,
		RolloutPoll:         5 * time.Second,
		EngineGatePoll:      time.Second,
		CAOverlap:           o.caOverlap,
	}); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	if o.enableWebhooks {
		if err := webhooks.Setup(mgr, mgr.GetAPIReader()); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	if webhookCert != nil {
		// Ready once the API server can call this replica's webhooks, so
		// `helm install --wait` returns when creating a Tenant works.
		if err := mgr.Add(webhookCert); err != nil {
			return fmt.Errorf("adding the webhook certificate keeper: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook-certificate", webhookCert.Ready); err != nil {
			return fmt.Errorf("adding ready check: %w", err)
		}
	}

	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}

// newWebhookCertKeeper is the webhook certificate of --webhook-cert-secret.
// Its client does not cache: it reads one Secret and two configurations,
// and must see what other replicas wrote.
func newWebhookCertKeeper(cfg *rest.Config, scheme *runtime.Scheme, o options) (*webhookcert.Keeper, error) {
	if o.webhookCertDir != "" {
		return nil, fmt.Errorf("--webhook-cert-dir and --webhook-cert-secret are two sources of the webhook certificate: give one")
	}
	ns, name, ok := strings.Cut(o.webhookService, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--webhook-service must be NAMESPACE/NAME with --webhook-cert-secret, got %q", o.webhookService)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the webhook certificate's client: %w", err)
	}
	return webhookcert.New(webhookcert.Config{
		Client:                         c,
		Secret:                         types.NamespacedName{Namespace: ns, Name: o.webhookCertSecret},
		ValidatingWebhookConfiguration: o.validatingWebhooks,
		MutatingWebhookConfiguration:   o.mutatingWebhooks,
		DNSNames:                       serviceDNSNames(ns, name, o.clusterDomain),
	})
}

// serviceDNSNames are the names the API server may call a Service by: it
// uses NAME.NAMESPACE.svc; the full name is there for other clients.
func serviceDNSNames(ns, name, clusterDomain string) []string {
	return []string{name + "." + ns + ".svc", name + "." + ns + ".svc." + clusterDomain}
}

// cacheOptions keep the informer caches small: no managedFields on any
// object, and Nodes without their status (images, conditions, addresses),
// since placement reads only labels and schedulability.
//
// With namespaces, namespaced objects are watched in those only, except
// CSIStorageCapacity: the CSI drivers publish it in their own namespaces,
// and placement reads it wherever it is.
func cacheOptions(namespaces []string) cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Transform: func(obj any) (any, error) {
				if n, ok := obj.(*corev1.Node); ok {
					n.Status = corev1.NodeStatus{}
					n.ManagedFields = nil
					n.Annotations = nil
				}
				return obj, nil
			}},
		},
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
		o.ByObject[&storagev1.CSIStorageCapacity{}] = cache.ByObject{Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}
	}
	return o
}

// splitNamespaces parses --watch-namespaces.
func splitNamespaces(list string) []string {
	var out []string
	for _, ns := range strings.Split(list, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}
