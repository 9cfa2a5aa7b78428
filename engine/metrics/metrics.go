// Package metrics exposes a strata process's Prometheus metrics: S3
// requests by API and status with latency, time to first byte and bytes in
// and out (measured in a front-end middleware), and the node's drives,
// capacity and healing (collected from a snapshot when scraped).
package metrics

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"
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

// ObserveFirstByte records a GET's time to first byte.
func (m *S3) ObserveFirstByte(d time.Duration) { m.ttfb.Observe(d.Seconds()) }

// Middleware measures every S3 request. It runs in the front end after the
// request limiter, so requests refused for load are counted by the limiter
// (as SlowDown) and not here.
func (m *S3) Middleware() fiber.Handler {
	return func(c fiber.Ctx) error {
		rc := c.RequestCtx()
		api := APIName(string(rc.Method()), string(rc.Path()), rc.QueryArgs(), rc.Request.Header.Peek("X-Amz-Copy-Source") != nil)
		m.inflight.Inc()
		start := time.Now()
		err := c.Next()
		m.inflight.Dec()
		status := rc.Response.StatusCode()
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
		m.requests.WithLabelValues(api, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
		if n := rc.Request.Header.ContentLength(); n > 0 {
			m.bytesIn.WithLabelValues(api).Add(float64(n))
		}
		if n := rc.Response.Header.ContentLength(); n > 0 {
			m.bytesOut.WithLabelValues(api).Add(float64(n))
		}
		return err
	}
}

// APIName names the S3 API a request calls, from its method, path and
// query, the way AWS names operations.
func APIName(method, path string, q *fasthttp.Args, copySource bool) string {
	bucket, object := splitPath(path)
	has := func(k string) bool { return q.Has(k) }
	if bucket == "" {
		if method == "GET" {
			return "ListBuckets"
		}
		return "Unknown"
	}
	if object == "" {
		switch method {
		case "GET":
			switch {
			case has("uploads"):
				return "ListMultipartUploads"
			case has("versions"):
				return "ListObjectVersions"
			case has("versioning"):
				return "GetBucketVersioning"
			case has("location"):
				return "GetBucketLocation"
			case has("tagging"):
				return "GetBucketTagging"
			case has("policy"):
				return "GetBucketPolicy"
			case has("acl"):
				return "GetBucketAcl"
			case has("list-type"):
				return "ListObjectsV2"
			}
			return "ListObjects"
		case "HEAD":
			return "HeadBucket"
		case "PUT":
			switch {
			case has("versioning"):
				return "PutBucketVersioning"
			case has("tagging"):
				return "PutBucketTagging"
			case has("policy"):
				return "PutBucketPolicy"
			case has("acl"):
				return "PutBucketAcl"
			}
			return "CreateBucket"
		case "DELETE":
			switch {
			case has("tagging"):
				return "DeleteBucketTagging"
			case has("policy"):
				return "DeleteBucketPolicy"
			}
			return "DeleteBucket"
		case "POST":
			if has("delete") {
				return "DeleteObjects"
			}
		}
		return "Unknown"
	}
	switch method {
	case "GET":
		switch {
		case has("uploadId"):
			return "ListParts"
		case has("tagging"):
			return "GetObjectTagging"
		case has("attributes"):
			return "GetObjectAttributes"
		case has("acl"):
			return "GetObjectAcl"
		}
		return "GetObject"
	case "HEAD":
		return "HeadObject"
	case "PUT":
		switch {
		case has("partNumber") && copySource:
			return "UploadPartCopy"
		case has("partNumber"):
			return "UploadPart"
		case has("tagging"):
			return "PutObjectTagging"
		case has("acl"):
			return "PutObjectAcl"
		case copySource:
			return "CopyObject"
		}
		return "PutObject"
	case "POST":
		switch {
		case has("uploads"):
			return "CreateMultipartUpload"
		case has("uploadId"):
			return "CompleteMultipartUpload"
		}
	case "DELETE":
		switch {
		case has("uploadId"):
			return "AbortMultipartUpload"
		case has("tagging"):
			return "DeleteObjectTagging"
		}
		return "DeleteObject"
	}
	return "Unknown"
}

func splitPath(path string) (bucket, object string) {
	for len(path) > 0 && path[0] == '/' {
		path = path[1:]
	}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			return path[:i], path[i+1:]
		}
	}
	return path, ""
}
