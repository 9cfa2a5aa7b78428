package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/internal/engine"
)

// +kubebuilder:rbac:groups=storage.strata.dev,resources=bucketclaims;bucketaccesses,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=storage.strata.dev,resources=bucketclaims/status;bucketaccesses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=storage.strata.dev,resources=bucketclaims/finalizers;bucketaccesses/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// BucketClaimReconciler makes a claim's bucket in its Tenant, keeps its
// versioning, object lock and quota, reports its usage, and applies the
// deletion policy when the claim goes.
type BucketClaimReconciler struct {
	Reconcilers
	// usageRead remembers, per claim UID, when its usage was last read:
	// the figures are written to status only when they change, so an idle
	// claim costs the API server nothing.
	usageRead sync.Map
	// applied remembers, per claim UID, what was last applied to its
	// bucket and when (claimApplied): a claim whose rules resolve otherwise
	// (its Tenant's targets changed), or last applied longer than
	// Config.BucketsResync ago, is applied again. After a restart each
	// claim is applied once.
	applied sync.Map
}

// claimApplied is what a pass applied to a claim's bucket: its
// notifications as they resolved (appliedNotifications), and when.
type claimApplied struct {
	notifications string
	at            time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *BucketClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &v1.BucketClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := c.Status.DeepCopy()
	if !c.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, c, before)
	}
	if controllerutil.AddFinalizer(c, ClaimFinalizer) {
		if err := r.Client.Update(ctx, c); err != nil {
			return requeueOnConflict(err)
		}
	}
	retry, err := r.reconcileBucket(ctx, c)
	if werr := r.writeClaimStatus(ctx, c, before); werr != nil {
		return requeueOnConflict(werr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

func (r *BucketClaimReconciler) writeClaimStatus(ctx context.Context, c *v1.BucketClaim, before *v1.BucketClaimStatus) error {
	if equality.Semantic.DeepEqual(before, &c.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, c); err != nil {
		return err
	}
	recordConditionEvents(r.Recorder, c, before.Conditions, c.Status.Conditions, v1.ConditionReady)
	return nil
}

// refuse records why the claim is not served; the retry comes from the
// refusal (0: a watch brings the claim back).
func refuse(conds *[]metav1.Condition, generation int64, err error) (time.Duration, error) {
	var ref *claimRefusal
	if !errors.As(err, &ref) {
		return 0, err
	}
	setCondition(conds, generation, v1.ConditionReady, false, ref.reason, ref.message)
	return ref.retry, nil
}

func (r *BucketClaimReconciler) reconcileBucket(ctx context.Context, c *v1.BucketClaim) (time.Duration, error) {
	ct, err := r.tenantFor(ctx, c.Spec.TenantRef, c.Namespace)
	if err != nil {
		c.Status.BucketReady = false
		return refuse(&c.Status.Conditions, c.Generation, err)
	}
	name := bucketNameOf(c)
	c.Status.BucketName, c.Status.Endpoint = name, ct.ep.URL
	interval := r.Config.claimsUsageInterval()
	// The notification rules resolve against the Tenant's targets at every
	// pass (no request): a change of those targets is applied to a claim
	// that is Ready, and one that loses its target says so.
	notes, notesErr := claimNotifications(c, ct.tenant)
	applied := claimApplied{notifications: appliedNotifications(notes), at: r.Config.Now()}
	last, known := r.applied.Load(c.UID) // not known after a restart
	ready := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != c.Generation || notesErr != nil || !known ||
		last.(claimApplied).notifications != applied.notifications || applied.at.Sub(last.(claimApplied).at) >= r.Config.bucketsResync() {
		b := engine.ClaimBucket{Bucket: engine.Bucket{Name: name, Versioning: c.Spec.Versioning, Notifications: notes},
			Owner: string(c.UID), OwnerName: c.Namespace + "/" + c.Name, Quota: quotaOf(c)}
		if l := c.Spec.ObjectLock; l != nil {
			b.ObjectLock = &engine.ObjectLock{Mode: l.Mode, Days: l.Days}
		}
		err := r.Config.Engine.EnsureClaimBucket(ctx, ct.ep, b)
		switch {
		case errors.Is(err, engine.ErrTargetNotLoaded):
			// The bucket is as specified but for its notifications.
			c.Status.BucketReady = true
			setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonClaimFailed,
				err.Error()+" (the tenant's servers take a change of its spec.notifications.targets as the kubelet updates their targets file, within a minute or two; retried every 30 s)")
			return 30 * time.Second, nil
		case errors.Is(err, engine.ErrRefused):
			c.Status.BucketReady = true
			setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonClaimInvalid, err.Error())
			return interval, nil
		case errors.Is(err, engine.ErrBucketTaken):
			c.Status.BucketReady = false
			setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonClaimInvalid,
				fmt.Sprintf("bucket %s exists in Tenant %s/%s and was not made by this claim: choose another spec.bucketName (or leave it empty for one made of the namespace and name)",
					name, ct.tenant.Namespace, ct.tenant.Name))
			return interval, nil
		case err != nil:
			c.Status.BucketReady = false
			setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonClaimFailed, err.Error())
			return 30 * time.Second, nil
		}
		c.Status.BucketReady = true
		if notesErr != nil {
			// The bucket is made; its rules name a target the Tenant
			// does not have.
			setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonClaimInvalid, notesErr.Error())
			return interval, nil
		}
		r.applied.Store(c.UID, applied)
		c.Status.ObservedGeneration = c.Generation
		setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, true, v1.ReasonReconciled,
			fmt.Sprintf("bucket %s is ready in Tenant %s/%s%s", name, ct.tenant.Namespace, ct.tenant.Name, quotaText(b.Quota)))
	}
	r.refreshUsage(ctx, c, ct, interval)
	return min(interval, r.Config.bucketsResync()), nil
}

