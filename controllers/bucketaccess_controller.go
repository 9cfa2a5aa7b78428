package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

// indexAccessClaims indexes BucketAccesses by NAMESPACE/CLAIM for each
// claim they name.
const indexAccessClaims = "access.claims"

// Keys of the Secret (static keys) and ConfigMap (web identity) an access
// writes; AWS SDKs read the AWS_ ones from the environment (envFrom).
const (
	KeyAccessKeyID     = "AWS_ACCESS_KEY_ID"
	KeySecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	KeyEndpointURL     = "AWS_ENDPOINT_URL"
	KeyRegion          = "AWS_REGION"
	KeyRoleARN         = "AWS_ROLE_ARN"
	// KeySTSEndpointURL: the AWS SDKs' web identity providers ask STS at
	// this, and not at AWS_ENDPOINT_URL (aws-sdk-go-v2's did not, found
	// by the local cluster's pod).
	KeySTSEndpointURL = "AWS_ENDPOINT_URL_STS"
	KeyAudience       = "STRATA_STS_AUDIENCE"
	KeyBucketName     = "BUCKET_NAME"
	KeyBucketNames    = "BUCKET_NAMES"
	KeyCABundle       = "ca.crt"
)

// BucketAccessReconciler gives an access its IAM user and keys (in a
// Secret) or its role (assumed by a ServiceAccount through STS), with one
// inline policy reaching the claimed buckets; it rotates keys on request
// and deletes the user or role when the access goes.
type BucketAccessReconciler struct {
	Reconcilers
	// ensured remembers, per access UID, the user or role last made
	// (principalEnsured), so an unchanged access does not call the tenant
	// each pass, only every BucketsResync.
	ensured sync.Map
}

// principalEnsured is the hash of the user or role an access last made,
// and when.
type principalEnsured struct {
	hash string
	at   time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *BucketAccessReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &v1.BucketAccess{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := a.Status.DeepCopy()
	if !a.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, a, before)
	}
	if controllerutil.AddFinalizer(a, ClaimFinalizer) {
		if err := r.Client.Update(ctx, a); err != nil {
			return requeueOnConflict(err)
		}
	}
	retry, err := r.reconcileAccess(ctx, a)
	if err != nil {
		var ref *claimRefusal
		if !errors.As(err, &ref) {
			return ctrl.Result{}, err
		}
		a.Status.AccessGranted = false
		setCondition(&a.Status.Conditions, a.Generation, v1.ConditionReady, false, ref.reason, ref.message)
		retry = ref.retry
	}
	if werr := r.writeAccessStatus(ctx, a, before); werr != nil {
		return requeueOnConflict(werr)
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

func (r *BucketAccessReconciler) writeAccessStatus(ctx context.Context, a *v1.BucketAccess, before *v1.BucketAccessStatus) error {
	if equality.Semantic.DeepEqual(before, &a.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, a); err != nil {
		return err
	}
	recordConditionEvents(r.Recorder, a, before.Conditions, a.Status.Conditions, v1.ConditionReady)
	return nil
}

// claimedBuckets reads the claims an access names: their buckets and
// their one Tenant.
func (r *BucketAccessReconciler) claimedBuckets(ctx context.Context, a *v1.BucketAccess) ([]string, v1.ClaimTenantReference, error) {
	var buckets []string
	var ref v1.ClaimTenantReference
	for i, name := range a.Spec.BucketClaims {
		c := &v1.BucketClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, c)
		if apierrors.IsNotFound(err) {
			return nil, ref, &claimRefusal{reason: v1.ReasonWaitingForClaim, message: fmt.Sprintf("BucketClaim %s does not exist in namespace %s", name, a.Namespace)}
		}
		if err != nil {
			return nil, ref, err
		}
		if !c.Status.BucketReady || c.Status.BucketName == "" {
			return nil, ref, &claimRefusal{reason: v1.ReasonWaitingForClaim, message: fmt.Sprintf("the bucket of BucketClaim %s is not ready yet", name)}
		}
		if i > 0 && c.Spec.TenantRef != ref {
			return nil, ref, &claimRefusal{reason: v1.ReasonClaimInvalid, message: fmt.Sprintf(
				"BucketClaim %s is of Tenant %s/%s, %s of %s/%s: an access reaches buckets of one tenant; make one BucketAccess per tenant",
				name, c.Spec.TenantRef.Namespace, c.Spec.TenantRef.Name, a.Spec.BucketClaims[0], ref.Namespace, ref.Name)}
		}
		ref = c.Spec.TenantRef
		buckets = append(buckets, c.Status.BucketName)
	}
	return buckets, ref, nil
}

