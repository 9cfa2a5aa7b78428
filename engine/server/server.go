// Package server assembles `strata server`: it brings up the deployment's
// pools (this node's drives opened locally, the others reached through
// their nodes' internode service), starts healing, the drive monitor, the
// stale-upload cleaner, decommission and the topology watcher, and serves
// S3, health, metrics and the admin API on one listener and the internode
// service on another.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/console"
	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/iamapi"
	"github.com/strata-storage/strata/engine/internode"
	"github.com/strata-storage/strata/engine/kms"
	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3api"
	"github.com/strata-storage/strata/engine/s3http"
	"github.com/strata-storage/strata/engine/vfs"
)

// Config configures a server.
type Config struct {
	// Address is host:port to serve S3 on; the node's identity in the
	// topology.
	Address string
	// Topology is the deployment's pool list; TopologyFile, when set, is
	// where it came from, re-read when it changes.
	Topology     cluster.Topology
	TopologyFile string
	// InternodePort is where every node serves its drives to the others.
	InternodePort int
	// InternodeProtocol is the protocol version this node speaks
	// (internode.Protocol; lower only to test rolling upgrades).
	InternodeProtocol int
	// NoSync turns off fsync (relaxed durability, for benchmarks that say so).
	NoSync bool
	// ShardFiles writes shards as files of their own (drive.Options.ShardFiles).
	ShardFiles bool
	// CertsDir holds tls.crt and tls.key (and ca.crt); empty = plain HTTP.
	CertsDir string
	// AdminOverHTTP serves the admin API over plain HTTP too (SigV4 only).
	AdminOverHTTP bool
	// Limits bound the S3 port's connections, headers, bodies and
	// requests in flight.
	Limits s3http.Limits
	// DataSlots bounds the requests moving large objects at once
	// (s3api.Config.DataSlots); 0 is no bound.
	DataSlots int
	// MetaCacheSize, when positive, is one metadata cache the node's
	// drives share, memtables included (drive.Options.Cache); 0: a cache
	// of drive.DefaultCacheSize per drive.
	MetaCacheSize int64
	// MemTableSize is each drive's memtable size; 0: the default.
	MemTableSize int64
	// InsecureInternode lets a clustered node run its internode service
	// without TLS (no CertsDir). With CertsDir peers are always verified.
	InsecureInternode bool
	// CertsReloadInterval is how often they are checked for changes
	// (0: certfiles.DefaultInterval).
	CertsReloadInterval time.Duration
	// MetricsTokenFile holds the bearer token /strata/metrics requires
	// (re-read when it changes); empty: metrics are served to anyone.
	MetricsTokenFile string
	Root             iam.Credentials
	// UsersFile is the users file (empty: root only).
	UsersFile string
	// NotifyTargetsFile lists the bucket notifications' targets
	// (engine/notify.TargetsFile; empty: none).
	NotifyTargetsFile string
	// NotifyTakeOver, for tests only, is how old an offline node's stored
	// events must be before this node delivers them (0: the queue's
	// default).
	NotifyTakeOver time.Duration
	// NotifyUnknownGrace, for tests only, is how old an event for a
	// target the server does not have must be before it is dropped (0:
	// the queue's default).
	NotifyUnknownGrace time.Duration
	// KeysFile holds the master keys of SSE-S3 and SSE-KMS (engine/kms);
	// empty: only SSE-C is offered.
	KeysFile string
	Healer   erasure.HealerOptions
	// StaleUploadAge is how old an unfinished multipart upload gets before
	// it is aborted.
	StaleUploadAge time.Duration
	// LifecycleInterval is the pause between two lifecycle passes
	// (0: DefaultLifecycleInterval); LifecycleDay, for tests only, is the
	// length of a lifecycle rule's day (0: S3's).
	LifecycleInterval, LifecycleDay time.Duration
	// MaxPutSize, for tests only: s3api.Config.MaxPutSize.
	MaxPutSize int64
	// MonitorInterval is how often drives are checked (offline drives
	// retried, wiped drives detected).
	MonitorInterval time.Duration
	// Console is the web console's listener (engine/console); no address:
	// none.
	Console console.Options
	// ShutdownDelay is how long readiness is reported down before the
	// listener stops, so load balancers stop sending new requests first.
	ShutdownDelay time.Duration
	// DriveOpenDelay is waited before each local drive is opened (a test
	// seam: STRATA_TEST_DRIVE_OPEN_DELAY).
	DriveOpenDelay time.Duration
	// DriveFS and DriveMetaFS, when set, are the filesystem seams of this
	// node's drives, for their files and their metadata stores (a test
	// seam: STRATA_TEST_SLOW_WRITES).
	DriveFS     vfs.FS
	DriveMetaFS pebblevfs.FS
	Log         *slog.Logger
}