// appliedNotifications names what a claim's notifications resolved to
// ("" for none kept), to tell when they must be applied again (a new
// generation applies them anyway).
func appliedNotifications(n *engine.Notifications) string {
	if n == nil {
		return ""
	}
	return fmt.Sprintf("%+v", n.Rules)
}

// claimNotifications is the notification configuration a claim asks for
// (nil: none kept), its targets named by the Tenant's
// spec.notifications.targets.
func claimNotifications(c *v1.BucketClaim, t *v1.Tenant) (*engine.Notifications, error) {
	return bucketNotifications(c.Spec.Notifications, t, "spec.notifications")
}

// bucketNotifications turns a bucket's notification rules (field: where
// they are in the spec, for messages) into the configuration the engine
// client applies, each target one of the Tenant's; a target the Tenant
// does not have is an error that says which it has. nil: none kept.
func bucketNotifications(spec *v1.BucketNotifications, t *v1.Tenant, field string) (*engine.Notifications, error) {
	if spec == nil {
		return nil, nil
	}
	n := &engine.Notifications{Rules: []engine.NotificationRule{}}
	for i, rule := range spec.Rules {
		var target *v1.NotificationTargetSpec
		var names []string
		for j := range t.Spec.Notifications.Targets {
			tt := &t.Spec.Notifications.Targets[j]
			names = append(names, tt.Name)
			if tt.Name == rule.Target {
				target = tt
			}
		}
		if target == nil {
			has := "none"
			if len(names) > 0 {
				has = strings.Join(names, ", ")
			}
			return nil, fmt.Errorf("%s.rules[%d].target: Tenant %s/%s has no notification target %q (its spec.notifications.targets: %s)",
				field, i, t.Namespace, t.Name, rule.Target, has)
		}
		id := rule.ID
		if id == "" {
			id = fmt.Sprintf("%s-%d", rule.Target, i+1)
		}
		n.Rules = append(n.Rules, engine.NotificationRule{ID: id, Events: rule.Events, Prefix: rule.Prefix, Suffix: rule.Suffix,
			ARN: notifytargets.Target{ID: target.Name, Type: target.Type}.ARN(ClaimRegion)})
	}
	return n, nil
}

