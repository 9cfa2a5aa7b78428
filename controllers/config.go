package controllers

import (
	"context"
	"fmt"
	"io"
	"time"

	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/engine"
)

// Finalizer runs deletionPolicy before a Tenant or pool goes.
const Finalizer = "storage.strata.dev/cleanup"

// indexTenantRef indexes pools by spec.tenantRef.name.
const indexTenantRef = "spec.tenantRef.name"

// Config is the operator-wide configuration every reconciler shares. It is
// read-only after start; per-reconcile state lives in scope structs.
type Config struct {
	// DefaultImage runs tenants without spec.image.
	DefaultImage string
	// ClusterDomain of Service DNS names (cluster.local).
	ClusterDomain string
	// DefaultIssuer signs certificates of TLS mode CertManager without
	// spec.tls.issuerRef; with no name, each such tenant gets a CA of its
	// own from cert-manager (builders.CertManagerCA).
	DefaultIssuer cmmeta.IssuerReference
	// CAOverlap is how long a new CA is in a tenant's trust bundle before
	// certificates it signed are served, so clients that fetch the bundle
	// now and then (ConfigMap <tenant>-ca-bundle) have it in time.
	CAOverlap time.Duration
	// MonitoringLabels go on every Tenant's ServiceMonitor and
	// PrometheusRule (--monitoring-labels), so the cluster's Prometheus
	// selects them without each Tenant saying so; a Tenant's own
	// spec.monitoring labels win.
	MonitoringLabels map[string]string
	// Engine talks to running tenants (admin API, buckets).
	Engine engine.Client
	// Issuer reads this cluster's ServiceAccount token issuer (the API
	// server's /.well-known/openid-configuration); nil: none known.
	Issuer func(ctx context.Context) (string, error)
	// Random is crypto/rand.Reader in production.
	Random io.Reader
	// Now is time.Now in production.
	Now func() time.Time
	// EngineRefresh is how often a running tenant's admin API is polled
	// for drive states and capacity.
	EngineRefresh time.Duration
	// RolloutPoll is how often a roll-out in progress checks its health
	// gate (the engine's health is not watched).
	RolloutPoll time.Duration
	// EngineGatePoll is how soon a roll-out whose servers are all ready
	// asks the next server's engine again (the server restarted last is
	// catching up on the writes it missed, a few seconds). Zero means
	// RolloutPoll.
	EngineGatePoll time.Duration
	// PodPoll is how often a pool whose pods are not all ready looks at
	// them for ones the kubelet cannot start (Pods are not watched: a
	// cache of every pod in the cluster is not worth it). Zero means 15 s.
	PodPoll time.Duration
	// ClaimsUsageInterval is how often a BucketClaim's usage is read from
	// its tenant (written to status only when it changed). Zero means 5
	// minutes.
	ClaimsUsageInterval time.Duration
	// BucketsResync is how often the settings of a ready claim's bucket
	// and of a Tenant's declared buckets (versioning, object lock, quota,
	// notifications...) are applied again although nothing changed, which
	// undoes changes made to them through S3. Zero means 10 minutes.
	BucketsResync time.Duration
}

func (c Config) claimsUsageInterval() time.Duration {
	if c.ClaimsUsageInterval > 0 {
		return c.ClaimsUsageInterval
	}
	return 5 * time.Minute
}

func (c Config) bucketsResync() time.Duration {
	if c.BucketsResync > 0 {
		return c.BucketsResync
	}
	return 10 * time.Minute
}

// podPoll is Config.PodPoll with its default.
func (c Config) podPoll() time.Duration {
	if c.PodPoll > 0 {
		return c.PodPoll
	}
	return 15 * time.Second
}

// Reconcilers holds what every reconciler needs from the manager.
type Reconcilers struct {
	Client    client.Client
	APIReader client.Reader // uncached reads: Secrets and Pods are not cached
	Scheme    *runtime.Scheme
	Mapper    meta.RESTMapper
	Recorder  recorder.EventRecorder
	Config    Config
}