func (r *BucketAccessReconciler) reconcileAccess(ctx context.Context, a *v1.BucketAccess) (time.Duration, error) {
	buckets, ref, err := r.claimedBuckets(ctx, a)
	if err != nil {
		return 0, err
	}
	ct, err := r.tenantFor(ctx, ref, a.Namespace)
	if err != nil {
		return 0, err
	}
	policy := a.Spec.Policy
	if a.Spec.Role != "" {
		policy = rolePolicy(a.Spec.Role, buckets)
	} else if err := checkAccessPolicy(policy, buckets); err != nil {
		return 0, &claimRefusal{reason: v1.ReasonClaimInvalid, message: err.Error()}
	}
	a.Status.Buckets, a.Status.Tenant = buckets, ref.Namespace+"/"+ref.Name
	p := engine.Principal{Name: principalName(a), Path: principalPath(a.Namespace), Policy: policy}
	var what string
	if a.Spec.ServiceAccountName != "" {
		if what, err = r.grantRole(ctx, a, ct, p); err != nil {
			return 0, err
		}
	} else if what, err = r.grantKeys(ctx, a, ct, p); err != nil {
		return 0, err
	}
	a.Status.AccessGranted, a.Status.ObservedGeneration = true, a.Generation
	setCondition(&a.Status.Conditions, a.Generation, v1.ConditionReady, true, v1.ReasonReconciled,
		fmt.Sprintf("%s reaches bucket(s) %s of Tenant %s", what, strings.Join(buckets, ", "), a.Status.Tenant))
	return min(r.Config.claimsUsageInterval(), r.Config.bucketsResync()), nil
}

// ensure makes the user or role when it changed since it was last made,
// when BucketsResync has passed since (undoing changes made through IAM:
// the user or role deleted, its policy replaced), or after the operator
// restarted. keyGone: the user is made, but p.KeyID is no longer its key.
func (r *BucketAccessReconciler) ensure(ctx context.Context, a *v1.BucketAccess, ct *claimTenant, p engine.Principal) (arn string, keyGone bool, err error) {
	sum := sha256.Sum256([]byte(ct.ep.URL + "\x00" + p.Name + "\x00" + p.Path + "\x00" + p.Policy + "\x00" + p.Trust + "\x00" + p.KeyID))
	h := hex.EncodeToString(sum[:])
	now := r.Config.Now()
	if got, ok := r.ensured.Load(a.UID); ok && got.(principalEnsured).hash == h && a.Status.AccessGranted &&
		now.Sub(got.(principalEnsured).at) < r.Config.bucketsResync() {
		return a.Status.RoleARN, false, nil
	}
	arn, err = r.Config.Engine.EnsurePrincipal(ctx, ct.ep, p)
	keyGone = errors.Is(err, engine.ErrKeyGone)
	if err != nil && !keyGone {
		return "", false, &claimRefusal{reason: v1.ReasonClaimFailed, retry: 30 * time.Second, message: err.Error()}
	}
	if !keyGone {
		// Else its key is replaced first: asked again at the next pass
		// (with the new key) rather than trusted for a resync.
		r.ensured.Store(a.UID, principalEnsured{hash: h, at: now})
	}
	return arn, keyGone, nil
}

