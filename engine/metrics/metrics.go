// Package metrics exposes a strata process's Prometheus metrics: S3
// requests by API and status with latency, time to first byte and bytes in
// and out (reported by the S3 front end, engine/s3api), the S3 port's
// connections (http.go), and the node's drives,
// capacity and healing (collected from a snapshot when scraped).
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "strata"

// S3 holds the request metrics.
type S3 struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttfb     prometheus.Histogram
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inflight prometheus.Gauge
}

// latencyBuckets span a cached 4 KiB GET (sub-millisecond) to a large
// upload over a slow link.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewRegistry returns a registry with the Go runtime and process metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewS3 registers the request metrics.
func NewS3(reg prometheus.Registerer) *S3 {
	m := &S3{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "s3", Name: "requests_total",
			Help: "S3 requests by API and HTTP status.",
		}, []string{"api", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "s3", Name: "request_duration_seconds",
			Help: "Time to answer an S3 request (headers sent; streamed bodies continue after), by API.", Buckets: latencyBuckets,
		}, []string{"api"}),
		ttfb: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: "s3", Name: "ttfb_seconds",
			Help: "Time from a GET's arrival to the first byte of its body.", Buckets: latencyBuckets,
		}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "s3", Name: "received_bytes_total", Help: "Request body bytes, by API.",
		}, []string{"api"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: "s3", Name: "sent_bytes_total", Help: "Response body bytes, by API.",
		}, []string{"api"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: "s3", Name: "requests_in_flight", Help: "S3 requests being served.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.ttfb, m.bytesIn, m.bytesOut, m.inflight)
	return m
}

// Begin counts a request the S3 front end started (engine/s3api).
func (m *S3) Begin() { m.inflight.Inc() }

// Observe records a request the S3 front end answered (engine/s3api): its
// API, status, duration and body bytes.
func (m *S3) Observe(api string, status int, d time.Duration, in, out int64) {
	m.inflight.Dec()
	m.requests.WithLabelValues(api, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(api).Observe(d.Seconds())
	if in > 0 {
		m.bytesIn.WithLabelValues(api).Add(float64(in))
	}
	if out > 0 {
		m.bytesOut.WithLabelValues(api).Add(float64(out))
	}
}

// FirstByte records a GET's time to first byte (engine/s3api).
func (m *S3) FirstByte(d time.Duration) { m.ttfb.Observe(d.Seconds()) }
