package main

import (
	"strings"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	base := Workload{Concurrency: 16, Duration: 10 * time.Second, Mix: defaultMix}
	with := func(f func(*Workload)) Workload {
		w := base
		f(&w)
		return w
	}
	cases := []struct {
		name         string
		w            Workload
		wantPrepared int
		wantCount    int64
		wantWarmup   time.Duration
		wantErr      string
	}{
		{name: "put prepares nothing", w: with(func(w *Workload) { w.Op, w.Size = OpPut, 4096 })},
		{name: "get 4KiB default set", w: with(func(w *Workload) { w.Op, w.Size = OpGet, 4096 }), wantPrepared: 1000},
		{name: "get 1MiB capped by bytes", w: with(func(w *Workload) { w.Op, w.Size = OpGet, 1<<20 }), wantPrepared: 512},
		{name: "get 16MiB floor per worker", w: with(func(w *Workload) { w.Op, w.Size = OpGet, 16<<20 }), wantPrepared: 64},
		{name: "explicit objects", w: with(func(w *Workload) { w.Op, w.Size, w.Objects = OpHead, 4096, 300 }), wantPrepared: 300},
		{name: "delete is bounded by its set", w: with(func(w *Workload) { w.Op, w.Size = OpDelete, 4096 }), wantPrepared: 2000, wantCount: 2000},
		{name: "delete keeps a smaller count", w: with(func(w *Workload) { w.Op, w.Size, w.Count = OpDelete, 4096, 50 }), wantPrepared: 2000, wantCount: 50},
		{name: "warm-up kept for reads", w: with(func(w *Workload) { w.Op, w.Size, w.Warmup = OpGet, 4096, time.Second }), wantPrepared: 1000, wantWarmup: time.Second},
		{name: "warm-up dropped for writes", w: with(func(w *Workload) { w.Op, w.Size, w.Warmup = OpPut, 4096, time.Second })},
		{name: "count-only bound", w: with(func(w *Workload) { w.Op, w.Size, w.Duration, w.Count = OpPut, 4096, 0, 100 }), wantCount: 100},
		{name: "no bound", w: with(func(w *Workload) { w.Op, w.Size, w.Duration = OpPut, 4096, 0 }), wantErr: "duration or a count"},
		{name: "zero size", w: with(func(w *Workload) { w.Op = OpPut }), wantErr: "size must be positive"},
		{name: "zero clients", w: with(func(w *Workload) { w.Op, w.Size, w.Concurrency = OpPut, 4096, 0 }), wantErr: "concurrency"},
		{name: "too few objects", w: with(func(w *Workload) { w.Op, w.Size, w.Objects = OpGet, 4096, 8 }), wantErr: "cannot feed"},
		{name: "unknown op", w: with(func(w *Workload) { w.Op, w.Size = "scan", 4096 }), wantErr: "unknown workload"},
		{name: "empty mix", w: with(func(w *Workload) { w.Op, w.Size, w.Mix = OpMixed, 4096, Mix{} }), wantErr: "zero"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := plan(c.w)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("plan() error = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("plan() error = %v", err)
			}
			if p.Prepared != c.wantPrepared || p.Count != c.wantCount || p.Warmup != c.wantWarmup {
				t.Errorf("plan() = prepared %d, count %d, warm-up %s; want %d, %d, %s",
					p.Prepared, p.Count, p.Warmup, c.wantPrepared, c.wantCount, c.wantWarmup)
			}
		})
	}
}

func TestWorkerRangePartitionsTheSet(t *testing.T) {
	for _, tc := range []struct{ prepared, workers int }{{2000, 16}, {1000, 16}, {17, 16}, {16, 16}, {5, 3}} {
		next := 0
		for i := range tc.workers {
			lo, hi := workerRange(tc.prepared, tc.workers, i)
			if lo != next || hi < lo {
				t.Fatalf("%+v: worker %d got [%d,%d), want it to start at %d", tc, i, lo, hi, next)
			}
			if n := hi - lo; n < tc.prepared/tc.workers || n > tc.prepared/tc.workers+1 {
				t.Errorf("%+v: worker %d owns %d objects: unbalanced", tc, i, n)
			}
			next = hi
		}
		if next != tc.prepared {
			t.Errorf("%+v: ranges end at %d, want %d", tc, next, tc.prepared)
		}
	}
}

func TestKeysAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := range 100 {
		seen[preparedKey("set", i, 16)] = true
		seen[newKey("set", i%16, int64(i))] = true
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct keys, want 200", len(seen))
	}
	if k := preparedKey("set-4KiB", 17, 16); k != "set-4KiB/p01/00000017" {
		t.Errorf("preparedKey = %q", k)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{
		"4KiB": 4096, "64kib": 64 << 10, "1MiB": 1 << 20, "16M": 16 << 20, "1G": 1 << 30, "512": 512, "512B": 512,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "-4KiB", "4XB", "0"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded, want an error", bad)
		}
	}
	for n, want := range map[int64]string{4096: "4KiB", 1 << 20: "1MiB", 16 << 20: "16MiB", 1 << 30: "1GiB", 1000: "1000B", 1536: "1536B"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
	sizes, err := parseSizes("1MiB,4KiB")
	if err != nil || len(sizes) != 2 || sizes[0] != 4096 {
		t.Errorf("parseSizes = %v, %v; want sorted [4096 1048576]", sizes, err)
	}
}

func TestMix(t *testing.T) {
	m, err := parseMix("get=45,stat=30,put=15,delete=10")
	if err != nil || m != defaultMix {
		t.Fatalf("parseMix = %+v, %v; want %+v", m, err, defaultMix)
	}
	if back, err := parseMix(m.String()); err != nil || back != m {
		t.Errorf("round trip of %q = %+v, %v", m.String(), back, err)
	}
	counts := map[Op]int{}
	for r := range m.total() {
		counts[m.pick(r)]++
	}
	if counts[OpGet] != 45 || counts[OpHead] != 30 || counts[OpPut] != 15 || counts[OpDelete] != 10 {
		t.Errorf("pick over the whole range = %v, want the weights", counts)
	}
	for _, bad := range []string{"get", "get=-1", "list=3", "get=0", "get=x"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q) succeeded, want an error", bad)
		}
	}
}

func TestSuiteSteps(t *testing.T) {
	for _, suite := range []string{"engine", "gateway"} {
		for _, profile := range []string{"quick", "default", "full"} {
			stps, err := steps(suite, profile)
			if err != nil {
				t.Fatalf("steps(%s, %s): %v", suite, profile, err)
			}
			have := map[string]bool{}
			lastSmallUser, deleteAt, replicas := -1, -1, 0
			for i, s := range stps {
				have[stepLabel(s)] = true
				if s.Dataset == smallSet {
					lastSmallUser = i
				}
				if s.Op == OpDelete {
					deleteAt = i
				}
				if s.Replicas > 1 {
					replicas++
				}
			}
			for _, must := range []string{"put-4KiB", "get-4KiB", "head-4KiB", "put-1MiB", "get-1MiB"} {
				if !have[must] {
					t.Errorf("%s/%s lacks %s", suite, profile, must)
				}
			}
			if deleteAt >= 0 && deleteAt != lastSmallUser {
				t.Errorf("%s/%s: DELETE consumes the 4KiB set at step %d, but step %d still reads it", suite, profile, deleteAt, lastSmallUser)
			}
			if wantReplicas := map[string]int{"engine": 0, "gateway": 1}[suite]; replicas != wantReplicas {
				t.Errorf("%s/%s has %d replica steps, want %d", suite, profile, replicas, wantReplicas)
			}
		}
	}
	if _, err := steps("engine", "huge"); err == nil {
		t.Error("unknown profile accepted")
	}
}

