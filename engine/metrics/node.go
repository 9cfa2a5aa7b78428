package metrics

import (
	"strconv"
	"time"

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
	WritesBehind                             int64
	DrivesHealing                            int
}

// Set is one erasure set as the node sees it: how many of its drives
// answer, how many are in sync, and how many a write needs.
type Set struct {
	Pool string
	Set  int
	// Drives in the set; Online answer (in sync or healing); Healthy are
	// online and not being rebuilt.
	Drives, Online, Healthy int
	// WriteQuorum and ReadQuorum are the drives a write must commit to and
	// a read must find.
	WriteQuorum, ReadQuorum int
}

// Pool is a pool's state: Active, Draining or Decommissioned.
type Pool struct {
	Name, State string
}

// Drain is the progress of one set's drain that this node runs (the node
// of the set's first drive), kept across restarts.
type Drain struct {
	Pool           string
	Set            int
	Objects, Bytes int64
}

// Peers counts the other nodes by whether they answer, and the times one
// stopped answering.
type Peers struct {
	Online, Offline int
	OfflineEvents   uint64
	// ClockOffset is the largest difference, either way, between another
	// node's clock and this one's at their last pings.
	ClockOffset time.Duration
}

// Lifecycle is the lifecycle pass's counters (on the server node or the
// gateway replica that runs it).
type Lifecycle struct {
	// Runs are completed passes; Versions the versions they looked at.
	Runs, Versions int64
	// Actions count what the passes did, by lifecycle.ActionKind name and
	// "abort-upload"; "kept-locked" counts versions a lock kept.
	Actions map[string]int64
	// LastRunEnd is when the last pass ended (Unix seconds; 0: never).
	LastRunEnd float64
}

// Snapshot is what a node reports when scraped.
type Snapshot struct {
	Drives []Drive
	Sets   []Set
	Pools  []Pool
	Drains []Drain
	Peers  Peers
	Heal   Heal
}

// PoolStates a pool can be in (the erasure layer's names).
var PoolStates = []string{"Active", "Draining", "Decommissioned"}

// nodeCollector turns a snapshot, taken at scrape time, into metrics.
type nodeCollector struct {
	snapshot func() Snapshot

	driveState, driveTotal, driveFree *prometheus.Desc
	setDrives, setOnline, setHealthy  *prometheus.Desc
	setWriteQuorum, setReadQuorum     *prometheus.Desc
	poolState                         *prometheus.Desc
	drainObjects, drainBytes          *prometheus.Desc
	peers, peerOfflineEvents          *prometheus.Desc
	peerClockOffset                   *prometheus.Desc
	healQueue, healDrives, healBehind *prometheus.Desc
	healCounters                      map[string]*prometheus.Desc
}

