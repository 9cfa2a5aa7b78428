package main

import (
	"context"
	crand "crypto/rand"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// IngestResult is what `bench ingest` measured: a large number of new small
// objects written into one bucket, and how the rate held up as it filled.
type IngestResult struct {
	Target      string `json:"target"`
	Version     string `json:"version"`
	Durability  string `json:"durability"`
	Objects     int    `json:"objects"`
	Written     int64  `json:"written"`
	Failed      int64  `json:"failed"`
	FirstError  string `json:"first_error,omitempty"`
	Size        int64  `json:"size_bytes"`
	Concurrency int    `json:"concurrency"`
	Dirs        int    `json:"dirs"`
	Client      string `json:"client_settings"`
	// Seconds and PerSec are the whole run's.
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_s"`
	// Window is a tenth of the PUTs that succeeded; FirstPerSec is the rate
	// of the first window to complete, LastPerSec of the last.
	Window      int     `json:"window"`
	FirstPerSec float64 `json:"first_per_s"`
	LastPerSec  float64 `json:"last_per_s"`
	Ratio       float64 `json:"ratio"`
	// TenthsPerSec is the rate of each tenth of the PUTs, in the order
	// they completed.
	TenthsPerSec []float64      `json:"tenths_per_s"`
	FirstLatency LatencySummary `json:"first_latency"`
	LastLatency  LatencySummary `json:"last_latency"`
	// CPU in cores, averaged over the run (see Result).
	ClientCPU float64 `json:"client_cpu_cores"`
	ServerCPU float64 `json:"server_cpu_cores"`
	OtherCPU  float64 `json:"other_cpu_cores"`
	// ServerCPUPerPut is the server's CPU time per successful PUT, in µs.
	ServerCPUPerPut float64 `json:"server_cpu_per_put_us"`
	ServerPeakRSS   int64   `json:"server_peak_rss_bytes"`
	// DriveBytes is the space allocated under each drive directory once
	// the server has stopped; DiskBytes their sum, PayloadBytes what the
	// clients wrote.
	DriveBytes   []int64 `json:"drive_bytes"`
	DiskBytes    int64   `json:"disk_bytes"`
	PayloadBytes int64   `json:"payload_bytes"`
	// Store is what the drives' metadata stores reported at the end,
	// summed over the four (strata's /strata/metrics).
	Store        *StoreFigures `json:"metadata_store,omitempty"`
	LoadAvgStart string        `json:"load_avg_at_start"`
	LoadAvgEnd   string        `json:"load_avg_at_end"`
	Started      string        `json:"started"`
	Commit       string        `json:"commit"`
}

// ingestDisk is the disk space a run needs per payload byte: two of four
// shards are parity, and metadata, write-ahead logs and compaction's
// temporary copies come on top.
const ingestDisk = 3

// cmdIngest runs `bench ingest`: a strata server of its own (4 drive
// directories, 2+2, durable: the server's default), and -objects new
// objects of unique keys from -concurrency writers, each PUT timed as it
// completes.
func cmdIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o       ClientOptions
		bin     = fs.String("strata", "", "strata binary to start (4 drive directories, 2+2, durable)")
		objects = fs.Int("objects", 1000000, "objects to write")
		size    = fs.String("size", "4KiB", "object size")
		dirs    = fs.Int("dirs", 300, "directories (key prefixes) the keys spread over")
		tmp     = fs.String("tmp", "", "where the server's drive directories go (default $TMPDIR)")
		out     = fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	)
	fs.IntVar(&o.Concurrency, "concurrency", 16, "writers")
	clientSettingFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *objects < 10 || *dirs < 1 || o.Concurrency < 1 {
		return fmt.Errorf("ingest: -strata is required, -objects must be at least 10, -dirs and -concurrency positive")
	}
	n, err := parseSize(*size)
	if err != nil {
		return err
	}
	if err := checkFreeSpace(*tmp, uint64(*objects)*uint64(n)*ingestDisk); err != nil {
		return err
	}
	kind := strataServerKind(*bin, nil)
	srv, err := startScratch(ctx, kind, *tmp, "")
	if err != nil {
		return err
	}
	defer srv.close()
	res := IngestResult{Target: kind.description, Version: binaryVersion(kind),
		Durability: "durable: every write synced before it is acknowledged (strata server's default)",
		Objects:    *objects, Size: n, Concurrency: o.Concurrency, Dirs: *dirs, Client: o.settings(),
		LoadAvgStart: loadAvg(), Started: time.Now().UTC().Format(time.RFC3339), Commit: gitCommit()}
	fmt.Fprintf(stderr, "%s (%s), %s clients: %d x %s from %d writers into %d directories; data in %s\n",
		res.Target, res.Version, res.Client, *objects, formatSize(n), o.Concurrency, *dirs, srv.root)

	r := newRunner(srv.target(), o, "bench-ingest", n)
	if err := r.ensureBucket(ctx); err != nil {
		return err
	}
	run, err := ingest(ctx, r, srv.pid(), *objects, *dirs, n, o.Concurrency, stderr)
	if err != nil {
		return err
	}
	run.fill(&res)
	res.LoadAvgEnd = loadAvg()
	if res.Written < 10 {
		return fmt.Errorf("ingest: only %d PUTs succeeded (%d failed, first: %s)", res.Written, res.Failed, res.FirstError)
	}

	if st, err := storeFigures(ctx, srv.endpoint); err != nil {
		fmt.Fprintf(stderr, "metadata store figures: %v\n", err)
	} else {
		res.Store = &st
	}

	// Bytes on disk once the server has closed its drives.
	srv.stop()
	for i := 1; i <= 4; i++ {
		b, err := allocatedBytes(filepath.Join(srv.dataDir(), fmt.Sprintf("d%d", i)))
		if err != nil {
			return err
		}
		res.DriveBytes = append(res.DriveBytes, b)
		res.DiskBytes += b
	}
	fmt.Fprintf(stderr, "%s: %d objects in %.0fs, %.0f/s; first tenth %.0f/s, last %.0f/s (%.2fx); %d failed; "+
		"server %.2f cores, %.0f µs CPU per PUT, peak RSS %s; %s on the drives (%.1fx the payload); load %s -> %s\n",
		res.Target, res.Written, res.Seconds, res.PerSec, res.FirstPerSec, res.LastPerSec, res.Ratio, res.Failed,
		res.ServerCPU, res.ServerCPUPerPut, fmtBytes(res.ServerPeakRSS), fmtBytes(res.DiskBytes),
		float64(res.DiskBytes)/float64(res.PayloadBytes), res.LoadAvgStart, res.LoadAvgEnd)
	if st := res.Store; st != nil {
		fmt.Fprintf(stderr, "metadata stores: %s applied, %s written (WAL %s, flushes %s, compactions %s): write amplification %.1fx; "+
			"%d write stalls, %.1fs in all; compaction debt %s, L0 sublevels up to %d\n",
			fmtBytes(int64(st.AppliedBytes)), fmtBytes(int64(st.WALBytes+st.FlushedBytes+st.CompactedBytes)), fmtBytes(int64(st.WALBytes)),
			fmtBytes(int64(st.FlushedBytes)), fmtBytes(int64(st.CompactedBytes)), st.WriteAmp, st.Stalls, st.StallSeconds,
			fmtBytes(int64(st.CompactionDebt)), st.MaxL0Sublevels)
	}
	return writeJSONFile(*out, res, stdout)
}

