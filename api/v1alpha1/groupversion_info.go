// Package v1alpha1 holds the Strata API: Tenant, ServerPool and GatewayPool.
//
// A Tenant is one S3 identity and trust domain. ServerPools (erasure-coded
// servers on block storage) and GatewayPools (stateless S3 gateways on a shared
// POSIX filesystem) point at a Tenant through spec.tenantRef and serve its data.
//
// +kubebuilder:object:generate=true
// +groupName=storage.strata.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Strata kind.
	GroupVersion = schema.GroupVersion{Group: "storage.strata.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Strata kinds with a runtime.Scheme. It uses
	// apimachinery only, so importing this package stays cheap.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Strata kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Tenant{}, &TenantList{},
		&ServerPool{}, &ServerPoolList{},
		&GatewayPool{}, &GatewayPoolList{},
		&BucketClaim{}, &BucketClaimList{},
		&BucketAccess{}, &BucketAccessList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
