package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/s3http"
)

// RegisterHTTP exports the S3 listener's connection statistics: open
// connections by phase, and the connections and requests its limits shed,
// timed out or refused (docs/security.md).
func RegisterHTTP(reg prometheus.Registerer, stats func() s3http.Stats) {
	reg.MustRegister(&httpCollector{stats: stats})
}

type httpCollector struct{ stats func() s3http.Stats }

var (
	httpConnsDesc = prometheus.NewDesc(namespace+"_s3_connections", "Open connections to the S3 port, by phase.", []string{"phase"}, nil)
	httpEventDesc = prometheus.NewDesc(namespace+"_s3_connection_events_total",
		"Connections closed or requests refused by the S3 port's limits, by event.", []string{"event"}, nil)
)

func (c *httpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- httpConnsDesc
	ch <- httpEventDesc
}

func (c *httpCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for phase, n := range map[string]int{"handshaking": st.Handshaking, "awaiting_header": st.AwaitingHeader, "serving": st.Serving, "idle": st.Idle} {
		ch <- prometheus.MustNewConstMetric(httpConnsDesc, prometheus.GaugeValue, float64(n), phase)
	}
	events := map[string]uint64{
		"accepted": st.Accepted, "shed_at_limit": st.ShedAtLimit, "shed_no_descriptors": st.ShedNoDescriptors,
		"rejected_at_limit": st.RejectedAtLimit, "header_timeout": st.HeaderTimeouts, "idle_timeout": st.IdleTimeouts,
		"handshake_timeout": st.HandshakeTimeouts, "handshake_error": st.HandshakeErrors, "slow_body": st.SlowBodies,
		"write_stall": st.WriteStalls, "refused_server_busy": st.RefusedServerBusy, "refused_client_busy": st.RefusedClientBusy,
	}
	for event, n := range events {
		ch <- prometheus.MustNewConstMetric(httpEventDesc, prometheus.CounterValue, float64(n), event)
	}
}
