package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

// What BucketClaims and BucketAccesses share: the Tenant a claim names,
// whether its namespace may claim, and the tenant's endpoint.

// ClaimFinalizer removes a claim's bucket (deletionPolicy Delete) or an
// access's user or role from the tenant before the object goes.
const ClaimFinalizer = "storage.strata.dev/claim"

// AnnotationRotateKeys on a BucketAccess asks for new keys: any value not
// yet acted on (status.rotation) makes them.
const AnnotationRotateKeys = "storage.strata.dev/rotate-keys"

// annotationKeysRotation on an access's Secret records the rotation
// request (AnnotationRotateKeys's value) its key was made for. The Secret
// is read from the API server, not the cache: a reconcile that still sees
// the access's status from before a rotation does not rotate again.
const annotationKeysRotation = "storage.strata.dev/keys-rotation"

// indexClaimTenant indexes claims and accesses by NAMESPACE/TENANT.
const indexClaimTenant = "claim.tenant"

// claimWorkers reconcile claims and accesses side by side: most of a
// pass waits on the tenant's S3, IAM and admin APIs.
const claimWorkers = 8

// ClaimRegion is the region written for claims' clients (the engine
// accepts any; SDKs want one).
const ClaimRegion = "us-east-1"

// claimTenant is a claim's Tenant, once it may serve the claim.
type claimTenant struct {
	tenant *v1.Tenant
	ep     engine.Endpoint
}

// claimRefusal is why a claim cannot be served now: a reason and a
// message for its Ready condition.
type claimRefusal struct {
	reason, message string
	retry           time.Duration
}

func (e *claimRefusal) Error() string { return e.reason + ": " + e.message }

// tenantFor finds the Tenant ref names and checks that it serves claims
// from namespace ns and is ready.
func (r *Reconcilers) tenantFor(ctx context.Context, ref v1.ClaimTenantReference, ns string) (*claimTenant, error) {
	t := &v1.Tenant{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, t)
	if apierrors.IsNotFound(err) {
		return nil, &claimRefusal{reason: v1.ReasonTenantNotFound,
			message: fmt.Sprintf("Tenant %s/%s does not exist: fix spec.tenantRef", ref.Namespace, ref.Name)}
	}
	if err != nil {
		return nil, err
	}
	if ok, err := r.namespaceMayClaim(ctx, t, ns); err != nil {
		return nil, err
	} else if !ok {
		return nil, &claimRefusal{reason: v1.ReasonNamespaceNotAllowed,
			message: fmt.Sprintf("Tenant %s/%s does not serve claims from namespace %s: its spec.claims.namespaceSelector must select this namespace (ask the tenant's administrators)", t.Namespace, t.Name, ns)}
	}
	if !meta.IsStatusConditionTrue(t.Status.Conditions, v1.ConditionReady) {
		return nil, &claimRefusal{reason: v1.ReasonWaitingForTenant, retry: 30 * time.Second,
			message: fmt.Sprintf("Tenant %s/%s is not Ready yet", t.Namespace, t.Name)}
	}
	root, _, err := rootCredentials(ctx, r.APIReader, t)
	if err != nil {
		return nil, &claimRefusal{reason: v1.ReasonWaitingForTenant, retry: 30 * time.Second, message: err.Error()}
	}
	ep, err := r.tenantEndpoint(ctx, t, root)
	if err != nil {
		return nil, &claimRefusal{reason: v1.ReasonWaitingForTenant, retry: 30 * time.Second, message: err.Error()}
	}
	return &claimTenant{tenant: t, ep: ep}, nil
}

// inLiveTenant runs fn with the endpoint of the Tenant ns/name, unless
// the Tenant is gone or going (then there is nothing to clean up in it).
func (r *Reconcilers) inLiveTenant(ctx context.Context, ns, name string, fn func(ep engine.Endpoint) error) error {
	t := &v1.Tenant{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return nil
	}
	root, _, err := rootCredentials(ctx, r.APIReader, t)
	if err != nil {
		return err
	}
	ep, err := r.tenantEndpoint(ctx, t, root)
	if err != nil {
		return err
	}
	return fn(ep)
}

// tenantEndpoint is the tenant's S3 endpoint with its root keys and CA.
func (r *Reconcilers) tenantEndpoint(ctx context.Context, t *v1.Tenant, root [2]string) (engine.Endpoint, error) {
	ep := engine.Endpoint{URL: builders.ServiceURL(t, builders.S3ServiceName(t.Name), r.Config.ClusterDomain), AccessKey: root[0], SecretKey: root[1]}
	if name := builders.TLSSecretName(t); name != "" {
		sec := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, sec); err != nil {
			return ep, fmt.Errorf("reading the CA of Tenant %s/%s: %w", t.Namespace, t.Name, err)
		}
		ep.CA = sec.Data["ca.crt"]
	}
	return ep, nil
}

