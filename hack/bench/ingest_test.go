package main

import (
	"context"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIngestKeysAreUniqueAndSpread(t *testing.T) {
	const n, dirs = 30000, 300
	seen := map[string]bool{}
	perDir := map[string]int{}
	for i := range n {
		k := ingestKey(i, dirs)
		if seen[k] {
			t.Fatalf("key %q repeats at %d", k, i)
		}
		seen[k] = true
		parts := strings.Split(k, "/")
		if len(parts) != 3 || parts[0] != "ingest" {
			t.Fatalf("key %q is not ingest/DIR/NAME", k)
		}
		perDir[parts[1]]++
	}
	if len(perDir) != dirs {
		t.Errorf("keys use %d directories, want %d", len(perDir), dirs)
	}
	for d, c := range perDir {
		if c < n/dirs/2 || c > n/dirs*2 {
			t.Errorf("directory %s holds %d keys, want about %d", d, c, n/dirs)
		}
	}
	// Consecutive objects land in different directories (no sequential run).
	if strings.Split(ingestKey(0, dirs), "/")[1] == strings.Split(ingestKey(1, dirs), "/")[1] &&
		strings.Split(ingestKey(1, dirs), "/")[1] == strings.Split(ingestKey(2, dirs), "/")[1] {
		t.Error("the first keys share a directory: not spread")
	}
}

func TestTenthRates(t *testing.T) {
	if tenthRates(make([]time.Duration, 9)) != nil {
		t.Error("fewer than ten completions should give no tenths")
	}
	// 100 PUTs: the first 50 one per 10 ms, the last 50 one per 20 ms.
	var done []time.Duration
	var at time.Duration
	for i := range 100 {
		if i < 50 {
			at += 10 * time.Millisecond
		} else {
			at += 20 * time.Millisecond
		}
		done = append(done, at)
	}
	rates := tenthRates(done)
	for i, want := range []float64{100, 100, 100, 100, 100, 50, 50, 50, 50, 50} {
		if math.Abs(rates[i]-want) > 0.01 {
			t.Errorf("tenth %d: %.2f/s, want %.0f/s (all %v)", i, rates[i], want, rates)
		}
	}
}

func TestIngestFill(t *testing.T) {
	run := &ingestRun{objects: 20, size: 4096, failed: 1, firstError: "SlowDown: x",
		first: newHistogram(), last: newHistogram(), elapsed: 2 * time.Second,
		clientCPU: time.Second, server: procStats{cpu: 2 * time.Second, peakRSS: 1 << 20}}
	for i := range 19 {
		run.done = append(run.done, time.Duration(i+1)*100*time.Millisecond)
	}
	var res IngestResult
	run.fill(&res)
	if res.Written != 19 || res.Failed != 1 || res.Window != 1 || res.PayloadBytes != 19*4096 {
		t.Errorf("fill = written %d, failed %d, window %d, payload %d", res.Written, res.Failed, res.Window, res.PayloadBytes)
	}
	if res.PerSec != 9.5 || res.ServerCPU != 1 || res.ClientCPU != 0.5 || res.Ratio <= 0 {
		t.Errorf("fill = %.2f/s, server %.2f, client %.2f cores, ratio %.2f", res.PerSec, res.ServerCPU, res.ClientCPU, res.Ratio)
	}
	if want := 2e6 / 19; math.Abs(res.ServerCPUPerPut-want) > 1 {
		t.Errorf("CPU per PUT %.0f µs, want %.0f", res.ServerCPUPerPut, want)
	}
}

func TestAllocatedBytes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := allocatedBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 1<<20 || got > 2<<20 {
		t.Errorf("allocatedBytes = %d, want about 1 MiB", got)
	}
	if err := checkFreeSpace(dir, 1<<62); err == nil {
		t.Error("checkFreeSpace accepted an exabyte")
	}
	if err := checkFreeSpace(dir, 1); err != nil {
		t.Errorf("checkFreeSpace(1 byte) = %v", err)
	}
}

func TestIngestAgainstFakeS3(t *testing.T) {
	fake := &fakeS3{objects: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	target := Target{Name: "fake", Endpoints: []string{srv.URL}, AccessKey: "a", SecretKey: "b"}
	r := newRunner(target, ClientOptions{Concurrency: 4}, "bench", 4096)
	// The sampled "server" is this process.
	run, err := ingest(context.Background(), r, os.Getpid(), 200, 10, 4096, 4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var res IngestResult
	run.fill(&res)
	if res.Written != 200 || res.Failed != 0 || len(res.TenthsPerSec) != 10 || res.FirstLatency.Count != 20 || res.LastLatency.Count != 20 {
		t.Errorf("ingest = %d written, %d failed, tenths %v, latencies %d/%d", res.Written, res.Failed, res.TenthsPerSec,
			res.FirstLatency.Count, res.LastLatency.Count)
	}
	if n := fake.count("bench/ingest/"); n != 200 {
		t.Errorf("%d objects stored, want 200", n)
	}
	// Every object got bytes of its own.
	bodies := map[string]bool{}
	fake.mu.Lock()
	for _, b := range fake.objects {
		bodies[string(b)] = true
	}
	fake.mu.Unlock()
	if len(bodies) != 200 {
		t.Errorf("%d distinct bodies among 200 objects", len(bodies))
	}
}

// TestParseStoreFigures: the drives' metadata store series of a metrics
// page are summed (L0 sublevels: the most of any drive), and the write
// amplification is what they wrote over what they were given.
func TestParseStoreFigures(t *testing.T) {
	page := `# HELP strata_drive_metadata_applied_bytes_total x
# TYPE strata_drive_metadata_applied_bytes_total counter
strata_drive_metadata_applied_bytes_total{index="0",pool="pool-0",set="0"} 1000
strata_drive_metadata_applied_bytes_total{index="1",pool="pool-0",set="0"} 1000
strata_drive_metadata_written_bytes_total{index="0",kind="wal",pool="pool-0",set="0"} 1000
strata_drive_metadata_written_bytes_total{index="0",kind="flush",pool="pool-0",set="0"} 1000
strata_drive_metadata_written_bytes_total{index="0",kind="compaction",pool="pool-0",set="0"} 6000
strata_drive_metadata_written_bytes_total{index="1",kind="compaction",pool="pool-0",set="0"} 2000
strata_drive_metadata_write_stalls_total{index="1",pool="pool-0",set="0"} 3
strata_drive_metadata_write_stall_seconds_total{index="1",pool="pool-0",set="0"} 1.25
strata_drive_metadata_l0_sublevels{index="0",pool="pool-0",set="0"} 4
strata_drive_metadata_l0_sublevels{index="1",pool="pool-0",set="0"} 7
strata_drive_metadata_compaction_debt_bytes{index="1",pool="pool-0",set="0"} 5e+06
strata_s3_requests_total{api="PutObject"} 12
`
	want := StoreFigures{AppliedBytes: 2000, WALBytes: 1000, FlushedBytes: 1000, CompactedBytes: 8000, WriteAmp: 5,
		Stalls: 3, StallSeconds: 1.25, CompactionDebt: 5e6, MaxL0Sublevels: 7}
	if got := parseStoreFigures(page); got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
