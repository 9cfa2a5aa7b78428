package controllers

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/engine"
)

// ServiceAccountAudience is the audience a projected ServiceAccount token
// must be made for to be accepted by a tenant's STS: the tenant's own,
// never the API server's (a token a pod holds for the API server must not
// open the tenant's buckets).
func ServiceAccountAudience(t *v1.Tenant) string {
	return "sts.strata.dev/" + t.Namespace + "/" + t.Name
}

// reconcileWebIdentity registers spec.webIdentity's issuers with the
// tenant's STS (its IAM API) once the tenant is ready, once per
// generation: this cluster's ServiceAccount issuer, read from the API
// server, for the tenant's own audience, and the providers named.
func (r *TenantReconciler) reconcileWebIdentity(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	w := t.Spec.WebIdentity
	if !w.ServiceAccounts && len(w.Providers) == 0 || r.Config.Engine == nil {
		meta.RemoveStatusCondition(&t.Status.Conditions, v1.ConditionWebIdentityReady)
		t.Status.WebIdentity = nil
		return nil
	}
	if !tenantPoolsReady(s) {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionWebIdentityReady, false, v1.ReasonWaitingForPods,
			"identity token issuers are registered once the tenant's server pools are ready")
		return nil
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionWebIdentityReady); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation {
		return nil
	}
	if gen, ok := r.webIdentityEnsured.Load(t.UID); ok && gen.(int64) == t.Generation && t.Status.WebIdentity != nil {
		return nil
	}
	failed := func(msg string) error {
		setCondition(&t.Status.Conditions, t.Generation, v1.ConditionWebIdentityReady, false, v1.ReasonWebIdentityFailed, msg)
		s.requeueWithin(30 * time.Second)
		return nil
	}
	status := &v1.WebIdentityStatus{}
	var providers []engine.OIDCProvider
	if w.ServiceAccounts {
		if r.Config.Issuer == nil {
			return failed("this operator knows no ServiceAccount token issuer")
		}
		issuer, err := r.Config.Issuer(ctx)
		if err != nil {
			return failed("reading the cluster's ServiceAccount token issuer: " + err.Error())
		}
		status.Issuer, status.Audience = issuer, ServiceAccountAudience(t)
		providers = append(providers, engine.OIDCProvider{URL: issuer, ClientIDs: []string{status.Audience}})
	}
	for _, p := range w.Providers {
		providers = append(providers, engine.OIDCProvider{URL: p.URL, ClientIDs: p.ClientIDs})
	}
	arns, err := r.Config.Engine.EnsureOIDCProviders(ctx, r.endpoint(s), providers)
	if err != nil {
		return failed(err.Error())
	}
	r.webIdentityEnsured.Store(t.UID, t.Generation)
	status.Providers = arns
	t.Status.WebIdentity = status
	setCondition(&t.Status.Conditions, t.Generation, v1.ConditionWebIdentityReady, true, v1.ReasonReconciled,
		"identity token issuers registered: "+strings.Join(arns, ", "))
	return nil
}