// Node is a running server.
type Node struct {
	cfg      Config
	dep      *cluster.Deployment
	started  time.Time
	ready    atomic.Bool
	stopping atomic.Bool
	// announced: every peer that answers was told this node is back
	// (announce); until then its pings say it is starting.
	announced atomic.Bool
	bg        context.Context

	// What the listeners hold, for GET tls: the S3 leaf, the internode
	// TLS (nil unless clustered with TLS), the CAs trusted (nil without
	// CertsDir).
	served       *s3api.ServedCertificate
	internodeTLS *internode.TLS
	trust        *certfiles.Trust

	mu      sync.Mutex
	healers map[string]*erasure.Healer // by pool
	// healerStops end the healers' runs (a removed pool's).
	healerStops map[string]context.CancelFunc
	drains      map[drainKey]*drainState
	lifecycle   *lifecycle.Worker
	// told holds the pool states peers set before this node ran the pool:
	// topology files reach nodes at different times, and a pool added and
	// decommissioned within a minute can be Decommissioned everywhere
	// before a node's file lists it. Applied when the pool is added.
	told map[string]string
	// replication is the node's bucket replication (set before serving).
	replication *replicate.Service
}

// Run serves until ctx ends, then drains: readiness drops, in-flight
// requests finish, drives close. It is long on purpose: it is the node's
// start-up sequence (deployment, keys, backend, background loops, serving,
// drain) read top to bottom, each step a call; splitting it would scatter
// the order that matters.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if cfg.InternodeProtocol == 0 {
		cfg.InternodeProtocol = internode.Protocol
	}
	if cfg.InternodePort == 0 {
		cfg.InternodePort = internode.DefaultPort
	}
	secret := internode.Secret(cfg.Root.SecretKey)
	peerOpts := internode.PeerOptions{Secret: secret, Version: cfg.InternodeProtocol, Log: log}
	itls, err := internodeTLS(cfg, log)
	if err != nil {
		return err
	}
	if itls != nil {
		peerOpts.TLS = itls.Client
	}
	dep := cluster.NewDeployment(cluster.Options{
		Locality: locality(cfg, 3*time.Minute), InternodePort: cfg.InternodePort,
		Drive: drive.Options{NoSync: cfg.NoSync, FS: cfg.DriveFS, MetaFS: cfg.DriveMetaFS, Log: log, Cache: metaCache(cfg.MetaCacheSize), MemTableSize: cfg.MemTableSize, ShardFiles: cfg.ShardFiles}, Peer: peerOpts, Log: log, DriveOpenDelay: cfg.DriveOpenDelay,
	})
	defer dep.Close()
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	n := &Node{cfg: cfg, dep: dep, started: time.Now(), bg: bg, healers: map[string]*erasure.Healer{}, healerStops: map[string]context.CancelFunc{}, drains: map[drainKey]*drainState{},
		served: &s3api.ServedCertificate{}, internodeTLS: itls, trust: trusted(cfg, itls)}

	// This node's drives are open before the internode service answers
	// anyone (a peer is never told a drive is not served while it is being
	// opened); the service then runs while the deployment agrees on its
	// format, as peers ask for this node's drives' formats.
	if err := dep.Open(cfg.Topology); err != nil {
		return err
	}
	if clustered(cfg.Topology) {
		srv := &internode.Server{Drive: dep.LocalDrive, Secret: secret, Version: cfg.InternodeProtocol, Log: log, NoSync: cfg.NoSync,
			OnBucketChanged: func(b string) {
				if dep.Pools != nil {
					dep.Pools.ForgetBucket(b)
				}
			},
			Served:  func() ([]string, bool) { return dep.ServedDrives(), !n.announced.Load() },
			Pools:   dep.PoolNames,
			Names:   dep.LocalHosts,
			OnHello: n.helloFrom,
			Node:    n}
		stop, err := serveInternode(cfg.Address, cfg.InternodePort, srv, itls, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := dep.Bootstrap(ctx); err != nil {
		return err
	}
	dep.Pools.KnownBy = func(pool string) int { return internode.KnownBy(dep.PoolPeers(), pool) }
	n.announce(ctx)
	dep.Pools.OnBucketChange = func(b string) { notifyBucketChanged(bg, dep.Peers(), b) }
	for _, pr := range dep.PoolRuntimes() {
		n.startPool(pr)
	}

	users, err := iam.NewUsers(cfg.UsersFile, cfg.Root.AccessKey, log)
	if err != nil {
		return err
	}
	token, err := metrics.OptionalToken(cfg.MetricsTokenFile, log)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	s3m := metrics.NewS3(reg)
	if cfg.CertsDir != "" {
		metrics.RegisterCertificate(reg, filepath.Join(cfg.CertsDir, certfiles.CertFile), filepath.Join(cfg.CertsDir, certfiles.CAFile))
	}
	// A scrape carries no context: its drive calls are bounded by the
	// node's lifetime and a deadline shorter than Prometheus' scrape timeout.
	metrics.RegisterNode(reg, func() metrics.Snapshot {
		ctx, cancel := context.WithTimeout(bg, 8*time.Second)
		defer cancel()
		return n.snapshot(ctx)
	})
	metrics.RegisterLifecycle(reg, func() metrics.Lifecycle {
		if n.lifecycle == nil {
			return metrics.Lifecycle{} // scraped before it was built
		}
		return n.lifecycle.Metrics()
	})
	metrics.RegisterStores(reg, n.stores)
	metrics.RegisterBucketQuotas(reg, func() []metrics.BucketQuota {
		ctx, cancel := context.WithTimeout(bg, 8*time.Second)
		defer cancel()
		return n.quotaMetrics(ctx)
	})
	users.SetBucketOwners(func(bucket string) (string, bool) {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		bk, err := dep.Pools.StatBucket(ctx, bucket)
		if err != nil {
			return "", false
		}
		if bk.Owner == "" {
			return cfg.Root.AccessKey, true // buckets from before owners were kept
		}
		return bk.Owner, true
	})
	var keys *kms.Keys
	if cfg.KeysFile != "" {
		if keys, err = kms.Load(cfg.KeysFile, log); err != nil {
			return err
		}
		go keys.Watch(5*time.Second, bg.Done())
	}
	audiences, err := webAudiences(os.Getenv)
	if err != nil {
		return err
	}
	layer := erasure.Layer{Pools: dep.Pools, Heal: n.heal}
	n.lifecycle = lifecycle.NewWorker(layer, s3api.VersionFacts, lifecycle.WorkerOptions{Day: cfg.LifecycleDay, Log: log})
	go n.runLifecycle(bg)
	go n.monitorDrives(bg)
	go n.cleanStaleUploads(bg)
	go n.runDecommissions(bg)
	go users.Watch(5*time.Second, bg.Done())
	if cfg.TopologyFile != "" {
		go n.watchTopology(bg)
	}

	// The listener outlives ctx by ShutdownDelay: readiness drops first.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	go func() {
		<-ctx.Done()
		n.stopping.Store(true)
		log.Info("shutting down: readiness down, draining", "delay", cfg.ShutdownDelay)
		time.Sleep(cfg.ShutdownDelay)
		stopServing()
	}()
	onListen := func() {
		n.ready.Store(true)
		log.Info("serving S3", "address", cfg.Address, "tls", cfg.CertsDir != "")
	}
	s3cfg := s3api.Config{RootAccess: cfg.Root.AccessKey, RootSecret: cfg.Root.SecretKey, Users: users,
		Observer: s3m, LifecycleDay: cfg.LifecycleDay, MaxPutSize: cfg.MaxPutSize, DataSlots: cfg.DataSlots, Log: log}
	if cfg.Console.OIDC.Issuer != "" && keys == nil {
		return errors.New("console: single sign-on assumes roles through STS, which needs IAM (a master keys file)")
	}
	web := webVerifier(os.Getenv)
	if keys != nil {
		s3cfg.Keys = keys
		// The IAM directory seals its secrets with the master keys: no
		// keys file, no IAM API (the operator always mounts one).
		dir := iam.NewDirectory(layer, keys, log)
		if users != nil {
			dir.SetDeclared(users.Declares)
		}
		loadCtx, cancel := context.WithTimeout(bg, 30*time.Second)
		if err := dir.Load(loadCtx); err != nil {
			log.Warn("IAM directory not loaded yet; it is read again every second", "err", err)
		}
		cancel()
		go tick(bg, time.Second, func() {
			if err := dir.Refresh(bg); err != nil && bg.Err() == nil {
				log.Warn("IAM directory not refreshed; keeping the last one loaded", "err", err)
			}
		})
		s3cfg.Directory = dir
		s3cfg.IAM = &iamapi.Handler{Dir: dir, CheckPolicy: s3api.CheckIdentityPolicy, CheckTrust: s3api.CheckTrustPolicy}
		s3cfg.Sessions = iam.NewSessions(keys)
		s3cfg.STS = &iamapi.STS{IAM: s3cfg.IAM, Sessions: s3cfg.Sessions, Web: web, Audiences: audiences}
	}
	var queue *notify.Queue
	var remotes *replicate.Remotes
	if cfg.NotifyTargetsFile != "" {
		if queue, remotes, err = startNotifications(bg, cfg, layer, dep.Peers, reg, log); err != nil {
			return err
		}
		defer replicate.StopQueue(stopBg, queue, log) // before the drives close (dep.Close)
		s3cfg.Notifier = queue
	}
	front := s3api.New(layer, s3cfg)
	n.replication = replicate.Start(front, layer, queue, remotes, reg)
	n.lifecycle.OnExpired(front.LifecycleExpired)
	if err := console.Start(serveCtx, console.Config{Options: cfg.Console, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval,
		S3Address: cfg.Address, S3TLS: cfg.CertsDir != "", S3Leaf: n.served.Leaf, RootSecret: cfg.Root.SecretKey, Limits: cfg.Limits, IssuerClient: web.Client, Log: log}); err != nil {
		stopBg()
		return fmt.Errorf("console: %w", err)
	}
	err = s3api.Serve(serveCtx, front, s3api.ServeConfig{
		Address: cfg.Address, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval, Served: n.served,
		Limits: cfg.Limits, OnListen: onListen, Log: log, Stats: func(st func() s3http.Stats) { metrics.RegisterHTTP(reg, st) },
		Routes: s3api.Routes(n, metrics.Handler(reg, token), users, cfg.Root.AccessKey, cfg.Root.SecretKey, cfg.AdminOverHTTP),
	})
	stopBg()
	return err
}

