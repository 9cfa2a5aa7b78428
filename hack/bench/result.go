package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

const mib = 1 << 20

// noisyOtherCPU is the CPU use of everything but client and server above
// which a comparison marks a figure as skewed. Our own loopback softirqs and
// writeback stay below it for small objects.
const noisyOtherCPU = 0.3

// Result is one measured run of one workload against one target.
type Result struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Op          Op      `json:"op"`
	Size        int64   `json:"size_bytes"`
	Concurrency int     `json:"concurrency"`
	Endpoints   int     `json:"endpoints"`
	Prepared    int     `json:"prepared_objects,omitempty"`
	Seconds     float64 `json:"seconds"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	Bytes       int64   `json:"bytes"`
	// ObjPerSec counts successful requests (for LIST: listings) per second.
	ObjPerSec    float64         `json:"objects_per_s"`
	MiBPerSec    float64         `json:"mib_per_s"`
	ListedPerSec float64         `json:"listed_per_s,omitempty"`
	Latency      LatencySummary  `json:"latency"`
	TTFB         *LatencySummary `json:"ttfb,omitempty"`
	Breakdown    []OpResult      `json:"breakdown,omitempty"`
	FirstError   string          `json:"first_error,omitempty"`
	// ClientCPU and ServerCPU are the average number of cores the load
	// generator and the server processes kept busy; on a 2-core box their
	// sum near 2 means the run was CPU-bound.
	ClientCPU float64 `json:"client_cpu_cores"`
	ServerCPU float64 `json:"server_cpu_cores,omitempty"`
	// OtherCPU is everything else the machine did meanwhile: kernel
	// threads and softirqs (loopback networking, writeback), and other
	// people's processes. Large values mean the figures are skewed.
	OtherCPU      float64 `json:"other_cpu_cores,omitempty"`
	ServerPeakRSS int64   `json:"server_peak_rss_bytes,omitempty"`
	// ServerCPUPerOp and ClientCPUPerOp are CPU time per successful
	// request in µs, the server's summed over every sampled process (a
	// cluster's nodes): what a request costs wherever it runs, which a
	// rate on shared cores hides.
	ServerCPUPerOp float64 `json:"server_cpu_per_op_us,omitempty"`
	ClientCPUPerOp float64 `json:"client_cpu_per_op_us,omitempty"`
	// Client names the clients' settings: lean, defaults (the SDK's), or
	// the flags in between.
	Client string `json:"client_settings,omitempty"`
	// PrepareSeconds is how long writing the prepared set took, when this
	// run wrote it (with the suite's clients, not measured otherwise).
	PrepareSeconds float64 `json:"prepare_seconds,omitempty"`
}

// OpResult is one operation's share of a MIXED run.
type OpResult struct {
	Op         Op              `json:"op"`
	Ops        int64           `json:"ops"`
	Errors     int64           `json:"errors"`
	ObjPerSec  float64         `json:"objects_per_s"`
	MiBPerSec  float64         `json:"mib_per_s"`
	Latency    LatencySummary  `json:"latency"`
	TTFB       *LatencySummary `json:"ttfb,omitempty"`
	FirstError string          `json:"first_error,omitempty"`
}

func newResult(target string, p Plan, endpoints int, elapsed time.Duration) Result {
	return Result{
		Target:      target,
		Workload:    p.Name(),
		Op:          p.Op,
		Size:        p.Size,
		Concurrency: p.Concurrency,
		Endpoints:   endpoints,
		Prepared:    p.Prepared,
		Seconds:     elapsed.Seconds(),
	}
}

// fill computes rates and percentiles from the merged per-operation stats.
func (r *Result) fill(stats map[Op]*opStats) {
	total := newHistogram()
	ops := make([]Op, 0, len(stats))
	for op := range stats {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return opOrder(ops[i]) < opOrder(ops[j]) })
	for _, op := range ops {
		s := stats[op]
		total.merge(s.lat)
		r.Errors += s.errors
		r.Bytes += s.bytes
		if r.FirstError == "" {
			r.FirstError = s.firstErr
		}
		if s.listed > 0 {
			r.ListedPerSec = float64(s.listed) / r.Seconds
		}
		if s.ttfb != nil && s.ttfb.count() > 0 && r.Op != OpMixed {
			t := s.ttfb.summary()
			r.TTFB = &t
		}
		if r.Op == OpMixed {
			or := OpResult{
				Op:         op,
				Ops:        s.lat.count(),
				Errors:     s.errors,
				ObjPerSec:  float64(s.lat.count()) / r.Seconds,
				MiBPerSec:  float64(s.bytes) / mib / r.Seconds,
				Latency:    s.lat.summary(),
				FirstError: s.firstErr,
			}
			if s.ttfb != nil && s.ttfb.count() > 0 {
				t := s.ttfb.summary()
				or.TTFB = &t
			}
			r.Breakdown = append(r.Breakdown, or)
		}
	}
	r.Ops = total.count()
	r.Latency = total.summary()
	if r.Seconds > 0 {
		r.ObjPerSec = float64(r.Ops) / r.Seconds
		r.MiBPerSec = float64(r.Bytes) / mib / r.Seconds
	}
}

func opOrder(op Op) int {
	for i, o := range allOps {
		if o == op {
			return i
		}
	}
	return len(allOps)
}

// Headline is the figure a comparison table shows for a result: objects/s
// for small objects and metadata operations, MiB/s for large objects.
func (r Result) Headline() (value float64, unit string) {
	switch {
	case r.Op == OpList:
		return r.ListedPerSec, "listed/s"
	case (r.Op.writes() || r.Op == OpGet || r.Op == OpMixed) && r.Size >= mib:
		return r.MiBPerSec, "MiB/s"
	default:
		return r.ObjPerSec, "obj/s"
	}
}

// writeResultTable prints one row per result (and per operation of a MIXED
// result) with throughput, latency percentiles and, for GET, TTFB.
func writeResultTable(out io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tworkload\tconc\tops\terr\tobj/s\tMiB/s\tp50 ms\tp90 ms\tp99 ms\tTTFB p50\tTTFB p99\tcli CPU\tsrv CPU\toth CPU\tsrv RSS\tsrv µs/op\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t\n",
			r.Target, r.rowKey().label(), r.Concurrency, r.Ops, r.Errors,
			fmtRate(r.ObjPerSec), fmtRate(r.MiBPerSec),
			fmtMs(r.Latency.P50), fmtMs(r.Latency.P90), fmtMs(r.Latency.P99),
			ttfbCell(r.TTFB, 50), ttfbCell(r.TTFB, 99),
			r.ClientCPU, fmtCores(r.ServerCPU), fmtCores(r.OtherCPU), fmtBytes(r.ServerPeakRSS), fmtMicros(r.ServerCPUPerOp))
		for _, b := range r.Breakdown {
			fmt.Fprintf(tw, "\t  %s\t\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\t\t\t\t\t\n",
				b.Op, b.Ops, b.Errors, fmtRate(b.ObjPerSec), fmtRate(b.MiBPerSec),
				fmtMs(b.Latency.P50), fmtMs(b.Latency.P90), fmtMs(b.Latency.P99),
				ttfbCell(b.TTFB, 50), ttfbCell(b.TTFB, 99))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(out, "%s %s: %d errors, first: %s\n", r.Target, r.Workload, r.Errors, r.FirstError)
		}
	}
	return nil
}

func ttfbCell(t *LatencySummary, pct int) string {
	if t == nil {
		return "-"
	}
	if pct == 50 {
		return fmtMs(t.P50)
	}
	return fmtMs(t.P99)
}

func fmtRate(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fmtMicros(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtCores(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtBytes(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", float64(n)/mib)
	}
}

// Comparison is what one suite run reports: the results of every target on
// the same workloads, plus each target's peak RSS over the whole run.
type Comparison struct {
	Meta    RunMeta        `json:"meta"`
	Targets []TargetReport `json:"targets"`
}

// RunMeta records how and where a suite ran, so figures in the docs can be
// traced to a command and a machine.
type RunMeta struct {
	Suite   string    `json:"suite"`
	Started time.Time `json:"started"`
	Command string    `json:"command"`
	Commit  string    `json:"commit,omitempty"`
	CPU     string    `json:"cpu,omitempty"`
	Cores   int       `json:"cores"`
	// LoadAvg is the 1, 5 and 15-minute load average when the suite started: other
	// work on a shared 2-core machine skews every figure.
	LoadAvg     string  `json:"load_avg_at_start,omitempty"`
	WaitIdle    string  `json:"wait_idle,omitempty"`
	MaxOther    float64 `json:"max_other_cpu_cores,omitempty"`
	GoVersion   string  `json:"go_version"`
	Concurrency int     `json:"concurrency"`
	Duration    string  `json:"duration_per_workload"`
	SignPayload bool    `json:"sign_payload"`
	Checksums   bool    `json:"checksums"`
	FullSDK     bool    `json:"full_sdk"`
	// Clients is the suite's -clients: lean, defaults, or both (each
	// target measured twice, results told apart by client_settings).
	Clients string `json:"clients,omitempty"`
}

// TargetReport is one server's part of a suite run.
type TargetReport struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version,omitempty"`
	Status      string `json:"status"` // "ok", "skipped: ...", "failed: ..."
	// BusyBefore is how many cores the machine kept busy just before this
	// target started (measured when the suite waits for an idle machine).
	BusyBefore float64  `json:"busy_cores_before,omitempty"`
	PeakRSS    int64    `json:"peak_rss_bytes,omitempty"`
	Results    []Result `json:"results,omitempty"`
}

