package server

import (
	"testing"

	"github.com/strata-storage/strata/engine/cluster"
)

func TestClustered(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints []string
		want      bool
	}{
		{"local paths", []string{"/srv/d{1...4}"}, false},
		{"urls", []string{"http://10.0.0.1:9000/d1", "http://10.0.0.2:9000/d1"}, true},
		// The topology file the operator writes: ranges in host and path.
		{"urls with ranges", []string{"https://media-nvme-{0...3}.media-hl.default.svc.cluster.local:9000/data{0...1}"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := cluster.Topology{Version: 1, Pools: []cluster.PoolSpec{{Name: "p", Endpoints: tc.endpoints}}}
			if got := clustered(topo); got != tc.want {
				t.Fatalf("clustered(%q) = %v, want %v", tc.endpoints, got, tc.want)
			}
		})
	}
}
