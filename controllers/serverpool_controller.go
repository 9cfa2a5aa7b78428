package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
	"github.com/strata-storage/strata/internal/placement"
)

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csistoragecapacities,verbs=get;list;watch

// ServerPoolReconciler places a ServerPool and runs it as StatefulSets.
type ServerPoolReconciler struct{ Reconcilers }

type poolScope struct {
	pool   *v1.ServerPool
	tenant *v1.Tenant
	log    logr.Logger
	plan   placement.Plan
	engine builders.Engine
	root   [2]string
	ca     []byte
	sets   []appsv1.StatefulSet
	drives *v1.DriveCounts
	// poolState is the engine's state of the pool ("" when not read).
	poolState string
	// deletionRefused says why a deleted pool keeps running.
	deletionRefused string
	created         bool // a StatefulSet of the pool exists
	requeue         reconcile.Result
	rollout         rolloutState
	// waitReason/waitMessage say what a stopped pass waits for.
	waitReason, waitMessage string
	// pods is why servers cannot start, when they cannot.
	pods podTrouble
}

func (s *poolScope) requeueWithin(d time.Duration) {
	if d > 0 && (s.requeue.RequeueAfter == 0 || d < s.requeue.RequeueAfter) {
		s.requeue.RequeueAfter = d
	}
}

func (s *poolScope) wait(reason, message string) error {
	s.waitReason, s.waitMessage = reason, message
	return errWaiting
}

// Reconcile places the pool and converges its workloads; status once.
func (r *ServerPoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1.ServerPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s := &poolScope{pool: p, log: log.FromContext(ctx)}
	before := p.Status.DeepCopy()
	if !p.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(p, Finalizer) {
			return reconcile.Result{}, nil
		}
		// Without the webhook (or past it) a pool that may hold objects
		// is not torn down: it keeps serving, Degraded with the reason,
		// until it may go.
		t, err := findTenant(ctx, r.Client, p.Namespace, p.Spec.TenantRef.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if s.deletionRefused = builders.PoolDeletionRefusal(p, t, false); s.deletionRefused == "" {
			return reconcile.Result{}, r.reconcileDelete(ctx, s)
		}
	} else if controllerutil.AddFinalizer(p, Finalizer) {
		if err := r.Client.Update(ctx, p); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}
	var stepErr error
	for _, step := range []func(context.Context, *poolScope) error{
		r.reconcileTenant,
		r.reconcilePlacement,
		r.reconcileTopologyMembership,
		r.reconcileCredentials,
		r.reconcileStatefulSets,
		r.reconcilePods,
		r.reconcileRollout,
		r.reconcileDisruptionBudget,
		r.reconcileClaims,
		r.reconcileDrives,
	} {
		if stepErr = step(ctx, s); stepErr != nil {
			break
		}
	}
	computeServerPoolStatus(p, s)
	if !equality.Semantic.DeepEqual(before, &p.Status) {
		if err := r.Client.Status().Update(ctx, p); err != nil {
			return requeueOnConflict(fmt.Errorf("writing status: %w", err))
		}
	}
	r.recordPoolTransitions(p, before.Conditions, p.Status.Conditions)
	if stepErr != nil && !errors.Is(stepErr, errWaiting) {
		return reconcile.Result{}, stepErr
	}
	return s.requeue, nil
}

func (r *ServerPoolReconciler) recordPoolTransitions(obj client.Object, before, after []metav1.Condition) {
	recordConditionEvents(r.Recorder, obj, before, after,
		v1.ConditionTenantFound, v1.ConditionStorageReady, v1.ConditionReady, v1.ConditionDegraded)
	// A drain, a decommission and a roll-out narrated by their steps.
	recordStepEvents(r.Recorder, obj, before, after, v1.ConditionProgressing, v1.ConditionUpgrading)
}

// reconcileTenant: the pool waits (no requeue; the Tenant watch wakes it)
// until its Tenant exists.
func (r *ServerPoolReconciler) reconcileTenant(ctx context.Context, s *poolScope) error {
	t, err := findTenant(ctx, r.Client, s.pool.Namespace, s.pool.Spec.TenantRef.Name)
	if err != nil {
		return err
	}
	p := s.pool
	if t == nil {
		msg := fmt.Sprintf("Tenant %q does not exist in namespace %s; the pool starts when it is created", p.Spec.TenantRef.Name, p.Namespace)
		setCondition(&p.Status.Conditions, p.Generation, v1.ConditionTenantFound, false, v1.ReasonWaitingForTenant, msg)
		return s.wait(v1.ReasonWaitingForTenant, msg)
	}
	s.tenant = t
	setCondition(&p.Status.Conditions, p.Generation, v1.ConditionTenantFound, true, v1.ReasonReconciled, "Tenant "+t.Name+" found")
	return nil
}

