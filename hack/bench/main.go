// Command bench is Strata's S3 load generator and benchmark runner.
//
//	bench run   -endpoint URL [flags]   one workload against a running S3 service
//	bench suite engine|gateway [flags]  start strata and its peers one after
//	                                    another and compare them
//	bench versions -strata BIN          10,000 versions of one key
//	bench ingest -strata BIN            a million small objects, the last
//	                                    tenth's rate against the first's
//	bench listing [flags]               LIST of 100,000 objects, strata
//	                                    against MinIO
//
// Workloads follow warp's shapes (PUT, GET, HEAD, DELETE, LIST, MIXED) on
// aws-sdk-go-v2 with path-style addressing and SigV4; latencies go to
// HdrHistograms. See docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage:
  bench run -endpoint URL [-op put] [-size 4KiB] [flags]
  bench suite engine|gateway [flags]
  bench versions -strata BIN [-versions 10000] [flags]
  bench ingest -strata BIN [-objects 1000000] [flags]
  bench listing [-targets strata,minio] [-objects 100000] [flags]
Run "bench COMMAND -h" for the flags.
`

func main() {
	if os.Getenv("GOGC") == "" {
		// The SDK allocates ~30 KiB per request; collecting less often
		// leaves more of the 2 cores to the server under test.
		debug.SetGCPercent(400)
	}
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "suite":
		err = cmdSuite(ctx, args[1:], stdout, stderr)
	case "versions":
		err = cmdVersions(ctx, args[1:], stdout, stderr)
	case "ingest":
		err = cmdIngest(ctx, args[1:], stdout, stderr)
	case "listing":
		err = cmdListing(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "bench: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// clientFlags registers the flags shared by run and suite.
func clientFlags(fs *flag.FlagSet, o *ClientOptions, duration, warmup *time.Duration, count *int64) {
	fs.IntVar(&o.Concurrency, "concurrency", 16, "parallel clients")
	fs.DurationVar(duration, "duration", 10*time.Second, "measured time per workload (0: count bound only)")
	fs.Int64Var(count, "count", 0, "at most this many requests per workload (0: duration bound only)")
	fs.DurationVar(warmup, "warmup", 0, "unmeasured run before each GET, HEAD or LIST workload")
	clientSettingFlags(fs, o)
}

// clientSettingFlags registers the flags that turn the SDK's defaults back
// on (all three: what a client gets without asking).
func clientSettingFlags(fs *flag.FlagSet, o *ClientOptions) {
	fs.BoolVar(&o.SignPayload, "sign-payload", false, "sign the SHA-256 of each body instead of sending UNSIGNED-PAYLOAD")
	fs.BoolVar(&o.Checksums, "checksums", false, "let the SDK add CRC32 checksums to uploads and validate downloads")
	fs.BoolVar(&o.FullSDK, "full-sdk", false, "keep the SDK's whole middleware stack and endpoint rules (costs the client ~15% more CPU)")
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o          ClientOptions
		w          Workload
		duration   time.Duration
		warmup     time.Duration
		count      int64
		endpoints  = fs.String("endpoint", "", "S3 endpoint URL; several comma-separated spread the clients over replicas")
		access     = fs.String("access-key", os.Getenv("AWS_ACCESS_KEY_ID"), "access key (default $AWS_ACCESS_KEY_ID)")
		secret     = fs.String("secret-key", "", "secret key (default $AWS_SECRET_ACCESS_KEY; never put secrets on command lines you share)")
		region     = fs.String("region", "us-east-1", "SigV4 region")
		bucket     = fs.String("bucket", "strata-bench", "bucket (created when missing)")
		prefix     = fs.String("prefix", "", "key prefix (default: bench-<op>-<size>)")
		op         = fs.String("op", "put", "workload: put, get, head (stat), delete, list or mixed")
		sizes      = fs.String("size", "4KiB", "object size(s), comma-separated: 4KiB,64KiB,1MiB,16MiB")
		objects    = fs.Int("objects", 0, "objects prepared for get/head/delete/list/mixed (0: a default by size)")
		dirs       = fs.Int("dirs", defaultDirs, "directories (key prefixes) the prepared objects spread over")
		listShape  = fs.String("list", "all", "what -op list lists: all (every object), top (the directories, with delimiter /) or dir (one directory, with delimiter /)")
		mix        = fs.String("mix", defaultMix.String(), "weights of mixed")
		noPrepare  = fs.Bool("no-prepare", false, "assume the prepared objects exist (a previous run with the same prefix wrote them)")
		pids       = fs.String("pid", "", "server process(es) to sample for peak RSS and CPU, comma-separated (a cluster's nodes: CPU is summed)")
		jsonPath   = fs.String("json", "", "also write the results as JSON to this file (- for stdout)")
		cpuProfile = fs.String("cpuprofile", "", "write the load generator's CPU profile here")
	)
	clientFlags(fs, &o, &duration, &warmup, &count)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoints == "" {
		return fmt.Errorf("-endpoint is required")
	}
	if *secret == "" {
		*secret = os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	parsedOp, err := parseOp(*op)
	if err != nil {
		return err
	}
	sizeList, err := parseSizes(*sizes)
	if err != nil {
		return err
	}
	m, err := parseMix(*mix)
	if err != nil {
		return err
	}
	shape, err := parseListShape(*listShape)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	t := Target{Name: hostOf(*endpoints), Endpoints: strings.Split(*endpoints, ","), AccessKey: *access, SecretKey: *secret, Region: *region}
	runner := newRunner(t, o, *bucket, sizeList[len(sizeList)-1])
	if runner.Procs, err = parsePids(*pids); err != nil {
		return err
	}
	var results []Result
	for _, size := range sizeList {
		w = Workload{Op: parsedOp, Size: size, Concurrency: o.Concurrency, Duration: duration, Count: count, Warmup: warmup,
			Objects: *objects, Dirs: *dirs, List: shape, Mix: m}
		p, err := plan(w)
		if err != nil {
			return err
		}
		pfx := *prefix
		if pfx == "" {
			pfx = "bench-" + p.Name()
		}
		if p.Prepared > 0 && !*noPrepare {
			t0 := time.Now()
			if err := runner.Prepare(ctx, pfx, p.Set(), o.Concurrency); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "prepared %d x %s in %.1fs\n", p.Prepared, formatSize(size), time.Since(t0).Seconds())
		}
		res, err := runner.Measure(ctx, p, pfx)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if err := writeResultTable(stdout, results); err != nil {
		return err
	}
	return writeJSONFile(*jsonPath, results, stdout)
}

// parsePids reads -pid: process IDs separated by commas, or nothing.
func parsePids(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("-pid: %q is not a process ID", f)
		}
		out = append(out, pid)
	}
	return out, nil
}

func cmdSuite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "engine" && args[0] != "gateway") {
		return fmt.Errorf("suite needs engine or gateway as its first argument")
	}
	name := args[0]
	fs := flag.NewFlagSet("bench suite "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := SuiteConfig{Name: name}
	f := registerSuiteFlags(fs, &c, 20*time.Minute, "")
	maxBytes := fs.String("max-bytes", "4GiB", "stop a PUT workload after writing this much")
	fs.StringVar(&c.Profile, "profile", "default", "workload set: quick (4 KiB PUT/GET/HEAD, 1 MiB PUT/GET), default, or full")
	for name, value := range map[string]string{"duration": "8s", "warmup": "2s"} {
		if err := fs.Set(name, value); err != nil {
			return err
		}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	mb, err := parseSize(*maxBytes)
	if err != nil {
		return err
	}
	c.MaxBytes = mb
	stps, err := steps(name, c.Profile)
	if err != nil {
		return err
	}
	// Strata first: the comparison shows its ratios to each peer.
	extra := strings.Fields(*f.strataArgs)
	kinds := []serverKind{strataServerKind(*f.strataBin, extra)}
	if name == "gateway" {
		kinds[0] = strataGatewayKind(*f.strataBin, extra)
	}
	if *f.baseline != "" {
		// The same target from another build, right after this one's: an
		// A/B in one run, its ratios in the strata/strata-baseline column.
		b := strataServerKind(*f.baseline, extra)
		if name == "gateway" {
			b = strataGatewayKind(*f.baseline, extra)
		}
		b.name, b.description = "strata-baseline", b.description+" (baseline build "+*f.baseline+")"
		kinds = append(kinds, b)
	}
	if name != "gateway" {
		keys, err := os.MkdirTemp("", "strata-bench-keys-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(keys)
		sse, err := strataSSEKind(*f.strataBin, extra, keys)
		if err != nil {
			return err
		}
		kinds = append(kinds, sse, minioKind(filepath.Join(*f.peersDir, "minio")), garageKind(filepath.Join(*f.peersDir, "garage")))
	}
	kinds = append(kinds, versitygwKind(filepath.Join(*f.peersDir, "versitygw"), *f.keepAlive))
	return runSuite(ctx, c, f, kinds, stps, "bench suite "+strings.Join(args, " "), stdout, stderr)
}

// suiteFlags are the flags of the commands that start servers one after
// another and compare them (bench suite and bench listing) beyond those
// in SuiteConfig.
type suiteFlags struct {
	strataBin, strataArgs, peersDir, only, outDir, clients, baseline *string
	keepAlive                                                        *bool
	timeout                                                          *time.Duration
}

func registerSuiteFlags(fs *flag.FlagSet, c *SuiteConfig, timeout time.Duration, targets string) *suiteFlags {
	f := &suiteFlags{
		strataBin:  fs.String("strata", "bin/strata", "strata binary"),
		baseline:   fs.String("baseline", "", "another strata binary (e.g. main before a change), run as target strata-baseline right after strata: an A/B in one run"),
		strataArgs: fs.String("strata-args", "", "extra flags for strata server/gateway, space-separated (e.g. --no-sync; reported with the figures)"),
		peersDir:   fs.String("peers", "hack/peers/bin", "directory holding the minio, versitygw and garage binaries (hack/peers.sh)"),
		only:       fs.String("targets", targets, "comma-separated subset of targets to run (strata, strata-baseline, strata-sse-s3, minio, garage, versitygw)"),
		outDir:     fs.String("out", "bench-results", "directory for the JSON report and server logs"),
		keepAlive:  fs.Bool("versitygw-keepalive", true, "start VersityGW with --keep-alive (it closes every connection otherwise)"),
		timeout:    fs.Duration("timeout", timeout, "hard bound on the whole run"),
		clients: fs.String("clients", leanClients, "client settings: lean (as the flags say; by default unsigned payloads, no checksums, a lean SDK stack), "+
			"defaults (the SDK's: -sign-payload -checksums -full-sdk), or both (every target runs twice, lean then defaults, reported side by side)"),
	}
	clientFlags(fs, &c.Client, &c.Duration, &c.Warmup, &c.Count)
	fs.StringVar(&c.TmpDir, "tmp", "", "where the servers' temporary data directories go (default $TMPDIR)")
	fs.DurationVar(&c.WaitIdle, "wait-idle", 0, "before each target (and each retry), wait up to this long for the machine to be nearly idle")
	fs.Float64Var(&c.MaxOther, "max-other", 0, "measure a workload again when other work kept more than this many cores busy (0: never)")
	fs.IntVar(&c.Retries, "retries", 2, "how many times -max-other may measure a workload again")
	return f
}

// runSuite runs stps against each selected kind in turn, once per client
// setting, prints the tables and writes the JSON report.
func runSuite(ctx context.Context, c SuiteConfig, f *suiteFlags, kinds []serverKind, stps []Step, command string, stdout, stderr io.Writer) error {
	c.Concurrency = c.Client.Concurrency
	runs, err := clientRuns(*f.clients, c.Client)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	defer cancel()

	stamp := time.Now().UTC().Format("20060102-150405")
	c.LogDir = filepath.Join(*f.outDir, "logs", c.Name+"-"+stamp)
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	c.Command = strings.TrimSpace(command)

	cmp := Comparison{Meta: RunMeta{
		Suite:       c.Name + "/" + c.Profile,
		Started:     time.Now().UTC(),
		Command:     c.Command,
		Commit:      gitCommit(),
		CPU:         cpuModel(),
		Cores:       runtime.NumCPU(),
		LoadAvg:     loadAvg(),
		WaitIdle:    c.WaitIdle.String(),
		MaxOther:    c.MaxOther,
		GoVersion:   runtime.Version(),
		Concurrency: c.Concurrency,
		Duration:    c.Duration.String(),
		SignPayload: c.Client.SignPayload,
		Checksums:   c.Client.Checksums,
		FullSDK:     c.Client.FullSDK,
		Clients:     *f.clients,
	}}
	selected := map[string]bool{}
	for _, n := range strings.Split(*f.only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			selected[n] = true
		}
	}
	for _, k := range kinds {
		if len(selected) > 0 && !selected[k.name] {
			cmp.Targets = append(cmp.Targets, TargetReport{Name: k.name, Description: k.description, Status: "skipped: not selected"})
			continue
		}
		var rep TargetReport
		for i, o := range runs {
			run := c
			run.Client = o
			r := runTarget(ctx, run, k, stps, stderr)
			if i == 0 {
				rep = r
			} else {
				rep = rep.add(r, o.settings())
			}
		}
		cmp.Targets = append(cmp.Targets, rep)
	}

	fmt.Fprintln(stdout)
	var all []Result
	for _, t := range cmp.Targets {
		all = append(all, t.Results...)
	}
	if err := writeResultTable(stdout, all); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if err := writeComparisonTable(stdout, cmp); err != nil {
		return err
	}
	jsonPath := filepath.Join(*f.outDir, fmt.Sprintf("%s-%s.json", c.Name, stamp))
	if err := writeJSONFile(jsonPath, cmp, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s (server logs in %s)\n", jsonPath, c.LogDir)
	for _, t := range cmp.Targets {
		if strings.HasPrefix(t.Status, "failed") {
			return fmt.Errorf("%s %s", t.Name, t.Status)
		}
	}
	return nil
}

func writeJSONFile(path string, v any, stdout io.Writer) error {
	switch path {
	case "":
		return nil
	case "-":
		return writeJSON(stdout, v)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func hostOf(endpoints string) string {
	first, _, _ := strings.Cut(endpoints, ",")
	return strings.TrimPrefix(strings.TrimPrefix(first, "http://"), "https://")
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
