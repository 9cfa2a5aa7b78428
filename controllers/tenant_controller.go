package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// A Tenant being deleted deletes its pools (deletionPolicy runs in theirs).
// +kubebuilder:rbac:groups=storage.strata.dev,resources=serverpools;gatewaypools,verbs=delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates;issuers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete

// TenantReconciler turns a Tenant into its credentials, certificates,
// Services and topology file, deletes its pools when it goes, and aggregates
// their status.
type TenantReconciler struct {
	Reconcilers
	// bucketsEnsured remembers, per Tenant UID, the generation whose
	// buckets were applied and when (ensuredAt): a pass that reads the
	// Tenant before its BucketsReady condition reached the cache (or whose
	// status write conflicted) does not call the engine again, and one
	// Config.BucketsResync later applies them again (undoing changes made
	// through S3), as the first pass after a restart does.
	bucketsEnsured sync.Map
	// webIdentityEnsured: the same for spec.webIdentity.
	webIdentityEnsured sync.Map
}

// tenantScope is the state of one reconcile.
type tenantScope struct {
	tenant   *v1.Tenant
	log      logr.Logger
	rootKeys [2]string
	ca       []byte // PEM CA of the serving certificate, when known
	// certificateExpiring says the served certificate expires within
	// certificateWarning (it makes the tenant Degraded).
	certificateExpiring string
	servers             []v1.ServerPool
	gateways            []v1.GatewayPool
	// the pools' workloads, for roll-out progress
	statefulSets []appsv1.StatefulSet
	deployments  []appsv1.Deployment
	requeue      time.Duration
	capacity     *engine.Capacity
}

