package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestReplicationLoad measures the replication targets on this
// machine (`make replication-load`; not in make test): the lag of 4 KiB
// PUTs at 200 a second (from the source's strata_replication_lag_seconds
// histogram: the time from each write to its copy at the destination),
// and what replication costs the source's 4 KiB PUT throughput (bin/bench,
// 16 lean clients, a replicated bucket and a plain one, both versioned,
// alternating which goes first; the destination runs on the same two
// cores, as it would not in production). STRATA_TEST_REPLICATION_LOAD=1
// runs it; STRATA_BENCH_BIN names bin/bench.
func TestReplicationLoad(t *testing.T) {
	if os.Getenv("STRATA_TEST_REPLICATION_LOAD") == "" {
		t.Skip("the replication load measurement runs with STRATA_TEST_REPLICATION_LOAD=1 (make replication-load)")
	}
	benchBin := os.Getenv("STRATA_BENCH_BIN")
	if benchBin == "" {
		t.Fatal("STRATA_BENCH_BIN must name bin/bench")
	}
	keys := "STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-key")
	dst := startServer(t, serverOpts{drives: 4, env: []string{keys}})
	remote := replicationRemote(t, dst)
	// STRATA_TEST_REPLICATION_RTT (e.g. 50ms): the destination as a
	// distant site, each request held that long by a proxy before it is
	// passed on (no netem here; the connections are kept, as the remote's
	// are).
	if v := os.Getenv("STRATA_TEST_REPLICATION_RTT"); v != "" {
		rtt, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		remote = distantRemote(t, dst, rtt)
		t.Logf("the destination behind a proxy adding %s a request", rtt)
	}
	srcEnv := append(slices.Clone(remote), keys)
	// STRATA_TEST_PPROF_DIR: the source's CPU profile during each round's
	// runs (8 s), to see where replication's CPU goes.
	profDir, pprofAddr := os.Getenv("STRATA_TEST_PPROF_DIR"), ""
	if profDir != "" {
		pprofAddr = freeAddr(t)
		srcEnv = append(srcEnv, "STRATA_PPROF_ADDR="+pprofAddr)
	}
	src := startServer(t, serverOpts{drives: 4, env: srcEnv})
	sc, dc := src.aws(), dst.aws()
	versionedBucket(t, sc, "repl")
	versionedBucket(t, sc, "plain")
	versionedBucket(t, dc, "dst")
	replicateAll(t, src, "repl", "dst")

	drain := func() {
		t.Helper()
		waitFor(t, "the replication backlog to drain", 5*time.Minute, func() bool { return replicationDrained(src) })
	}

	// Lag at 200 PUT/s.
	rate, seconds := 200, 30
	if v := os.Getenv("STRATA_TEST_REPLICATION_SECONDS"); v != "" {
		seconds, _ = strconv.Atoi(v)
	}
	body := randomBytes(4096)
	jobs := make(chan int, 64)
	var late, failed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("repl"), Key: aws.String(fmt.Sprintf("lag/%06d", i)),
					Body: bytes.NewReader(body)}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := 0; i < rate*seconds; i++ {
		<-tick.C
		select {
		case jobs <- i:
		default:
			late.Add(1)
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	drain()
	if failed.Load() > 0 {
		t.Fatalf("%d PUTs failed", failed.Load())
	}
	_, families := scrapeMetrics(t, http.DefaultClient, src.url(), "")
	h := families["strata_replication_lag_seconds"].GetMetric()[0].GetHistogram()
	var bounds []float64
	var counts []uint64
	for _, b := range h.GetBucket() {
		bounds, counts = append(bounds, b.GetUpperBound()), append(counts, b.GetCumulativeCount())
	}
	total := h.GetSampleCount()
	t.Logf("lag at %d PUT/s for %ds (%d PUTs, %d not sent on time): p50 %.3fs, p90 %.3fs, p99 %.3fs (histogram, interpolated), mean %.3fs",
		rate, seconds, total, late.Load(), quantile(0.5, bounds, counts), quantile(0.9, bounds, counts), quantile(0.99, bounds, counts),
		h.GetSampleSum()/float64(total))
	if p99 := quantile(0.99, bounds, counts); p99 >= 5 {
		t.Errorf("lag p99 %.2fs: the target is under 5s", p99)
	}
	sameVersions(t, sc, dc, "repl", "dst", time.Minute)

	// Cost: bin/bench PUT rounds on both buckets.
	rounds := 4
	if v := os.Getenv("STRATA_TEST_REPLICATION_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	if rounds == 0 {
		return // the lag alone
	}
	// Lean clients, and the SDK's defaults (signed payloads, checksums,
	// the whole middleware stack).
	for _, client := range []struct {
		name  string
		flags []string
	}{{"lean", nil}, {"SDK defaults", []string{"-sign-payload", "-checksums", "-full-sdk"}}} {
		measureCost(t, src, benchBin, drain, client.name, client.flags, rounds, profDir, pprofAddr, costCase{"repl", "replication", 15})
	}
	sameVersions(t, sc, dc, "repl", "dst", time.Minute)
}

// distantRemote is replicationRemote through a proxy that holds each
// request rtt before passing it to dst unchanged (its Host too: the
// signature covers it).
func distantRemote(t *testing.T, dst *server, rtt time.Duration) []string {
	t.Helper()
	target, err := url.Parse(dst.url())
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	proxy := &httputil.ReverseProxy{Transport: tr, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
	}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(rtt)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return replicationRemoteAt(t, front.URL)
}

// costCase is the bucket whose PUTs carry a feature's work (replicated,
// notified), what the log calls it, and its target (at most this many
// percent of the plain bucket's PUT throughput).
type costCase struct {
	bucket, feature string
	targetPercent   int
}

// measureCost runs rounds of bin/bench PUTs on bucket plain and on the
// case's, alternating which goes first, and logs both.
func measureCost(t *testing.T, src *server, benchBin string, drain func(), client string, flags []string, rounds int, profDir, pprofAddr string, c costCase) {
	type run struct {
		perSec, cpuPerPut, drainSeconds float64
		store                           storeBytes
	}
	results := map[string][]run{}
	for r := range rounds {
		order := []string{"plain", c.bucket}
		if r%2 == 1 {
			order = []string{c.bucket, "plain"}
		}
		for _, bucket := range order {
			before, storeBefore := procCPUSeconds(t, src.cmd.Process.Pid), readStoreBytes(t, src)
			out := filepath.Join(t.TempDir(), "bench.json")
			args := append([]string{"run", "-endpoint", src.url(), "-bucket", bucket, "-prefix", fmt.Sprintf("cost-%s-%d", strings.ReplaceAll(client, " ", "-"), r),
				"-op", "put", "-size", "4KiB", "-concurrency", "16", "-duration", "10s", "-json", out}, flags...)
			cmd := exec.Command(benchBin, args...)
			cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+rootUser, "AWS_SECRET_ACCESS_KEY="+rootPassword)
			var prof sync.WaitGroup
			if profDir != "" {
				name := fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(client, " ", "-"), bucket, r)
				prof.Go(func() {
					time.Sleep(1500 * time.Millisecond) // after bench's preparation
					saveProfile(t, pprofAddr, "profile?seconds=8", filepath.Join(profDir, name+".pprof"))
					// What is in the heap near the run's end (the events
					// waiting for delivery among it).
					saveProfile(t, pprofAddr, "heap", filepath.Join(profDir, name+"-heap.pprof"))
				})
			}
			b, err := cmd.CombinedOutput()
			prof.Wait()
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, b)
			}
			drained := time.Now()
			drain() // the copies (deliveries) made after the run are its cost too
			cpu := procCPUSeconds(t, src.cmd.Process.Pid) - before
			var res []struct {
				Ops       int64   `json:"ops"`
				Errors    int64   `json:"errors"`
				ObjPerSec float64 `json:"objects_per_s"`
			}
			raw, err := os.ReadFile(out)
			if err != nil || json.Unmarshal(raw, &res) != nil || len(res) != 1 || res[0].Errors > 0 {
				t.Fatalf("bench result: %v %s", err, raw)
			}
			results[bucket] = append(results[bucket], run{res[0].ObjPerSec, cpu / float64(res[0].Ops) * 1e6, time.Since(drained).Seconds(),
				readStoreBytes(t, src).since(storeBefore, float64(res[0].Ops))})
		}
	}
	mean := func(rs []run, f func(run) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	for _, b := range []string{"plain", c.bucket} {
		var parts []string
		for _, r := range results[b] {
			parts = append(parts, fmt.Sprintf("%.0f (%.1fs)", r.perSec, r.drainSeconds))
		}
		t.Logf("%s clients, %s: PUT/s (and the time its deliveries took after the run) %s (mean %.0f), server CPU per PUT with the deliveries made after the run %.0f us", client, b, strings.Join(parts, " / "),
			mean(results[b], func(r run) float64 { return r.perSec }), mean(results[b], func(r run) float64 { return r.cpuPerPut }))
		t.Logf("%s clients, %s: the drives' metadata stores per PUT (all drives): %.0f bytes applied, %.0f to the log, %.0f flushed, %.0f compacted", client, b,
			mean(results[b], func(r run) float64 { return r.store.applied }), mean(results[b], func(r run) float64 { return r.store.wal }),
			mean(results[b], func(r run) float64 { return r.store.flush }), mean(results[b], func(r run) float64 { return r.store.compaction }))
	}
	plain, with := mean(results["plain"], func(r run) float64 { return r.perSec }), mean(results[c.bucket], func(r run) float64 { return r.perSec })
	t.Logf("%s clients: %s costs %.1f%% of the server's 4 KiB PUT throughput (target: at most %d%%)", client, c.feature, (1-with/plain)*100, c.targetPercent)
}