// refreshUsage reads the bucket's usage at most once an interval, and
// changes status only when the figures changed.
func (r *BucketClaimReconciler) refreshUsage(ctx context.Context, c *v1.BucketClaim, ct *claimTenant, interval time.Duration) {
	now := r.Config.Now()
	if last, ok := r.usageRead.Load(c.UID); ok && now.Sub(last.(time.Time)) < interval && c.Status.Usage != nil {
		return
	}
	u, err := r.Config.Engine.BucketUsage(ctx, ct.ep, c.Status.BucketName)
	if err != nil {
		return // the figures stay as last read; the next interval tries again
	}
	r.usageRead.Store(c.UID, now)
	if cur := c.Status.Usage; cur == nil || cur.Bytes != u.Bytes || cur.Objects != u.Objects {
		c.Status.Usage = &v1.BucketUsage{Bytes: u.Bytes, Objects: u.Objects, Updated: metav1.NewTime(now)}
	}
}

func quotaOf(c *v1.BucketClaim) engine.Quota {
	var q engine.Quota
	if cq := c.Spec.Quota; cq != nil {
		if cq.MaxSize != nil {
			q.Bytes = cq.MaxSize.Value()
		}
		if cq.MaxObjects != nil {
			q.Objects = *cq.MaxObjects
		}
	}
	return q
}

func quotaText(q engine.Quota) string {
	switch {
	case q.Bytes > 0 && q.Objects > 0:
		return fmt.Sprintf(", quota %d bytes and %d objects", q.Bytes, q.Objects)
	case q.Bytes > 0:
		return fmt.Sprintf(", quota %d bytes", q.Bytes)
	case q.Objects > 0:
		return fmt.Sprintf(", quota %d objects", q.Objects)
	}
	return ""
}

// reconcileDelete applies the deletion policy: Delete empties and deletes
// the bucket (retained objects hold the claim, and say so); Retain leaves
// it. A Tenant that is gone leaves nothing to do.
func (r *BucketClaimReconciler) reconcileDelete(ctx context.Context, c *v1.BucketClaim, before *v1.BucketClaimStatus) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, ClaimFinalizer) {
		return ctrl.Result{}, nil
	}
	if c.Spec.DeletionPolicy == v1.DeletionPolicyDelete && c.Status.BucketName != "" {
		deleted := false
		err := r.inLiveTenant(ctx, c.Spec.TenantRef.Namespace, c.Spec.TenantRef.Name, func(ep engine.Endpoint) error {
			deleted = true
			return r.Config.Engine.DeleteClaimBucket(ctx, ep, c.Status.BucketName, string(c.UID))
		})
		if err != nil {
			return r.stillDeleting(ctx, c, before, err)
		}
		if deleted {
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "BucketDeleted", "Delete", "deleted bucket %s and its objects (deletionPolicy Delete)", c.Status.BucketName)
		}
	}
	r.usageRead.Delete(c.UID)
	r.applied.Delete(c.UID)
	controllerutil.RemoveFinalizer(c, ClaimFinalizer)
	if err := r.Client.Update(ctx, c); err != nil {
		return requeueOnConflict(err)
	}
	return ctrl.Result{}, nil
}

// stillDeleting says why the claim cannot go yet and tries again later.
func (r *BucketClaimReconciler) stillDeleting(ctx context.Context, c *v1.BucketClaim, before *v1.BucketClaimStatus, err error) (ctrl.Result, error) {
	setCondition(&c.Status.Conditions, c.Generation, v1.ConditionReady, false, v1.ReasonDeleting, err.Error())
	if werr := r.writeClaimStatus(ctx, c, before); werr != nil {
		return requeueOnConflict(werr)
	}
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

// SetupWithManager watches claims, their Tenants and namespaces.
func (r *BucketClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	list := func() client.ObjectList { return &v1.BucketClaimList{} }
	items := func(l client.ObjectList) []client.Object {
		var out []client.Object
		for i := range l.(*v1.BucketClaimList).Items {
			out = append(out, &l.(*v1.BucketClaimList).Items[i])
		}
		return out
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.BucketClaim{}).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(claimsOfTenant(r.Client, list, items)), builder.WithPredicates(tenantClaimsChanged)).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(claimsInNamespace(r.Client, list, items)), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: claimWorkers}).
		Named("bucketclaim").Complete(r)
}