func (s *tenantScope) requeueWithin(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

// errWaiting stops the steps of a pass without an error: a condition says
// what the tenant waits for, and a watch (or requeue) brings it back.
var errWaiting = errors.New("waiting")

// Reconcile runs the tenant's steps in order and writes status once.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &v1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &tenantScope{tenant: t, log: log.FromContext(ctx)}
	before := t.Status.DeepCopy()

	if !t.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s, before)
	}
	if controllerutil.AddFinalizer(t, Finalizer) {
		if err := r.Client.Update(ctx, t); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	var stepErr error
	for _, step := range []func(context.Context, *tenantScope) error{
		r.reconcileCredentials,
		r.reconcileEncryptionKeys,
		r.reconcileMetricsToken,
		r.reconcileCertificates,
		r.reconcileServices,
		// After the certificates: a replication pair's Tenants each wait
		// for the other's CA bundle.
		r.reconcileNotifyTargets,
		r.reconcileNetworkPolicy,
		r.reconcilePools,
		r.reconcileTopology,
		r.reconcileMonitoring,
		r.reconcileEngine,
		r.reconcileBuckets,
		r.reconcileWebIdentity,
	} {
		if stepErr = step(ctx, s); stepErr != nil {
			break
		}
	}
	computeTenantStatus(t, s, r.Config.ClusterDomain, builders.Image(t, r.Config.DefaultImage))
	if err := r.writeStatus(ctx, t, before); err != nil {
		return requeueOnConflict(err)
	}
	r.recordTransitions(t, before)
	if stepErr != nil && !errors.Is(stepErr, errWaiting) {
		return ctrl.Result{}, stepErr
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

func (r *TenantReconciler) writeStatus(ctx context.Context, t *v1.Tenant, before *v1.TenantStatus) error {
	if equality.Semantic.DeepEqual(before, &t.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, t); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// recordTransitions records an Event when a condition the user cares about
// changes, never on a pass that changed nothing.
func (r *TenantReconciler) recordTransitions(t *v1.Tenant, before *v1.TenantStatus) {
	recordConditionEvents(r.Recorder, t, before.Conditions, t.Status.Conditions,
		v1.ConditionCredentialsReady, v1.ConditionCertificatesReady, v1.ConditionBucketsReady, v1.ConditionReady, v1.ConditionDegraded)
	// A roll-out's start, pause and end.
	recordStepEvents(r.Recorder, t, before.Conditions, t.Status.Conditions, v1.ConditionUpgrading)
}

// reconcileCredentials makes sure root keys exist (generating them once),
// reads every user's keys and renders the IAM file.
func (r *TenantReconciler) reconcileCredentials(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	name := builders.RootSecretName(t)
	root := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, root)
	switch {
	case apierrors.IsNotFound(err) && t.Spec.Credentials.SecretRef != nil:
		return r.credentialsMissing(s, fmt.Sprintf("Secret %q named by spec.credentials.secretRef does not exist: create it with keys %s and %s",
			name, builders.AccessKeyKey, builders.SecretKeyKey))
	case apierrors.IsNotFound(err) && t.Status.CredentialsSecret == name:
		// We generated it before and it is gone: new keys would not open
		// the tenant's data, so say so instead of minting them.
		return r.credentialsMissing(s, fmt.Sprintf("the generated root credentials Secret %q was deleted; restore it from a backup (keys %s and %s), or delete and re-create the Tenant to start over",
			name, builders.AccessKeyKey, builders.SecretKeyKey))
	case apierrors.IsNotFound(err):
		gen, err := builders.NewRootCredentials(t, r.Config.Random)
		if err != nil {
			return err
		}
		if err := r.Client.Create(ctx, gen); err != nil {
			return fmt.Errorf("creating root credentials: %w", err)
		}
		r.Recorder.Eventf(t, gen, corev1.EventTypeNormal, "CredentialsGenerated", "CreateSecret", "generated root credentials in Secret %s", gen.Name)
		root = gen
	case err != nil:
		return fmt.Errorf("reading root credentials: %w", err)
	}
	access, secret, err := builders.CredentialsIn(root)
	if err != nil {
		return r.credentialsMissing(s, err.Error()+": the root credentials Secret needs both keys")
	}
	s.rootKeys = [2]string{access, secret}
	t.Status.CredentialsSecret = name

	keys := map[string][2]string{}
	for _, u := range t.Spec.Users {
		us := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: u.SecretRef.Name}, us)
		if apierrors.IsNotFound(err) {
			return r.credentialsMissing(s, fmt.Sprintf("user %q: Secret %q does not exist: create it with keys %s and %s",
				u.Name, u.SecretRef.Name, builders.AccessKeyKey, builders.SecretKeyKey))
		}
		if err != nil {
			return fmt.Errorf("reading Secret of user %s: %w", u.Name, err)
		}
		a, sk, err := builders.CredentialsIn(us)
		if err != nil {
			return r.credentialsMissing(s, fmt.Sprintf("user %q: %s", u.Name, err))
		}
		keys[u.Name] = [2]string{a, sk}
	}
	iam, err := builders.IAMSecret(t, keys)
	if err != nil {
		return err
	}
	if _, err := apply(ctx, r.Client, r.Scheme, t, iam, secretOps); err != nil {
		return err
	}
	setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCredentialsReady, true, v1.ReasonReconciled,
		fmt.Sprintf("root keys in Secret %s; %d user(s) rendered into Secret %s", name, len(t.Spec.Users), iam.Name))
	return nil
}

// reconcileEncryptionKeys makes sure the encryption master keys exist
// (generating them once) and that the servers can read them. They are
// credentials: a problem with them holds CredentialsReady.
func (r *TenantReconciler) reconcileEncryptionKeys(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	name := builders.EncryptionKeysSecretName(t)
	keys := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, keys)
	generatedBefore := t.Status.Encryption != nil && t.Status.Encryption.KeysSecret == name
	switch {
	case apierrors.IsNotFound(err) && t.Spec.Encryption.KeysSecretRef != nil:
		return r.credentialsMissing(s, fmt.Sprintf("Secret %q named by spec.encryption.keysSecretRef does not exist: create it with key %s (the keys file, docs/operator.md)",
			name, builders.EncryptionKeysFileKey))
	case apierrors.IsNotFound(err) && generatedBefore:
		// New keys would not open what the old ones sealed.
		return r.credentialsMissing(s, fmt.Sprintf("the generated encryption keys Secret %q was deleted: encrypted objects cannot be read without it; restore it from a backup",
			name))
	case apierrors.IsNotFound(err):
		gen, err := builders.NewEncryptionKeys(t, r.Config.Random)
		if err != nil {
			return err
		}
		if err := r.Client.Create(ctx, gen); err != nil {
			return fmt.Errorf("creating encryption keys: %w", err)
		}
		r.Recorder.Eventf(t, gen, corev1.EventTypeNormal, "EncryptionKeysGenerated", "CreateSecret", "generated encryption master keys in Secret %s", gen.Name)
		keys = gen
	case err != nil:
		return fmt.Errorf("reading encryption keys: %w", err)
	}
	st, err := builders.EncryptionKeysIn(keys)
	if err != nil {
		return r.credentialsMissing(s, err.Error())
	}
	t.Status.Encryption = st
	if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionCredentialsReady); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionCredentialsReady, true, v1.ReasonReconciled,
			fmt.Sprintf("%s; encryption keys in Secret %s (default key %s, %d key(s))", c.Message, name, st.DefaultKey, st.Keys))
	}
	return nil
}