// storeBytes are the drives' metadata stores' bytes, summed over the
// drives: applied (the batches given), and written to the log, by
// flushes and by compactions.
type storeBytes struct{ applied, wal, flush, compaction float64 }

func readStoreBytes(t *testing.T, s *server) storeBytes {
	t.Helper()
	_, families := scrapeMetrics(t, http.DefaultClient, s.url(), "")
	var b storeBytes
	if f := families["strata_drive_metadata_applied_bytes_total"]; f != nil {
		for _, m := range f.Metric {
			b.applied += m.GetCounter().GetValue()
		}
	}
	if f := families["strata_drive_metadata_written_bytes_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() != "kind" {
					continue
				}
				switch v := m.GetCounter().GetValue(); l.GetValue() {
				case "wal":
					b.wal += v
				case "flush":
					b.flush += v
				case "compaction":
					b.compaction += v
				}
			}
		}
	}
	return b
}

// since is what the stores did after before, per one of n requests.
func (b storeBytes) since(before storeBytes, n float64) storeBytes {
	return storeBytes{(b.applied - before.applied) / n, (b.wal - before.wal) / n, (b.flush - before.flush) / n, (b.compaction - before.compaction) / n}
}

// saveProfile fetches one of the server's /debug/pprof profiles into path.
func saveProfile(t *testing.T, addr, profile, path string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + profile)
	if err != nil {
		t.Errorf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	_ = os.WriteFile(path, buf.Bytes(), 0o644)
}

// quantile estimates the q-quantile of a cumulative histogram as
// Prometheus's histogram_quantile does: linearly within the bucket.
func quantile(q float64, bounds []float64, cumulative []uint64) float64 {
	if len(cumulative) == 0 || cumulative[len(cumulative)-1] == 0 {
		return math.NaN()
	}
	rank := q * float64(cumulative[len(cumulative)-1])
	i := sort.Search(len(cumulative), func(i int) bool { return float64(cumulative[i]) >= rank })
	if i == len(bounds) {
		return bounds[len(bounds)-1]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = bounds[i-1], float64(cumulative[i-1])
	}
	in := float64(cumulative[i]) - below
	if in == 0 {
		return bounds[i]
	}
	return lo + (bounds[i]-lo)*(rank-below)/in
}

// procCPUSeconds is a process's user and system CPU time.
func procCPUSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is 3, utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
