// Package server assembles `strata server`: it opens the node's drives,
// agrees on their format, builds the erasure pool, starts healing, the
// drive monitor and the stale-upload cleaner, and serves S3, health,
// metrics and the admin API on one listener.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/cluster"
	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/s3front"
)

// Config configures a server.
type Config struct {
	// Address is host:port to serve on.
	Address string
	// Drives are this node's drive directories, in slot order.
	Drives []string
	// Parity per set; 0 = the default for the set size.
	Parity int
	// NoSync turns off fsync (relaxed durability, for benchmarks that say so).
	NoSync bool
	// CertsDir holds tls.crt and tls.key; empty = plain HTTP.
	CertsDir string
	// CertsReloadInterval is how often they are checked for changes.
	CertsReloadInterval time.Duration
	Root                iam.Credentials
	// UsersFile is the users file (empty: root only).
	UsersFile string
	Healer    erasure.HealerOptions
	// StaleUploadAge is how old an unfinished multipart upload gets before
	// it is aborted.
	StaleUploadAge time.Duration
	// MonitorInterval is how often drives are checked (offline drives
	// retried, wiped drives detected).
	MonitorInterval time.Duration
	// ShutdownDelay is how long readiness is reported down before the
	// listener stops, so load balancers stop sending new requests first.
	ShutdownDelay time.Duration
	Log           *slog.Logger
}

// Node is a running server.
type Node struct {
	cfg      Config
	pool     *cluster.LocalPool
	healer   *erasure.Healer
	started  time.Time
	ready    atomic.Bool
	stopping atomic.Bool
	ctx      context.Context
}

// Run serves until ctx ends, then drains: readiness drops, in-flight
// requests finish, drives close.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	lp, err := cluster.OpenLocalPool(cfg.Drives, cfg.Parity, drive.Options{NoSync: cfg.NoSync}, log)
	if err != nil {
		return err
	}
	defer lp.Close()
	n := &Node{cfg: cfg, pool: lp, started: time.Now(), ctx: ctx}
	n.healer = erasure.NewHealer(lp.Pool, cfg.Healer, log)
	log.Info("drives ready", "drives", len(cfg.Drives), "layout", lp.Pool.String(), "deployment", lp.Format.DeploymentID,
		"durable", !cfg.NoSync)

	users, err := iam.NewUsers(cfg.UsersFile, cfg.Root.AccessKey, log)
	if err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	s3m := metrics.NewS3(reg)
	metrics.RegisterNode(reg, n.snapshot)

	be := s3front.New(lp.Pool, s3front.Options{
		Hooks:  s3front.Hooks{Heal: n.healer.Enqueue, FirstByte: s3m.ObserveFirstByte},
		Access: users,
		Log:    log,
	})

	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	go n.healer.Run(bg)
	for _, pos := range lp.Fresh {
		n.healer.HealDrive(bg, pos/lp.Format.SetSize, pos%lp.Format.SetSize)
	}
	go n.monitorDrives(bg)
	go n.cleanStaleUploads(bg)
	go users.Watch(5*time.Second, bg.Done())

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
	err = s3front.Serve(serveCtx, be, s3front.ServeConfig{
		Address: cfg.Address, RootAccess: cfg.Root.AccessKey, RootSecret: cfg.Root.SecretKey,
		IAM: users, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval, Middleware: s3m.Middleware(), Log: log,
		Routes: s3front.Routes(n, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), cfg.Root.AccessKey, cfg.Root.SecretKey),
		OnListen: func() {
			n.ready.Store(true)
			log.Info("serving S3", "address", cfg.Address, "tls", cfg.CertsDir != "")
		},
	})
	stopBg()
	return err
}

// Ready implements health.Checker: serving, not shutting down, and every
// set readable.
func (n *Node) Ready() (bool, string) {
	switch {
	case n.stopping.Load():
		return false, "shutting down"
	case !n.ready.Load():
		return false, "starting"
	}
	for i, s := range n.pool.Pool.Sets() {
		if online(s) < s.Layout().ReadQuorum() {
			return false, fmt.Sprintf("set %d has %d drives online, %d needed to read", i, online(s), s.Layout().ReadQuorum())
		}
	}
	return true, ""
}

func online(s *erasure.Set) int {
	n := 0
	for _, d := range s.Drives() {
		if d != nil {
			n++
		}
	}
	return n
}

// ClusterHealthy implements health.Checker. All drives of a single-node
// server are on this node, so it can never go down for maintenance
// without losing quorum.
func (n *Node) ClusterHealthy(maintenance bool) (bool, string) {
	for i, s := range n.pool.Pool.Sets() {
		if online(s) < s.Layout().WriteQuorum() {
			return false, fmt.Sprintf("set %d has %d drives online, %d needed to write", i, online(s), s.Layout().WriteQuorum())
		}
	}
	if maintenance {
		return false, "every drive of every set is on this node: taking it down stops the deployment"
	}
	return true, ""
}

// driveState names a slot's state.
func (n *Node) driveState(pos int) string {
	setSize := n.pool.Format.SetSize
	switch {
	case n.pool.Drive(pos) == nil:
		return "offline"
	case n.healer.Healing(pos/setSize, pos%setSize):
		return "healing"
	}
	return "online"
}

