package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Step is one workload of a suite.
type Step struct {
	Op      Op
	Size    int64
	Objects int // prepared objects (0: the plan's default)
	// Dataset names a prepared set that several steps read, so it is written
	// once per server; "" gives the step a set of its own.
	Dataset string
	// Replicas > 1 starts that many server processes on the same directory
	// and spreads the clients over them (gateway scale-out).
	Replicas int
	Dirs     int       // directories the prepared set spreads over (0: 16)
	List     ListShape // what a LIST step lists
	// Concurrency, when set, is the step's number of clients instead of the
	// suite's (which still writes the prepared set).
	Concurrency int
}

// SuiteConfig is what both suites share.
type SuiteConfig struct {
	Name        string // "engine" or "gateway"
	Profile     string
	Concurrency int
	Duration    time.Duration
	Warmup      time.Duration
	Count       int64 // request bound per workload (0: none)
	MaxBytes    int64 // PUT stops after writing this much per workload
	Client      ClientOptions
	TmpDir      string
	// WaitIdle, when positive, waits up to that long before each target
	// for the machine to be nearly idle (other users' builds skew figures).
	WaitIdle time.Duration
	// MaxOther, when positive, measures a step again (up to Retries times)
	// when everything but client and server kept more cores busy than this.
	MaxOther float64
	Retries  int
	LogDir   string
	Command  string
}

const (
	// idleBusyCores is what -wait-idle waits for.
	idleBusyCores = 0.25
	// prepareTimeout bounds writing a prepared set, so a very slow server
	// fails the step instead of eating the suite's time; a large set gets
	// prepareTimePerObject more for each object.
	prepareTimeout       = 3 * time.Minute
	prepareTimePerObject = 10 * time.Millisecond
	kib                  = 1 << 10
	// The shared 4 KiB set is read by GET, HEAD and LIST and consumed by
	// DELETE, which therefore runs last among its users.
	smallSet = "4KiB"
)

// steps returns the workloads of a suite profile, in the order they run.
func steps(suite, profile string) ([]Step, error) {
	small := []Step{
		{Op: OpPut, Size: 4 * kib},
		{Op: OpGet, Size: 4 * kib, Objects: 2000, Dataset: smallSet},
		{Op: OpHead, Size: 4 * kib, Objects: 2000, Dataset: smallSet},
	}
	large := []Step{
		{Op: OpPut, Size: mib},
		{Op: OpGet, Size: mib, Dataset: "1MiB"},
	}
	var out []Step
	switch profile {
	case "quick":
		out = append(append(out, small...), large...)
	case "default", "full":
		out = append(out, small...)
		out = append(out,
			Step{Op: OpList, Size: 4 * kib, Objects: 2000, Dataset: smallSet},
			Step{Op: OpDelete, Size: 4 * kib, Objects: 2000, Dataset: smallSet},
			Step{Op: OpPut, Size: 64 * kib},
			Step{Op: OpGet, Size: 64 * kib, Dataset: "64KiB"},
		)
		out = append(out, large...)
		out = append(out,
			Step{Op: OpPut, Size: 16 * mib},
			Step{Op: OpGet, Size: 16 * mib, Dataset: "16MiB"},
			// 256 MiB in parts of 16 MiB: four uploads of four parts in
			// flight, the 16 requests of the other steps.
			Step{Op: OpMultipart, Size: 256 * mib, Concurrency: 16 / multipartPartsInFlight},
		)
		if profile == "full" {
			out = append(out,
				Step{Op: OpHead, Size: 64 * kib, Dataset: "64KiB"},
				Step{Op: OpMixed, Size: 64 * kib},
				Step{Op: OpMixed, Size: mib},
			)
		} else {
			out = append(out, Step{Op: OpMixed, Size: 64 * kib})
		}
	default:
		return nil, fmt.Errorf("unknown profile %q (want quick, default or full)", profile)
	}
	if suite == "gateway" {
		// Scale-out: HEAD/s of one and of two gateway processes on one
		// directory, on the small set before DELETE consumes it.
		rep := Step{Op: OpHead, Size: 4 * kib, Objects: 2000, Dataset: smallSet, Replicas: 2}
		for i, s := range out {
			if s.Op == OpHead && s.Dataset == smallSet {
				out = append(out[:i+1], append([]Step{rep}, out[i+1:]...)...)
				break
			}
		}
	}
	return out, nil
}