// clustered reports whether the topology names nodes (not bare paths).
func clustered(t cluster.Topology) bool {
	for _, p := range t.Pools {
		// Endpoints carry {a...b} ranges (the operator writes them so), which
		// do not parse as URLs until expanded.
		eps, err := cluster.ExpandAll(p.Endpoints)
		if err != nil {
			continue
		}
		for _, e := range eps {
			if ep, err := cluster.ParseEndpoint(e); err == nil && ep.Host != "" {
				return true
			}
		}
	}
	return false
}

// serveInternode starts the internode HTTP/2 service on the S3 address's
// host and the internode port.
// metaCache is the drives' shared metadata cache of size bytes; nil (a
// cache per drive) when size is not positive.
func metaCache(size int64) *drive.MetaCache {
	if size <= 0 {
		return nil
	}
	return drive.NewMetaCache(size)
}

// locality decides which endpoints are this node's; peers' names that do
// not resolve yet are waited for (wait), as pods of a StatefulSet start
// together and each gets its DNS record only once it has an address.
func locality(cfg Config, wait time.Duration) cluster.Locality {
	return cluster.Locality{Address: cfg.Address, ResolveWait: wait, Logf: func(format string, args ...any) {
		cfg.Log.Info(fmt.Sprintf(format, args...))
	}}
}

