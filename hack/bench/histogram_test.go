package main

import (
	"math"
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	s := h.summary()
	cases := []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50, 500},
		{"p90", s.P90, 900},
		{"p99", s.P99, 990},
		{"p99.9", s.P999, 999},
		{"max", s.Max, 1000},
		{"mean", s.Mean, 500.5},
	}
	for _, c := range cases {
		// Three significant digits: within 0.1%.
		if math.Abs(c.got-c.want) > c.want*0.001 {
			t.Errorf("%s = %v ms, want %v ms", c.name, c.got, c.want)
		}
	}
	if s.Count != 1000 {
		t.Errorf("count = %d, want 1000", s.Count)
	}
}

func TestHistogramMergeAndClamp(t *testing.T) {
	a, b := newHistogram(), newHistogram()
	a.record(0)                // below the range: counted as 1µs
	b.record(time.Hour)        // above the range: counted at the ceiling
	b.record(time.Millisecond) // ordinary
	a.merge(b)
	if a.count() != 3 {
		t.Fatalf("merged count = %d, want 3", a.count())
	}
	s := a.summary()
	if want := float64(histogramMax.Milliseconds()); math.Abs(s.Max-want) > want*0.001 {
		t.Errorf("max = %v ms, want the %v ms ceiling", s.Max, want)
	}
	if s.P50 < 0.99 || s.P50 > 1.01 {
		t.Errorf("p50 = %v ms, want 1 ms", s.P50)
	}
}

func TestHistogramEmpty(t *testing.T) {
	if s := newHistogram().summary(); s != (LatencySummary{}) {
		t.Errorf("empty summary = %+v, want zeros", s)
	}
}
