// Package webhooks holds the defaulting and validating admission webhooks
// for what CEL in the CRDs cannot say: defaults that depend on other fields,
// pool names unique within a tenant across kinds, the Tenant existing (a
// warning: pools may be created first), and names short enough for the
// objects derived from them.
package webhooks

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// +kubebuilder:webhook:path=/mutate-storage-strata-dev-v1alpha1-tenant,mutating=true,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=tenants,verbs=create;update,versions=v1alpha1,name=mtenant.storage.strata.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-storage-strata-dev-v1alpha1-tenant,mutating=false,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=tenants,verbs=create;update,versions=v1alpha1,name=vtenant.storage.strata.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/mutate-storage-strata-dev-v1alpha1-serverpool,mutating=true,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=serverpools,verbs=create;update,versions=v1alpha1,name=mserverpool.storage.strata.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-storage-strata-dev-v1alpha1-serverpool,mutating=false,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=serverpools,verbs=create;update;delete,versions=v1alpha1,name=vserverpool.storage.strata.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/mutate-storage-strata-dev-v1alpha1-gatewaypool,mutating=true,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=gatewaypools,verbs=create;update,versions=v1alpha1,name=mgatewaypool.storage.strata.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-storage-strata-dev-v1alpha1-gatewaypool,mutating=false,failurePolicy=fail,sideEffects=None,groups=storage.strata.dev,resources=gatewaypools,verbs=create;update,versions=v1alpha1,name=vgatewaypool.storage.strata.dev,admissionReviewVersions=v1

// The ServerPool delete check reads the pool's namespace (is it going away?).
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// MaxTenantName keeps every derived name within Kubernetes limits; it is
// also the longest name spec.tenantRef accepts.
const MaxTenantName = 40

// Setup registers the webhooks with the manager's webhook server. reader
// should be uncached (the API reader): admission must see current state.
func Setup(mgr ctrl.Manager, reader client.Reader) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &v1.Tenant{}).
		WithDefaulter(tenantDefaulter{}).WithValidator(tenantValidator{}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1.ServerPool{}).
		WithDefaulter(serverPoolDefaulter{}).WithValidator(serverPoolValidator{reader}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &v1.GatewayPool{}).
		WithDefaulter(gatewayPoolDefaulter{}).WithValidator(gatewayPoolValidator{reader}).Complete()
}

// ---- Tenant

type tenantDefaulter struct{}

// Default sets spec.expose.port from the TLS mode: 443 with TLS, 80
// without (a CRD default cannot depend on another field).
func (tenantDefaulter) Default(_ context.Context, t *v1.Tenant) error {
	if t.Spec.Expose.Port == 0 {
		t.Spec.Expose.Port = builders.ServicePort(t)
	}
	return nil
}

type tenantValidator struct{}

func (tenantValidator) ValidateCreate(_ context.Context, t *v1.Tenant) (admission.Warnings, error) {
	return nil, validateTenant(t)
}

func (tenantValidator) ValidateUpdate(_ context.Context, _, t *v1.Tenant) (admission.Warnings, error) {
	return nil, validateTenant(t)
}

func (tenantValidator) ValidateDelete(context.Context, *v1.Tenant) (admission.Warnings, error) {
	return nil, nil
}

func validateTenant(t *v1.Tenant) error {
	var errs field.ErrorList
	if len(t.Name) > MaxTenantName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), t.Name, fmt.Sprintf(
			"Tenant names are limited to %d characters: pools refer to them in spec.tenantRef, and Services and StatefulSets are named after them", MaxTenantName)))
	}
	return invalid("Tenant", t.Name, errs)
}

// ---- ServerPool

type serverPoolDefaulter struct{}

// Default labels the pool with its tenant, so `kubectl get spool -l
// storage.strata.dev/tenant=media` lists a tenant's pools.
func (serverPoolDefaulter) Default(_ context.Context, p *v1.ServerPool) error {
	p.Labels = withLabel(p.Labels, builders.LabelTenant, p.Spec.TenantRef.Name)
	return nil
}

type serverPoolValidator struct{ reader client.Reader }

func (v serverPoolValidator) ValidateCreate(ctx context.Context, p *v1.ServerPool) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

func (v serverPoolValidator) ValidateUpdate(ctx context.Context, _, p *v1.ServerPool) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

// ValidateDelete refuses deleting a pool that may hold objects while its
// Tenant stays (builders.PoolDeletionRefusal says how to go about it).
func (v serverPoolValidator) ValidateDelete(ctx context.Context, p *v1.ServerPool) (admission.Warnings, error) {
	var tenant *v1.Tenant
	t := &v1.Tenant{}
	switch err := v.reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.TenantRef.Name}, t); {
	case err == nil:
		tenant = t
	case !apierrors.IsNotFound(err):
		return nil, apierrors.NewInternalError(fmt.Errorf("reading Tenant %s: %w", p.Spec.TenantRef.Name, err))
	}
	ns := &corev1.Namespace{}
	if err := v.reader.Get(ctx, client.ObjectKey{Name: p.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", p.Namespace, err))
	}
	if refusal := builders.PoolDeletionRefusal(p, tenant, !ns.DeletionTimestamp.IsZero()); refusal != "" {
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: v1.GroupVersion.Group, Resource: "serverpools"}, p.Name, errors.New(refusal))
	}
	return nil, nil
}

