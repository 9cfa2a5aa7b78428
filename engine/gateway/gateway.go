// Package gateway assembles `strata gateway`: S3 over a directory tree
// (buckets are its top-level directories, objects plain files, the layout
// versitygw's posix backend reads and writes too; engine/posix), served by
// the same S3 front end (engine/s3api), health, metrics, TLS and IAM as
// `strata server`. A gateway keeps nothing locally: multipart staging,
// versions, locks and (without user xattrs) metadata live on the served
// volume, so replicas on one shared filesystem serve any request,
// including parts of one upload arriving at different replicas.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-storage/strata/engine/posix"
	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/console"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3api"
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
	// CertsReloadInterval is how often they are checked for changes.
	CertsReloadInterval time.Duration
	// MetricsTokenFile holds the bearer token /strata/metrics requires
	// (re-read when it changes); empty: metrics are served to anyone.
	MetricsTokenFile string
	RootUser         iam.Credentials
	// UsersFile is the users file (empty: root only).
	UsersFile string
	// NotifyTargetsFile lists the bucket notifications' targets
	// (engine/notify.TargetsFile; empty: none).
	NotifyTargetsFile string
	// NotifyUnknownGrace, for tests only, is how old an event for a
	// target the gateway does not have must be before it is dropped (0:
	// the queue's default).
	NotifyUnknownGrace time.Duration
	// Console is the web console's listener (engine/console); no address:
	// none.
	Console console.Options
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
	// MaxPutSize, for tests only: s3api.Config.MaxPutSize.
	MaxPutSize int64
	// ShutdownDelay is how long readiness is reported down before the
	// listener stops, so load balancers stop sending new requests first.
	ShutdownDelay time.Duration
	Log           *slog.Logger
}

// DefaultLifecycleInterval is the pause between two lifecycle passes.
const DefaultLifecycleInterval = time.Hour

// MetadataMode is where object metadata lives (posix.MetadataMode).
type MetadataMode = posix.MetadataMode

// Metadata modes: auto picks xattr when the filesystem stores user
// extended attributes, sidecar otherwise, once per volume.
const (
	MetadataAuto    = posix.MetadataAuto
	MetadataXattr   = posix.MetadataXattr
	MetadataSidecar = posix.MetadataSidecar
)

// DefaultClaimTimeout is Config.ClaimTimeout's default.
const DefaultClaimTimeout = posix.DefaultClaimTimeout

// replicaName names this process among the gateway's replicas (the pod's
// host name, and its process ID for replicas sharing a host).
func replicaName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

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
	served *s3api.ServedCertificate
	trust  *certfiles.Trust
	// replication is the gateway's bucket replication (set before
	// serving).
	replication *replicate.Service
}

// ReplicationStatus is the gateway's bucket replication (admin API).
func (g *Gateway) ReplicationStatus(ctx context.Context) (adminapi.ReplicationStatus, error) {
	return g.replication.Status(ctx)
}

// ResyncReplication queues a bucket's versions not yet replicated.
func (g *Gateway) ResyncReplication(ctx context.Context, bucket string) (adminapi.ResyncResult, error) {
	return g.replication.ResyncBucket(ctx, bucket)
}

