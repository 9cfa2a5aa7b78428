package main

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1µs up to histogramMax, with
// three significant digits: about 80 KiB per histogram, and each worker owns
// its own so recording never takes a lock.
const histogramMax = 10 * time.Minute

type histogram struct {
	h *hdrhistogram.Histogram
}

func newHistogram() *histogram {
	return &histogram{h: hdrhistogram.New(1, histogramMax.Microseconds(), 3)}
}

// record adds one observation; values outside the range are clamped so a
// stuck request still counts rather than vanishing from the percentiles.
func (h *histogram) record(d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	if us > histogramMax.Microseconds() {
		us = histogramMax.Microseconds()
	}
	_ = h.h.RecordValue(us) // cannot fail: us is within the trackable range
}

func (h *histogram) merge(other *histogram) {
	h.h.Merge(other.h)
}

func (h *histogram) count() int64 {
	return h.h.TotalCount()
}

// LatencySummary is the part of a latency distribution the reports show, in
// milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func (h *histogram) summary() LatencySummary {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{
		Count: h.h.TotalCount(),
		Mean:  h.h.Mean() / 1000,
		P50:   ms(h.h.ValueAtPercentile(50)),
		P90:   ms(h.h.ValueAtPercentile(90)),
		P99:   ms(h.h.ValueAtPercentile(99)),
		P999:  ms(h.h.ValueAtPercentile(99.9)),
		Max:   ms(h.h.Max()),
	}
}
