package builders

// Labels on everything the operator creates. Selectors use a subset that
// never changes over an object's life.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelTenant and LabelPool name the owning Tenant and pool; the
	// webhook also sets LabelTenant on pools so they can be listed by tenant.
	LabelTenant = "storage.strata.dev/tenant"
	LabelPool   = "storage.strata.dev/pool"
	// LabelGroup tells a pool's StatefulSets apart (explicit domains).
	LabelGroup = "storage.strata.dev/group"

	ComponentServer  = "server"
	ComponentGateway = "gateway"
	ManagedBy        = "strata-operator"
)

// TenantLabels are on every object of a tenant.
func TenantLabels(tenant string) map[string]string {
	return map[string]string{
		LabelName:      "strata",
		LabelInstance:  tenant,
		LabelManagedBy: ManagedBy,
		LabelTenant:    tenant,
	}
}

// ServerSelector selects every server pod of a tenant (all pools).
func ServerSelector(tenant string) map[string]string {
	return map[string]string{LabelInstance: tenant, LabelComponent: ComponentServer}
}

// PoolSelector selects every pod of one pool (all its StatefulSets).
func PoolSelector(tenant, pool, component string) map[string]string {
	return map[string]string{LabelInstance: tenant, LabelComponent: component, LabelPool: pool}
}

// GroupSelector selects the pods of one StatefulSet of a pool.
func GroupSelector(tenant, pool, group string) map[string]string {
	s := PoolSelector(tenant, pool, ComponentServer)
	if group == "" {
		group = "all"
	}
	s[LabelGroup] = group
	return s
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// WithDefaults returns labels with defaults added where labels does not
// set the key.
func WithDefaults(labels, defaults map[string]string) map[string]string {
	return merge(defaults, labels)
}
