package engine

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// memoryCgroup is a cgroup v1 memory cgroup made for one test.
type memoryCgroup struct{ dir string }

// newMemoryCgroup makes a memory cgroup limited to limit bytes, removed
// when the test ends (after its processes, which cleanups registered
// later stop first).
func newMemoryCgroup(t *testing.T, limit int64) memoryCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOutsideCI(t, "needs root to make a memory cgroup")
	}
	base := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(base, "memory.limit_in_bytes")); err != nil {
		skipOutsideCI(t, "no cgroup v1 memory hierarchy at "+base)
	}
	cg := memoryCgroup{dir: filepath.Join(base, fmt.Sprintf("strata-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")))}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The kernel removes a cgroup once its last process has gone.
		waitFor(t, "the test cgroup emptied", 10*time.Second, func() bool { return os.Remove(cg.dir) == nil })
	})
	if err := os.WriteFile(filepath.Join(cg.dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cg
}

func (cg memoryCgroup) procs() string { return filepath.Join(cg.dir, "cgroup.procs") }

// value reads a number from one of the cgroup's files; key selects a line
// of a "key value" file.
func (cg memoryCgroup) value(t *testing.T, file, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if key == "" && len(f) == 1 || len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s has no %q", file, key)
	return 0
}

// TestMemoryLimitedServer: a server in a 256 MiB memory cgroup, as a pod
// with a 256 MiB memory limit runs it, finds its limit by itself (the
// cgroup), sets the Go runtime's soft limit from it, sizes the drives'
// shared metadata cache from it and bounds the requests moving object
// data at once. Under mixed 4 KiB and 16 MiB PUT and GET load from 144
// clients, then a drive wiped and healed while the load goes on, it is
// never OOM-killed, every request succeeds (a SlowDown the SDK retried
// included) and its resident memory stays under the limit with room to
// spare. (Without the bound, 160 clients PUTting 16 MiB objects had a
// server in 1 GiB killed within seconds: docs/engine.md.)
func TestMemoryLimitedServer(t *testing.T) {
	const limit = 256 << 20
	cg := newMemoryCgroup(t, limit)
	// The rebuild reads at up to 512 MiB/s (64 by default), so that
	// rebuilding 128 objects of 16 MiB under load takes seconds.
	extra := append([]string{"--heal-bytes-per-second", "536870912"}, strings.Fields(os.Getenv("STRATA_TEST_MEMORY_EXTRA"))...)
	s := startServer(t, serverOpts{drives: 4, cgroupProcs: cg.procs(), extra: extra})
	if m := regexp.MustCompile(`"msg":"memory limit","bytes":(\d+),"from":"([^"]+)","go_soft_limit":(\d+),"gogc":(\d+),"max_data_requests":(\d+),"metadata_cache":(\d+),"memtable":(\d+)`).FindStringSubmatch(s.logs()); m == nil {
		t.Fatalf("the server did not report the cgroup's memory limit:\n%s", s.logs())
	} else {
		t.Logf("server: memory limit %s bytes from %s, Go soft limit %s, GOGC %s, max data requests %s, metadata cache %s, memtables %s", m[1], m[2], m[3], m[4], m[5], m[6], m[7])
		if m[1] != strconv.Itoa(limit) || !strings.HasPrefix(m[2], cg.dir) {
			t.Fatalf("limit %s from %s, want %d from %s", m[1], m[2], limit, cg.dir)
		}
	}
	c := s.aws()
	mustCreateBucket(t, c, "mem")
	large, small := randomBytes(16<<20), randomBytes(4<<10)

	var stop atomic.Bool
	var ops, failed atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	// Each worker has keys of its own (concurrent writes of one key are
	// not what this test is about).
	work := func(worker int, data []byte, keys int) {
		defer wg.Done()
		for n := 0; !stop.Load(); n++ {
			key := fmt.Sprintf("w%03d/%d", worker, n%keys)
			var err error
			// One request in four a PUT: an overwritten version stays on
			// its drives for a minute, and the test's disk use with it.
			if n < keys || n%4 == 0 {
				_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("mem"), Key: aws.String(key), Body: bytes.NewReader(data)})
			} else {
				var out *s3.GetObjectOutput
				if out, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("mem"), Key: aws.String(key)}); err == nil {
					var got []byte
					got, err = io.ReadAll(out.Body)
					out.Body.Close()
					if err == nil && !bytes.Equal(got, data) {
						err = fmt.Errorf("GET %s: %d bytes, not what was put", key, len(got))
					}
				}
			}
			ops.Add(1)
			if err != nil {
				failed.Add(1)
				firstErr.Do(func() { t.Errorf("worker %d: %v", worker, err) })
			}
		}
	}
	// On a failure, the clients stop before the server does.
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	load := func() {
		stop.Store(false)
		for w := range 144 {
			wg.Add(1)
			if w < 128 {
				go work(w, large, 1)
			} else {
				go work(w, small, 8)
			}
		}
	}
	// The cgroup's usage counts the page cache the kernel reclaims at the
	// limit; its RSS is the process's own.
	var peakRSS atomic.Int64
	var sampling atomic.Bool
	sampling.Store(true)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Load() {
			select {
			case <-s.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if b, err := os.ReadFile(filepath.Join(cg.dir, "memory.stat")); err == nil {
				if m := regexp.MustCompile(`(?m)^total_rss (\d+)$`).FindSubmatch(b); m != nil {
					n, _ := strconv.ParseInt(string(m[1]), 10, 64)
					peakRSS.Store(max(peakRSS.Load(), n))
				}
			}
		}
	}()
	load()
	time.Sleep(10 * time.Second)
	stop.Store(true)
	wg.Wait()
	// A drive replaced while the server is down: it starts healing it
	// from parity, and reads of what it held are rebuilt meanwhile.
	s.stop()
	wipe(t, s.drives[0])
	s.restart()
	t.Logf("drive %s wiped after %d requests; load again while it heals", s.drives[0], ops.Load())
	load()
	healStart := time.Now()
	waitFor(t, "the wiped drive rebuilt", 90*time.Second, func() bool {
		st := s.healStatus()
		for _, d := range st.Drives {
			if d.Error != "" {
				t.Fatalf("drive heal failed: %+v", d)
			}
		}
		return len(st.Drives) > 0 && st.Drives[0].Done
	})
	t.Logf("drive rebuilt under load in %s", time.Since(healStart).Round(time.Second))
	stop.Store(true)
	wg.Wait()
	s.waitHealed(t) // what the load left queued
	sampling.Store(false)
	<-sampled

	var onDisk int64
	for _, d := range s.drives {
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if fi, err := e.Info(); err == nil {
					onDisk += fi.Size()
				}
			}
			return nil
		})
	}
	t.Logf("the drives hold %d MiB at the end", onDisk>>20)
	peak, ooms := cg.value(t, "memory.max_usage_in_bytes", ""), cg.value(t, "memory.oom_control", "oom_kill")
	t.Logf("%d requests, %d failed; peak RSS %d MiB (sampled every 200 ms), cgroup peak usage %d MiB of %d (page cache included), OOM kills %d",
		ops.Load(), failed.Load(), peakRSS.Load()>>20, peak>>20, limit>>20, ooms)
	select {
	case <-s.done:
		t.Fatalf("the server died under load (OOM kills: %d)", ooms)
	default:
	}
	if ooms != 0 {
		t.Errorf("%d OOM kill(s) in the server's cgroup", ooms)
	}
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed", failed.Load(), ops.Load())
	}
	// The cgroup would kill the server at the limit; the budget is meant
	// to keep it well below (the page cache the kernel reclaims aside).
	if budget := int64(limit) * 95 / 100; peakRSS.Load() > budget {
		t.Errorf("peak RSS %d MiB, over 95%% of the %d MiB limit", peakRSS.Load()>>20, limit>>20)
	}
}