func findTenant(ctx context.Context, c client.Client, ns, name string) (*v1.Tenant, error) {
	t := &v1.Tenant{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Tenant %s: %w", name, err)
	}
	return t, nil
}

// reconcilePods looks at the pods while servers are not all ready, for
// those the kubelet cannot start, and again every Config.PodPoll while a
// pod is not ready.
func (r *ServerPoolReconciler) reconcilePods(ctx context.Context, s *poolScope) error {
	var ready int32
	for _, sts := range s.sets {
		ready += sts.Status.ReadyReplicas
	}
	if len(s.sets) == 0 || ready >= s.pool.Spec.Servers {
		return nil
	}
	trouble, waiting, err := readPodTrouble(ctx, r.APIReader, s.pool.Namespace, builders.PoolSelector(s.tenant.Name, s.pool.Name, builders.ComponentServer))
	if waiting {
		s.requeueWithin(r.Config.podPoll())
	}
	s.pods = trouble
	return err
}

// reconcilePlacement runs placement on today's cluster facts. A refused
// pool that has no StatefulSet yet stops here: nothing is half-created.
func (r *ServerPoolReconciler) reconcilePlacement(ctx context.Context, s *poolScope) error {
	p := s.pool
	var facts placement.Facts
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	classes := &storagev1.StorageClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return fmt.Errorf("listing StorageClasses: %w", err)
	}
	caps := &storagev1.CSIStorageCapacityList{}
	if err := r.Client.List(ctx, caps); err != nil {
		return fmt.Errorf("listing CSIStorageCapacities: %w", err)
	}
	facts = placement.Facts{Nodes: nodes.Items, StorageClasses: classes.Items, Capacities: caps.Items}

	sets := &appsv1.StatefulSetList{}
	if err := r.Client.List(ctx, sets, client.InNamespace(p.Namespace),
		client.MatchingLabels(builders.PoolSelector(s.tenant.Name, p.Name, builders.ComponentServer))); err != nil {
		return fmt.Errorf("listing StatefulSets: %w", err)
	}
	s.sets = sets.Items
	s.created = len(sets.Items) > 0

	in := placement.Input{Spec: p.Spec, PodLabels: builders.PoolSelector(s.tenant.Name, p.Name, builders.ComponentServer)}
	if l := p.Status.Layout; l != nil && l.SetSize > 0 {
		in.Pinned = &placement.Erasure{SetSize: int(l.SetSize), Parity: int(l.Parity)}
	}
	if s.created && len(s.sets[0].Spec.VolumeClaimTemplates) > 0 {
		q := s.sets[0].Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
		in.ProvisionedSize = &q
	}
	s.plan = placement.Compute(in, facts)
	if s.plan.OK() {
		setCondition(&p.Status.Conditions, p.Generation, v1.ConditionStorageReady, true, v1.ReasonReconciled, placementSummary(&s.plan))
	} else {
		var msgs []string
		for _, pr := range s.plan.Problems {
			msgs = append(msgs, pr.Message)
		}
		setCondition(&p.Status.Conditions, p.Generation, v1.ConditionStorageReady, false, s.plan.Problems[0].Reason, strings.Join(msgs, "; "))
		if !s.created {
			// Watches on Nodes and StorageClasses bring us back.
			return s.wait(s.plan.Problems[0].Reason, strings.Join(msgs, "; "))
		}
	}
	if s.plan.Layout.SetSize > 0 && (s.plan.OK() || in.Pinned != nil) {
		p.Status.Layout = s.plan.LayoutStatus()
		p.Status.Tolerates = s.plan.Write.ToStatus()
	}
	return nil
}

func placementSummary(p *placement.Plan) string {
	return fmt.Sprintf("%d erasure set(s) of %d drives, parity %d, over %d failure domain(s); survives %d drive(s), %d server(s), %d domain(s) with writes",
		p.Layout.Sets, p.Layout.SetSize, p.Layout.Parity, p.Domains, p.Write.Drives, p.Write.Servers, p.Write.Domains)
}

// reconcileTopologyMembership: servers start only once the tenant's
// topology file lists the pool (the Tenant controller adds it after the
// layout appears in status).
func (r *ServerPoolReconciler) reconcileTopologyMembership(ctx context.Context, s *poolScope) error {
	if s.created {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.pool.Namespace, Name: builders.TopologyConfigMapName(s.tenant.Name)}, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading topology: %w", err)
	}
	if err != nil || !builders.PoolInTopology(cm, s.pool.Name) {
		return s.wait(v1.ReasonWaitingForTopology,
			fmt.Sprintf("waiting for Tenant %s to list the pool in ConfigMap %s", s.tenant.Name, builders.TopologyConfigMapName(s.tenant.Name)))
	}
	return nil
}