// tenantClaimsChanged passes the Tenant changes its claims care about:
// readiness, the namespace selector, the web identity issuer, the
// notification targets (claims' rules name them).
var tenantClaimsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	a, b := e.ObjectOld.(*v1.Tenant), e.ObjectNew.(*v1.Tenant)
	return meta.IsStatusConditionTrue(a.Status.Conditions, v1.ConditionReady) != meta.IsStatusConditionTrue(b.Status.Conditions, v1.ConditionReady) ||
		!equality.Semantic.DeepEqual(a.Spec.Claims, b.Spec.Claims) || !equality.Semantic.DeepEqual(a.Status.WebIdentity, b.Status.WebIdentity) ||
		!equality.Semantic.DeepEqual(a.Spec.Notifications, b.Spec.Notifications) ||
		!a.DeletionTimestamp.Equal(b.DeletionTimestamp)
}}

// namespaceMayClaim reports whether the tenant's selector selects ns.
func (r *Reconcilers) namespaceMayClaim(ctx context.Context, t *v1.Tenant, ns string) (bool, error) {
	sel := t.Spec.Claims.NamespaceSelector
	if sel == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, &claimRefusal{reason: v1.ReasonNamespaceNotAllowed,
			message: fmt.Sprintf("Tenant %s/%s has an invalid spec.claims.namespaceSelector (%v): it selects no namespace until it is fixed", t.Namespace, t.Name, err)}
	}
	n := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return s.Matches(labels.Set(n.Labels)), nil
}

// claimName is a name of at most max characters made of a claim's
// namespace and name joined by sep; a longer one is cut and ends in a hash
// of the whole, so two claims never share it.
func claimName(ns, name, sep string, max int) string {
	full := ns + sep + name
	if len(full) <= max {
		return full
	}
	sum := sha256.Sum256([]byte(ns + "/" + name))
	cut := strings.TrimRight(full[:max-9], ".-")
	return cut + "-" + hex.EncodeToString(sum[:4])
}

// bucketNameOf is a claim's bucket: spec.bucketName, else NAMESPACE-NAME
// made a valid bucket name.
func bucketNameOf(c *v1.BucketClaim) string {
	if c.Spec.BucketName != "" {
		return c.Spec.BucketName
	}
	n := claimName(c.Namespace, c.Name, "-", 63)
	n = strings.ReplaceAll(n, "..", ".")
	return strings.Trim(n, ".-")
}

// principalName is the IAM user or role of an access (64 characters at
// most, IAM's limit).
func principalName(a *v1.BucketAccess) string { return claimName(a.Namespace, a.Name, ".", 64) }

// principalPath groups an access's user or role by namespace.
func principalPath(ns string) string { return "/strata-claims/" + ns + "/" }

// Actions of the access roles.
var (
	readActions = []string{"s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging", "s3:GetObjectVersionTagging",
		"s3:GetObjectAttributes", "s3:GetObjectVersionAttributes", "s3:GetObjectRetention", "s3:GetObjectLegalHold",
		"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads", "s3:ListMultipartUploadParts",
		"s3:GetBucketLocation", "s3:GetBucketVersioning", "s3:GetBucketObjectLockConfiguration"}
	writeActions = []string{"s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject", "s3:DeleteObjectVersion",
		"s3:DeleteObjectTagging", "s3:DeleteObjectVersionTagging", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
		"s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads", "s3:GetBucketLocation"}
)

type policyStatement struct {
	Effect   string   `json:"Effect"`
	Action   []string `json:"Action"`
	Resource []string `json:"Resource"`
}

type policyDocument struct {
	Version   string            `json:"Version"`
	Statement []policyStatement `json:"Statement"`
}

// rolePolicy is the identity policy of a role over buckets.
func rolePolicy(role string, buckets []string) string {
	var actions []string
	switch role {
	case v1.AccessRead:
		actions = readActions
	case v1.AccessWrite:
		actions = writeActions
	default:
		actions = append(slices.Clone(readActions), writeActions...)
	}
	slices.Sort(actions)
	actions = slices.Compact(actions)
	var res []string
	for _, b := range buckets {
		res = append(res, "arn:aws:s3:::"+b, "arn:aws:s3:::"+b+"/*")
	}
	doc, _ := json.Marshal(policyDocument{Version: "2012-10-17", Statement: []policyStatement{{Effect: "Allow", Action: actions, Resource: res}}})
	return string(doc)
}