// planStep turns a step into a plan with the suite's bounds.
func (c SuiteConfig) planStep(s Step) (Plan, error) {
	w := Workload{
		Op:          s.Op,
		Size:        s.Size,
		Concurrency: c.Concurrency,
		Duration:    c.Duration,
		Count:       c.Count,
		Warmup:      c.Warmup,
		Objects:     s.Objects,
		Dirs:        s.Dirs,
		List:        s.List,
		Mix:         defaultMix,
	}
	if s.Concurrency > 0 {
		w.Concurrency = s.Concurrency
	}
	if s.Op.writes() && c.MaxBytes > 0 {
		if byBytes := max(c.MaxBytes/s.Size, 1); w.Count == 0 || byBytes < w.Count {
			w.Count = byBytes
		}
	}
	return plan(w)
}

// clientRuns returns the client settings each target of a suite runs with,
// in order, for the -clients flag: lean (o as the flags left it), defaults
// (the SDK's) or both.
func clientRuns(clients string, o ClientOptions) ([]ClientOptions, error) {
	switch clients {
	case leanClients:
		return []ClientOptions{o}, nil
	case defaultClients:
		return []ClientOptions{o.withSDKDefaults()}, nil
	case "both":
		if o.settings() == defaultClients {
			return nil, fmt.Errorf("-clients both runs the SDK's defaults second: leave -sign-payload, -checksums and -full-sdk off")
		}
		return []ClientOptions{o, o.withSDKDefaults()}, nil
	}
	return nil, fmt.Errorf("unknown -clients %q (want lean, defaults or both)", clients)
}

// runTarget starts kind on a fresh directory, runs every step against it and
// stops it. A binary that says "not implemented" yields a skipped report.
func runTarget(ctx context.Context, c SuiteConfig, kind serverKind, stps []Step, progress io.Writer) TargetReport {
	rep := TargetReport{Name: kind.name, Description: kind.description, Version: versionOf(kind)}
	logPath := filepath.Join(c.LogDir, fmt.Sprintf("%s-%s.log", c.Name, kind.name))
	fmt.Fprintf(progress, "== %s (%s) %s; %s clients\n", kind.name, kind.description, rep.Version, c.Client.settings())
	if c.WaitIdle > 0 {
		rep.BusyBefore = waitIdle(c.WaitIdle, idleBusyCores)
		fmt.Fprintf(progress, "   machine busy %.2f cores before start\n", rep.BusyBefore)
	}
	primary, err := startScratch(ctx, kind, c.TmpDir, logPath)
	if errors.Is(err, errNotImplemented) {
		rep.Status = "skipped: " + err.Error()
		fmt.Fprintf(progress, "   %s\n", rep.Status)
		return rep
	}
	if err != nil {
		rep.Status = "failed: " + err.Error()
		fmt.Fprintf(progress, "   %s\n", rep.Status)
		return rep
	}
	defer primary.close()
	life, err := startProcSampler(primary.pid())
	if err != nil {
		rep.Status = "failed: " + err.Error()
		return rep
	}

	maxSize := int64(0)
	for _, s := range stps {
		maxSize = max(maxSize, s.Size)
	}
	runner := newRunner(primary.target(), c.Client, "strata-bench", maxSize)
	runner.Procs = []int{primary.pid()}
	runner.BucketEncryption = kind.bucketEncryption
	prepared := map[string]int{} // dataset -> objects written

	rep.Status = "ok"
	for _, s := range stps {
		if ctx.Err() != nil {
			rep.Status = "failed: " + ctx.Err().Error()
			break
		}
		res, err := c.runStep(ctx, runner, kind, primary.dataDir(), s, prepared, progress)
		for retry := 0; err == nil && c.MaxOther > 0 && res.OtherCPU > c.MaxOther && retry < c.Retries && c.timeForRetry(ctx); retry++ {
			// Other work shared the machine: measure again once it is quiet
			// and keep the cleaner of the two.
			busy := waitIdle(c.WaitIdle, idleBusyCores)
			fmt.Fprintf(progress, "   %s: other CPU %.2f > %.2f cores, again (machine now %.2f busy)\n", stepLabel(s), res.OtherCPU, c.MaxOther, busy)
			again, againErr := c.runStep(ctx, runner, kind, primary.dataDir(), s, prepared, progress)
			if againErr != nil {
				err = againErr
				break
			}
			if again.OtherCPU < res.OtherCPU {
				res = again
			}
		}
		if err != nil {
			fmt.Fprintf(progress, "   %s: %v\n", stepLabel(s), err)
			rep.Status = "failed: " + stepLabel(s) + ": " + err.Error()
			if res.Ops == 0 {
				break
			}
		}
		rep.Results = append(rep.Results, res)
		rep.PeakRSS = max(rep.PeakRSS, res.ServerPeakRSS)
	}
	rep.PeakRSS = max(rep.PeakRSS, life.stop().peakRSS)
	return rep
}

// timeForRetry says whether the suite's deadline leaves room to wait for an
// idle machine and measure a step again, with margin for the steps after it.
func (c SuiteConfig) timeForRetry(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	if !ok {
		return true
	}
	step := c.WaitIdle + c.Warmup + c.Duration + 30*time.Second
	return time.Until(deadline) > 4*step
}

