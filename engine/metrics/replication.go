package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Replication is bucket replication as it stands on this process.
type Replication struct {
	Remotes []ReplicationRemote
	Buckets []ReplicationBucket
}

// ReplicationRemote is one remote's backlog: the changes waiting to reach
// it and the time the oldest was stored (zero: none).
type ReplicationRemote struct {
	ARN     string
	Backlog int64
	Oldest  time.Time
}

// ReplicationBucket is one source bucket's counters since the start.
type ReplicationBucket struct {
	Bucket                             string
	Replicated, Failed, Retried, Bytes int64
}

// RegisterReplication exports replication: each remote's backlog and the
// age of its oldest change (what the lag alert watches), each bucket's
// counters, and the lag histogram, whose observer it returns (the time
// from a write to its copy at the destination).
func RegisterReplication(reg prometheus.Registerer, read func() Replication) (observeLag func(time.Duration)) {
	lag := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "replication_lag_seconds",
		Help:    "Time from a write (or delete, or tag change) to its copy at the replication destination.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}})
	reg.MustRegister(&replicationCollector{read: read}, lag)
	return func(d time.Duration) { lag.Observe(d.Seconds()) }
}

type replicationCollector struct{ read func() Replication }

var (
	replBacklogDesc = prometheus.NewDesc(namespace+"_replication_backlog_changes",
		"Changes stored and not yet replicated, by remote.", []string{"remote"}, nil)
	replAgeDesc = prometheus.NewDesc(namespace+"_replication_oldest_pending_seconds",
		"Age of the oldest change not yet replicated, by remote (0: none).", []string{"remote"}, nil)
	replChangesDesc = prometheus.NewDesc(namespace+"_replication_changes_total",
		"Replicated changes by source bucket and result: replicated, failed (marked FAILED, not retried), retried (an attempt to be made again).",
		[]string{"bucket", "result"}, nil)
	replBytesDesc = prometheus.NewDesc(namespace+"_replication_bytes_total", "Bytes copied to replication destinations, by source bucket.",
		[]string{"bucket"}, nil)
)

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replBacklogDesc
	ch <- replAgeDesc
	ch <- replChangesDesc
	ch <- replBytesDesc
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.read()
	for _, rm := range r.Remotes {
		ch <- prometheus.MustNewConstMetric(replBacklogDesc, prometheus.GaugeValue, float64(rm.Backlog), rm.ARN)
		age := 0.0
		if !rm.Oldest.IsZero() {
			age = time.Since(rm.Oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(replAgeDesc, prometheus.GaugeValue, age, rm.ARN)
	}
	for _, b := range r.Buckets {
		for result, v := range map[string]int64{"replicated": b.Replicated, "failed": b.Failed, "retried": b.Retried} {
			ch <- prometheus.MustNewConstMetric(replChangesDesc, prometheus.CounterValue, float64(v), b.Bucket, result)
		}
		ch <- prometheus.MustNewConstMetric(replBytesDesc, prometheus.CounterValue, float64(b.Bytes), b.Bucket)
	}
}