// reconcileNotifyTargets renders the tenant's notification targets and
// replication remotes, with their credentials, into the Secret the
// servers and gateways read; a tenant without any gets an empty list (the
// engine takes a file gone for a fault, not a removal). A missing
// credentials Secret (or peer Tenant) holds CredentialsReady, as a user's
// does.
func (r *TenantReconciler) reconcileNotifyTargets(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	creds := map[string]map[string][]byte{}
	for _, tg := range t.Spec.Notifications.Targets {
		if tg.CredentialsSecretRef == nil {
			continue
		}
		sec := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: tg.CredentialsSecretRef.Name}, sec)
		if apierrors.IsNotFound(err) {
			return r.credentialsMissing(s, fmt.Sprintf("notification target %q: Secret %q does not exist: create it with any of the keys %s, %s and %s",
				tg.Name, tg.CredentialsSecretRef.Name, builders.NotifyTokenKey, builders.NotifyUsernameKey, builders.NotifyPasswordKey))
		}
		if err != nil {
			return fmt.Errorf("reading Secret of notification target %s: %w", tg.Name, err)
		}
		creds[tg.Name] = sec.Data
	}
	var remotes []builders.Remote
	for _, rm := range t.Spec.Replication.Remotes {
		resolved, err := r.resolveRemote(ctx, s, rm)
		if errors.Is(err, errWaiting) {
			// A peer gone or not ready holds CredentialsReady; a running
			// tenant keeps the targets it has and the other steps go on.
			have := &corev1.Secret{}
			if r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: builders.NotifyTargetsSecretName(t.Name)}, have) == nil {
				return nil
			}
		}
		if err != nil {
			return err
		}
		remotes = append(remotes, resolved)
	}
	sec, err := builders.NotifyTargetsSecret(t, creds, remotes)
	if err != nil {
		return err
	}
	_, err = apply(ctx, r.Client, r.Scheme, t, sec, secretOps)
	return err
}

