package placement

import (
	"testing"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Placement runs on every ServerPool reconcile. Target (issue 7): a 64-server
// x 16-drive pool over 1,000 labelled nodes placed in under 50 ms.
func BenchmarkCompute64x16Over1000Nodes(b *testing.B) {
	facts := Facts{Nodes: cluster(4, 10, 25), StorageClasses: wffc("nvme", "enc-a", "enc-b")} // 1,000 nodes
	cases := map[string]v1.ServerPoolSpec{
		"LocalNVMe-by-node": pool(v1.MediaLocalNVMe, 64, 16, []string{"nvme"}),
		"NVMeoF-spread-by-rack": pool(v1.MediaNVMeoF, 64, 16, []string{"enc-a", "enc-b"},
			domainKey(rackKey), tolerate(1, 2, 0)),
		"NVMeoF-explicit-zones": pool(v1.MediaNVMeoF, 64, 16, []string{"enc-a", "enc-b"},
			domains(zoneKey, "z0", "z1", "z2", "z3")),
	}
	for name, spec := range cases {
		b.Run(name, func(b *testing.B) {
			if p := place(spec, facts); !p.OK() {
				b.Fatalf("refused: %+v", p.Problems)
			}
			b.ReportAllocs()
			for b.Loop() {
				place(spec, facts)
			}
		})
	}
}