// StoreFigures are the drives' metadata store metrics, summed over the
// drives (L0 sublevels: the most of any drive).
type StoreFigures struct {
	AppliedBytes   uint64  `json:"applied_bytes"`
	WALBytes       uint64  `json:"wal_bytes"`
	FlushedBytes   uint64  `json:"flushed_bytes"`
	CompactedBytes uint64  `json:"compacted_bytes"`
	WriteAmp       float64 `json:"write_amplification"`
	Stalls         uint64  `json:"write_stalls"`
	StallSeconds   float64 `json:"write_stall_seconds"`
	CompactionDebt uint64  `json:"compaction_debt_bytes"`
	MaxL0Sublevels int     `json:"max_l0_sublevels"`
}

// storeFigures reads a strata server's metadata store metrics.
func storeFigures(ctx context.Context, endpoint string) (StoreFigures, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/strata/metrics", nil)
	if err != nil {
		return StoreFigures{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return StoreFigures{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return StoreFigures{}, fmt.Errorf("GET /strata/metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return StoreFigures{}, err
	}
	return parseStoreFigures(string(body)), nil
}

// parseStoreFigures sums the strata_drive_metadata_ series of a metrics
// page (Prometheus text format).
func parseStoreFigures(page string) StoreFigures {
	var st StoreFigures
	for line := range strings.Lines(page) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "strata_drive_metadata_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			continue
		}
		name, labels, _ := strings.Cut(line[:i], "{")
		switch name {
		case "strata_drive_metadata_applied_bytes_total":
			st.AppliedBytes += uint64(v)
		case "strata_drive_metadata_written_bytes_total":
			switch {
			case strings.Contains(labels, `kind="wal"`):
				st.WALBytes += uint64(v)
			case strings.Contains(labels, `kind="flush"`):
				st.FlushedBytes += uint64(v)
			case strings.Contains(labels, `kind="compaction"`):
				st.CompactedBytes += uint64(v)
			}
		case "strata_drive_metadata_write_stalls_total":
			st.Stalls += uint64(v)
		case "strata_drive_metadata_write_stall_seconds_total":
			st.StallSeconds += v
		case "strata_drive_metadata_compaction_debt_bytes":
			st.CompactionDebt += uint64(v)
		case "strata_drive_metadata_l0_sublevels":
			st.MaxL0Sublevels = max(st.MaxL0Sublevels, int(v))
		}
	}
	if st.AppliedBytes > 0 {
		st.WriteAmp = float64(st.WALBytes+st.FlushedBytes+st.CompactedBytes) / float64(st.AppliedBytes)
	}
	return st
}

// ingestRun is what the writers of one ingest observed.
type ingestRun struct {
	objects    int
	done       []time.Duration // when the i-th PUT to succeed did, since the start
	failed     int64
	firstError string
	first      *histogram // latencies of the first tenth of PUTs to complete
	last       *histogram // and of the last (of the PUTs asked for)
	size       int64
	elapsed    time.Duration
	clientCPU  time.Duration
	server     procStats
	otherCPU   float64 // cores
}

// ingest writes objects new objects of the given size from concurrency
// writers, each with fresh random bytes, and times each PUT as it
// completes.
func ingest(ctx context.Context, r *Runner, pid, objects, dirs int, size int64, concurrency int, progress io.Writer) (*ingestRun, error) {
	sampler, err := startProcSampler(pid)
	if err != nil {
		return nil, err
	}
	run := &ingestRun{objects: objects, size: size, first: newHistogram(), last: newHistogram()}
	done := make([]atomic.Int64, objects)
	window := max(objects/10, 1)
	var next, completed, failed atomic.Int64
	var mu sync.Mutex // guards the histograms and firstError
	cpu0 := selfCPU()
	machine0, _, machineErr := machineCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Go(func() {
			var seed [32]byte
			_, _ = crand.Read(seed[:])
			rng := rand.NewChaCha8(seed)
			buf := make([]byte, size)
			w := newWorker(i, r.client(i), r.Bucket, "", size, buf)
			first, last := newHistogram(), newHistogram()
			defer func() {
				mu.Lock()
				run.first.merge(first)
				run.last.merge(last)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= objects {
					return
				}
				// New bytes for every object: nothing below can
				// deduplicate or compress them.
				_, _ = rng.Read(buf)
				t0 := time.Now()
				if err := w.put(ctx, ingestKey(k, dirs)); err != nil {
					if failed.Add(1) == 1 {
						mu.Lock()
						run.firstError = errorCode(err)
						mu.Unlock()
					}
					continue
				}
				now := time.Now()
				c := int(completed.Add(1)) - 1
				done[c].Store(int64(now.Sub(start)))
				switch {
				case c < window:
					first.record(now.Sub(t0))
				case c >= objects-window:
					last.record(now.Sub(t0))
				}
				if (c+1)%window == 0 {
					since := time.Duration(0)
					if c+1 > window {
						since = time.Duration(done[c-window].Load())
					}
					fmt.Fprintf(progress, "   %3d%%  %9d PUTs  %6.0fs  this tenth %6.0f/s\n", (c+1)*100/objects, c+1,
						now.Sub(start).Seconds(), float64(window)/(now.Sub(start)-since).Seconds())
				}
			}
		})
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	run.clientCPU = selfCPU() - cpu0
	run.server = sampler.stop()
	machine1, _, machineErr1 := machineCPU()
	if machineErr == nil && machineErr1 == nil {
		busy := machine1 - machine0 - run.clientCPU - run.server.cpu
		run.otherCPU = max(busy.Seconds()/run.elapsed.Seconds(), 0)
	}
	run.failed = failed.Load()
	run.done = make([]time.Duration, completed.Load())
	for i := range run.done {
		run.done[i] = time.Duration(done[i].Load())
	}
	return run, ctx.Err()
}

// fill computes the rates and figures of res from what the writers saw.
func (run *ingestRun) fill(res *IngestResult) {
	got := len(run.done)
	res.Written, res.Failed, res.FirstError = int64(got), run.failed, run.firstError
	res.PayloadBytes = int64(got) * run.size
	res.Seconds = run.elapsed.Seconds()
	res.PerSec = float64(got) / res.Seconds
	res.TenthsPerSec = tenthRates(run.done)
	if got >= 10 {
		res.Window = got / 10
		res.FirstPerSec, res.LastPerSec = res.TenthsPerSec[0], res.TenthsPerSec[9]
		res.Ratio = res.LastPerSec / res.FirstPerSec
	}
	res.FirstLatency, res.LastLatency = run.first.summary(), run.last.summary()
	res.ClientCPU = run.clientCPU.Seconds() / res.Seconds
	res.ServerCPU = run.server.cpu.Seconds() / res.Seconds
	res.OtherCPU = run.otherCPU
	if got > 0 {
		res.ServerCPUPerPut = float64(run.server.cpu.Microseconds()) / float64(got)
	}
	res.ServerPeakRSS = run.server.peakRSS
}

// tenthRates splits completion times (since the start, in order) into ten
// equal parts and returns the rate of each: its count over the time from
// the end of the part before (or the start) to its own last completion.
func tenthRates(done []time.Duration) []float64 {
	if len(done) < 10 {
		return nil
	}
	rates := make([]float64, 10)
	var prevEnd time.Duration
	for t := range 10 {
		lo, hi := t*len(done)/10, (t+1)*len(done)/10
		end := done[hi-1]
		if span := (end - prevEnd).Seconds(); span > 0 {
			rates[t] = float64(hi-lo) / span
		}
		prevEnd = end
	}
	return rates
}

// ingestKey names the i-th object of an ingest: keys come in no order, the
// way many clients' uploads do, and spread over dirs directories. The
// name is a bijective mix (splitmix64's finalizer) of i, so keys are unique.
func ingestKey(i, dirs int) string {
	h := uint64(i) + 0x9e3779b97f4a7c15
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
	h = (h ^ (h >> 27)) * 0x94d049bb133111eb
	h ^= h >> 31
	return fmt.Sprintf("ingest/%04d/%016x", h%uint64(dirs), h)
}

// allocatedBytes sums the disk space allocated to the files under root.
func allocatedBytes(root string) (int64, error) {
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// checkFreeSpace fails when the filesystem of dir ("": $TMPDIR) has less
// than need bytes free.
func checkFreeSpace(dir string, need uint64) error {
	if dir == "" {
		dir = os.TempDir()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	if free := st.Bavail * uint64(st.Bsize); free < need {
		return fmt.Errorf("%s has %s free, this run needs about %s", dir, fmtBytes(int64(free)), fmtBytes(int64(need)))
	}
	return nil
}