// resolveRemote finds a replication remote's endpoint, credentials and
// CA: a peer Tenant's S3 Service, root credentials (or the Secret named)
// and trust bundle, or the endpoint, Secret and ConfigMap given.
func (r *TenantReconciler) resolveRemote(ctx context.Context, s *tenantScope, rm v1.ReplicationRemoteSpec) (builders.Remote, error) {
	t := s.tenant
	out := builders.Remote{Name: rm.Name, Endpoint: rm.Endpoint}
	if rm.TenantRef != nil {
		peer := &v1.Tenant{}
		key := client.ObjectKey{Namespace: rm.TenantRef.Namespace, Name: rm.TenantRef.Name}
		if err := r.APIReader.Get(ctx, key, peer); apierrors.IsNotFound(err) {
			return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: Tenant %s does not exist", rm.Name, key))
		} else if err != nil {
			return out, fmt.Errorf("reading Tenant %s of replication remote %s: %w", key, rm.Name, err)
		}
		if rm.CredentialsSecretRef == nil && !namesAsRemote(peer, t) {
			// The peer's root credentials go only to a Tenant the peer
			// names in turn: a pair is declared on both sides.
			return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: Tenant %s does not name Tenant %s/%s in spec.replication.remotes; "+
				"its root credentials are used only for a pair both Tenants declare (or give credentialsSecretRef)", rm.Name, key, t.Namespace, t.Name))
		}
		out.Endpoint = builders.RemoteEndpoint(peer)
		if builders.TLSEnabled(peer) {
			cm := &corev1.ConfigMap{}
			err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: peer.Namespace, Name: builders.TrustBundleName(peer.Name)}, cm)
			if apierrors.IsNotFound(err) || err == nil && cm.Data["ca.crt"] == "" {
				return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: Tenant %s has no CA bundle yet (ConfigMap %s)", rm.Name, key, builders.TrustBundleName(peer.Name)))
			}
			if err != nil {
				return out, fmt.Errorf("reading the CA bundle of Tenant %s: %w", key, err)
			}
			out.CA = []byte(cm.Data["ca.crt"])
		}
		if rm.CredentialsSecretRef == nil {
			sec := &corev1.Secret{}
			name := builders.RootSecretName(peer)
			if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: peer.Namespace, Name: name}, sec); apierrors.IsNotFound(err) {
				return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: Tenant %s has no root credentials yet (Secret %s)", rm.Name, key, name))
			} else if err != nil {
				return out, fmt.Errorf("reading the root credentials of Tenant %s: %w", key, err)
			}
			a, sk, err := builders.CredentialsIn(sec)
			if err != nil {
				return out, err
			}
			out.AccessKey, out.SecretKey = a, sk
			return out, nil
		}
	}
	if rm.CredentialsSecretRef != nil {
		sec := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: rm.CredentialsSecretRef.Name}, sec)
		if apierrors.IsNotFound(err) {
			return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: Secret %q does not exist: create it with keys %s and %s",
				rm.Name, rm.CredentialsSecretRef.Name, builders.AccessKeyKey, builders.SecretKeyKey))
		}
		if err != nil {
			return out, fmt.Errorf("reading Secret of replication remote %s: %w", rm.Name, err)
		}
		a, sk, err := builders.CredentialsIn(sec)
		if err != nil {
			return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: %v", rm.Name, err))
		}
		out.AccessKey, out.SecretKey = a, sk
	}
	if rm.CAConfigMapRef != nil {
		cm := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: rm.CAConfigMapRef.Name}, cm)
		if apierrors.IsNotFound(err) || err == nil && cm.Data["ca.crt"] == "" {
			return out, r.credentialsMissing(s, fmt.Sprintf("replication remote %q: ConfigMap %q with key ca.crt does not exist", rm.Name, rm.CAConfigMapRef.Name))
		}
		if err != nil {
			return out, fmt.Errorf("reading the CA of replication remote %s: %w", rm.Name, err)
		}
		out.CA = []byte(cm.Data["ca.crt"])
	}
	return out, nil
}

// namesAsRemote reports whether peer lists t as a replication remote.
func namesAsRemote(peer, t *v1.Tenant) bool {
	for _, rm := range peer.Spec.Replication.Remotes {
		if rm.TenantRef != nil && rm.TenantRef.Namespace == t.Namespace && rm.TenantRef.Name == t.Name {
			return true
		}
	}
	return false
}

func (r *TenantReconciler) credentialsMissing(s *tenantScope, msg string) error {
	setCondition(&s.tenant.Status.Conditions, s.tenant.Generation, v1.ConditionCredentialsReady, false, v1.ReasonSecretMissing, msg)
	return errWaiting
}

// reconcileServices: the client Service and the headless Service for pod
// DNS names.
func (r *TenantReconciler) reconcileServices(ctx context.Context, s *tenantScope) error {
	for _, svc := range []*corev1.Service{builders.S3Service(s.tenant), builders.HeadlessService(s.tenant)} {
		if _, err := apply(ctx, r.Client, r.Scheme, s.tenant, svc, serviceOps); err != nil {
			return err
		}
	}
	return nil
}

// reconcileNetworkPolicy keeps the servers' NetworkPolicy, or removes it
// when the tenant turned it off.
func (r *TenantReconciler) reconcileNetworkPolicy(ctx context.Context, s *tenantScope) error {
	np := builders.ServerNetworkPolicy(s.tenant)
	if !builders.NetworkPolicyEnabled(s.tenant) {
		return deleteOwned(ctx, r.Client, s.tenant, np)
	}
	_, err := apply(ctx, r.Client, r.Scheme, s.tenant, np, networkPolicyOps)
	return err
}

