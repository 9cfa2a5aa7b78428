package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNodeMetrics: a snapshot's sets, pools, drains and peers become the
// gauges the alerts read, with the labels they group by.
func TestNodeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterNode(reg, func() Snapshot {
		return Snapshot{
			Sets:   []Set{{Pool: "pool-0", Set: 1, Drives: 4, Online: 3, Healthy: 2, WriteQuorum: 3, ReadQuorum: 2}},
			Pools:  []Pool{{Name: "pool-0", State: "Draining"}},
			Drains: []Drain{{Pool: "pool-0", Set: 1, Objects: 12, Bytes: 4096}},
			Peers:  Peers{Online: 2, Offline: 1, OfflineEvents: 5},
		}
	})
	want := `
# HELP strata_erasure_set_drives_online Drives of the set that answer (in sync or healing); writes fail below strata_erasure_set_write_quorum.
# TYPE strata_erasure_set_drives_online gauge
strata_erasure_set_drives_online{pool="pool-0",set="1"} 3
# HELP strata_erasure_set_drives_healthy Drives of the set that answer and are in sync; below strata_erasure_set_drives the set has less than full redundancy.
# TYPE strata_erasure_set_drives_healthy gauge
strata_erasure_set_drives_healthy{pool="pool-0",set="1"} 2
# HELP strata_erasure_set_write_quorum Drives of the set a write must commit to.
# TYPE strata_erasure_set_write_quorum gauge
strata_erasure_set_write_quorum{pool="pool-0",set="1"} 3
# HELP strata_pool_state 1 for the pool's current state (Active, Draining, Decommissioned).
# TYPE strata_pool_state gauge
strata_pool_state{pool="pool-0",state="Active"} 0
strata_pool_state{pool="pool-0",state="Decommissioned"} 0
strata_pool_state{pool="pool-0",state="Draining"} 1
# HELP strata_decommission_objects_moved Objects the drain of a set has moved to other pools so far (reported by the node that drains the set; kept across restarts).
# TYPE strata_decommission_objects_moved gauge
strata_decommission_objects_moved{pool="pool-0",set="1"} 12
# HELP strata_internode_peers Other nodes of the deployment by whether they answer this node (online, offline).
# TYPE strata_internode_peers gauge
strata_internode_peers{state="offline"} 1
strata_internode_peers{state="online"} 2
# HELP strata_internode_peer_offline_total Times another node stopped answering this one.
# TYPE strata_internode_peer_offline_total counter
strata_internode_peer_offline_total 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"strata_erasure_set_drives_online", "strata_erasure_set_drives_healthy", "strata_erasure_set_write_quorum",
		"strata_pool_state", "strata_decommission_objects_moved", "strata_internode_peers", "strata_internode_peer_offline_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
