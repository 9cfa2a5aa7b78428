package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete

// GatewayPoolReconciler runs a GatewayPool as a Deployment on a shared
// ReadWriteMany claim, with its Service, PDB and optional HPA.
type GatewayPoolReconciler struct{ Reconcilers }

type gatewayScope struct {
	pool       *v1.GatewayPool
	tenant     *v1.Tenant
	log        logr.Logger
	engine     builders.Engine
	deployment *appsv1.Deployment
	claimOK    bool
	waitReason string
	waitMsg    string
	// pods is why gateways cannot start, when they cannot.
	pods podTrouble
	// requeue is when to look again (pods not ready).
	requeue reconcile.Result
}

func (s *gatewayScope) wait(reason, msg string) error {
	s.waitReason, s.waitMsg = reason, msg
	return errWaiting
}

// Reconcile converges the gateway pool; status once.
func (r *GatewayPoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	g := &v1.GatewayPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, g); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s := &gatewayScope{pool: g, log: log.FromContext(ctx)}
	before := g.Status.DeepCopy()
	if !g.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(g, Finalizer) {
		if err := r.Client.Update(ctx, g); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}
	var stepErr error
	for _, step := range []func(context.Context, *gatewayScope) error{
		r.reconcileTenant,
		r.reconcileClaim,
		r.reconcileCredentials,
		r.reconcileDeployment,
		r.reconcilePods,
		r.reconcileService,
		r.reconcileAutoscaler,
		r.reconcileDisruptionBudget,
	} {
		if stepErr = step(ctx, s); stepErr != nil {
			break
		}
	}
	computeGatewayPoolStatus(g, s, r.Config.ClusterDomain)
	if !equality.Semantic.DeepEqual(before, &g.Status) {
		if err := r.Client.Status().Update(ctx, g); err != nil {
			return requeueOnConflict(fmt.Errorf("writing status: %w", err))
		}
	}
	recordConditionEvents(r.Recorder, g, before.Conditions, g.Status.Conditions,
		v1.ConditionTenantFound, v1.ConditionReady, v1.ConditionDegraded)
	if stepErr != nil && !errors.Is(stepErr, errWaiting) {
		return reconcile.Result{}, stepErr
	}
	return s.requeue, nil
}

// reconcilePods looks at the pods while gateways are not all ready, for
// those the kubelet cannot start, and again every Config.PodPoll while a
// pod is not ready.
func (r *GatewayPoolReconciler) reconcilePods(ctx context.Context, s *gatewayScope) error {
	d := s.deployment
	if d == nil || d.Spec.Replicas == nil || d.Status.ReadyReplicas >= *d.Spec.Replicas {
		return nil
	}
	trouble, waiting, err := readPodTrouble(ctx, r.APIReader, s.pool.Namespace, builders.PoolSelector(s.tenant.Name, s.pool.Name, builders.ComponentGateway))
	if waiting {
		s.requeue.RequeueAfter = r.Config.podPoll()
	}
	s.pods = trouble
	return err
}

func (r *GatewayPoolReconciler) reconcileTenant(ctx context.Context, s *gatewayScope) error {
	g := s.pool
	t, err := findTenant(ctx, r.Client, g.Namespace, g.Spec.TenantRef.Name)
	if err != nil {
		return err
	}
	if t == nil {
		msg := fmt.Sprintf("Tenant %q does not exist in namespace %s; the pool starts when it is created", g.Spec.TenantRef.Name, g.Namespace)
		setCondition(&g.Status.Conditions, g.Generation, v1.ConditionTenantFound, false, v1.ReasonWaitingForTenant, msg)
		return s.wait(v1.ReasonWaitingForTenant, msg)
	}
	s.tenant = t
	setCondition(&g.Status.Conditions, g.Generation, v1.ConditionTenantFound, true, v1.ReasonReconciled, "Tenant "+t.Name+" found")
	return nil
}

// reconcileClaim creates the claim of a volume template (without an owner:
// deletionPolicy decides its fate) or checks the named one exists.
func (r *GatewayPoolReconciler) reconcileClaim(ctx context.Context, s *gatewayScope) error {
	name := builders.GatewayClaim(s.tenant, s.pool)
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.pool.Namespace, Name: name}, pvc)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading claim %s: %w", name, err)
	}
	if err == nil {
		s.claimOK = true
		return nil
	}
	want := builders.GatewayPVC(s.tenant, s.pool)
	if want == nil {
		// The Deployment is still created: its pods start once the claim
		// appears, and the condition says what is missing.
		s.claimOK = false
		return nil
	}
	if err := r.Client.Create(ctx, want); err != nil {
		return fmt.Errorf("creating claim %s: %w", name, err)
	}
	r.Recorder.Eventf(s.pool, want, corev1.EventTypeNormal, "createdClaim", "Create", "created ReadWriteMany claim %s", name)
	s.claimOK = true
	return nil
}