// reconcilePools lists the tenant's pools for the topology file and status.
func (r *TenantReconciler) reconcilePools(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	servers := &v1.ServerPoolList{}
	if err := r.Client.List(ctx, servers, client.InNamespace(t.Namespace), client.MatchingFields{indexTenantRef: t.Name}); err != nil {
		return fmt.Errorf("listing ServerPools: %w", err)
	}
	gateways := &v1.GatewayPoolList{}
	if err := r.Client.List(ctx, gateways, client.InNamespace(t.Namespace), client.MatchingFields{indexTenantRef: t.Name}); err != nil {
		return fmt.Errorf("listing GatewayPools: %w", err)
	}
	s.servers, s.gateways = servers.Items, gateways.Items
	sets := &appsv1.StatefulSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(t.Namespace), client.MatchingLabels{builders.LabelTenant: t.Name}); err != nil {
		return fmt.Errorf("listing StatefulSets: %w", err)
	}
	deps := &appsv1.DeploymentList{}
	if err := r.Client.List(ctx, deps, client.InNamespace(t.Namespace), client.MatchingLabels{builders.LabelTenant: t.Name}); err != nil {
		return fmt.Errorf("listing Deployments: %w", err)
	}
	s.statefulSets, s.deployments = sets.Items, deps.Items
	return nil
}

// reconcileTopology renders topology.json from the pools whose layout is
// decided, in creation order.
func (r *TenantReconciler) reconcileTopology(ctx context.Context, s *tenantScope) error {
	cm, err := builders.TopologyConfigMap(s.tenant, builders.TopologyPools(s.servers), r.Config.ClusterDomain)
	if err != nil {
		return err
	}
	op, err := apply(ctx, r.Client, r.Scheme, s.tenant, cm, configMapOps)
	if err != nil {
		return err
	}
	if op == opUpdated {
		r.Recorder.Eventf(s.tenant, cm, corev1.EventTypeNormal, "TopologyUpdated", "UpdateConfigMap",
			"topology file %s now lists %d pool(s)", cm.Name, len(builders.TopologyPools(s.servers)))
	}
	return nil
}

// reconcileMonitoring creates the ServiceMonitor and PrometheusRule when the
// prometheus-operator CRDs exist (discovered, never required), and removes
// its own when monitoring is switched off.
func (r *TenantReconciler) reconcileMonitoring(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	if hasKind(r.Mapper, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind)) {
		sm := builders.ServiceMonitor(t)
		sm.Labels = builders.WithDefaults(sm.Labels, r.Config.MonitoringLabels)
		if enabled(t.Spec.Monitoring.ServiceMonitor.Enabled) {
			if _, err := apply(ctx, r.Client, r.Scheme, t, sm, serviceMonitorOps); err != nil {
				return err
			}
		} else if err := deleteOwned(ctx, r.Client, t, sm); err != nil {
			return err
		}
	}
	if hasKind(r.Mapper, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PrometheusRuleKind)) {
		pr := builders.PrometheusRule(t)
		pr.Labels = builders.WithDefaults(pr.Labels, r.Config.MonitoringLabels)
		if enabled(t.Spec.Monitoring.PrometheusRule.Enabled) {
			if _, err := apply(ctx, r.Client, r.Scheme, t, pr, prometheusRuleOps); err != nil {
				return err
			}
		} else if err := deleteOwned(ctx, r.Client, t, pr); err != nil {
			return err
		}
	}
	return nil
}

func enabled(b *bool) bool { return b == nil || *b }

// deleteOwned deletes obj if it exists and the owner controls it.
func deleteOwned(ctx context.Context, c client.Client, owner, obj client.Object) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, owner) {
		return nil
	}
	return client.IgnoreNotFound(c.Delete(ctx, obj))
}

func (r *TenantReconciler) endpoint(s *tenantScope) engine.Endpoint {
	t := s.tenant
	return engine.Endpoint{
		URL:       builders.ServiceURL(t, builders.S3ServiceName(t.Name), r.Config.ClusterDomain),
		AccessKey: s.rootKeys[0], SecretKey: s.rootKeys[1], CA: s.ca,
	}
}

// reconcileEngine reads capacity from the admin API once a server pool
// runs; an unreachable engine leaves capacity unknown.
func (r *TenantReconciler) reconcileEngine(ctx context.Context, s *tenantScope) error {
	running := false
	for _, p := range s.servers {
		running = running || p.Status.ReadyServers > 0
	}
	if !running || r.Config.Engine == nil {
		return nil
	}
	s.requeueWithin(r.Config.EngineRefresh)
	info, err := r.Config.Engine.Info(ctx, r.endpoint(s))
	if err != nil {
		s.log.V(1).Info("admin API not reachable", "error", err.Error())
		return nil
	}
	s.capacity = &info.Capacity
	return nil
}