func stepLabel(s Step) string {
	l := Workload{Op: s.Op, Size: s.Size, List: s.List}.Name()
	if s.Replicas > 1 {
		l += fmt.Sprintf(" x%d replicas", s.Replicas)
	}
	return l
}

// runStep prepares the step's objects when needed and measures it.
func (c SuiteConfig) runStep(ctx context.Context, r *Runner, kind serverKind, data string, s Step, prepared map[string]int, progress io.Writer) (Result, error) {
	p, err := c.planStep(s)
	if err != nil {
		return Result{}, err
	}
	prefix := "run-" + p.Name()
	if s.Dataset != "" {
		prefix = "set-" + s.Dataset
	}
	var prepSeconds float64
	if p.Prepared > 0 && prepared[s.Dataset] != p.Prepared {
		t0 := time.Now()
		prepCtx, cancel := context.WithTimeout(ctx, prepareTimeout+time.Duration(p.Prepared)*prepareTimePerObject)
		err := r.Prepare(prepCtx, prefix, p.Set(), c.Concurrency)
		cancel()
		if err != nil {
			return Result{}, err
		}
		flushed := syncDisks()
		prepSeconds = time.Since(t0).Seconds() - flushed.Seconds()
		fmt.Fprintf(progress, "   prepared %d x %s in %.1fs, %.0f/s (+%.1fs sync)\n", p.Prepared, formatSize(p.Size), prepSeconds,
			float64(p.Prepared)/prepSeconds, flushed.Seconds())
		if s.Dataset != "" {
			prepared[s.Dataset] = p.Prepared
		}
	}
	if p.Op == OpDelete || p.Op == OpMixed {
		delete(prepared, s.Dataset)
	}

	runner := r
	if s.Replicas > 1 {
		extra, stop, err := startReplicas(ctx, kind, data, s.Replicas-1, c)
		if err != nil {
			return Result{}, err
		}
		defer stop()
		t := r.Target
		t.Endpoints = append([]string{}, t.Endpoints...)
		procs := append([]int{}, r.Procs...)
		for _, e := range extra {
			t.Endpoints = append(t.Endpoints, e.endpoint)
			procs = append(procs, e.pid())
		}
		runner = &Runner{Target: t, Clients: newS3Clients(t, c.Client, newTransport(c.Concurrency)), Bucket: r.Bucket, Procs: procs, payload: r.payload,
			Settings: r.Settings}
	}
	res, err := runner.Measure(ctx, p, prefix)
	res.PrepareSeconds = prepSeconds
	if err == nil && res.Ops == 0 {
		err = fmt.Errorf("no request succeeded (%d errors, first: %s)", res.Errors, res.FirstError)
	}
	if p.Op.writes() || p.Op == OpMixed || p.Op == OpDelete {
		syncDisks() // the next step should not pay for this one's writeback
	}
	v, unit := res.Headline()
	fmt.Fprintf(progress, "   %-24s %9s %-8s p50 %6s ms  p99 %6s ms  errors %d  cpu client %.2f server %.2f other %.2f\n",
		stepLabel(s), fmtRate(v), unit, fmtMs(res.Latency.P50), fmtMs(res.Latency.P99), res.Errors, res.ClientCPU, res.ServerCPU, res.OtherCPU)
	return res, err
}

// startReplicas starts n more processes of kind on the primary's data
// directory.
func startReplicas(ctx context.Context, kind serverKind, data string, n int, c SuiteConfig) ([]*serverProcess, func(), error) {
	var procs []*serverProcess
	stop := func() {
		for _, p := range procs {
			p.stop()
		}
	}
	for i := range n {
		logPath := filepath.Join(c.LogDir, fmt.Sprintf("%s-%s-replica%d.log", c.Name, kind.name, i+2))
		p, err := startServer(ctx, kind, data, logPath)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("replica %d: %w", i+2, err)
		}
		procs = append(procs, p)
	}
	return procs, stop, nil
}

// syncDisks flushes dirty pages to disk, so that the writeback of one
// phase does not slow the next, and returns how long that took.
func syncDisks() time.Duration {
	t0 := time.Now()
	syscall.Sync()
	return time.Since(t0)
}

// versionOf names the build of a server binary: the module version Go
// recorded in it, else the first line of its version command.
func versionOf(kind serverKind) string {
	if bi, err := buildinfo.ReadFile(kind.binary); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Path + "@" + bi.Main.Version
	}
	return binaryVersion(kind)
}

// cpuModel reads the CPU model name for the run's metadata.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(val)
		}
	}
	return ""
}

// loadAvg returns the 1-, 5- and 15-minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
