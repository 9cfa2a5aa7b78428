package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// DriveStates a drive can be in.
var DriveStates = []string{"online", "offline", "healing", "unformatted"}

// Drive is one drive as the node sees it.
type Drive struct {
	Pool       string
	Set, Index int
	State      string
	TotalBytes uint64
	FreeBytes  uint64
}

// Heal is the healer's counters.
type Heal struct {
	QueueLength, Queued, Dropped             int64
	ObjectsHealed, ShardsHealed, BytesHealed int64
	Purged, Failed, ScanCycles, ScanObjects  int64
	DrivesHealing                            int
}

// Snapshot is what a node reports when scraped.
type Snapshot struct {
	Drives []Drive
	Heal   Heal
}

// nodeCollector turns a snapshot, taken at scrape time, into metrics.
type nodeCollector struct {
	snapshot func() Snapshot

	driveState, driveTotal, driveFree *prometheus.Desc
	healQueue, healDrives             *prometheus.Desc
	healCounters                      map[string]*prometheus.Desc
}

// RegisterNode registers a collector of the node's drives and healing.
func RegisterNode(reg prometheus.Registerer, snapshot func() Snapshot) {
	// A drive is named by its slot (pool, set, index): the metrics are
	// served without authentication, so they name no internal host or path
	// (the authenticated admin API maps slots to endpoints).
	labels := []string{"pool", "set", "index"}
	c := &nodeCollector{
		snapshot: snapshot,
		driveState: prometheus.NewDesc("strata_drive_state", "1 for the drive's current state (online, offline, healing, unformatted).",
			append(labels, "state"), nil),
		driveTotal: prometheus.NewDesc("strata_drive_total_bytes", "Capacity of the drive's filesystem.", labels, nil),
		driveFree:  prometheus.NewDesc("strata_drive_free_bytes", "Free bytes of the drive's filesystem.", labels, nil),
		healQueue:  prometheus.NewDesc("strata_heal_queue_length", "Objects waiting in the heal queue or being healed now.", nil, nil),
		healDrives: prometheus.NewDesc("strata_heal_drives_healing", "Drives being rebuilt.", nil, nil),
		healCounters: map[string]*prometheus.Desc{
			"queued":  prometheus.NewDesc("strata_heal_queued_total", "Objects queued for healing (damaged on read, partial writes).", nil, nil),
			"dropped": prometheus.NewDesc("strata_heal_dropped_total", "Objects not queued because the queue was full (the scanner heals them).", nil, nil),
			"objects": prometheus.NewDesc("strata_heal_objects_total", "Objects healed.", nil, nil),
			"shards":  prometheus.NewDesc("strata_heal_shards_total", "Drive copies of objects rewritten by healing.", nil, nil),
			"bytes":   prometheus.NewDesc("strata_heal_bytes_total", "Object bytes rebuilt by healing.", nil, nil),
			"purged":  prometheus.NewDesc("strata_heal_dangling_purged_total", "Dangling versions (held by too few drives to read) removed.", nil, nil),
			"failed":  prometheus.NewDesc("strata_heal_failures_total", "Heal attempts that failed.", nil, nil),
			"cycles":  prometheus.NewDesc("strata_scanner_cycles_total", "Completed integrity scans of every object.", nil, nil),
			"scanned": prometheus.NewDesc("strata_scanner_objects_total", "Objects read and verified by the integrity scanner.", nil, nil),
		},
	}
	reg.MustRegister(c)
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.driveState
	ch <- c.driveTotal
	ch <- c.driveFree
	ch <- c.healQueue
	ch <- c.healDrives
	for _, d := range c.healCounters {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for _, d := range s.Drives {
		lv := []string{d.Pool, strconv.Itoa(d.Set), strconv.Itoa(d.Index)}
		for _, st := range DriveStates {
			v := 0.0
			if st == d.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.driveState, prometheus.GaugeValue, v, append(lv, st)...)
		}
		ch <- prometheus.MustNewConstMetric(c.driveTotal, prometheus.GaugeValue, float64(d.TotalBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.driveFree, prometheus.GaugeValue, float64(d.FreeBytes), lv...)
	}
	h := s.Heal
	ch <- prometheus.MustNewConstMetric(c.healQueue, prometheus.GaugeValue, float64(h.QueueLength))
	ch <- prometheus.MustNewConstMetric(c.healDrives, prometheus.GaugeValue, float64(h.DrivesHealing))
	for name, v := range map[string]int64{
		"queued": h.Queued, "dropped": h.Dropped, "objects": h.ObjectsHealed, "shards": h.ShardsHealed,
		"bytes": h.BytesHealed, "purged": h.Purged, "failed": h.Failed, "cycles": h.ScanCycles, "scanned": h.ScanObjects,
	} {
		ch <- prometheus.MustNewConstMetric(c.healCounters[name], prometheus.CounterValue, float64(v))
	}
}
