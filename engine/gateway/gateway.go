// Package gateway assembles `strata gateway`: S3 over a directory tree
// (buckets are its top-level directories, objects plain files) with
// versitygw's posix backend, behind the same front end, health, metrics,
// TLS and IAM as `strata server`. A gateway keeps nothing locally:
// multipart staging, versions, locks and (without user xattrs) metadata
// live on the served volume, so replicas on one shared filesystem serve
// any request, including parts of one upload arriving at different
// replicas.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/s3front"
	"github.com/strata-storage/strata/engine/s3http"
)

// Config configures a gateway.
type Config struct {
	// Address is host:port to serve on.
	Address string
	// Root is the served directory: its top-level directories are buckets.
	Root string
	// VersionsDir keeps older versions of objects; empty: <Root>/.strata/versions.
	VersionsDir string
	// Metadata is where object metadata lives (auto: xattrs when the
	// filesystem stores them, sidecar files otherwise).
	Metadata MetadataMode
	// CertsDir holds tls.crt and tls.key (and ca.crt, reported by GET tls
	// and the CA expiry metric); empty = plain HTTP.
	CertsDir string
	// AdminOverHTTP serves the admin API over plain HTTP too (SigV4 only).
	AdminOverHTTP bool
	// Limits bound the S3 port's connections, requests and slow clients.
	Limits s3http.Limits
	// FrontEnd picks the S3 front end (server.FrontEndStrata or
	// server.FrontEndVersitygw) while both exist.
	FrontEnd string
	// CertsReloadInterval is how often they are checked for changes.
	CertsReloadInterval time.Duration
	// MetricsTokenFile holds the bearer token /strata/metrics requires
	// (re-read when it changes); empty: metrics are served to anyone.
	MetricsTokenFile string
	RootUser         iam.Credentials
	// UsersFile is the users file (empty: root only).
	UsersFile string
	// LargeDirThreshold is the entry count from which a directory is
	// reported as large; 0 turns the watch off.
	LargeDirThreshold int
	// LargeDirScanInterval is the pause between two scans of the volume
	// for large directories; 0: only directories written through S3 are
	// counted.
	LargeDirScanInterval time.Duration
	// ETagSyncLimit is the largest file created on the filesystem whose
	// ETag is computed before answering its first HEAD or GET (larger ones
	// are hashed in the background).
	ETagSyncLimit int64
	// Fsync syncs every written object (data, xattrs, directory entries up
	// to the bucket) before acknowledging it.
	Fsync bool
	// StaleUploadAge is how long a multipart upload may go without a new
	// part before it is aborted and its staged parts removed; 0: never.
	StaleUploadAge time.Duration
	// ClaimTimeout is how long, beyond its parts' size at 16 MiB/s, a
	// multipart completion claimed by another replica may take before this
	// one takes it over (the claimant died); 0: DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// LifecycleInterval is the pause between two passes of the buckets'
	// lifecycle rules, run by one replica at a time; 0: DefaultLifecycleInterval.
	LifecycleInterval time.Duration
	// LifecycleDay, for tests only, shortens the day of lifecycle rules.
	LifecycleDay time.Duration
	// ShutdownDelay is how long readiness is reported down before the
	// listener stops, so load balancers stop sending new requests first.
	ShutdownDelay time.Duration
	Log           *slog.Logger
}

// DefaultLifecycleInterval is the pause between two lifecycle passes.
const DefaultLifecycleInterval = time.Hour

// replicaName names this process among the gateway's replicas (the pod's
// host name, and its process ID for replicas sharing a host).
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// maxCopySource is the largest object CopyObject and UploadPartCopy copy,
// as in S3.
const maxCopySource = 5 << 30

// Gateway is a running gateway.
type Gateway struct {
	cfg Config
	// root is the served directory, marker the volume's marker file, id
	// its deployment ID and metadata its metadata mode.
	root, marker, id, metadata string
	started                    time.Time
	ready                      atomic.Bool
	stopping                   atomic.Bool
	// volume is what the last probe of the volume found.
	volume atomic.Pointer[volumeState]
	// served is the S3 listener's certificate; trust is ca.crt as last
	// read (nil without CertsDir).
	served servedCert
	trust  *certfiles.Trust
}

// Run serves until ctx ends, then drains: readiness drops, in-flight
// requests finish. Long on purpose, like the server's Run: the gateway's
// start-up sequence in the order it must happen.
func Run(ctx context.Context, cfg Config) error {
	g := &Gateway{cfg: cfg, started: time.Now()}
	if cfg.CertsDir != "" {
		g.trust = certfiles.NewTrust(filepath.Join(cfg.CertsDir, certfiles.CAFile), certfiles.Interval(cfg.CertsReloadInterval), nil)
	}
	g.volume.Store(&volumeState{})
	if cfg.FrontEnd == FrontEndStrata {
		return g.runOwn(ctx)
	}
	return g.runVersitygw(ctx)
}

