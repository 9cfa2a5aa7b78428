package crd_test

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Small builders: a minimal valid object of each kind, changed by the specs.

func minimalTenant(ns string) *v1.Tenant {
	return &v1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "media"},
	}
}

func minimalServerPool(ns string) *v1.ServerPool {
	return &v1.ServerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-a"},
		Spec: v1.ServerPoolSpec{
			TenantRef:        v1.TenantReference{Name: "media"},
			Servers:          4,
			VolumesPerServer: 4,
			Storage: v1.StorageSpec{
				Media:             v1.MediaLocalNVMe,
				StorageClassNames: []string{"nvme-local"},
				Size:              resource.MustParse("1Ti"),
			},
		},
	}
}

func minimalGatewayPool(ns string) *v1.GatewayPool {
	return &v1.GatewayPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nas"},
		Spec: v1.GatewayPoolSpec{
			TenantRef: v1.TenantReference{Name: "media"},
			Volume:    v1.GatewayVolume{ClaimName: "shared-fs"},
		},
	}
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

var int32Ptr = ptr.To[int32]
