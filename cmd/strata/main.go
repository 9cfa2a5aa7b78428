// Command strata is the Strata storage engine: `strata server` runs the
// erasure-coded S3 server, `strata gateway` the S3-to-POSIX gateway, and
// `strata selftest` checks an endpoint end to end (the tenant chart's helm
// test runs it).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/console"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/gateway"
	"github.com/strata-storage/strata/engine/hlc"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/internode"
	"github.com/strata-storage/strata/engine/kms"
	"github.com/strata-storage/strata/engine/memlimit"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/s3http"
	"github.com/strata-storage/strata/engine/server"
)

const usage = `usage: strata <command> [flags]

commands:
  server    run the erasure-coded S3 server on this node's drives
  gateway   run the S3 gateway over a POSIX directory
  selftest  write, read back and delete objects at an S3 endpoint (helm test)
  admin     day-2: a tenant's pools, drives, healing, users, decommission
  version   print the build version

Root credentials come from STRATA_ROOT_USER and STRATA_ROOT_PASSWORD, or from
the files named by STRATA_ROOT_USER_FILE and STRATA_ROOT_PASSWORD_FILE; never
from flags. Run 'strata <command> -h' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "strata %s\n", buildinfo.String())
		return 0
	case "server":
		return runServer(args[1:], stderr, getenv)
	case "gateway":
		return runGateway(args[1:], stderr, getenv)
	case "selftest":
		return runSelftest(args[1:], stdout, stderr, getenv)
	case "admin":
		return runAdmin(args[1:], stdout, stderr, getenv)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// ansiColor matches terminal color codes a library may print with.
var ansiColor = regexp.MustCompile("\x1b\\[[0-9;]*m")

// captureStrays makes every line the process writes a JSON log record:
// what libraries print on the process's standard output and error becomes
// a record of log. Only when logging to the process's own
// standard error (not in tests that pass their own writer).
func captureStrays(logOut io.Writer, log *slog.Logger) {
	if f, ok := logOut.(*os.File); !ok || f != os.Stderr {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		log.Warn("library output not captured", "err", err)
		return
	}
	os.Stdout, os.Stderr = w, w
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(ansiColor.ReplaceAllString(sc.Text(), ""))
			switch {
			case line == "":
			case strings.Contains(line, "ERROR") || strings.Contains(line, "PANIC"):
				log.Warn("S3 front end", "output", line)
			default:
				log.Info("S3 front end", "output", line)
			}
		}
	}()
}

// noResolve lets the start-up check of the endpoints run without DNS: a
// cluster's names may not resolve until its pods run.
func noResolve(host string) ([]net.IP, error) { return nil, errResolveSkipped }

var errResolveSkipped = errors.New("name resolution skipped")

func isResolveError(err error) bool { return errors.Is(err, errResolveSkipped) }

// servePprof serves Go's profiler on addr (a loopback address, for
// profiling a benchmark run); empty: not at all.
func servePprof(addr string, log *slog.Logger) {
	if addr == "" {
		return
	}
	if !loopback(addr) {
		// Profiles and traces show request data and cost CPU on demand:
		// they are for someone on the node (or a port-forward), never the
		// network.
		log.Error("STRATA_PPROF_ADDR must be a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT); the profiler is off", "addr", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { log.Warn("profiler stopped", "err", http.ListenAndServe(addr, mux)) }()
}

// loopback reports whether a listen address is on the loopback interface
// only (an empty host listens everywhere).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServer(args []string, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("strata server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: strata server [flags] ENDPOINT...
       strata server [flags] --topology FILE

ENDPOINT is a drive: a directory (/data/d1) or scheme://host:port/path on a
node of the cluster. {a...b} ranges expand (/data/d{1...4},
http://10.0.0.{1...4}:9000/data{1...2}); with ranges each argument is one
server pool, without them all arguments are one pool. --topology reads the
pool list from a file (docs/topology.md) and follows its changes.

`)
		fs.PrintDefaults()
	}
	address := fs.String("address", ":9000", "host:port to serve S3, health, metrics and admin on (this node's identity in endpoints)")
	topologyFile := fs.String("topology", "", "topology file listing the pools (docs/topology.md); re-read when it changes")
	internodePort := fs.Int("internode-port", internode.DefaultPort, "port of the internode service, the same on every node")
	parity := fs.Int("parity", 0, "parity shards per erasure set (0: 1 for 2-3 drives, 2 for 4-5, 3 for 6-7, 4 for 8-16)")
	certsDir := fs.String("certs-dir", "", "directory with tls.crt and tls.key, and ca.crt that internode peers are verified against (without it: the system roots); "+
		"reloaded when they change; empty serves plain HTTP")
	limits := limitFlags(fs)
	consoleOpts := consoleFlags(fs)
	consoleSecretFile := consoleOIDCFlags(fs, consoleOpts)
	adminOverHTTP := fs.Bool("admin-over-http", false, "serve the admin API over plain HTTP too (requests signed with SigV4 only); without it, the admin API answers only over TLS")
	certsReload := fs.Duration("certs-reload-interval", certfiles.DefaultInterval, "how often --certs-dir is checked for a renewed certificate or CA bundle")
	metricsToken := metricsTokenFlag(fs)
	insecureInternode := fs.Bool("insecure-internode", false, "let a cluster run its internode service without TLS (no --certs-dir); only for networks where nothing but the deployment's servers reaches the internode port. "+
		"With --certs-dir peers are always verified")
	noSync := fs.Bool("no-sync", false, "do not fsync data and metadata (NOT durable; for benchmarks that say so)")
	shardFiles := fs.Bool("shard-files", true, "write each shard as a file of its own, not in a directory per object version (fewer filesystem operations a PUT); --shard-files=false writes directories, which every build reads (a build before 2026-11-29 cannot read shard files: docs/engine.md)")
	scanInterval := fs.Duration("scan-interval", erasure.DefaultHealerOptions.ScanInterval, "pause between two integrity scans of every object")
	healRate := fs.Float64("heal-bytes-per-second", erasure.DefaultHealerOptions.BytesPerSecond, "bound on the bytes healing and scanning read per second")
	staleUploads := fs.Duration("stale-uploads-expiry", 24*time.Hour, "abort multipart uploads unfinished after this long")
	lifecycleEvery := fs.Duration("lifecycle-interval", server.DefaultLifecycleInterval, "pause between two passes of the buckets' lifecycle rules")
	monitor := fs.Duration("drive-monitor-interval", 10*time.Second, "how often drives are checked (offline retried, wiped detected)")
	shutdownDelay := fs.Duration("shutdown-delay", 5*time.Second, "readiness reports down this long before the listener stops")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	formSpill := formSpillFlag(fs)
	memory := memoryFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "strata server:", err)
		return 2
	}
	plan, err := memory.apply(getenv, log)
	if err != nil {
		fmt.Fprintln(stderr, "strata server:", err)
		return 2
	}
	captureStrays(stderr, log)
	warnFormSpill(*formSpill, log)
	var topo cluster.Topology
	switch {
	case *topologyFile != "" && fs.NArg() > 0:
		fmt.Fprintln(stderr, "strata server: give endpoints or --topology, not both")
		return 2
	case *topologyFile != "":
		data, err := os.ReadFile(*topologyFile)
		if err == nil {
			topo, err = cluster.ParseTopology(data)
		}
		if err != nil {
			fmt.Fprintln(stderr, "strata server:", err)
			return 2
		}
	case fs.NArg() == 0:
		fs.Usage()
		return 2
	default:
		topo = cluster.TopologyFromArgs(fs.Args(), *parity)
	}
	for _, p := range topo.Pools {
		if _, err := p.Layout(cluster.Locality{Address: *address, Resolve: noResolve}); err != nil && !isResolveError(err) {
			fmt.Fprintln(stderr, "strata server:", err)
			return 2
		}
	}
	protocol := buildinfo.Protocol()
	if v := getenv("STRATA_INTERNODE_PROTOCOL"); v != "" {
		// Only for testing a rolling upgrade: speak an older protocol.
		if p, err := strconv.Atoi(v); err == nil && p >= internode.MinProtocol && p <= protocol {
			protocol = p
		}
	}
	// Only for tests of a node's start-up: wait before opening each drive.
	openDelay, _ := time.ParseDuration(getenv("STRATA_TEST_DRIVE_OPEN_DELAY"))
	lifecycleDay := testLifecycleDay(getenv)
	// Only for tests of ordering under clock skew: this node's clock for
	// versions is off by this much (a node whose clock is wrong).
	if skew, err := time.ParseDuration(getenv("STRATA_TEST_CLOCK_SKEW")); err == nil && skew != 0 {
		log.Warn("STRATA_TEST_CLOCK_SKEW: this node's version clock is skewed, for tests only", "skew", skew)
		hlc.Skew(skew)
	}
	// Only for tests of slow drives: writes under a path take longer.
	driveFS, metaFS, err := slowWrites(getenv("STRATA_TEST_SLOW_WRITES"))
	if err != nil {
		fmt.Fprintln(stderr, "strata server:", err)
		return 2
	}
	if driveFS != nil {
		log.Warn("STRATA_TEST_SLOW_WRITES: writes to a drive are slowed, for tests only", "value", getenv("STRATA_TEST_SLOW_WRITES"))
	}
	root, err := iam.RootFromEnv(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "strata server:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	servePprof(getenv("STRATA_PPROF_ADDR"), log)
	if *consoleSecretFile != "" {
		secret, err := os.ReadFile(*consoleSecretFile)
		if err != nil {
			fmt.Fprintln(stderr, "strata server: --console-oidc-client-secret-file:", err)
			return 2
		}
		consoleOpts.OIDC.ClientSecret = strings.TrimSpace(string(secret))
	}
	healer := erasure.DefaultHealerOptions
	healer.ScanInterval, healer.BytesPerSecond = *scanInterval, *healRate
	err = server.Run(ctx, server.Config{
		Address: *address, Topology: topo, TopologyFile: *topologyFile, InternodePort: *internodePort,
		InternodeProtocol: protocol, NoSync: *noSync, ShardFiles: *shardFiles, CertsDir: *certsDir, InsecureInternode: *insecureInternode, AdminOverHTTP: *adminOverHTTP, Limits: *limits, Console: *consoleOpts,
		DataSlots: plan.DataSlots, MetaCacheSize: plan.Meta, MemTableSize: plan.MemTable,
		CertsReloadInterval: *certsReload, MetricsTokenFile: *metricsToken, Root: root, UsersFile: getenv(iam.EnvIAMFile), KeysFile: getenv(kms.EnvKeysFile),
		NotifyTargetsFile: getenv(notify.EnvTargetsFile), NotifyTakeOver: testNotifyTakeOver(getenv, log), NotifyUnknownGrace: testNotifyUnknownGrace(getenv, log),
		Healer: healer, StaleUploadAge: *staleUploads, LifecycleInterval: *lifecycleEvery, LifecycleDay: lifecycleDay, MaxPutSize: testMaxPutSize(getenv, log),
		MonitorInterval: *monitor, ShutdownDelay: *shutdownDelay, DriveOpenDelay: openDelay, DriveFS: driveFS, DriveMetaFS: metaFS, Log: log,
	})
	if err != nil {
		log.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

// gatewayGCPercent is the gateway's GOGC unless the environment sets one.
const gatewayGCPercent = 200

func runGateway(args []string, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("strata gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: strata gateway --root DIR [flags]\n\nServes DIR as S3: its top-level directories are buckets, files are objects.\n\n")
		fs.PrintDefaults()
	}
	address := fs.String("address", ":9000", "host:port to serve S3, health, metrics and admin on")
	root := fs.String("root", "", "directory to serve; its top-level directories are the buckets (required)")
	versions := fs.String("versions-dir", "", "directory for older versions of objects (default: ROOT/.strata/versions)")
	metadata := fs.String("metadata", string(gateway.MetadataAuto), "where object metadata lives: auto (xattrs when the filesystem has them), xattr or sidecar")
	certsDir := fs.String("certs-dir", "", "directory with tls.crt and tls.key (reloaded when they change); empty serves plain HTTP")
	limits := limitFlags(fs)
	consoleOpts := consoleFlags(fs)
	adminOverHTTP := fs.Bool("admin-over-http", false, "serve the admin API over plain HTTP too (requests signed with SigV4 only); without it, the admin API answers only over TLS")
	certsReload := fs.Duration("certs-reload-interval", certfiles.DefaultInterval, "how often --certs-dir is checked for a renewed certificate")
	metricsToken := metricsTokenFlag(fs)
	largeDir := fs.Int("large-dir-threshold", 100000, "entries from which a directory is reported as large (metric and log); 0 turns the watch off")
	largeScan := fs.Duration("large-dir-scan-interval", time.Hour, "pause between scans of the whole volume for large directories; 0: only directories written through S3 are counted")
	fsync := fs.Bool("fsync", false, "sync every written object (data, xattrs, directory entries) before acknowledging it; off: as VersityGW, durable once the filesystem flushes")
	staleUploads := fs.Duration("stale-uploads-expiry", 24*time.Hour, "abort multipart uploads that received no part for this long (0: never)")
	claimTimeout := fs.Duration("multipart-claim-timeout", gateway.DefaultClaimTimeout, "how long (beyond its parts' size at 16 MiB/s) a multipart completion claimed by another replica may take before this one takes it over, the other taken for dead")
	lifecycleEvery := fs.Duration("lifecycle-interval", gateway.DefaultLifecycleInterval, "pause between two passes of the buckets' lifecycle rules (one replica at a time runs them)")
	etagLimit := fs.Int64("etag-sync-limit", 256<<20, "largest file created on the filesystem whose ETag is computed before its first HEAD or GET answers (larger: in the background)")
	shutdownDelay := fs.Duration("shutdown-delay", 5*time.Second, "readiness reports down this long before the listener stops")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	memoryLimit := memoryLimitFlag(fs, "")
	formSpill := formSpillFlag(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "strata gateway:", err)
		return 2
	}
	if l, err := memlimit.Find(*memoryLimit, getenv); err != nil {
		fmt.Fprintln(stderr, "strata gateway:", err)
		return 2
	} else if soft, gogc := memlimit.ApplySoftLimit(l, getenv), memlimit.ApplyGCPercent(l, getenv); l.Bytes > 0 {
		log.Info("memory limit", "bytes", l.Bytes, "from", l.Source, "go_soft_limit", soft, "gogc", gogc)
	} else {
		log.Info(noMemoryLimit, "gogc", gogc)
	}
	captureStrays(stderr, log)
	warnFormSpill(*formSpill, log)
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	cfg := gateway.Config{
		Address: *address, Root: *root, VersionsDir: *versions, Metadata: gateway.MetadataMode(*metadata), CertsDir: *certsDir, AdminOverHTTP: *adminOverHTTP, Limits: *limits, Console: *consoleOpts,
		CertsReloadInterval: *certsReload, MetricsTokenFile: *metricsToken, UsersFile: getenv(iam.EnvIAMFile), NotifyTargetsFile: getenv(notify.EnvTargetsFile), NotifyUnknownGrace: testNotifyUnknownGrace(getenv, log), LargeDirThreshold: *largeDir,
		LargeDirScanInterval: *largeScan, ETagSyncLimit: *etagLimit, StaleUploadAge: *staleUploads, ClaimTimeout: *claimTimeout, Fsync: *fsync, ShutdownDelay: *shutdownDelay, Log: log,
		LifecycleInterval: *lifecycleEvery, LifecycleDay: testLifecycleDay(getenv), MaxPutSize: testMaxPutSize(getenv, log),
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintln(stderr, "strata gateway:", err)
		return 2
	}
	if cfg.RootUser, err = iam.RootFromEnv(getenv); err != nil {
		fmt.Fprintln(stderr, "strata gateway:", err)
		return 2
	}
	if getenv("GOGC") == "" {
		// The gateway's live heap is small; collecting half as often
		// buys CPU for requests for about 20 MiB of RSS
		// (docs/benchmarks.md#gateway). GOGC in the environment wins.
		debug.SetGCPercent(gatewayGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	servePprof(getenv("STRATA_PPROF_ADDR"), log)
	if err := gateway.Run(ctx, cfg); err != nil {
		log.Error("gateway stopped", "err", err)
		return 1
	}
	return 0
}

// memorySettings are the flags that size the server to its memory.
type memorySettings struct {
	limit     *string
	dataSlots *int
}

// noMemoryLimit is what server and gateway log when they found no limit.
const noMemoryLimit = "no memory limit (--memory-limit, $" + memlimit.EnvLimit + " or a cgroup's)"

// minDataSlots: however small the memory, this many large requests may
// move data at once.
const minDataSlots = 4

// memoryLimitFlag registers --memory-limit.
func memoryLimitFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("memory-limit", "", "memory the process may use (1Gi, 1073741824): sets the Go runtime's soft limit to 80% of it unless GOMEMLIMIT is set"+what+
		". Default: $"+memlimit.EnvLimit+" (the operator sets it from the container's memory limit), else the cgroup's limit")
}

func memoryFlags(fs *flag.FlagSet) memorySettings {
	return memorySettings{
		limit: memoryLimitFlag(fs, ", sizes the drives' shared metadata cache (a quarter of it) and --max-data-requests"),
		dataSlots: fs.Int("max-data-requests", 0, "requests moving more than 128 KiB of object data at once (PUT, UploadPart, copies, GET); beyond, they wait up to 15 s, then SlowDown. "+
			"0: from the memory limit (80% of it less the metadata cache and 48 MiB, 8 MiB each, at least 4), no bound without a limit; -1: no bound"),
	}
}

// apply finds the memory limit, sets the runtime's soft limit from it and
// returns how the server spends it (the zero plan without a limit: the
// defaults, and no bound on data requests unless the flag sets one).
func (m memorySettings) apply(getenv func(string) string, log *slog.Logger) (memlimit.Plan, error) {
	l, err := memlimit.Find(*m.limit, getenv)
	if err != nil {
		return memlimit.Plan{}, err
	}
	soft := memlimit.ApplySoftLimit(l, getenv)
	gogc := memlimit.ApplyGCPercent(l, getenv)
	plan := memlimit.PlanFor(l.Bytes, minDataSlots)
	switch {
	case *m.dataSlots < 0:
		plan.DataSlots = 0
	case *m.dataSlots > 0:
		plan.DataSlots = *m.dataSlots
	}
	if l.Bytes > 0 {
		log.Info("memory limit", "bytes", l.Bytes, "from", l.Source, "go_soft_limit", soft, "gogc", gogc, "max_data_requests", plan.DataSlots,
			"metadata_cache", plan.Meta, "memtable", plan.MemTable)
	} else {
		log.Info(noMemoryLimit, "gogc", gogc, "max_data_requests", plan.DataSlots)
	}
	return plan, nil
}

// formSpillFlag registers --form-spill-dir, which no longer does anything:
// POST form uploads are streamed to storage once their policy and
// signature are checked, never held in memory or on disk (docs/security.md).
// The flag stays so that deployments that pass it still start.
func formSpillFlag(fs *flag.FlagSet) *string {
	return fs.String("form-spill-dir", "", "deprecated, ignored: POST form uploads are streamed to storage, never kept while parsed")
}

// warnFormSpill says that --form-spill-dir is ignored, when it is given.
func warnFormSpill(dir string, log *slog.Logger) {
	if dir != "" {
		log.Warn("--form-spill-dir is ignored: POST form uploads are streamed to storage and never spill", "dir", dir)
	}
}

// metricsTokenFlag registers --metrics-token-file.
func metricsTokenFlag(fs *flag.FlagSet) *string {
	return fs.String("metrics-token-file", "", "file holding the bearer token /strata/metrics requires (re-read when it changes, so a rotated Secret "+
		"needs no restart); empty: /strata/metrics answers anyone who reaches the port, without authentication")
}

// consoleFlags registers the web console's settings (engine/console).
func consoleFlags(fs *flag.FlagSet) *console.Options {
	o := &console.Options{}
	fs.StringVar(&o.Address, "console-address", "", "host:port to serve the web console on, with --certs-dir's certificate (empty: no console); sign in with S3 credentials")
	fs.StringVar(&o.PublicS3URL, "console-s3-url", "", "the S3 endpoint the console's presigned links name, as browsers reach it (empty: the console's host name with --console-s3-port)")
	fs.IntVar(&o.PublicS3Port, "console-s3-port", 0, "without --console-s3-url, the port presigned links name with the console's host name, such as the S3 Service's (0: the S3 listener's)")
	fs.DurationVar(&o.SessionTTL, "console-session-ttl", console.DefaultSessionTTL, "how long a console sign-in lasts")
	fs.StringVar(&o.PrometheusURL, "console-prometheus-url", "", "a Prometheus scraping this tenant, whose HTTP API the console's tenant page charts (request rate, errors, latency over the last hour; empty: no charts)")
	fs.StringVar(&o.PrometheusSelector, "console-prometheus-selector", "", `label matchers of this tenant's series in that Prometheus, such as tenant="media",namespace="store" (empty: every series)`)
	return o
}

// consoleOIDCFlags registers the console's single sign-on (servers only:
// it assumes roles through STS).
func consoleOIDCFlags(fs *flag.FlagSet, o *console.Options) *string {
	fs.StringVar(&o.OIDC.Issuer, "console-oidc-issuer", "", "an OpenID Connect issuer the console offers single sign-on through (one the tenant accepts web identities from; empty: keys only)")
	fs.StringVar(&o.OIDC.ClientID, "console-oidc-client-id", "", "the console's client ID at --console-oidc-issuer")
	secretFile := fs.String("console-oidc-client-secret-file", "", "a file holding the client's secret (none: a public client, PKCE only); a file, not a flag, so the secret is not on the command line")
	fs.StringVar(&o.OIDC.RoleARN, "console-oidc-role-arn", "", "the role a single sign-on assumes with the ID token (AssumeRoleWithWebIdentity): its trust policy says who may sign in")
	fs.StringVar(&o.OIDC.Scopes, "console-oidc-scopes", "openid profile email", "the scopes asked of the issuer")
	fs.StringVar(&o.OIDC.RedirectURL, "console-oidc-redirect-url", "", "the console's callback as registered at the issuer, on the host browsers open the console at (empty: /api/oidc/callback on the host the browser names, https unless the console serves plain HTTP without X-Forwarded-Proto: https)")
	return secretFile
}

// limitFlags registers the S3 port's limits (docs/security.md): what a
// connection, a header, a body and a client may hold.
func limitFlags(fs *flag.FlagSet) *s3http.Limits {
	l := &s3http.Limits{}
	fs.IntVar(&l.MaxConnections, "max-connections", 0, "open connections to the S3 port at most; beyond, connections that have not "+
		"sent a whole header (then idle ones) are closed, oldest first (0: 16384, or fewer when the descriptor limit needs a reserve)")
	fs.IntVar(&l.MaxRequests, "max-requests", s3http.DefaultMaxRequests, "requests in flight at most; beyond, SlowDown")
	fs.IntVar(&l.MaxRequestsPerClient, "max-requests-per-client", s3http.DefaultMaxRequestsPerClient,
		"requests in flight at most per client address; beyond, SlowDown (behind a proxy every client shares its address)")
	fs.DurationVar(&l.HeaderTimeout, "header-timeout", s3http.DefaultHeaderTimeout, "a request's whole header must arrive within this, from its first byte")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", s3http.DefaultIdleTimeout, "a keep-alive connection idle this long is closed")
	fs.DurationVar(&l.TLSHandshakeTimeout, "tls-handshake-timeout", s3http.DefaultTLSHandshakeTimeout, "a TLS handshake must finish within this")
	fs.Int64Var(&l.MinBodyRate, "min-body-rate", s3http.DefaultMinBodyRate, "bytes per second a request body must average once --body-grace is spent; slower bodies are cut off (RequestTimeout)")
	fs.DurationVar(&l.BodyGrace, "body-grace", s3http.DefaultBodyGrace, "time a request body may wait before --min-body-rate applies")
	fs.DurationVar(&l.WriteStall, "write-stall", s3http.DefaultWriteStall, "a response write that makes no progress for this long fails")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", s3http.DefaultMaxHeaderBytes, "largest request header, in bytes")
	return l
}

// testMaxPutSize is the largest single PUT, only for tests of what is
// larger (STRATA_TEST_MAX_PUT_SIZE, bytes); 0 is S3's 5 GiB.
func testMaxPutSize(getenv func(string) string, log *slog.Logger) int64 {
	n, err := strconv.ParseInt(getenv("STRATA_TEST_MAX_PUT_SIZE"), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	log.Warn("STRATA_TEST_MAX_PUT_SIZE: single PUTs are limited below S3's 5 GiB, for tests only", "bytes", n)
	return n
}

// testLifecycleDay is the length of a lifecycle rule's day, only for tests
// of lifecycle rules (STRATA_TEST_LIFECYCLE_DAY); 0 is S3's day.
func testLifecycleDay(getenv func(string) string) time.Duration {
	d, _ := time.ParseDuration(getenv("STRATA_TEST_LIFECYCLE_DAY"))
	return d
}

// testNotifyTakeOver is STRATA_TEST_NOTIFY_TAKEOVER, for tests of a lost
// node's notification events only: how old they must be before another
// node delivers them (the default is a minute).
func testNotifyTakeOver(getenv func(string) string, log *slog.Logger) time.Duration {
	return testDuration(getenv, "STRATA_TEST_NOTIFY_TAKEOVER", "another node's notification events are taken over early", log)
}

// testNotifyUnknownGrace is STRATA_TEST_NOTIFY_UNKNOWN_GRACE, for tests of
// a target removed only: how old an event for a target the server does
// not have must be before it is dropped (the default is two minutes).
func testNotifyUnknownGrace(getenv func(string) string, log *slog.Logger) time.Duration {
	return testDuration(getenv, "STRATA_TEST_NOTIFY_UNKNOWN_GRACE", "events for targets the server does not have are dropped early", log)
}

// testDuration is the duration the variable name gives (0: unset or not
// one), logged as a test setting that does what.
func testDuration(getenv func(string) string, name, what string, log *slog.Logger) time.Duration {
	d, err := time.ParseDuration(getenv(name))
	if err != nil || d <= 0 {
		return 0
	}
	log.Warn(name+": "+what+", for tests only", "after", d)
	return d
}