// runVersitygw serves through versitygw's front end and posix backend.
func (g *Gateway) runVersitygw(ctx context.Context) error {
	cfg, log := g.cfg, g.cfg.Log
	l, err := prepareLayout(cfg.Root, cfg.Metadata, probeXattrs)
	if err != nil {
		return err
	}
	g.root, g.marker, g.id, g.metadata = l.root, filepath.Join(l.root, hiddenDir, markerFile), l.id, string(l.metadata)
	g.served = servedCert{vgw: &s3front.ServedCertificate{}}

	versions := cfg.VersionsDir
	if versions == "" {
		versions = filepath.Join(l.root, hiddenDir, versionsDir)
	} else if versions, err = filepath.Abs(versions); err != nil {
		return err
	}
	// CopyObjectThreshold is S3's 5 GiB copy limit: the backend's zero
	// value refuses every copy (versitygw's CLI sets it from a flag).
	opts := posix.PosixOpts{VersioningDir: l.backendPath(versions), CopyObjectThreshold: maxCopySource}
	var ms meta.MetadataStorer = meta.XattrMeta{}
	sidecar := filepath.Join(l.root, hiddenDir, sidecarDir)
	switch {
	case l.metadata == MetadataSidecar && l.detected:
		log.Warn("the filesystem does not store user xattrs: object metadata goes to sidecar files", "dir", sidecar, "reason", l.why)
	case l.metadata == MetadataSidecar:
		log.Info("object metadata in sidecar files", "dir", sidecar)
	default:
		log.Info("object metadata in user xattrs")
	}
	if l.metadata == MetadataSidecar {
		sc, err := meta.NewSideCar(sidecar)
		if err != nil {
			return fmt.Errorf("sidecar directory %s: %w", sidecar, err)
		}
		ms, opts.SideCarDir = sc, l.backendPath(sidecar)
	}
	// posix.New changes the working directory to the root; nothing in this
	// process may change it again (procCwd names the hidden directory).
	px, err := posix.New(l.root, ms, opts)
	if err != nil {
		return fmt.Errorf("posix backend on %s: %w", l.root, err)
	}
	vol, err := openVolume(l.root)
	if err != nil {
		px.Shutdown()
		return err
	}
	defer vol.close()
	log.Info("volume ready", "root", l.root, "versions", versions, "deployment", l.id, "fsync", cfg.Fsync)

	users, err := iam.NewUsers(cfg.UsersFile, cfg.RootUser.AccessKey, log)
	if err != nil {
		px.Shutdown()
		return err
	}
	token, err := metrics.OptionalToken(cfg.MetricsTokenFile, log)
	if err != nil {
		px.Shutdown()
		return err
	}
	reg := metrics.NewRegistry()
	s3m := metrics.NewS3(reg)
	if cfg.CertsDir != "" {
		metrics.RegisterCertificate(reg, filepath.Join(cfg.CertsDir, certfiles.CertFile), filepath.Join(cfg.CertsDir, certfiles.CAFile))
	}
	dirs := newDirWatch(l.root, cfg.LargeDirThreshold, time.Minute, log)
	reg.MustRegister(dirs, g.volumeCollector())

	be := &Backend{
		Posix: px, vol: vol, access: users, rootAccess: cfg.RootUser.AccessKey, region: "us-east-1",
		dirs: dirs, log: log, fsync: cfg.Fsync, meta: ms, day: cfg.LifecycleDay, claimBase: cmp.Or(cfg.ClaimTimeout, DefaultClaimTimeout),
		etags:     newETagFiller(l.root, ms, cfg.ETagSyncLimit, log),
		firstByte: func(s float64) { s3m.ObserveFirstByte(time.Duration(s * float64(time.Second))) },
	}

	users.SetBucketOwners(func(bucket string) (string, bool) {
		owner := be.owner(context.Background(), bucket)
		return owner, owner != ""
	})

	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	go users.Watch(5*time.Second, bg.Done())
	go dirs.run(bg, cfg.LargeDirScanInterval)
	go g.probeVolume(bg, 5*time.Second)
	go be.cleanStaleUploads(bg, cfg.StaleUploadAge, log)
	lc := s3front.NewLifecycleOver(lifecycleStore{be}, s3front.LifecycleOptions{Day: cfg.LifecycleDay, Log: log})
	metrics.RegisterLifecycle(reg, lc.Metrics)
	every := cfg.LifecycleInterval
	if every <= 0 {
		every = DefaultLifecycleInterval
	}
	go runLifecycle(bg, lc, filepath.Join(g.root, hiddenDir), replicaName(), every, log)

	// The listener outlives ctx by ShutdownDelay: readiness drops first.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	go func() {
		<-ctx.Done()
		g.stopping.Store(true)
		log.Info("shutting down: readiness down, draining", "delay", cfg.ShutdownDelay)
		time.Sleep(cfg.ShutdownDelay)
		stopServing()
	}()
	err = s3front.Serve(serveCtx, be, s3front.ServeConfig{
		Address: cfg.Address, RootAccess: cfg.RootUser.AccessKey, RootSecret: cfg.RootUser.SecretKey,
		IAM: users, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval, Served: g.served.vgw, Middleware: s3m.Middleware(), Log: log,
		Limits: s3front.Limits{MaxConnections: cfg.Limits.MaxConnections, MaxRequests: cfg.Limits.MaxRequests, MaxRequestsPerClient: cfg.Limits.MaxRequestsPerClient},
		Routes: s3front.Routes(g, metrics.Handler(reg, token), users, cfg.RootUser.AccessKey, cfg.RootUser.SecretKey, cfg.AdminOverHTTP),
		OnListen: func() {
			g.ready.Store(true)
			log.Info("serving S3", "address", cfg.Address, "tls", cfg.CertsDir != "")
		},
	})
	stopBg()
	return err
}