// reconcileCredentials reads the root keys (pods mount them; a hash of
// them rolls pods when they change) and the tenant's CA for the admin API.
func (r *ServerPoolReconciler) reconcileCredentials(ctx context.Context, s *poolScope) error {
	root, hash, err := rootCredentials(ctx, r.APIReader, s.tenant)
	if err != nil {
		return s.wait(v1.ReasonSecretMissing, err.Error())
	}
	s.root = root
	s.engine = builders.EngineFor(s.tenant, r.Config.DefaultImage, hash)
	if name := builders.TLSSecretName(s.tenant); name != "" {
		sec := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.tenant.Namespace, Name: name}, sec); err == nil {
			s.ca = sec.Data["ca.crt"]
		}
	}
	return nil
}

// rootCredentials reads the tenant's root keys and hashes them.
func rootCredentials(ctx context.Context, c client.Reader, t *v1.Tenant) ([2]string, string, error) {
	sec := &corev1.Secret{}
	name := builders.RootSecretName(t)
	if err := c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, sec); err != nil {
		return [2]string{}, "", fmt.Errorf("waiting for the root credentials Secret %s of Tenant %s: %w", name, t.Name, err)
	}
	a, sk, err := builders.CredentialsIn(sec)
	if err != nil {
		return [2]string{}, "", err
	}
	// Not the notification targets: the engine re-reads their file when
	// the kubelet updates it (internal/builders EngineFor).
	h := sha256.New()
	h.Write([]byte(a + "\x00" + sk))
	return [2]string{a, sk}, hex.EncodeToString(h.Sum(nil)[:8]), nil
}

func (r *ServerPoolReconciler) reconcileStatefulSets(ctx context.Context, s *poolScope) error {
	p := s.pool
	var live []appsv1.StatefulSet
	for _, g := range s.plan.Groups {
		sts := builders.ServerStatefulSet(s.tenant, p, g, s.plan.Claims, s.engine)
		op, err := apply(ctx, r.Client, r.Scheme, p, sts, statefulSetOps)
		if err != nil {
			return err
		}
		if op != opNone {
			r.Recorder.Eventf(p, sts, corev1.EventTypeNormal, string(op)+"StatefulSet", "Apply", "%s StatefulSet %s (%d servers)", op, sts.Name, g.Replicas)
		}
		cur := &appsv1.StatefulSet{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sts), cur); err == nil {
			live = append(live, *cur)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	s.sets = live
	s.created = true
	return nil
}

func (r *ServerPoolReconciler) reconcileDisruptionBudget(ctx context.Context, s *poolScope) error {
	pdb := builders.ServerPDB(s.tenant, s.pool, s.plan.Write.Servers)
	_, err := apply(ctx, r.Client, r.Scheme, s.pool, pdb, pdbOps)
	return err
}

// reconcileClaims grows existing drives when storage.size grew and the
// classes allow it (StatefulSet claim templates cannot change).
func (r *ServerPoolReconciler) reconcileClaims(ctx context.Context, s *poolScope) error {
	for _, pr := range s.plan.Problems {
		if pr.Reason == v1.ReasonExpansionNotAllowed {
			return nil
		}
	}
	want := s.pool.Spec.Storage.Size
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, pvcs, client.InNamespace(s.pool.Namespace),
		client.MatchingLabels(builders.PoolSelector(s.tenant.Name, s.pool.Name, builders.ComponentServer))); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		cur := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		// Only bound claims can grow; an unbound one is grown once bound.
		if cur.Cmp(want) >= 0 || pvc.Status.Phase != corev1.ClaimBound {
			continue
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := r.Client.Update(ctx, pvc); err != nil {
			return fmt.Errorf("growing claim %s: %w", pvc.Name, err)
		}
		r.Recorder.Eventf(s.pool, pvc, corev1.EventTypeNormal, "DriveExpanding", "Resize", "growing drive %s from %s to %s", pvc.Name, cur.String(), want.String())
	}
	return nil
}

