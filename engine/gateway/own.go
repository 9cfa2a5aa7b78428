package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/posix"
	"github.com/strata-storage/strata/engine/s3api"
	"github.com/strata-storage/strata/engine/s3http"
)

// runOwn serves the volume through Strata's S3 front end (engine/s3api)
// over the POSIX object layer (engine/posix): the server's handlers, the
// gateway's storage.
func (g *Gateway) runOwn(ctx context.Context) error {
	cfg, log := g.cfg, g.cfg.Log
	layer, err := posix.New(posix.Options{
		Root: cfg.Root, VersionsDir: cfg.VersionsDir, Metadata: posix.MetadataMode(cfg.Metadata), Fsync: cfg.Fsync,
		ETagSyncLimit: cfg.ETagSyncLimit, ClaimTimeout: cfg.ClaimTimeout,
		LargeDirThreshold: cfg.LargeDirThreshold, LargeDirScanInterval: cfg.LargeDirScanInterval,
		OnLargeDir: func(dir string, entries int, large bool) {
			if large {
				log.Warn("large directory: listing it and writing into it slow down", "directory", dir, "entries", entries, "threshold", cfg.LargeDirThreshold)
			} else {
				log.Info("directory no longer large", "directory", dir, "entries", entries)
			}
		},
		Log: log,
	})
	if err != nil {
		return err
	}
	defer layer.Close()
	g.root, g.marker, g.id, g.metadata = layer.Root(), layer.MarkerPath(), layer.DeploymentID(), string(layer.Metadata())
	g.served = servedCert{strata: &s3api.ServedCertificate{}}
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
	srv := s3api.New(layer, s3api.Config{RootAccess: cfg.RootUser.AccessKey, RootSecret: cfg.RootUser.SecretKey, Users: users,
		Observer: s3m, LifecycleDay: cfg.LifecycleDay, Log: log})
	err = s3api.Serve(serveCtx, srv, s3api.ServeConfig{
		Address: cfg.Address, CertsDir: cfg.CertsDir, CertsReloadInterval: cfg.CertsReloadInterval, Served: g.served.strata,
		Limits: cfg.Limits, Log: log, Stats: func(st func() s3http.Stats) { metrics.RegisterHTTP(reg, st) },
		Routes: s3api.Routes(g, metrics.Handler(reg, token), users, cfg.RootUser.AccessKey, cfg.RootUser.SecretKey, cfg.AdminOverHTTP),
		OnListen: func() {
			g.ready.Store(true)
			log.Info("serving S3", "address", cfg.Address, "tls", cfg.CertsDir != "", "frontEnd", FrontEndStrata)
		},
	})
	stopBg()
	return err
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