// Ready implements health.Checker: serving, not shutting down, and the
// volume answering.
func (g *Gateway) Ready() (bool, string) {
	switch {
	case g.stopping.Load():
		return false, "shutting down"
	case !g.ready.Load():
		return false, "starting"
	}
	if why := g.volume.Load().why; why != "" {
		return false, why
	}
	return true, ""
}

// ClusterHealthy implements health.Checker. Gateways hold no state, so any
// one of them may go down for maintenance; the volume must answer.
func (g *Gateway) ClusterHealthy(bool) (bool, string) {
	if why := g.volume.Load().why; why != "" {
		return false, why
	}
	return true, ""
}

// volumeState is what the last probe of the volume found.
type volumeState struct {
	why         string // why the volume is unavailable; "" when it answered
	total, free uint64 // its capacity, from the last probe that answered
	known       bool   // total and free were measured
}

// probeVolume checks every interval that the volume answers (statfs of the
// root, then a stat of the marker) within the interval, and keeps its
// capacity for the metrics and the admin API, so neither a scrape nor a
// readiness probe ever blocks on a hung NFS server. A probe still blocked
// is not duplicated.
func (g *Gateway) probeVolume(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	type result struct {
		total, free uint64
		err         error
	}
	var pending chan result
	for {
		if pending == nil {
			pending = make(chan result, 1)
			go func(done chan<- result) {
				total, free, err := statfs(g.root)
				if err == nil {
					_, err = os.Stat(g.marker)
				}
				done <- result{total, free, err}
			}(pending)
		}
		prev := g.volume.Load()
		next := *prev
		select {
		case r := <-pending:
			pending = nil
			next.why = ""
			if r.err != nil {
				next.why = "volume: " + r.err.Error()
			} else {
				next.total, next.free, next.known = r.total, r.free, true
			}
		case <-time.After(interval):
			next.why = fmt.Sprintf("volume %s did not answer within %s", g.root, interval)
		}
		if prev.why != next.why {
			if next.why != "" {
				g.cfg.Log.Error("volume unavailable", "reason", next.why)
			} else {
				g.cfg.Log.Info("volume available again")
			}
		}
		g.volume.Store(&next)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var _ admin.Informer = (*Gateway)(nil)

// Info implements admin.Informer.
func (g *Gateway) Info(context.Context) adminapi.Info {
	info := adminapi.Info{
		Version: buildinfo.String(), ProtocolVersion: 0, DeploymentID: g.id, Mode: "gateway",
		Uptime: time.Since(g.started).Round(time.Second).String(),
	}
	if v := g.volume.Load(); v.known {
		info.Capacity = adminapi.Capacity{TotalBytes: v.total, FreeBytes: v.free, UsedBytes: v.total - v.free, UsableBytes: v.free}
	}
	return info
}

// TLS implements admin.Informer: the leaf the S3 listener serves and ca.crt
// as last read (a gateway has no peers; the operator still asks it, so a
// CA leaves the bundle only once every pod has let it go).
func (g *Gateway) TLS() adminapi.TLSInfo {
	return adminapi.NewTLSInfo(g.served.Leaf(), nil, g.trust.CAs())
}

func statfs(dir string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// volumeCollector exports the volume's capacity and the metadata mode.
func (g *Gateway) volumeCollector() prometheus.Collector {
	return &volumeCollector{g: g,
		total: prometheus.NewDesc("strata_gateway_volume_total_bytes", "Capacity of the served filesystem.", nil, nil),
		free:  prometheus.NewDesc("strata_gateway_volume_free_bytes", "Bytes of the served filesystem available to the gateway (at the last probe, every 5 s).", nil, nil),
		info: prometheus.NewDesc("strata_gateway_info", "Always 1: the volume's metadata mode (xattr or sidecar) and deployment ID.",
			[]string{"metadata", "deployment"}, nil),
	}
}

type volumeCollector struct {
	g                 *Gateway
	total, free, info *prometheus.Desc
}

func (c *volumeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.free
	ch <- c.info
}

func (c *volumeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, c.g.metadata, c.g.id)
	if v := c.g.volume.Load(); v.known {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(v.total))
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(v.free))
	}
}

// errNoRoot is returned for an empty --root.
var errNoRoot = errors.New("--root is required: the directory whose subdirectories are the buckets")

// Check validates a configuration before anything is touched.
func (c Config) Check() error {
	if c.Root == "" {
		return errNoRoot
	}
	if c.LargeDirThreshold < 0 {
		return fmt.Errorf("--large-dir-threshold %d: want 0 (off) or more", c.LargeDirThreshold)
	}
	return nil
}