// Setup registers the field indexes, the operator's metrics and the three
// reconcilers.
func Setup(ctx context.Context, mgr manager.Manager, cfg Config) error {
	r := Reconcilers{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Mapper:    mgr.GetRESTMapper(),
		Recorder:  mgr.GetEventRecorder("strata-operator"),
		Config:    cfg,
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1.ServerPool{}, indexTenantRef, func(o client.Object) []string {
		return []string{o.(*v1.ServerPool).Spec.TenantRef.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.GatewayPool{}, indexTenantRef, func(o client.Object) []string {
		return []string{o.(*v1.GatewayPool).Spec.TenantRef.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.BucketClaim{}, indexClaimTenant, func(o client.Object) []string {
		ref := o.(*v1.BucketClaim).Spec.TenantRef
		return []string{ref.Namespace + "/" + ref.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.BucketAccess{}, indexClaimTenant, func(o client.Object) []string {
		return []string{o.(*v1.BucketAccess).Status.Tenant}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.BucketAccess{}, indexAccessClaims, func(o client.Object) []string {
		a := o.(*v1.BucketAccess)
		out := make([]string, len(a.Spec.BucketClaims))
		for i, c := range a.Spec.BucketClaims {
			out[i] = a.Namespace + "/" + c
		}
		return out
	}); err != nil {
		return err
	}
	if err := RegisterMetrics(ctrlmetrics.Registry, mgr.GetClient()); err != nil {
		return fmt.Errorf("registering the operator's metrics: %w", err)
	}
	if err := (&TenantReconciler{Reconcilers: r}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ServerPoolReconciler{r}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&GatewayPoolReconciler{r}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&BucketClaimReconciler{Reconcilers: r}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&BucketAccessReconciler{Reconcilers: r}).SetupWithManager(mgr)
}

// hasKind reports whether the API server serves a kind (an optional CRD
// such as cert-manager's Certificate).
func hasKind(mapper meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil
}

// setCondition records a condition for the object's current generation.
func setCondition(conds *[]metav1.Condition, generation int64, typ string, status bool, reason, message string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

// conditionChanged reports whether a condition's status or reason differs
// between two lists: Events are recorded on changes only, so a stuck object
// does not write an Event per reconcile.
func conditionChanged(before, after []metav1.Condition, typ string) bool {
	a, b := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(after, typ)
	if a == nil || b == nil {
		return a != b
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
}

// recordConditionEvents records an Event for each listed condition whose
// status, reason or message changed in this pass.
func recordConditionEvents(rec recorder.EventRecorder, obj runtime.Object, before, after []metav1.Condition, types ...string) {
	recordChanges(rec, obj, before, after, conditionChanged, types)
}

// recordStepEvents records an Event for each listed condition whose status
// or reason changed in this pass: the steps of a process (a roll-out, a
// drain) whose message counts progress, which would otherwise make an
// Event per server.
func recordStepEvents(rec recorder.EventRecorder, obj runtime.Object, before, after []metav1.Condition, types ...string) {
	stepChanged := func(before, after []metav1.Condition, typ string) bool {
		a, b := meta.FindStatusCondition(before, typ), meta.FindStatusCondition(after, typ)
		switch {
		case b == nil:
			return false
		case a == nil: // a step begins, not a resource that is created idle
			return b.Status == metav1.ConditionTrue || conditionBad(typ, b)
		}
		return a.Status != b.Status || a.Reason != b.Reason
	}
	recordChanges(rec, obj, before, after, stepChanged, types)
}

func recordChanges(rec recorder.EventRecorder, obj runtime.Object, before, after []metav1.Condition,
	changed func(before, after []metav1.Condition, typ string) bool, types []string) {
	for _, typ := range types {
		if !changed(before, after, typ) {
			continue
		}
		c := meta.FindStatusCondition(after, typ)
		if c == nil {
			continue
		}
		kind := corev1.EventTypeNormal
		if conditionBad(typ, c) {
			kind = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, kind, c.Reason, typ, "%s: %s", typ, c.Message)
	}
}

// conditionBad says whether a condition asks for attention (a Warning
// Event): Degraded when true; Progressing and Upgrading only when stuck;
// the others when false, except while things are being created.
func conditionBad(typ string, c *metav1.Condition) bool {
	switch typ {
	case v1.ConditionDegraded:
		return c.Status == metav1.ConditionTrue
	case v1.ConditionProgressing, v1.ConditionUpgrading:
		return c.Reason == v1.ReasonHealthGateFailed || c.Reason == v1.ReasonPlacementRefused
	}
	return c.Status == metav1.ConditionFalse && c.Reason != v1.ReasonCreating &&
		c.Reason != v1.ReasonWaitingForPods && c.Reason != v1.ReasonWaitingForTopology
}

// requeueOnConflict turns a write conflict (the cache was a write behind
// the API server) into a quiet retry: it is expected, not an error to log.
func requeueOnConflict(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, err
}