// checkAccessPolicy accepts a policy document of a BucketAccess only when
// what it allows is S3 on the claimed buckets: no Principal, NotAction or
// NotResource, Allow statements naming s3: actions and the buckets or
// their objects (Deny statements may name anything).
func checkAccessPolicy(doc string, buckets []string) error {
	var raw struct {
		Version   string
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return fmt.Errorf("spec.policy is not a JSON policy document: %w", err)
	}
	var stmts []map[string]json.RawMessage
	if err := json.Unmarshal(raw.Statement, &stmts); err != nil {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(raw.Statement, &one); err != nil {
			return fmt.Errorf("spec.policy: Statement is neither a statement nor a list of them")
		}
		stmts = []map[string]json.RawMessage{one}
	}
	if len(stmts) == 0 {
		return fmt.Errorf("spec.policy has no statement")
	}
	strs := func(m json.RawMessage) ([]string, error) {
		var list []string
		if err := json.Unmarshal(m, &list); err == nil {
			return list, nil
		}
		var one string
		err := json.Unmarshal(m, &one)
		return []string{one}, err
	}
	for i, st := range stmts {
		for _, banned := range []string{"Principal", "NotPrincipal", "NotAction", "NotResource"} {
			if _, ok := st[banned]; ok {
				return fmt.Errorf("spec.policy statement %d: %s is not allowed in an access's policy", i+1, banned)
			}
		}
		var effect string
		_ = json.Unmarshal(st["Effect"], &effect)
		if effect == "Deny" {
			continue
		}
		if effect != "Allow" {
			return fmt.Errorf("spec.policy statement %d: Effect must be Allow or Deny", i+1)
		}
		actions, err := strs(st["Action"])
		if err != nil || len(actions) == 0 {
			return fmt.Errorf("spec.policy statement %d: Action must name s3: actions", i+1)
		}
		for _, a := range actions {
			if !strings.HasPrefix(strings.ToLower(a), "s3:") {
				return fmt.Errorf("spec.policy statement %d: action %q is not an S3 action; an access's policy allows only s3: actions", i+1, a)
			}
		}
		resources, err := strs(st["Resource"])
		if err != nil || len(resources) == 0 {
			return fmt.Errorf("spec.policy statement %d: Resource must name the claimed buckets", i+1)
		}
		for _, res := range resources {
			if !claimedResource(res, buckets) {
				return fmt.Errorf("spec.policy statement %d: resource %q is not one of the claimed buckets (%s) or their objects",
					i+1, res, strings.Join(buckets, ", "))
			}
		}
	}
	return nil
}

var bucketARN = regexp.MustCompile(`^arn:aws:s3:::([^/*?]+)(/.*)?$`)

func claimedResource(res string, buckets []string) bool {
	m := bucketARN.FindStringSubmatch(res)
	return m != nil && slices.Contains(buckets, m[1])
}

// trustPolicy lets a ServiceAccount's projected tokens for the tenant's
// audience, from this cluster's issuer, assume a role.
func trustPolicy(providerARN, issuer, audience, ns, sa string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(issuer, "https://"), "http://"), "/")
	doc, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]any{"Federated": providerARN}, "Action": "sts:AssumeRoleWithWebIdentity",
		"Condition": map[string]any{"StringEquals": map[string]string{
			name + ":sub": "system:serviceaccount:" + ns + ":" + sa,
			name + ":aud": audience,
		}},
	}}})
	return string(doc)
}

// claimsOfTenant maps a Tenant to the claims or accesses that name it.
func claimsOfTenant(c client.Client, list func() client.ObjectList, items func(client.ObjectList) []client.Object) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list()
		if err := c.List(ctx, l, client.MatchingFields{indexClaimTenant: o.GetNamespace() + "/" + o.GetName()}); err != nil {
			return nil
		}
		return requestsFor(items(l))
	}
}

// claimsInNamespace maps a Namespace (its labels changed) to its claims.
func claimsInNamespace(c client.Client, list func() client.ObjectList, items func(client.ObjectList) []client.Object) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		l := list()
		if err := c.List(ctx, l, client.InNamespace(o.GetName())); err != nil {
			return nil
		}
		return requestsFor(items(l))
	}
}

func requestsFor(objs []client.Object) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(objs))
	for _, o := range objs {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return out
}
