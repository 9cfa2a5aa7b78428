package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func statsWith(op Op, n int, lat time.Duration, bytesEach int64) *opStats {
	s := newOpStats(op)
	for range n {
		s.lat.record(lat)
		s.bytes += bytesEach
		if s.ttfb != nil {
			s.ttfb.record(lat / 2)
		}
	}
	return s
}

func TestResultFill(t *testing.T) {
	p := Plan{Workload: Workload{Op: OpGet, Size: mib, Concurrency: 16}, Prepared: 512}
	r := newResult("minio", p, 1, 2*time.Second)
	s := statsWith(OpGet, 100, 10*time.Millisecond, mib)
	s.fail(errTest("boom"))
	r.fill(map[Op]*opStats{OpGet: s})
	if r.Workload != "get-1MiB" || r.Ops != 100 || r.Errors != 1 || r.FirstError != "boom" {
		t.Errorf("result = %+v", r)
	}
	if r.ObjPerSec != 50 || r.MiBPerSec != 50 {
		t.Errorf("rates = %v obj/s, %v MiB/s; want 50, 50", r.ObjPerSec, r.MiBPerSec)
	}
	if r.TTFB == nil || r.TTFB.P50 < 4.99 || r.TTFB.P50 > 5.01 {
		t.Errorf("TTFB = %+v, want p50 5 ms", r.TTFB)
	}
	if v, unit := r.Headline(); v != 50 || unit != "MiB/s" {
		t.Errorf("headline = %v %s, want 50 MiB/s", v, unit)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestResultFillMixed(t *testing.T) {
	p := Plan{Workload: Workload{Op: OpMixed, Size: 4096, Concurrency: 4}, Prepared: 100}
	r := newResult("x", p, 1, time.Second)
	r.fill(map[Op]*opStats{
		OpPut:  statsWith(OpPut, 10, time.Millisecond, 4096),
		OpGet:  statsWith(OpGet, 30, time.Millisecond, 4096),
		OpHead: statsWith(OpHead, 20, time.Millisecond, 0),
	})
	if r.Ops != 60 || r.ObjPerSec != 60 || r.TTFB != nil {
		t.Errorf("mixed totals = %d ops, %v obj/s, ttfb %v", r.Ops, r.ObjPerSec, r.TTFB)
	}
	var order []Op
	for _, b := range r.Breakdown {
		order = append(order, b.Op)
	}
	if len(order) != 3 || order[0] != OpPut || order[1] != OpGet || order[2] != OpHead {
		t.Errorf("breakdown order = %v, want put, get, head", order)
	}
	if r.Breakdown[1].TTFB == nil {
		t.Error("GET share of a mixed run lost its TTFB")
	}
	if v, unit := r.Headline(); v != 60 || unit != "obj/s" {
		t.Errorf("headline = %v %s", v, unit)
	}
}

func TestHeadline(t *testing.T) {
	for _, c := range []struct {
		r    Result
		unit string
	}{
		{Result{Op: OpPut, Size: 4096, ObjPerSec: 1}, "obj/s"},
		{Result{Op: OpPut, Size: 16 * mib, MiBPerSec: 1}, "MiB/s"},
		{Result{Op: OpHead, Size: 16 * mib, ObjPerSec: 1}, "obj/s"},
		{Result{Op: OpList, Size: 4096, ListedPerSec: 1}, "listed/s"},
	} {
		if v, unit := c.r.Headline(); unit != c.unit || v != 1 {
			t.Errorf("%s-%d headline = %v %s, want 1 %s", c.r.Op, c.r.Size, v, unit, c.unit)
		}
	}
}

func TestComparisonTable(t *testing.T) {
	res := func(target, workload string, op Op, size int64, v float64, endpoints int) Result {
		return Result{Target: target, Workload: workload, Op: op, Size: size, ObjPerSec: v, MiBPerSec: v, Endpoints: endpoints}
	}
	c := Comparison{Targets: []TargetReport{
		{Name: "strata", Status: "ok", PeakRSS: 200 * mib, Results: []Result{
			res("strata", "put-4KiB", OpPut, 4096, 1500, 1),
			res("strata", "head-4KiB", OpHead, 4096, 8000, 2),
		}},
		{Name: "minio", Status: "ok", PeakRSS: 1000 * mib, Results: []Result{
			res("minio", "put-4KiB", OpPut, 4096, 500, 1),
			func() Result { r := res("minio", "get-4KiB", OpGet, 4096, 3000, 1); r.OtherCPU = 0.8; return r }(),
		}},
		{Name: "versitygw", Status: "skipped: not selected"},
	}}
	var out bytes.Buffer
	if err := writeComparisonTable(&out, c); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"strata/minio", "strata/versitygw", // ratio columns
		"3.00x",                 // 1500 / 500
		"head-4KiB x2 replicas", // replica rows are told apart
		"0.20x",                 // RSS 200 / 1000
		"versitygw: skipped",    // status of targets that did not run
		"3000*",                 // a run shared with other work is marked
		"* other work",          // and explained
	} {
		if !strings.Contains(text, want) {
			t.Errorf("comparison table lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "n/a") < 2 {
		t.Errorf("missing figures should show as n/a ratios:\n%s", text)
	}
}

func TestResultTableAndJSON(t *testing.T) {
	p := Plan{Workload: Workload{Op: OpMixed, Size: 4096, Concurrency: 4}}
	r := newResult("versitygw", p, 1, time.Second)
	get := statsWith(OpGet, 5, time.Millisecond, 4096)
	get.fail(errTest("NoSuchKey: gone"))
	r.fill(map[Op]*opStats{OpGet: get})
	var out bytes.Buffer
	if err := writeResultTable(&out, []Result{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mixed-4KiB", "  get", "first: NoSuchKey: gone"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("result table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := writeJSON(&out, r); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"objects_per_s", "mib_per_s", "latency", "breakdown", "client_cpu_cores"} {
		if _, ok := back[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, out.String())
		}
	}
}

func TestComparisonTableClientSettings(t *testing.T) {
	res := func(workload, client string, v float64) Result {
		return Result{Workload: workload, Op: OpPut, Size: 4096, ObjPerSec: v, Endpoints: 1, Client: client}
	}
	strata := TargetReport{Name: "strata", Status: "ok", PeakRSS: 100 * mib, Results: []Result{res("put-4KiB", "lean", 2000), res("get-4KiB", "lean", 9000)}}
	strata = strata.add(TargetReport{Name: "strata", Status: "ok", PeakRSS: 300 * mib, Results: []Result{res("put-4KiB", "defaults", 1200), res("get-4KiB", "defaults", 6000)}}, "defaults")
	minio := TargetReport{Name: "minio", Status: "ok", PeakRSS: 900 * mib, Results: []Result{res("put-4KiB", "lean", 500), res("get-4KiB", "lean", 4000)}}
	minio = minio.add(TargetReport{Name: "minio", Status: "failed: get-4KiB: timeout", Results: []Result{res("put-4KiB", "defaults", 400)}}, "defaults")
	if strata.PeakRSS != 300*mib || len(strata.Results) != 4 || strata.Status != "ok" {
		t.Errorf("add: peak %d, %d results, status %q", strata.PeakRSS, len(strata.Results), strata.Status)
	}
	if minio.Status != "failed: get-4KiB: timeout (defaults clients)" {
		t.Errorf("add kept status %q, want the second run's failure", minio.Status)
	}
	var out bytes.Buffer
	if err := writeComparisonTable(&out, Comparison{Targets: []TargetReport{strata, minio}}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	// Each setting is compared with the same setting: 2000/500 and 1200/400.
	for _, want := range []string{"put-4KiB (defaults)", "4.00x", "3.00x", "get-4KiB (defaults)"} {
		if !strings.Contains(text, want) {
			t.Errorf("comparison lacks %q:\n%s", want, text)
		}
	}
	// A workload's rows sit together: put, put (defaults), get, get (defaults).
	order := []string{"put-4KiB ", "put-4KiB (defaults)", "get-4KiB ", "get-4KiB (defaults)"}
	last := -1
	for _, row := range order {
		i := strings.Index(text, row)
		if i <= last {
			t.Errorf("row %q out of order:\n%s", row, text)
		}
		last = i
	}
}

func TestFmtRatio(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{3, 1, "3.00x"}, {1, 4, "0.25x"}, {115, 29729, "0.0039x"}, {0, 1, "n/a"}, {1, 0, "n/a"}} {
		if got := fmtRatio(c.a, c.b); got != c.want {
			t.Errorf("fmtRatio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
