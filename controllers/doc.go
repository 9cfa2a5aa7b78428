// Package controllers holds one reconciler per Strata kind (Tenant,
// ServerPool, GatewayPool). Each reconciler is thin: it fetches the object,
// handles its finalizer and runs an ordered list of small idempotent steps
// whose desired objects come from pure builders in internal/.
//
// The RBAC markers below generate config/rbac/role.yaml (and the chart's
// ClusterRole). Each reconciler adds the markers for what it touches.
package controllers

// Every reconciler reads its kind, writes its status and finalizer, and
// records Events for actions taken on the user's behalf.
// +kubebuilder:rbac:groups=storage.strata.dev,resources=tenants;serverpools;gatewaypools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=storage.strata.dev,resources=tenants/status;serverpools/status;gatewaypools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=storage.strata.dev,resources=tenants/finalizers;serverpools/finalizers;gatewaypools/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