func (t TargetReport) result(k rowKey) (Result, bool) {
	for _, r := range t.Results {
		if r.rowKey() == k {
			return r, true
		}
	}
	return Result{}, false
}

// add folds another run of the same target, with the given client
// settings, into t: both runs' results, the larger peak, the first failure.
func (t TargetReport) add(o TargetReport, settings string) TargetReport {
	t.Results = append(t.Results, o.Results...)
	t.PeakRSS = max(t.PeakRSS, o.PeakRSS)
	t.BusyBefore = max(t.BusyBefore, o.BusyBefore)
	if t.Status == "ok" && o.Status != "ok" {
		t.Status = fmt.Sprintf("%s (%s clients)", o.Status, settings)
	}
	return t
}

// rowKey is what a comparison row holds: one workload, with as many
// replicas and with the same client settings on every target.
type rowKey struct {
	workload  string
	endpoints int
	client    string
}

func (r Result) rowKey() rowKey { return rowKey{r.Workload, r.Endpoints, r.Client} }

func (k rowKey) label() string {
	l := k.workload
	if k.endpoints > 1 {
		l = fmt.Sprintf("%s x%d replicas", k.workload, k.endpoints)
	}
	if k.client != "" && k.client != leanClients {
		l += " (" + k.client + ")"
	}
	return l
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeComparisonTable prints one row per workload with every target's
// headline figure and the ratio of the subject (the first target, Strata)
// to each peer; then peak RSS.
func writeComparisonTable(out io.Writer, c Comparison) error {
	if len(c.Targets) == 0 {
		return nil
	}
	subject, peers := c.Targets[0], c.Targets[1:]
	var rows []rowKey
	seen := map[rowKey]bool{}
	for _, t := range c.Targets {
		for _, r := range t.Results {
			k := r.rowKey()
			if !seen[k] {
				seen[k] = true
				rows = append(rows, k)
			}
		}
	}
	// One workload's rows together, each client setting in turn.
	order := map[rowKey]int{}
	for i, k := range rows {
		w := rowKey{workload: k.workload, endpoints: k.endpoints}
		if _, ok := order[w]; !ok {
			order[w] = i
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		return order[rowKey{workload: rows[i].workload, endpoints: rows[i].endpoints}] <
			order[rowKey{workload: rows[j].workload, endpoints: rows[j].endpoints}]
	})
	noisy := false
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"workload", "unit"}
	for _, t := range c.Targets {
		header = append(header, t.Name)
	}
	for _, p := range peers {
		header = append(header, subject.Name+"/"+p.Name)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, k := range rows {
		cells := []string{k.label(), ""}
		values := make([]float64, len(c.Targets))
		for i, t := range c.Targets {
			r, ok := t.result(k)
			if !ok {
				cells = append(cells, "-")
				continue
			}
			v, unit := r.Headline()
			values[i] = v
			cells[1] = unit
			cell := fmtRate(v)
			if r.OtherCPU > noisyOtherCPU {
				cell += "*"
				noisy = true
			}
			if r.Errors > 0 {
				cell += fmt.Sprintf(" (%d err)", r.Errors)
			}
			cells = append(cells, cell)
		}
		for i := range peers {
			cells = append(cells, fmtRatio(values[0], values[i+1]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	cells := []string{"peak RSS", "MiB"}
	for _, t := range c.Targets {
		cells = append(cells, fmtMiB(t.PeakRSS))
	}
	for _, p := range peers {
		cells = append(cells, fmtRatio(float64(subject.PeakRSS), float64(p.PeakRSS)))
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	if noisy {
		fmt.Fprintf(out, "* other work kept more than %.2f cores busy during that run: the figure is skewed\n", noisyOtherCPU)
	}
	for _, t := range c.Targets {
		if t.Status != "ok" {
			fmt.Fprintf(out, "%s: %s\n", t.Name, t.Status)
		}
	}
	return nil
}

func fmtRatio(a, b float64) string {
	switch {
	case a <= 0 || b <= 0:
		return "n/a"
	case a/b < 0.1:
		return fmt.Sprintf("%.2gx", a/b) // 0.0039x, not 0.00x
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func fmtMiB(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n)/mib)
}