func (v serverPoolValidator) validate(ctx context.Context, p *v1.ServerPool) (admission.Warnings, error) {
	var errs field.ErrorList
	tenant := p.Spec.TenantRef.Name
	groups := []string{""}
	for _, d := range p.Spec.Topology.Domains {
		groups = append(groups, d.Name)
	}
	for _, g := range groups[min(1, len(groups)-1):] {
		if name := builders.StatefulSetName(tenant, p.Name, g); len(name) > builders.MaxWorkloadName {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), p.Name, fmt.Sprintf(
				"the pool's StatefulSet would be named %q (%d characters); Kubernetes allows %d: shorten the pool, tenant or domain names",
				name, len(name), builders.MaxWorkloadName)))
			break
		}
	}
	gws := &v1.GatewayPoolList{}
	if err := v.reader.List(ctx, gws, client.InNamespace(p.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing GatewayPools: %w", err))
	}
	for _, g := range gws.Items {
		if g.Name == p.Name && g.Spec.TenantRef.Name == tenant {
			errs = append(errs, field.Duplicate(field.NewPath("metadata", "name"), fmt.Sprintf(
				"%s: GatewayPool %s already serves Tenant %s; pool names must be unique within a tenant (their Services and PodDisruptionBudgets share names)",
				p.Name, g.Name, tenant)))
		}
	}
	if p.Spec.Decommission {
		sps := &v1.ServerPoolList{}
		if err := v.reader.List(ctx, sps, client.InNamespace(p.Namespace)); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("listing ServerPools: %w", err))
		}
		takers := 0
		for _, q := range sps.Items {
			if q.Name != p.Name && q.Spec.TenantRef.Name == tenant && !q.Spec.Decommission && q.DeletionTimestamp.IsZero() {
				takers++
			}
		}
		if takers == 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "decommission"), true, fmt.Sprintf(
				"%s is the only ServerPool of Tenant %s that takes new objects, so its objects have nowhere to go: add a ServerPool before decommissioning this one",
				p.Name, tenant)))
		}
	}
	warnings, err := tenantWarning(ctx, v.reader, p.Namespace, tenant)
	if err != nil {
		return nil, err
	}
	return warnings, invalid("ServerPool", p.Name, errs)
}

// ---- GatewayPool

type gatewayPoolDefaulter struct{}

// Default labels the pool with its tenant and, with autoscaling, lifts a
// starting replica count below minReplicas to it.
func (gatewayPoolDefaulter) Default(_ context.Context, g *v1.GatewayPool) error {
	g.Labels = withLabel(g.Labels, builders.LabelTenant, g.Spec.TenantRef.Name)
	if a := g.Spec.Autoscaling; a != nil && a.MinReplicas > 0 && g.Spec.Replicas != nil && *g.Spec.Replicas < a.MinReplicas {
		m := a.MinReplicas
		g.Spec.Replicas = &m
	}
	return nil
}

type gatewayPoolValidator struct{ reader client.Reader }

func (v gatewayPoolValidator) ValidateCreate(ctx context.Context, g *v1.GatewayPool) (admission.Warnings, error) {
	return v.validate(ctx, g)
}

func (v gatewayPoolValidator) ValidateUpdate(ctx context.Context, _, g *v1.GatewayPool) (admission.Warnings, error) {
	return v.validate(ctx, g)
}

func (gatewayPoolValidator) ValidateDelete(context.Context, *v1.GatewayPool) (admission.Warnings, error) {
	return nil, nil
}

func (v gatewayPoolValidator) validate(ctx context.Context, g *v1.GatewayPool) (admission.Warnings, error) {
	var errs field.ErrorList
	tenant := g.Spec.TenantRef.Name
	if name := builders.GatewayName(tenant, g.Name); len(name) > 63 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), g.Name, fmt.Sprintf(
			"the pool's Service would be named %q (%d characters); Kubernetes allows 63: shorten the pool or tenant name", name, len(name))))
	}
	sps := &v1.ServerPoolList{}
	if err := v.reader.List(ctx, sps, client.InNamespace(g.Namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing ServerPools: %w", err))
	}
	for _, p := range sps.Items {
		if p.Name == g.Name && p.Spec.TenantRef.Name == tenant {
			errs = append(errs, field.Duplicate(field.NewPath("metadata", "name"), fmt.Sprintf(
				"%s: ServerPool %s already serves Tenant %s; pool names must be unique within a tenant (their Services and PodDisruptionBudgets share names)",
				g.Name, p.Name, tenant)))
		}
	}
	warnings, err := tenantWarning(ctx, v.reader, g.Namespace, tenant)
	if err != nil {
		return nil, err
	}
	return warnings, invalid("GatewayPool", g.Name, errs)
}

// ---- shared

// tenantWarning warns (does not refuse) when the Tenant does not exist:
// manifests are often applied pools first, and the pool waits for it.
func tenantWarning(ctx context.Context, reader client.Reader, ns, name string) (admission.Warnings, error) {
	err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1.Tenant{})
	if apierrors.IsNotFound(err) {
		return admission.Warnings{fmt.Sprintf(
			"Tenant %q does not exist in namespace %s yet: the pool waits (condition TenantFound=False) until it is created", name, ns)}, nil
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading Tenant %s: %w", name, err))
	}
	return nil, nil
}

func withLabel(l map[string]string, k, v string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	return l
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: kind}, name, errs)
}