func (r *GatewayPoolReconciler) reconcileCredentials(ctx context.Context, s *gatewayScope) error {
	_, hash, err := rootCredentials(ctx, r.APIReader, s.tenant)
	if err != nil {
		return s.wait(v1.ReasonSecretMissing, err.Error())
	}
	s.engine = builders.EngineFor(s.tenant, r.Config.DefaultImage, hash)
	return nil
}

func (r *GatewayPoolReconciler) reconcileDeployment(ctx context.Context, s *gatewayScope) error {
	d := builders.GatewayDeployment(s.tenant, s.pool, s.engine)
	ops := deploymentOps
	if s.pool.Spec.Autoscaling != nil {
		ops = autoscaledDeploymentOps(d)
	}
	op, err := apply(ctx, r.Client, r.Scheme, s.pool, d, ops)
	if err != nil {
		return err
	}
	if op != opNone {
		r.Recorder.Eventf(s.pool, d, corev1.EventTypeNormal, string(op)+"Deployment", "Apply", "%s Deployment %s", op, d.Name)
	}
	live := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.deployment = live
	return nil
}

func (r *GatewayPoolReconciler) reconcileService(ctx context.Context, s *gatewayScope) error {
	_, err := apply(ctx, r.Client, r.Scheme, s.pool, builders.GatewayService(s.tenant, s.pool), serviceOps)
	return err
}

func (r *GatewayPoolReconciler) reconcileAutoscaler(ctx context.Context, s *gatewayScope) error {
	hpa := builders.GatewayHPA(s.tenant, s.pool)
	if hpa == nil {
		old := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{
			Namespace: s.pool.Namespace, Name: builders.GatewayName(s.tenant.Name, s.pool.Name)}}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(old), old); err == nil && metav1.IsControlledBy(old, s.pool) {
			return client.IgnoreNotFound(r.Client.Delete(ctx, old))
		}
		return nil
	}
	_, err := apply(ctx, r.Client, r.Scheme, s.pool, hpa, hpaOps)
	return err
}

func (r *GatewayPoolReconciler) reconcileDisruptionBudget(ctx context.Context, s *gatewayScope) error {
	_, err := apply(ctx, r.Client, r.Scheme, s.pool, builders.GatewayPDB(s.tenant, s.pool), pdbOps)
	return err
}

// reconcileDelete deletes the claim the operator created when the tenant's
// deletionPolicy is Delete. A named claim (volume.claimName) is the user's
// and is never deleted.
func (r *GatewayPoolReconciler) reconcileDelete(ctx context.Context, s *gatewayScope) error {
	g := s.pool
	if !controllerutil.ContainsFinalizer(g, Finalizer) {
		return nil
	}
	t, err := findTenant(ctx, r.Client, g.Namespace, g.Spec.TenantRef.Name)
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: builders.GatewayName(g.Spec.TenantRef.Name, g.Name)}}
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
		return fmt.Errorf("deleting Deployment: %w", err)
	}
	if t != nil && t.Spec.DeletionPolicy == v1.DeletionPolicyDelete && g.Spec.Volume.ClaimName == "" {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: builders.GatewayClaimName(t.Name, g.Name)}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, pvc)); err != nil {
			return fmt.Errorf("deleting claim: %w", err)
		}
		r.Recorder.Eventf(g, nil, corev1.EventTypeNormal, "ClaimDeleted", "Delete", "deleted claim %s (deletionPolicy Delete)", pvc.Name)
	}
	controllerutil.RemoveFinalizer(g, Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, g))
}

// SetupWithManager: the pool, what it owns, its Tenant, the claim it mounts
// and the root Secret (rotation rolls the gateways).
func (r *GatewayPoolReconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		For(&v1.GatewayPool{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.tenantToPools)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimToPools)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToPools)).
		Named("gatewaypool").
		Complete(r)
}

func (r *GatewayPoolReconciler) tenantToPools(ctx context.Context, o client.Object) []reconcile.Request {
	return poolsOfTenant(ctx, r.Client, &v1.GatewayPoolList{}, o.GetNamespace(), o.GetName())
}

func (r *GatewayPoolReconciler) secretToPools(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, t := range tenantsUsingSecret(ctx, r.Client, o) {
		out = append(out, poolsOfTenant(ctx, r.Client, &v1.GatewayPoolList{}, t.Namespace, t.Name)...)
	}
	return out
}

// claimToPools wakes gateway pools waiting for a named claim.
func (r *GatewayPoolReconciler) claimToPools(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1.GatewayPoolList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		g := &list.Items[i]
		if g.Spec.Volume.ClaimName == o.GetName() || strings.HasSuffix(o.GetName(), "-"+g.Name+"-data") {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(g)})
		}
	}
	return out
}

// gatewaySelector is the label selector string of the scale subresource.
func gatewaySelector(t, pool string) string {
	return labels.SelectorFromSet(builders.PoolSelector(t, pool, builders.ComponentGateway)).String()
}