// RegisterNode registers a collector of the node's drives, erasure sets,
// pools, drains, peers and healing.
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
		// Sets as this node sees them: every server reports every set, and
		// a node cut off from the others sees their drives offline (alerts
		// take the best view: max across servers).
		setDrives: prometheus.NewDesc("strata_erasure_set_drives", "Drives in the erasure set.", []string{"pool", "set"}, nil),
		setOnline: prometheus.NewDesc("strata_erasure_set_drives_online",
			"Drives of the set that answer (in sync or healing); writes fail below strata_erasure_set_write_quorum.", []string{"pool", "set"}, nil),
		setHealthy: prometheus.NewDesc("strata_erasure_set_drives_healthy",
			"Drives of the set that answer and are in sync; below strata_erasure_set_drives the set has less than full redundancy.", []string{"pool", "set"}, nil),
		setWriteQuorum: prometheus.NewDesc("strata_erasure_set_write_quorum", "Drives of the set a write must commit to.", []string{"pool", "set"}, nil),
		setReadQuorum:  prometheus.NewDesc("strata_erasure_set_read_quorum", "Drives of the set a read must find (the data shards).", []string{"pool", "set"}, nil),
		poolState: prometheus.NewDesc("strata_pool_state", "1 for the pool's current state (Active, Draining, Decommissioned).",
			[]string{"pool", "state"}, nil),
		drainObjects: prometheus.NewDesc("strata_decommission_objects_moved",
			"Objects the drain of a set has moved to other pools so far (reported by the node that drains the set; kept across restarts).", []string{"pool", "set"}, nil),
		drainBytes: prometheus.NewDesc("strata_decommission_bytes_moved",
			"Object bytes the drain of a set has moved to other pools so far.", []string{"pool", "set"}, nil),
		peers: prometheus.NewDesc("strata_internode_peers", "Other nodes of the deployment by whether they answer this node (online, offline).",
			[]string{"state"}, nil),
		peerOfflineEvents: prometheus.NewDesc("strata_internode_peer_offline_total", "Times another node stopped answering this one.", nil, nil),
		peerClockOffset: prometheus.NewDesc("strata_internode_clock_offset_seconds",
			"Largest difference, either way, between another online node's wall clock and this node's at their last pings (versions are stamped with the nodes' clocks).", nil, nil),
		healQueue:  prometheus.NewDesc("strata_heal_queue_length", "Objects waiting in the heal queue or being healed now.", nil, nil),
		healDrives: prometheus.NewDesc("strata_heal_drives_healing", "Drives being rebuilt.", nil, nil),
		healBehind: prometheus.NewDesc("strata_heal_writes_behind",
			"Writes acknowledged at write quorum whose work on a slow drive still runs in the background (a failure there is queued for healing).", nil, nil),
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
	for _, d := range []*prometheus.Desc{c.setDrives, c.setOnline, c.setHealthy, c.setWriteQuorum, c.setReadQuorum,
		c.poolState, c.drainObjects, c.drainBytes, c.peers, c.peerOfflineEvents, c.peerClockOffset} {
		ch <- d
	}
	ch <- c.healQueue
	ch <- c.healDrives
	ch <- c.healBehind
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
	gauge := func(d *prometheus.Desc, v int, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lv...)
	}
	for _, set := range s.Sets {
		lv := []string{set.Pool, strconv.Itoa(set.Set)}
		gauge(c.setDrives, set.Drives, lv...)
		gauge(c.setOnline, set.Online, lv...)
		gauge(c.setHealthy, set.Healthy, lv...)
		gauge(c.setWriteQuorum, set.WriteQuorum, lv...)
		gauge(c.setReadQuorum, set.ReadQuorum, lv...)
	}
	for _, p := range s.Pools {
		for _, st := range PoolStates {
			v := 0
			if st == p.State {
				v = 1
			}
			gauge(c.poolState, v, p.Name, st)
		}
	}
	for _, d := range s.Drains {
		lv := []string{d.Pool, strconv.Itoa(d.Set)}
		ch <- prometheus.MustNewConstMetric(c.drainObjects, prometheus.GaugeValue, float64(d.Objects), lv...)
		ch <- prometheus.MustNewConstMetric(c.drainBytes, prometheus.GaugeValue, float64(d.Bytes), lv...)
	}
	gauge(c.peers, s.Peers.Online, "online")
	gauge(c.peers, s.Peers.Offline, "offline")
	ch <- prometheus.MustNewConstMetric(c.peerOfflineEvents, prometheus.CounterValue, float64(s.Peers.OfflineEvents))
	ch <- prometheus.MustNewConstMetric(c.peerClockOffset, prometheus.GaugeValue, s.Peers.ClockOffset.Seconds())
	h := s.Heal
	ch <- prometheus.MustNewConstMetric(c.healQueue, prometheus.GaugeValue, float64(h.QueueLength))
	ch <- prometheus.MustNewConstMetric(c.healDrives, prometheus.GaugeValue, float64(h.DrivesHealing))
	ch <- prometheus.MustNewConstMetric(c.healBehind, prometheus.GaugeValue, float64(h.WritesBehind))
	for name, v := range map[string]int64{
		"queued": h.Queued, "dropped": h.Dropped, "objects": h.ObjectsHealed, "shards": h.ShardsHealed,
		"bytes": h.BytesHealed, "purged": h.Purged, "failed": h.Failed, "cycles": h.ScanCycles, "scanned": h.ScanObjects,
	} {
		ch <- prometheus.MustNewConstMetric(c.healCounters[name], prometheus.CounterValue, float64(v))
	}
}

// LifecycleActions are the action label's values.
var LifecycleActions = []string{"expire-current", "delete-noncurrent", "remove-delete-marker", "abort-upload", "kept-locked"}

// lifecycleCollector turns the lifecycle pass's counters, read at scrape
// time, into metrics.
type lifecycleCollector struct {
	read                          func() Lifecycle
	runs, versions, actions, last *prometheus.Desc
}

// RegisterLifecycle registers the lifecycle pass's metrics (a server node
// and a gateway replica each export those of the passes they ran).
func RegisterLifecycle(reg prometheus.Registerer, read func() Lifecycle) {
	reg.MustRegister(&lifecycleCollector{
		read:     read,
		runs:     prometheus.NewDesc("strata_lifecycle_runs_total", "Completed lifecycle passes over the buckets that have lifecycle rules.", nil, nil),
		versions: prometheus.NewDesc("strata_lifecycle_versions_scanned_total", "Object versions the lifecycle passes looked at.", nil, nil),
		actions: prometheus.NewDesc("strata_lifecycle_actions_total",
			"What lifecycle rules did: expire-current, delete-noncurrent, remove-delete-marker, abort-upload, and kept-locked (a version a lock kept).", []string{"action"}, nil),
		last: prometheus.NewDesc("strata_lifecycle_last_run_end_timestamp_seconds", "When the last lifecycle pass ended (0: none yet in this process).", nil, nil),
	})
}

func (c *lifecycleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.runs, c.versions, c.actions, c.last} {
		ch <- d
	}
}

func (c *lifecycleCollector) Collect(ch chan<- prometheus.Metric) {
	lc := c.read()
	ch <- prometheus.MustNewConstMetric(c.runs, prometheus.CounterValue, float64(lc.Runs))
	ch <- prometheus.MustNewConstMetric(c.versions, prometheus.CounterValue, float64(lc.Versions))
	for _, a := range LifecycleActions {
		ch <- prometheus.MustNewConstMetric(c.actions, prometheus.CounterValue, float64(lc.Actions[a]), a)
	}
	ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, lc.LastRunEnd)
}
