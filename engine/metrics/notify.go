package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Notifications is the bucket notifications' queue as it stands.
type Notifications struct {
	// Queued, Delivered and Failed count events stored, delivered and
	// delivery attempts that failed (to be retried) since the start.
	Queued, Delivered, Failed int64
	// Backlog is the events stored and not yet delivered; Oldest the
	// time of the oldest of them (zero for none).
	Backlog int64
	Oldest  time.Time
	// Targets is how many targets and replication remotes are in force;
	// TargetsFileErrors counts reads of the targets file refused (the
	// targets in force kept).
	Targets           int
	TargetsFileErrors int64
}

// RegisterNotifications exports the notifications' queue: the counters,
// the backlog and the age of its oldest event (what the backlog alert
// watches).
func RegisterNotifications(reg prometheus.Registerer, read func() Notifications) {
	reg.MustRegister(&notifyCollector{read: read})
}

type notifyCollector struct{ read func() Notifications }

var (
	notifyEventsDesc = prometheus.NewDesc(namespace+"_notify_events_total",
		"Bucket notification events, by what happened: queued (stored with their write), delivered, failed (an attempt, retried).", []string{"result"}, nil)
	notifyBacklogDesc = prometheus.NewDesc(namespace+"_notify_backlog_events", "Bucket notification events stored and not yet delivered.", nil, nil)
	notifyAgeDesc     = prometheus.NewDesc(namespace+"_notify_oldest_undelivered_seconds",
		"Age of the oldest undelivered bucket notification event (0: none).", nil, nil)
	notifyTargetsDesc = prometheus.NewDesc(namespace+"_notify_targets",
		"Bucket notification targets and replication remotes in force (the targets file as last read).", nil, nil)
	notifyTargetsErrorsDesc = prometheus.NewDesc(namespace+"_notify_targets_file_errors_total",
		"Reads of the targets file refused (unreadable, malformed, or a target that cannot be opened): the targets in force stay.", nil, nil)
)

func (c *notifyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- notifyEventsDesc
	ch <- notifyBacklogDesc
	ch <- notifyAgeDesc
	ch <- notifyTargetsDesc
	ch <- notifyTargetsErrorsDesc
}

func (c *notifyCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.read()
	for result, v := range map[string]int64{"queued": n.Queued, "delivered": n.Delivered, "failed": n.Failed} {
		ch <- prometheus.MustNewConstMetric(notifyEventsDesc, prometheus.CounterValue, float64(v), result)
	}
	ch <- prometheus.MustNewConstMetric(notifyBacklogDesc, prometheus.GaugeValue, float64(n.Backlog))
	age := 0.0
	if !n.Oldest.IsZero() {
		age = time.Since(n.Oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(notifyAgeDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(notifyTargetsDesc, prometheus.GaugeValue, float64(n.Targets))
	ch <- prometheus.MustNewConstMetric(notifyTargetsErrorsDesc, prometheus.CounterValue, float64(n.TargetsFileErrors))
}
