package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStoreMetrics: each local drive's metadata store figures become
// series named by the drive's slot.
func TestStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterStores(reg, func() []Store {
		return []Store{{Pool: "pool-0", Set: 1, Index: 3, AppliedBytes: 1000, WALBytes: 1100, FlushedBytes: 1050,
			CompactedBytes: 4000, CompactionDebt: 77, L0Sublevels: 5, Stalls: 2, StallSeconds: 1.5, LiveBytes: 2048,
			CacheHits: 9, CacheMisses: 4}}
	})
	want := `
# HELP strata_drive_metadata_applied_bytes_total Bytes of the writes the drive's metadata store applied (records, with the inline data of small objects).
# TYPE strata_drive_metadata_applied_bytes_total counter
strata_drive_metadata_applied_bytes_total{index="3",pool="pool-0",set="1"} 1000
# HELP strata_drive_metadata_written_bytes_total Bytes the drive's metadata store wrote to disk, by what for (wal, flush, compaction); over strata_drive_metadata_applied_bytes_total, its write amplification.
# TYPE strata_drive_metadata_written_bytes_total counter
strata_drive_metadata_written_bytes_total{index="3",kind="compaction",pool="pool-0",set="1"} 4000
strata_drive_metadata_written_bytes_total{index="3",kind="flush",pool="pool-0",set="1"} 1050
strata_drive_metadata_written_bytes_total{index="3",kind="wal",pool="pool-0",set="1"} 1100
# HELP strata_drive_metadata_l0_sublevels Overlapping layers of freshly flushed tables in the drive's metadata store; writes stop at 12 until compactions bring them down.
# TYPE strata_drive_metadata_l0_sublevels gauge
strata_drive_metadata_l0_sublevels{index="3",pool="pool-0",set="1"} 5
# HELP strata_drive_metadata_write_stall_seconds_total How long the drive's metadata store held writes up, in all.
# TYPE strata_drive_metadata_write_stall_seconds_total counter
strata_drive_metadata_write_stall_seconds_total{index="3",pool="pool-0",set="1"} 1.5
# HELP strata_drive_metadata_block_cache_lookups_total Lookups in the drive's metadata store's block cache, by result (hit, miss).
# TYPE strata_drive_metadata_block_cache_lookups_total counter
strata_drive_metadata_block_cache_lookups_total{index="3",pool="pool-0",result="hit",set="1"} 9
strata_drive_metadata_block_cache_lookups_total{index="3",pool="pool-0",result="miss",set="1"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"strata_drive_metadata_applied_bytes_total", "strata_drive_metadata_written_bytes_total", "strata_drive_metadata_l0_sublevels",
		"strata_drive_metadata_write_stall_seconds_total", "strata_drive_metadata_block_cache_lookups_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