// Run serves the volume until ctx ends, then drains: readiness drops,
// in-flight requests finish. Long on purpose, like the server's Run: the
// gateway's start-up sequence in the order it must happen.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	g := &Gateway{cfg: cfg, started: time.Now(), served: &s3api.ServedCertificate{}}
	if cfg.CertsDir != "" {
		g.trust = certfiles.NewTrust(filepath.Join(cfg.CertsDir, certfiles.CAFile), certfiles.Interval(cfg.CertsReloadInterval), nil)
	}
	g.volume.Store(&volumeState{})
	layer, err := posix.New(posix.Options{
		Root: cfg.Root, VersionsDir: cfg.VersionsDir, Metadata: cfg.Metadata, Fsync: cfg.Fsync,
		ETagSyncLimit: cfg.ETagSyncLimit, ClaimTimeout: cfg.ClaimTimeout,
		LargeDirThreshold: cfg.LargeDirThreshold, LargeDirScanInterval: cfg.LargeDirScanInterval,
		Log: log,
	})
	if err != nil {
		return err
	}
	defer layer.Close()
	g.root, g.marker, g.id, g.metadata = layer.Root(), layer.MarkerPath(), layer.DeploymentID(), string(layer.Metadata())
	if layer.Metadata() == MetadataSidecar {
		log.Info("object metadata in sidecar files", "dir", filepath.Join(g.root, leaseDir, "meta"))
	} else {
		log.Info("object metadata in user xattrs")
	}
	log.Info("volume ready", "root", g.root, "metadata", g.metadata, "deployment", g.id, "fsync", cfg.Fsync)

	users, err := iam.NewUsers(cfg.UsersFile, cfg.RootUser.AccessKey, log)
	if err != nil {
		return err
	}
	users.SetBucketOwners(func(bucket string) (string, bool) {
		bk, err := layer.StatBucket(context.Background(), bucket)
		if err != nil || bk.Owner == "" {
			return "", false
		}
		return bk.Owner, true
	})
	token, err := metrics.OptionalToken(cfg.MetricsTokenFile, log)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	s3m := metrics.NewS3(reg)
	if cfg.CertsDir != "" {
		metrics.RegisterCertificate(reg, filepath.Join(cfg.CertsDir, certfiles.CertFile), filepath.Join(cfg.CertsDir, certfiles.CAFile))
	}
	reg.MustRegister(largeDirCollector{layer}, g.volumeCollector())

	lc := lifecycle.NewWorker(layer, s3api.VersionFacts, lifecycle.WorkerOptions{Day: cfg.LifecycleDay, Log: log})
	metrics.RegisterLifecycle(reg, lc.Metrics)
	every := cfg.LifecycleInterval
	if every <= 0 {
		every = DefaultLifecycleInterval
	}

	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	go users.Watch(5*time.Second, bg.Done())
	go g.probeVolume(bg, 5*time.Second)
	go cleanStaleUploads(bg, layer, cfg.StaleUploadAge, log)
	go runLifecycle(bg, lc, filepath.Join(g.root, leaseDir), replicaName(), every, log)

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
	s3cfg := s3api.Config{RootAccess: cfg.RootUser.AccessKey, RootSecret: cfg.RootUser.SecretKey, Users: users,
		Observer: s3m, LifecycleDay: cfg.LifecycleDay, MaxPutSize: cfg.MaxPutSize, Log: log}
	var queue *notify.Queue
	var remotes *replicate.Remotes
	if cfg.NotifyTargetsFile != "" {
		// Replicas share the root, and so the queue: each delivers its
		// own events, and those of a replica gone for a minute (pods of a
		// Deployment do not come back under their name).
		host, _ := os.Hostname()
		var err error
		if queue, remotes, err = replicate.StartQueue(bg, layer, replicate.QueueOptions{Path: cfg.NotifyTargetsFile, Node: host,
			UnknownGrace: cfg.NotifyUnknownGrace}, reg, log); err != nil {
			return err
		}
		defer replicate.StopQueue(stopBg, queue, log)
		s3cfg.Notifier = queue
	}
	srv := s3api.New(layer, s3cfg)
	g.replication = replicate.Start(srv, layer, queue, remotes, reg)
	lc.OnExpired(srv.LifecycleExpired)
	if err := console.Start(serveCtx, console.Config{Options: cfg.Console, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval,
		S3Address: cfg.Address, S3TLS: cfg.CertsDir != "", S3Leaf: g.served.Leaf, RootSecret: cfg.RootUser.SecretKey, Limits: cfg.Limits, Log: log}); err != nil {
		stopBg()
		return fmt.Errorf("console: %w", err)
	}
	err = s3api.Serve(serveCtx, srv, s3api.ServeConfig{
		Address: cfg.Address, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval, Served: g.served,
		Limits: cfg.Limits, Log: log, Stats: func(st func() s3http.Stats) { metrics.RegisterHTTP(reg, st) },
		Routes: s3api.Routes(g, metrics.Handler(reg, token), users, cfg.RootUser.AccessKey, cfg.RootUser.SecretKey, cfg.AdminOverHTTP),
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

// cleanStaleUploads aborts the uploads that received no part for age,
// every min(age/4, 1h), until ctx ends.
func cleanStaleUploads(ctx context.Context, layer *posix.Layer, age time.Duration, log *slog.Logger) {
	if age <= 0 {
		return
	}
	t := time.NewTicker(min(age/4, time.Hour))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := layer.AbortStaleUploads(ctx, age)
		if err != nil {
			log.Warn("stale multipart upload cleanup stopped", "err", err)
		}
		if n > 0 {
			log.Info("aborted stale multipart uploads", "count", n, "age", age)
		}
	}
}

// largeDirCollector exports the directories the layer found large.
type largeDirCollector struct{ layer *posix.Layer }

func (c largeDirCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLargeDirs
	ch <- descDirEntries
	ch <- descDirThreshold
}

func (c largeDirCollector) Collect(ch chan<- prometheus.Metric) {
	dirs := c.layer.LargeDirs()
	ch <- prometheus.MustNewConstMetric(descLargeDirs, prometheus.GaugeValue, float64(len(dirs)))
	ch <- prometheus.MustNewConstMetric(descDirThreshold, prometheus.GaugeValue, float64(c.layer.LargeDirThreshold()))
	for _, d := range dirs[:min(len(dirs), exportedLargeDirs)] {
		ch <- prometheus.MustNewConstMetric(descDirEntries, prometheus.GaugeValue, float64(d.Entries), d.Dir)
	}
}
