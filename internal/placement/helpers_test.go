package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Small builders for placement tests.

const (
	zoneKey = "topology.kubernetes.io/zone"
	rackKey = "topology.strata.dev/rack"
)

// cluster builds zones x racks x perRack nodes labelled with zone, rack and
// hostname (n0, n1, ...).
func cluster(zones, racks, perRack int) []corev1.Node {
	var out []corev1.Node
	for z := range zones {
		for r := range racks {
			for range perRack {
				name := fmt.Sprintf("n%d", len(out))
				out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
					hostnameKey: name,
					zoneKey:     fmt.Sprintf("z%d", z),
					rackKey:     fmt.Sprintf("z%d-r%d", z, r),
				}}})
			}
		}
	}
	return out
}

func nodes(n int) []corev1.Node { return cluster(1, 1, n) }

func class(name string, mode storagev1.VolumeBindingMode) storagev1.StorageClass {
	return storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       "test.csi.strata.dev",
		VolumeBindingMode: &mode,
	}
}

func wffc(names ...string) []storagev1.StorageClass {
	var out []storagev1.StorageClass
	for _, n := range names {
		out = append(out, class(n, storagev1.VolumeBindingWaitForFirstConsumer))
	}
	return out
}

type poolOpt func(*v1.ServerPoolSpec)

func pool(media v1.Media, servers, volumes int32, classes []string, opts ...poolOpt) v1.ServerPoolSpec {
	s := v1.ServerPoolSpec{
		TenantRef:        v1.TenantReference{Name: "media"},
		Servers:          servers,
		VolumesPerServer: volumes,
		Storage:          v1.StorageSpec{Media: media, StorageClassNames: classes, Size: resource.MustParse("1Ti")},
		Topology: v1.TopologySpec{
			FailureDomainKey: hostnameKey,
			Tolerate:         v1.ToleranceSpec{Domains: ptr.To[int32](1)},
		},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func tolerate(domains, servers, drives int32) poolOpt {
	return func(s *v1.ServerPoolSpec) {
		s.Topology.Tolerate = v1.ToleranceSpec{Domains: ptr.To(domains), Servers: servers, Drives: drives}
	}
}

func erasure(setSize, parity int32) poolOpt {
	return func(s *v1.ServerPoolSpec) { s.Erasure = v1.ErasureSpec{SetSize: setSize, Parity: parity} }
}

func domainKey(key string) poolOpt {
	return func(s *v1.ServerPoolSpec) { s.Topology.FailureDomainKey = key }
}

func domains(key string, values ...string) poolOpt {
	return func(s *v1.ServerPoolSpec) {
		s.Topology.FailureDomainKey = key
		s.Topology.Domains = nil
		for _, v := range values {
			s.Topology.Domains = append(s.Topology.Domains, v1.FailureDomain{Name: v})
		}
	}
}

func size(q string) poolOpt {
	return func(s *v1.ServerPoolSpec) { s.Storage.Size = resource.MustParse(q) }
}

func nodeSelector(k, v string) poolOpt {
	return func(s *v1.ServerPoolSpec) { s.NodeSelector = map[string]string{k: v} }
}

var podLabels = map[string]string{"app.kubernetes.io/instance": "media-pool"}

func place(spec v1.ServerPoolSpec, facts Facts) Plan {
	return Compute(Input{Spec: spec, PodLabels: podLabels}, facts)
}