func TestPlanStepCapsPutBytes(t *testing.T) {
	c := SuiteConfig{Concurrency: 16, Duration: time.Second, MaxBytes: 1 << 30}
	p, err := c.planStep(Step{Op: OpPut, Size: 16 << 20})
	if err != nil || p.Count != 64 {
		t.Errorf("16MiB PUT under a 1GiB cap: count %d, %v; want 64", p.Count, err)
	}
	c.Count = 10
	if p, _ := c.planStep(Step{Op: OpPut, Size: 16 << 20}); p.Count != 10 {
		t.Errorf("explicit smaller count lost: %d", p.Count)
	}
	if p, _ := c.planStep(Step{Op: OpGet, Size: 4096}); p.Count != 10 || p.Prepared != 1000 {
		t.Errorf("GET plan = count %d prepared %d", p.Count, p.Prepared)
	}
}

func TestListShapes(t *testing.T) {
	for _, c := range []struct {
		set       Set
		shape     ListShape
		prefix    string
		delimiter string
		want      int
	}{
		{Set{Objects: 100000, Dirs: 100}, ListAll, "", "", 100000},
		{Set{Objects: 100000, Dirs: 100}, ListTop, "", "/", 100},
		{Set{Objects: 100000, Dirs: 100}, ListDir, "p50/", "/", 1000},
		{Set{Objects: 10, Dirs: 16}, ListTop, "", "/", 10},       // fewer objects than directories
		{Set{Objects: 1001, Dirs: 4}, ListDir, "p02/", "/", 250}, // 1001 = 4 x 250 + 1: directory 0 has the extra
		{Set{Objects: 1003, Dirs: 4}, ListDir, "p02/", "/", 251},
	} {
		prefix, delimiter, want := c.set.listing(c.shape)
		if prefix != c.prefix || delimiter != c.delimiter || want != c.want {
			t.Errorf("%+v %q: listing = %q %q %d, want %q %q %d", c.set, c.shape, prefix, delimiter, want, c.prefix, c.delimiter, c.want)
		}
	}
	p, err := plan(Workload{Op: OpList, Size: 4096, Concurrency: 1, Duration: time.Second, Objects: 300, Dirs: 30, List: ListDir})
	if err != nil || p.ListPrefix != "p15/" || p.ListWant != 10 || p.Name() != "list-4KiB-dir" {
		t.Errorf("plan of a directory listing = %q want %d name %q, %v", p.ListPrefix, p.ListWant, p.Name(), err)
	}
	if p, _ := plan(Workload{Op: OpGet, Size: 4096, Concurrency: 1, Duration: time.Second}); p.Dirs != 16 || p.Set().key("s", 17) != "s/p01/00000017" {
		t.Errorf("default layout: %d directories, key %q", p.Dirs, p.Set().key("s", 17))
	}
	if _, err := plan(Workload{Op: OpList, Size: 4096, Concurrency: 1, Duration: time.Second, List: "sideways"}); err == nil {
		t.Error("unknown listing shape accepted")
	}
	for in, want := range map[string]ListShape{"all": ListAll, "": ListAll, "top": ListTop, "dir": ListDir} {
		if got, err := parseListShape(in); err != nil || got != want {
			t.Errorf("parseListShape(%q) = %q, %v", in, got, err)
		}
	}
}

func TestClientRuns(t *testing.T) {
	lean := ClientOptions{Concurrency: 16}
	if got := lean.settings(); got != "lean" {
		t.Errorf("lean settings = %q", got)
	}
	if got := lean.withSDKDefaults().settings(); got != "defaults" {
		t.Errorf("SDK defaults = %q", got)
	}
	if got := (ClientOptions{Checksums: true, FullSDK: true}).settings(); got != "checksums+full-sdk" {
		t.Errorf("partial settings = %q", got)
	}
	runs, err := clientRuns("both", lean)
	if err != nil || len(runs) != 2 || runs[0].settings() != "lean" || runs[1].settings() != "defaults" || runs[1].Concurrency != 16 {
		t.Errorf("both = %+v, %v", runs, err)
	}
	if runs, _ := clientRuns("defaults", lean); len(runs) != 1 || !runs[0].SignPayload {
		t.Errorf("defaults = %+v", runs)
	}
	if _, err := clientRuns("both", lean.withSDKDefaults()); err == nil {
		t.Error("both with defaults already on should be refused")
	}
	if _, err := clientRuns("fast", lean); err == nil {
		t.Error("unknown -clients accepted")
	}
}