// reconcileBuckets creates spec.buckets through S3 once the tenant is ready,
// once per generation.
func (r *TenantReconciler) reconcileBuckets(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	if len(t.Spec.Buckets) == 0 || r.Config.Engine == nil {
		meta.RemoveStatusCondition(&t.Status.Conditions, v1.ConditionBucketsReady)
		return nil
	}
	if !tenantPoolsReady(s) {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionBucketsReady, false, v1.ReasonWaitingForPods,
			"buckets are created once the tenant's server pools are ready")
		return nil
	}
	now := r.Config.Now()
	last, known := r.bucketsEnsured.Load(t.UID)
	fresh := known && last.(ensuredAt).generation == t.Generation && now.Sub(last.(ensuredAt).at) < r.Config.bucketsResync()
	if fresh {
		s.requeueWithin(r.Config.bucketsResync() - now.Sub(last.(ensuredAt).at))
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionBucketsReady); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation && fresh {
		return nil
	}
	// A bucket that cannot be applied (its spec names a target the Tenant
	// lacks, or S3 refuses it) does not hold back the others.
	buckets, applied, specErr := declaredBuckets(t)
	var applyErr error
	if !fresh {
		if applyErr = r.Config.Engine.EnsureBuckets(ctx, r.endpoint(s), buckets); applyErr == nil {
			r.bucketsEnsured.Store(t.UID, ensuredAt{generation: t.Generation, at: now})
			s.requeueWithin(r.Config.bucketsResync())
		}
	}
	failed := engine.FailedBuckets(applyErr)
	applied = slices.DeleteFunc(applied, func(b v1.BucketStatus) bool { return slices.Contains(failed, b.Name) })
	if applyErr == nil || failed != nil {
		t.Status.Buckets = applied // else the tenant did not answer: as it was
	}
	if err := errors.Join(specErr, applyErr); err != nil {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionBucketsReady, false, v1.ReasonBucketCreateFailed,
			strings.ReplaceAll(err.Error(), "\n", "; "))
		if applyErr != nil {
			s.requeueWithin(30 * time.Second)
		}
		return nil
	}
	names := make([]string, len(applied))
	for i, b := range applied {
		names[i] = b.Name
	}
	setCondition(&t.Status.Conditions, t.Generation, v1.ConditionBucketsReady, true, v1.ReasonReconciled,
		"buckets exist: "+strings.Join(names, ", "))
	return nil
}

// ensuredAt is the generation whose declared buckets were applied, and
// when.
type ensuredAt struct {
	generation int64
	at         time.Time
}

// reconcileDelete deletes the tenant's pools (each applies deletionPolicy to
// its own claims), then the generated root keys under policy Delete.
func (r *TenantReconciler) reconcileDelete(ctx context.Context, s *tenantScope, before *v1.TenantStatus) (ctrl.Result, error) {
	t := s.tenant
	if !controllerutil.ContainsFinalizer(t, Finalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.reconcilePools(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	remaining := len(s.servers) + len(s.gateways)
	for i := range s.servers {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &s.servers[i])); err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting ServerPool %s: %w", s.servers[i].Name, err)
		}
	}
	for i := range s.gateways {
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &s.gateways[i])); err != nil {
			return ctrl.Result{}, fmt.Errorf("deleting GatewayPool %s: %w", s.gateways[i].Name, err)
		}
	}
	if remaining > 0 {
		t.Status.Phase = v1.TenantDeleting
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionReady, false, v1.ReasonDeleting,
			fmt.Sprintf("deleting: waiting for %d pool(s) to go", remaining))
		if err := r.writeStatus(ctx, t, before); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil // pool deletions bring us back
	}
	if t.Spec.DeletionPolicy == v1.DeletionPolicyDelete {
		// The data is gone: so go the generated keys that opened it.
		var generated []string
		if t.Spec.Credentials.SecretRef == nil {
			generated = append(generated, builders.GeneratedRootSecretName(t.Name))
		}
		if t.Spec.Encryption.KeysSecretRef == nil {
			generated = append(generated, builders.GeneratedEncryptionKeysSecretName(t.Name))
		}
		for _, name := range generated {
			gen := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name}}
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, gen)); err != nil {
				return ctrl.Result{}, fmt.Errorf("deleting Secret %s: %w", name, err)
			}
		}
	}
	r.bucketsEnsured.Delete(t.UID)
	r.webIdentityEnsured.Delete(t.UID)
	controllerutil.RemoveFinalizer(t, Finalizer)
	if err := r.Client.Update(ctx, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches the Tenant, what it owns, its pools and the
// Secrets it reads.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.Tenant{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&v1.ServerPool{}, handler.EnqueueRequestsFromMapFunc(poolToTenant)).
		Watches(&v1.GatewayPool{}, handler.EnqueueRequestsFromMapFunc(poolToTenant)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(labelToTenant)).
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(labelToTenant)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToTenants)).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.peersOf)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.peersOf))
	if hasKind(r.Mapper, cmv1.SchemeGroupVersion.WithKind("Certificate")) {
		b = b.Owns(&cmv1.Certificate{})
	}
	// Optional CRDs installed after the operator started are still used
	// (kinds are discovered on each reconcile); only their watches need a
	// restart of the operator.
	if hasKind(r.Mapper, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind)) {
		b = b.Owns(&monitoringv1.ServiceMonitor{})
	}
	if hasKind(r.Mapper, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PrometheusRuleKind)) {
		b = b.Owns(&monitoringv1.PrometheusRule{})
	}
	return b.Named("tenant").Complete(r)
}

