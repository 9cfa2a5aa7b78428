package metrics

import "github.com/prometheus/client_golang/prometheus"

// BucketQuota is a bucket with a quota: its usage and its limits (0: no
// limit on that figure).
type BucketQuota struct {
	Bucket                   string
	Bytes, Objects           int64
	QuotaBytes, QuotaObjects int64
}

// quotaCollector reports the buckets that have a quota, read at scrape
// time (every server reports every such bucket: alerts take the max).
type quotaCollector struct {
	buckets                  func() []BucketQuota
	bytes, objects           *prometheus.Desc
	quotaBytes, quotaObjects *prometheus.Desc
}

// RegisterBucketQuotas registers the usage and quota of every bucket that
// has a quota.
func RegisterBucketQuotas(reg prometheus.Registerer, buckets func() []BucketQuota) {
	l := []string{"bucket"}
	reg.MustRegister(&quotaCollector{buckets: buckets,
		bytes:        prometheus.NewDesc("strata_bucket_usage_bytes", "Bytes the bucket's versions hold (buckets with a quota).", l, nil),
		objects:      prometheus.NewDesc("strata_bucket_usage_objects", "Versions the bucket holds, delete markers not counted (buckets with a quota).", l, nil),
		quotaBytes:   prometheus.NewDesc("strata_bucket_quota_bytes", "The bucket's hard quota in bytes (0: no limit).", l, nil),
		quotaObjects: prometheus.NewDesc("strata_bucket_quota_objects", "The bucket's hard quota in objects (0: no limit).", l, nil),
	})
}

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.objects, c.quotaBytes, c.quotaObjects} {
		ch <- d
	}
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.buckets() {
		for d, v := range map[*prometheus.Desc]int64{c.bytes: b.Bytes, c.objects: b.Objects, c.quotaBytes: b.QuotaBytes, c.quotaObjects: b.QuotaObjects} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), b.Bucket)
		}
	}
}
