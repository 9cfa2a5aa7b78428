package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Store is the metadata store of one of this node's drives (each node
// reports its own drives' stores; a drive is named by its slot).
type Store struct {
	Pool       string
	Set, Index int
	// AppliedBytes are the bytes of the writes the store applied; WAL,
	// Flushed and Compacted what it wrote to disk for them.
	AppliedBytes, WALBytes, FlushedBytes, CompactedBytes uint64
	CompactionDebt                                       uint64
	L0Sublevels                                          int
	Stalls                                               uint64
	StallSeconds                                         float64
	LiveBytes                                            uint64
	CacheHits, CacheMisses                               int64
}

// storeCollector turns the node's drives' metadata store figures, read at
// scrape time, into metrics.
type storeCollector struct {
	read                               func() []Store
	applied, written, debt, l0, stalls *prometheus.Desc
	stallSeconds, size, cacheLookups   *prometheus.Desc
}

// RegisterStores registers the metrics of this node's drives' metadata
// stores: write amplification (written over applied bytes), compaction
// debt, L0 sublevels, write stalls, size and block cache lookups.
func RegisterStores(reg prometheus.Registerer, read func() []Store) {
	labels := []string{"pool", "set", "index"}
	reg.MustRegister(&storeCollector{
		read: read,
		applied: prometheus.NewDesc("strata_drive_metadata_applied_bytes_total",
			"Bytes of the writes the drive's metadata store applied (records, with the inline data of small objects).", labels, nil),
		written: prometheus.NewDesc("strata_drive_metadata_written_bytes_total",
			"Bytes the drive's metadata store wrote to disk, by what for (wal, flush, compaction); over strata_drive_metadata_applied_bytes_total, its write amplification.",
			append(labels, "kind"), nil),
		debt: prometheus.NewDesc("strata_drive_metadata_compaction_debt_bytes",
			"Bytes the drive's metadata store estimates its compactions must still rewrite.", labels, nil),
		l0: prometheus.NewDesc("strata_drive_metadata_l0_sublevels",
			"Overlapping layers of freshly flushed tables in the drive's metadata store; writes stop at 12 until compactions bring them down.", labels, nil),
		stalls: prometheus.NewDesc("strata_drive_metadata_write_stalls_total",
			"Times the drive's metadata store held writes up for a flush or a compaction.", labels, nil),
		stallSeconds: prometheus.NewDesc("strata_drive_metadata_write_stall_seconds_total",
			"How long the drive's metadata store held writes up, in all.", labels, nil),
		size: prometheus.NewDesc("strata_drive_metadata_size_bytes", "Size of the drive's metadata store's tables.", labels, nil),
		cacheLookups: prometheus.NewDesc("strata_drive_metadata_block_cache_lookups_total",
			"Lookups in the drive's metadata store's block cache, by result (hit, miss).", append(labels, "result"), nil),
	})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.applied, c.written, c.debt, c.l0, c.stalls, c.stallSeconds, c.size, c.cacheLookups} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.read() {
		lv := []string{s.Pool, strconv.Itoa(s.Set), strconv.Itoa(s.Index)}
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(lv, extra...)...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		counter(c.applied, float64(s.AppliedBytes))
		counter(c.written, float64(s.WALBytes), "wal")
		counter(c.written, float64(s.FlushedBytes), "flush")
		counter(c.written, float64(s.CompactedBytes), "compaction")
		gauge(c.debt, float64(s.CompactionDebt))
		gauge(c.l0, float64(s.L0Sublevels))
		counter(c.stalls, float64(s.Stalls))
		counter(c.stallSeconds, s.StallSeconds)
		gauge(c.size, float64(s.LiveBytes))
		counter(c.cacheLookups, float64(s.CacheHits), "hit")
		counter(c.cacheLookups, float64(s.CacheMisses), "miss")
	}
}