// labelToTenant maps a pool's workload to its tenant (roll-out progress).
func labelToTenant(_ context.Context, o client.Object) []reconcile.Request {
	name, ok := o.GetLabels()[builders.LabelTenant]
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

func poolToTenant(_ context.Context, o client.Object) []reconcile.Request {
	var name string
	switch p := o.(type) {
	case *v1.ServerPool:
		name = p.Spec.TenantRef.Name
	case *v1.GatewayPool:
		name = p.Spec.TenantRef.Name
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// secretToTenants maps a Secret to the tenants that own it (label) or refer
// to it (root or user keys, external TLS), so a rotated or re-created
// Secret is picked up.
func (r *TenantReconciler) secretToTenants(ctx context.Context, o client.Object) []reconcile.Request {
	return withPeers(ctx, r.Client, tenantsUsingSecret(ctx, r.Client, o))
}

// peersOf maps a Tenant, or its trust bundle, to the Tenants that
// replicate to it.
func (r *TenantReconciler) peersOf(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetName()
	if _, ok := o.(*v1.Tenant); !ok {
		if name = o.GetLabels()[builders.LabelTenant]; name == "" {
			return nil
		}
	}
	self := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	return withPeers(ctx, r.Client, self)[1:]
}

func tenantsUsingSecret(ctx context.Context, c client.Client, o client.Object) []reconcile.Request {
	if name, ok := o.GetLabels()[builders.LabelTenant]; ok {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	}
	list := &v1.TenantList{}
	if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if tenantUsesSecret(&list.Items[i], o.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

func tenantUsesSecret(t *v1.Tenant, name string) bool {
	if builders.RootSecretName(t) == name || builders.TLSSecretName(t) == name || builders.TLSSourceSecretName(t) == name ||
		builders.EncryptionKeysSecretName(t) == name {
		return true
	}
	for _, u := range t.Spec.Users {
		if u.SecretRef.Name == name {
			return true
		}
	}
	for _, tg := range t.Spec.Notifications.Targets {
		if tg.CredentialsSecretRef != nil && tg.CredentialsSecretRef.Name == name {
			return true
		}
	}
	for _, rm := range t.Spec.Replication.Remotes {
		if rm.CredentialsSecretRef != nil && rm.CredentialsSecretRef.Name == name {
			return true
		}
	}
	return false
}

// withPeers adds to requests for Tenants those of the Tenants that name
// them as replication remotes (in any namespace): their targets carry the
// peers' endpoint, CA and root credentials.
func withPeers(ctx context.Context, c client.Client, reqs []reconcile.Request) []reconcile.Request {
	if len(reqs) == 0 {
		return reqs
	}
	list := &v1.TenantList{}
	if err := c.List(ctx, list); err != nil {
		return reqs
	}
	out := reqs
	for i := range list.Items {
		for _, rm := range list.Items[i].Spec.Replication.Remotes {
			if rm.TenantRef == nil {
				continue
			}
			for _, q := range reqs {
				if q.Namespace == rm.TenantRef.Namespace && q.Name == rm.TenantRef.Name {
					out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
		}
	}
	return out
}