// Info implements admin.Node.
func (n *Node) Info() admin.Info {
	f := n.pool.Format
	info := admin.Info{
		Version: buildinfo.String(), ProtocolVersion: 1, DeploymentID: f.DeploymentID.String(), Mode: "server",
		Uptime: time.Since(n.started).Round(time.Second).String(),
	}
	p := admin.PoolInfo{Name: "pool-0", State: "Active", Sets: f.Sets, SetSize: f.SetSize, Parity: f.Parity}
	for pos, path := range n.pool.Paths {
		di := admin.DriveInfo{Endpoint: path, Set: pos / f.SetSize, Index: pos % f.SetSize, State: n.driveState(pos)}
		if d := n.pool.Drive(pos); d != nil {
			if u, err := d.DiskInfo(); err == nil {
				di.TotalBytes, di.FreeBytes, di.UsedBytes = u.Total, u.Free, u.Total-u.Free
			}
		}
		info.Capacity.TotalBytes += di.TotalBytes
		info.Capacity.FreeBytes += di.FreeBytes
		info.Capacity.UsedBytes += di.UsedBytes
		p.Drives = append(p.Drives, di)
	}
	// Usable: the data share of the free space.
	info.Capacity.UsableBytes = info.Capacity.FreeBytes / uint64(f.SetSize) * uint64(f.SetSize-f.Parity)
	info.Pools = []admin.PoolInfo{p}
	return info
}

// HealStatus implements admin.Node.
func (n *Node) HealStatus() erasure.HealStatus { return n.healer.Status() }

// StartScan implements admin.Node.
func (n *Node) StartScan() { go n.healer.Scan(n.ctx) }

func (n *Node) snapshot() metrics.Snapshot {
	info := n.Info()
	hs := n.healer.Status()
	s := metrics.Snapshot{Heal: metrics.Heal{
		QueueLength: hs.QueueLength, Queued: hs.Queued, Dropped: hs.Dropped, ObjectsHealed: hs.ObjectsHealed,
		ShardsHealed: hs.ShardsHealed, BytesHealed: hs.BytesHealed, Purged: hs.Purged, Failed: hs.Failed,
		ScanCycles: hs.ScanCycles, ScanObjects: hs.ScanObjects,
	}}
	for _, d := range hs.Drives {
		if !d.Done && d.Error == "" {
			s.Heal.DrivesHealing++
		}
	}
	for _, p := range info.Pools {
		for _, d := range p.Drives {
			s.Drives = append(s.Drives, metrics.Drive{Pool: p.Name, Set: d.Set, Index: d.Index, Endpoint: d.Endpoint,
				State: d.State, TotalBytes: d.TotalBytes, FreeBytes: d.FreeBytes})
		}
	}
	return s
}

// monitorDrives retries offline drives and notices drives wiped or
// replaced under a running server: such a drive is reopened, formatted
// into its slot and rebuilt.
func (n *Node) monitorDrives(ctx context.Context) {
	t := time.NewTicker(n.cfg.MonitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		setSize := n.pool.Format.SetSize
		for pos, path := range n.pool.Paths {
			d := n.pool.Drive(pos)
			if d != nil {
				if _, err := os.Stat(drive.FormatPath(path)); err == nil || !errors.Is(err, os.ErrNotExist) {
					continue
				}
				n.cfg.Log.Warn("drive lost its format while running (wiped or replaced); reopening", "drive", path)
			}
			fresh, err := n.pool.Reopen(pos)
			if err != nil {
				if d != nil {
					n.cfg.Log.Error("drive offline", "drive", path, "err", err)
				}
				continue
			}
			n.cfg.Log.Info("drive back online", "drive", path, "fresh", fresh)
			// A drive that was away missed writes; an empty one missed all.
			n.healer.HealDrive(ctx, pos/setSize, pos%setSize)
		}
	}
}

// cleanStaleUploads aborts multipart uploads older than StaleUploadAge.
func (n *Node) cleanStaleUploads(ctx context.Context) {
	every := min(n.cfg.StaleUploadAge/4, time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		aborted, err := AbortStaleUploads(n.pool.Pool, n.cfg.StaleUploadAge)
		if err != nil {
			n.cfg.Log.Warn("stale upload cleanup stopped", "err", err)
		}
		if aborted > 0 {
			n.cfg.Log.Info("aborted stale multipart uploads", "count", aborted, "olderThan", n.cfg.StaleUploadAge)
		}
	}
}

// AbortStaleUploads aborts every upload of the pool started more than age
// ago.
func AbortStaleUploads(p *erasure.Pool, age time.Duration) (int, error) {
	buckets, err := p.ListBuckets()
	if err != nil {
		return 0, err
	}
	aborted := 0
	for _, b := range buckets {
		uploads, err := p.Uploads(b.Name, "")
		if err != nil {
			return aborted, err
		}
		for _, u := range uploads {
			if time.Since(u.Initiated) < age {
				continue
			}
			if err := p.AbortMultipartUpload(u.Bucket, u.Object, u.ID); err != nil && !errors.Is(err, erasure.ErrUploadNotFound) {
				return aborted, err
			}
			aborted++
		}
	}
	return aborted, nil
}

// ExpandDrives expands drive arguments with {a...b} ranges, refusing
// remote endpoints, which need the cluster mode.
func ExpandDrives(args []string) ([]string, error) {
	paths, err := cluster.ExpandAll(args)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if strings.Contains(p, "://") {
			return nil, fmt.Errorf("endpoint %s: remote endpoints need every node of the cluster (--topology); give local drive directories", p)
		}
	}
	return paths, nil
}