// reconcileDrives reads drive states from the admin API once servers run.
func (r *ServerPoolReconciler) reconcileDrives(ctx context.Context, s *poolScope) error {
	ready := int32(0)
	for _, sts := range s.sets {
		ready += sts.Status.ReadyReplicas
	}
	if ready == 0 || r.Config.Engine == nil {
		return nil
	}
	s.requeueWithin(r.Config.EngineRefresh)
	t := s.tenant
	info, err := r.Config.Engine.Info(ctx, engine.Endpoint{
		URL:       builders.ServiceURL(t, builders.S3ServiceName(t.Name), r.Config.ClusterDomain),
		AccessKey: s.root[0], SecretKey: s.root[1], CA: s.ca,
	})
	if err != nil {
		s.log.V(1).Info("admin API not reachable", "error", err.Error())
		return nil
	}
	for _, ip := range info.Pools {
		if ip.Name != s.pool.Name {
			continue
		}
		d := &v1.DriveCounts{}
		for _, dr := range ip.Drives {
			switch dr.State {
			case engine.DriveOnline:
				d.Online++
			case engine.DriveHealing:
				d.Healing++
			default:
				d.Offline++
			}
		}
		s.drives, s.poolState = d, ip.State
	}
	if s.poolState == v1.PoolStateDraining || (s.pool.Spec.Decommission && s.poolState != v1.PoolStateDecommissioned) {
		s.requeueWithin(drainPoll) // report a drain's end soon
	}
	return nil
}

// drainPoll is how often a draining pool's state is read from the engine.
const drainPoll = 5 * time.Second

// reconcileDelete applies the tenant's deletionPolicy to the pool's drives.
// Without a Tenant (already gone, or never there) claims are kept.
func (r *ServerPoolReconciler) reconcileDelete(ctx context.Context, s *poolScope) error {
	p := s.pool
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	t, err := findTenant(ctx, r.Client, p.Namespace, p.Spec.TenantRef.Name)
	if err != nil {
		return err
	}
	sel := client.MatchingLabels(builders.PoolSelector(p.Spec.TenantRef.Name, p.Name, builders.ComponentServer))
	// Owner references would collect these too; deleting them here stops
	// the servers before their claims go.
	if err := r.Client.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(p.Namespace), sel,
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return fmt.Errorf("deleting StatefulSets: %w", err)
	}
	if t != nil && t.Spec.DeletionPolicy == v1.DeletionPolicyDelete {
		if err := r.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(p.Namespace), sel); err != nil {
			return fmt.Errorf("deleting drives: %w", err)
		}
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "DrivesDeleted", "Delete", "deleted the pool's claims (deletionPolicy Delete)")
	}
	controllerutil.RemoveFinalizer(p, Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, p))
}

// SetupWithManager: the pool, what it owns, its Tenant, the topology file,
// and the cluster facts placement reads.
func (r *ServerPoolReconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		For(&v1.ServerPool{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tenantToPools)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.topologyToPools),
			builder.WithPredicates(predicate.NewPredicateFuncs(isTopologyConfigMap))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allPools), builder.WithPredicates(nodePlacementChanged)).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.allPools)).
		Watches(&storagev1.CSIStorageCapacity{}, handler.EnqueueRequestsFromMapFunc(r.allPools)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToPools)).
		Named("serverpool").
		Complete(r)
}

func isTopologyConfigMap(o client.Object) bool {
	t, ok := o.GetLabels()[builders.LabelTenant]
	return ok && o.GetName() == builders.TopologyConfigMapName(t)
}

// nodePlacementChanged ignores node status heartbeats: only what placement
// reads (labels, schedulability, existence) matters.
var nodePlacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, b := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return a.Spec.Unschedulable != b.Spec.Unschedulable || !equality.Semantic.DeepEqual(a.Labels, b.Labels)
	},
}

func (r *ServerPoolReconciler) tenantToPools(ctx context.Context, o client.Object) []reconcile.Request {
	return poolsOfTenant(ctx, r.Client, &v1.ServerPoolList{}, o.GetNamespace(), o.GetName())
}

func (r *ServerPoolReconciler) topologyToPools(ctx context.Context, o client.Object) []reconcile.Request {
	return poolsOfTenant(ctx, r.Client, &v1.ServerPoolList{}, o.GetNamespace(), o.GetLabels()[builders.LabelTenant])
}

func (r *ServerPoolReconciler) secretToPools(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, t := range tenantsUsingSecret(ctx, r.Client, o) {
		out = append(out, poolsOfTenant(ctx, r.Client, &v1.ServerPoolList{}, t.Namespace, t.Name)...)
	}
	return out
}

func (r *ServerPoolReconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &v1.ServerPoolList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// poolsOfTenant lists the pools (ServerPoolList or GatewayPoolList) whose
// spec.tenantRef names the tenant.
func poolsOfTenant(ctx context.Context, c client.Client, list client.ObjectList, ns, tenant string) []reconcile.Request {
	if tenant == "" {
		return nil
	}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{indexTenantRef: tenant}); err != nil {
		return nil
	}
	items, _ := meta.ExtractList(list)
	out := make([]reconcile.Request, 0, len(items))
	for _, it := range items {
		o := it.(client.Object)
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return out
}