// grantRole makes the role a ServiceAccount assumes and the ConfigMap
// its pods read.
func (r *BucketAccessReconciler) grantRole(ctx context.Context, a *v1.BucketAccess, ct *claimTenant, p engine.Principal) (string, error) {
	t := ct.tenant
	ws := t.Status.WebIdentity
	if !t.Spec.WebIdentity.ServiceAccounts || ws == nil || ws.Issuer == "" {
		return "", &claimRefusal{reason: v1.ReasonClaimInvalid, message: fmt.Sprintf(
			"Tenant %s/%s does not accept ServiceAccount tokens yet: its spec.webIdentity.serviceAccounts must be true (and WebIdentityReady), or use credentialsSecretName", t.Namespace, t.Name)}
	}
	issuer := strings.TrimSuffix(strings.TrimPrefix(ws.Issuer, "https://"), "/")
	provider := ""
	for _, arn := range ws.Providers {
		if strings.HasSuffix(arn, ":oidc-provider/"+issuer) {
			provider = arn
		}
	}
	if provider == "" {
		return "", &claimRefusal{reason: v1.ReasonWaitingForTenant, retry: 30 * time.Second,
			message: fmt.Sprintf("Tenant %s/%s has not registered the cluster's token issuer %s yet", t.Namespace, t.Name, ws.Issuer)}
	}
	p.Trust = trustPolicy(provider, ws.Issuer, ws.Audience, a.Namespace, a.Spec.ServiceAccountName)
	arn, _, err := r.ensure(ctx, a, ct, p)
	if err != nil {
		return "", err
	}
	a.Status.RoleARN = arn
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name, Labels: map[string]string{builders.LabelManagedBy: builders.ManagedBy}},
		Data: map[string]string{KeyRoleARN: arn, KeyAudience: ws.Audience, KeySTSEndpointURL: ct.ep.URL}}
	for k, v := range clientSettings(ct, a.Status.Buckets) {
		cm.Data[k] = v
	}
	if err := r.notTaken(ctx, a, &corev1.ConfigMap{}, a.Name, "ConfigMap"); err != nil {
		return "", err
	}
	if _, err := apply(ctx, r.Client, r.Scheme, a, cm, configMapOps); err != nil {
		return "", err
	}
	return fmt.Sprintf("role %s, assumed by ServiceAccount %s (settings in ConfigMap %s)", arn, a.Spec.ServiceAccountName, cm.Name), nil
}

// clientSettings are what a client of the claimed buckets needs besides
// credentials.
func clientSettings(ct *claimTenant, buckets []string) map[string]string {
	m := map[string]string{KeyEndpointURL: ct.ep.URL, KeyRegion: ClaimRegion, KeyBucketName: buckets[0], KeyBucketNames: strings.Join(buckets, ",")}
	if len(ct.ep.CA) > 0 {
		m[KeyCABundle] = string(ct.ep.CA)
	}
	return m
}

// notTaken refuses to write an object of the access's name that exists
// and is not the access's.
func (r *BucketAccessReconciler) notTaken(ctx context.Context, a *v1.BucketAccess, obj client.Object, name, kind string) error {
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, obj)
	if err == nil && !metav1.IsControlledBy(obj, a) {
		return &claimRefusal{reason: v1.ReasonClaimInvalid, message: fmt.Sprintf(
			"%s %s exists in namespace %s and is not this BucketAccess's: choose another name or delete it", kind, name, a.Namespace)}
	}
	return client.IgnoreNotFound(err)
}

// grantKeys makes the user, its key and the Secret holding it: a new key
// when the Secret lacks the one made, or a rotation is asked for; the
// user's other keys are deleted once the Secret holds the new one.
func (r *BucketAccessReconciler) grantKeys(ctx context.Context, a *v1.BucketAccess, ct *claimTenant, p engine.Principal) (string, error) {
	name := a.Spec.CredentialsSecretName
	live := &corev1.Secret{}
	if err := r.notTaken(ctx, a, live, name, "Secret"); err != nil {
		return "", err
	}
	rotate := a.Annotations[AnnotationRotateKeys]
	rotated := live.Annotations[annotationKeysRotation]
	wantRotation := rotate != "" && rotate != a.Status.Rotation && rotate != rotated
	id, secret := string(live.Data[KeyAccessKeyID]), string(live.Data[KeySecretAccessKey])
	// The Secret, the access's own, is the record of its key: a status
	// write that failed after a key was made does not make another.
	have := id != "" && secret != ""
	if have {
		p.KeyID = id
	}
	_, keyGone, err := r.ensure(ctx, a, ct, p)
	if err != nil {
		return "", err
	}
	if have && keyGone {
		// Deleted through IAM (with its user, perhaps): the Secret's key
		// opens nothing, so a new one replaces it.
		r.Recorder.Eventf(a, live, corev1.EventTypeWarning, "KeyLost", "CreateAccessKey",
			"access key %s of Secret %s is no longer the user's in the tenant; a new key replaces it", id, name)
		have = false
	}
	created := !have || wantRotation
	if created {
		keep := ""
		if have {
			keep = id // the Secret's key works until the new one is in it
		}
		k, err := r.Config.Engine.CreateAccessKey(ctx, ct.ep, p.Name, keep)
		if err != nil {
			return "", &claimRefusal{reason: v1.ReasonClaimFailed, retry: 30 * time.Second, message: err.Error()}
		}
		id, secret = k.ID, k.Secret
		if wantRotation {
			rotated = rotate
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: name, Labels: map[string]string{builders.LabelManagedBy: builders.ManagedBy}},
		Type: corev1.SecretTypeOpaque, StringData: map[string]string{KeyAccessKeyID: id, KeySecretAccessKey: secret}}
	if rotated != "" {
		sec.Annotations = map[string]string{annotationKeysRotation: rotated}
	}
	for k, v := range clientSettings(ct, a.Status.Buckets) {
		sec.StringData[k] = v
	}
	sec.Data = map[string][]byte{}
	for k, v := range sec.StringData {
		sec.Data[k] = []byte(v)
	}
	sec.StringData = nil
	if _, err := apply(ctx, r.Client, r.Scheme, a, sec, secretOps); err != nil {
		return "", err
	}
	if created || id != a.Status.AccessKeyID {
		// The Secret holds the key: a key it replaced goes (a user's first
		// key replaces none).
		if have || a.Status.AccessKeyID != "" {
			if err := r.Config.Engine.DeleteAccessKeys(ctx, ct.ep, p.Name, id); err != nil {
				return "", &claimRefusal{reason: v1.ReasonClaimFailed, retry: 30 * time.Second, message: err.Error()}
			}
		}
		first := a.Status.AccessKeyID == ""
		a.Status.AccessKeyID = id
		if created {
			now := metav1.NewTime(r.Config.Now())
			a.Status.KeysRotated = &now
		}
		switch {
		case !created:
		case first:
			r.Recorder.Eventf(a, sec, corev1.EventTypeNormal, "KeysIssued", "CreateAccessKey", "access key %s written to Secret %s", id, name)
		default:
			r.Recorder.Eventf(a, sec, corev1.EventTypeNormal, "KeysRotated", "CreateAccessKey", "new access key %s written to Secret %s; the previous key is deleted", id, name)
		}
	}
	if rotate != "" && rotated == rotate {
		a.Status.Rotation = rotate
	}
	return fmt.Sprintf("access key %s (Secret %s)", id, name), nil
}