func serveInternode(address string, port int, srv *internode.Server, itls *internode.TLS, log *slog.Logger) (func(), error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("internode service on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols),
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: 2 << 20, MaxReceiveBufferPerConnection: 3 << 20, SendPingTimeout: 10 * time.Second}}
	// HTTP/1.1 only opens the framed channel (internode/frames.go).
	hs.Protocols.SetHTTP1(true)
	if itls != nil {
		hs.TLSConfig = itls.Server
		hs.Protocols.SetHTTP2(true)
		l = tls.NewListener(l, itls.Server)
	} else {
		hs.Protocols.SetUnencryptedHTTP2(true)
	}
	go func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("internode service stopped", "err", err)
		}
	}()
	log.Info("serving internode", "address", addr, "tls", itls != nil)
	return func() {
		_ = hs.Close()
		srv.Close()
	}, nil
}

// announceTimeout bounds announce: a peer that does not answer is not
// waited for (it finds this node at its next ping).
const announceTimeout = 5 * time.Second

// announce tells every peer that this node is back, by name, and waits
// until each that answers has pinged it back (helloFrom): a peer that held
// it offline would otherwise find it only at its next ping, and meanwhile
// count its drives as lost while another peer already counts them, so a
// maintenance gate asked there could let a second node go. Until then this
// node's pings say it is starting, so no peer's gate counts its drives.
func (n *Node) announce(ctx context.Context) {
	defer n.announced.Store(true)
	hosts := n.dep.LocalHosts()
	peers := n.dep.Peers()
	if len(hosts) == 0 || len(peers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, h := range hosts {
				if err := p.Hello(ctx, h); err != nil {
					n.cfg.Log.Debug("peer not told this node is back", "peer", p.Host, "err", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// helloFrom answers a peer that says it is back: it is pinged at once.
func (n *Node) helloFrom(ctx context.Context, host string) {
	if p := n.dep.Peer(host); p != nil {
		if err := p.Check(ctx); err != nil {
			n.cfg.Log.Warn("a node said it is back but does not answer", "node", host, "err", err)
		}
	}
}

// startPool starts the healer of a pool and rebuilds its fresh drives.
func (n *Node) startPool(pr *cluster.PoolRuntime) {
	applyOverride(pr)
	opts := n.cfg.Healer
	opts.ScanSet = func(set int) bool { return n.leads(pr, set) }
	h := erasure.NewHealer(pr.Entry.Pool, opts, n.cfg.Log)
	ctx, stop := context.WithCancel(n.bg)
	n.mu.Lock()
	n.healers[pr.Layout.Name] = h
	n.healerStops[pr.Layout.Name] = stop
	n.mu.Unlock()
	go h.Run(ctx)
	for _, slot := range pr.Fresh {
		h.HealDrive(n.bg, slot/pr.Layout.SetSize, slot%pr.Layout.SetSize)
	}
}

// stopPool stops the healer of a pool taken out of the deployment.
func (n *Node) stopPool(pool string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if stop := n.healerStops[pool]; stop != nil {
		stop()
	}
	delete(n.healers, pool)
	delete(n.healerStops, pool)
}

// leads reports whether this node scans and drains a set: the node of the
// set's first drive.
func (n *Node) leads(pr *cluster.PoolRuntime, set int) bool {
	return pr.Layout.Drives[set*pr.Layout.SetSize].Local
}

func (n *Node) healer(pool string) *erasure.Healer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.healers[pool]
}

// heal queues an object found damaged, in every pool that may hold it.
func (n *Node) heal(bucket, object string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.healers {
		h.Enqueue(bucket, object)
	}
}

// monitorDrives retries this node's offline drives and notices drives
// wiped or replaced under a running server, or whose metadata store failed:
// such a drive is reopened (formatted into its slot when empty) and
// rebuilt.
func (n *Node) monitorDrives(ctx context.Context) {
	t := time.NewTicker(n.cfg.MonitorInterval)
	defer t.Stop()
	offline := map[string]string{} // why each offline drive was last said to be
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, pr := range n.dep.PoolRuntimes() {
			for _, slot := range pr.LocalSlots() {
				path := pr.Layout.Drives[slot].Path
				d := pr.Local(slot)
				switch {
				case d == nil:
				case d.Failed() != nil:
					n.cfg.Log.Error("drive offline: its metadata store failed; reopened once its disk takes writes again", "drive", path, "err", d.Failed())
					if err := pr.TakeOffline(slot); err != nil {
						n.cfg.Log.Warn("closing a failed drive", "drive", path, "err", err)
					}
					continue
				default:
					if _, err := os.Stat(drive.FormatPath(path)); err == nil || !errors.Is(err, os.ErrNotExist) {
						continue
					}
					n.cfg.Log.Warn("drive lost its format while running (wiped or replaced); reopening", "drive", path)
				}
				// A disk that refuses writes (full, failing) is not opened:
				// pebble would wait on it without end.
				err := drive.Probe(path)
				fresh := false
				if err == nil {
					fresh, err = pr.Reopen(ctx, slot)
				}
				if err != nil {
					// Said once per reason, not at every look.
					if why := err.Error(); d != nil || offline[path] != why {
						n.cfg.Log.Error("drive offline", "drive", path, "err", err)
						offline[path] = why
					}
					continue
				}
				delete(offline, path)
				n.cfg.Log.Info("drive back online", "drive", path, "fresh", fresh)
				// A drive that was away missed writes; an empty one missed all.
				if h := n.healer(pr.Layout.Name); h != nil {
					h.HealDrive(ctx, slot/pr.Layout.SetSize, slot%pr.Layout.SetSize)
				}
			}
		}
	}
}

// cleanStaleUploads aborts multipart uploads older than StaleUploadAge.
func (n *Node) cleanStaleUploads(ctx context.Context) {
	tick(ctx, min(n.cfg.StaleUploadAge/4, time.Hour), func() {
		aborted, err := AbortStaleUploads(ctx, n.dep.Pools, n.cfg.StaleUploadAge)
		if err != nil {
			n.cfg.Log.Warn("stale upload cleanup stopped", "err", err)
		}
		if aborted > 0 {
			n.cfg.Log.Info("aborted stale multipart uploads", "count", aborted, "olderThan", n.cfg.StaleUploadAge)
		}
	})
}

// AbortStaleUploads aborts every upload started more than age ago.
func AbortStaleUploads(ctx context.Context, p *erasure.Pools, age time.Duration) (int, error) {
	buckets, err := p.ListBuckets(ctx)
	if err != nil {
		return 0, err
	}
	aborted := 0
	for _, b := range buckets {
		err := p.EachUpload(ctx, b.Name, "", func(u objlayer.UploadInfo) (bool, error) {
			if time.Since(u.Initiated) < age {
				return true, nil
			}
			if err := p.AbortMultipartUpload(ctx, u.Bucket, u.Object, u.ID); err != nil && !errors.Is(err, objlayer.ErrUploadNotFound) {
				return false, err
			}
			aborted++
			return true, nil
		})
		if err != nil {
			return aborted, err
		}
	}
	return aborted, nil
}

// internodeTLS loads a clustered node's internode TLS: nil for a lone
// node, and without --certs-dir, which only InsecureInternode allows (then
// logged). Requests
// are signed either way; TLS is what keeps them private and their answers
// genuine. With certificates peers are always verified: against ca.crt,
// or against the system roots until a ca.crt appears (logged).
func internodeTLS(cfg Config, log *slog.Logger) (*internode.TLS, error) {
	if !clustered(cfg.Topology) {
		return nil, nil
	}
	if cfg.CertsDir == "" {
		if !cfg.InsecureInternode {
			return nil, errors.New("internode traffic would not be encrypted nor its peers verified (no --certs-dir): give --certs-dir with tls.crt and tls.key " +
				"(and ca.crt, the CA of the peers' certificates), or --insecure-internode when only this deployment's servers can reach the internode port")
		}
		log.Warn("internode traffic is not encrypted nor its peers verified (--insecure-internode): only this deployment's servers may reach the internode port",
			"internodePort", cfg.InternodePort)
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(cfg.CertsDir, certfiles.CAFile)); err != nil {
		log.Info("no ca.crt in --certs-dir: peers' certificates are verified against the system roots (and their names), and peers need no client certificate, until a ca.crt appears",
			"certsDir", cfg.CertsDir)
	}
	return internode.LoadTLS(cfg.CertsDir, cfg.CertsReloadInterval)
}

// trusted is the CA bundle the node reports trusting: the internode one
// when clustered with TLS, else ca.crt as the process last read it.
func trusted(cfg Config, itls *internode.TLS) *certfiles.Trust {
	switch {
	case itls != nil:
		return itls.Trust()
	case cfg.CertsDir == "":
		return nil
	}
	return certfiles.NewTrust(filepath.Join(cfg.CertsDir, certfiles.CAFile), certfiles.Interval(cfg.CertsReloadInterval), nil)
}

// bucketNoticeWait bounds how long a bucket change waits for its peers to
// drop their cached record before it is acknowledged. A peer that does not
// answer in time is still told in the background, and its cache lapses
// after erasure.DefaultBucketCacheTTL anyway.
const bucketNoticeWait = time.Second

// notifyBucketChanged tells every peer that a bucket changed and waits
// (at most bucketNoticeWait) for the online ones to answer, so that a
// policy, versioning or lock change acknowledged through one node is what
// the next request through any other node sees. Offline peers are told in
// the background: they re-read the bucket when their cache lapses.
func notifyBucketChanged(bg context.Context, peers []*internode.Peer, bucket string) {
	var waits []chan struct{}
	for _, p := range peers {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.NotifyBucketChanged(bg, bucket)
		}()
		if p.Online() {
			waits = append(waits, done)
		}
	}
	if len(waits) == 0 {
		return
	}
	deadline := time.NewTimer(bucketNoticeWait)
	defer deadline.Stop()
	for _, done := range waits {
		select {
		case <-done:
		case <-deadline.C:
			return
		}
	}
}

// startNotifications opens the bucket notifications' targets, starts
// delivering their queue and reads the targets file again as it changes.
// A node is named by its S3 address; another node's stored events are
// left to it while it is online, and taken over by the online node with
// the lowest address when it is not.
func startNotifications(bg context.Context, cfg Config, layer objlayer.Layer, peers func() []*internode.Peer, reg prometheus.Registerer, log *slog.Logger) (*notify.Queue, *replicate.Remotes, error) {
	return replicate.StartQueue(bg, layer, replicate.QueueOptions{Path: cfg.NotifyTargetsFile, Node: cfg.Address, UnknownGrace: cfg.NotifyUnknownGrace,
		Configure: func(q *notify.Queue) {
			if cfg.NotifyTakeOver > 0 {
				q.TakeOver, q.Rescan = cfg.NotifyTakeOver, cfg.NotifyTakeOver/2
			}
			q.Takes = func(node string) bool {
				for _, p := range peers() {
					if p.Online() && (p.Host == node || p.Host < cfg.Address) {
						return false
					}
				}
				return true
			}
		}}, reg, log)
}