// reconcileDelete deletes the access's user or role from its Tenant (a
// Tenant that is gone leaves nothing to do); the Secret or ConfigMap goes
// with the access (owner reference).
func (r *BucketAccessReconciler) reconcileDelete(ctx context.Context, a *v1.BucketAccess, before *v1.BucketAccessStatus) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(a, ClaimFinalizer) {
		return ctrl.Result{}, nil
	}
	if ns, name, ok := strings.Cut(a.Status.Tenant, "/"); ok {
		err := r.inLiveTenant(ctx, ns, name, func(ep engine.Endpoint) error {
			return r.Config.Engine.DeletePrincipal(ctx, ep, principalName(a), a.Spec.ServiceAccountName != "")
		})
		if err != nil {
			setCondition(&a.Status.Conditions, a.Generation, v1.ConditionReady, false, v1.ReasonDeleting, err.Error())
			if werr := r.writeAccessStatus(ctx, a, before); werr != nil {
				return requeueOnConflict(werr)
			}
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
	}
	r.ensured.Delete(a.UID)
	controllerutil.RemoveFinalizer(a, ClaimFinalizer)
	if err := r.Client.Update(ctx, a); err != nil {
		return requeueOnConflict(err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches accesses, their claims, Tenants, namespaces
// and the Secrets and ConfigMaps they own.
func (r *BucketAccessReconciler) SetupWithManager(mgr ctrl.Manager) error {
	list := func() client.ObjectList { return &v1.BucketAccessList{} }
	items := func(l client.ObjectList) []client.Object {
		var out []client.Object
		for i := range l.(*v1.BucketAccessList).Items {
			out = append(out, &l.(*v1.BucketAccessList).Items[i])
		}
		return out
	}
	claimToAccesses := func(ctx context.Context, o client.Object) []reconcile.Request {
		l := &v1.BucketAccessList{}
		if err := r.Client.List(ctx, l, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexAccessClaims: o.GetNamespace() + "/" + o.GetName()}); err != nil {
			return nil
		}
		return requestsFor(items(l))
	}
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1.BucketAccess{}, handler.OnlyControllerOwner())
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.BucketAccess{}).
		Owns(&corev1.ConfigMap{}).
		WatchesMetadata(&corev1.Secret{}, owner).
		Watches(&v1.BucketClaim{}, handler.EnqueueRequestsFromMapFunc(claimToAccesses)).
		Watches(&v1.Tenant{}, handler.EnqueueRequestsFromMapFunc(claimsOfTenant(r.Client, list, items)), builder.WithPredicates(tenantClaimsChanged)).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(claimsInNamespace(r.Client, list, items)), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: claimWorkers}).
		Named("bucketaccess").Complete(r)
}
