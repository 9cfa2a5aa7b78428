package s3api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/health"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3http"
)

// ServeConfig configures the S3 listener shared by `strata server` and
// `strata gateway`.
type ServeConfig struct {
	// Address is host:port to listen on.
	Address string
	// CertsDir holds tls.crt and tls.key (a mounted kubernetes.io/tls
	// Secret); empty serves plain HTTP. The files are re-read when they
	// change, without a restart.
	CertsDir string
	// CertsReloadInterval is how often the certificate files are checked
	// for changes; 0: certfiles' default.
	CertsReloadInterval time.Duration
	// Routes are endpoints of the process's own (health, metrics, admin),
	// served before S3 and outside its request limits.
	Routes []s3http.Route
	// Limits bound connections, headers, bodies and requests in flight.
	Limits s3http.Limits
	// OnListen is called once the listener accepts connections.
	OnListen func()
	// Served, when set, is told which certificate the listener serves.
	Served *ServedCertificate
	// Stats, when set, is given the HTTP server's statistics (metrics).
	Stats func(func() s3http.Stats)
	Log   *slog.Logger
}

// Serve runs the S3 front end until ctx ends, then finishes the requests
// in flight (up to 10 s) and returns.
func Serve(ctx context.Context, s *Server, cfg ServeConfig) error {
	hc := s3http.Config{
		Address: cfg.Address, Handler: s, Routes: cfg.Routes, OnListen: cfg.OnListen, Log: cfg.Log, Limits: cfg.Limits,
		Refuse: func(w http.ResponseWriter, r *s3http.Request, reason s3http.RefuseReason) {
			e := s3err.SlowDown.With("Please reduce your request rate: " + reason.String() + ".")
			body := s3err.Render(e, r.URL.Path, r.ID, w.Header().Get("X-Amz-Id-2"))
			w.Header()["Content-Type"] = []string{"application/xml"}
			w.Header()["Content-Length"] = []string{strconv.Itoa(len(body))}
			w.Header()["Retry-After"] = []string{"1"}
			w.WriteHeader(e.Status)
			_, _ = w.Write(body)
		},
	}
	if cfg.CertsDir != "" {
		pair := certfiles.NewKeyPair(filepath.Join(cfg.CertsDir, certfiles.CertFile), filepath.Join(cfg.CertsDir, certfiles.KeyFile),
			certfiles.Interval(cfg.CertsReloadInterval))
		if _, err := pair.Get(); err != nil {
			return err
		}
		get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.Get() }
		if cfg.Served != nil {
			cfg.Served.get.Store(&get)
		}
		hc.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: get}
	}
	srv, err := s3http.NewServer(hc)
	if err != nil {
		return err
	}
	if cfg.Stats != nil {
		cfg.Stats(srv.Stats)
	}
	return srv.Serve(ctx)
}

// ServedCertificate tells which certificate the S3 listener presents now,
// as its certificate store holds it (what clients get, not what the files
// hold).
type ServedCertificate struct {
	get atomic.Pointer[func(*tls.ClientHelloInfo) (*tls.Certificate, error)]
}

// Leaf is the certificate served now; nil before the listener is set up,
// or without TLS.
func (c *ServedCertificate) Leaf() *x509.Certificate {
	if c == nil {
		return nil
	}
	get := c.get.Load()
	if get == nil {
		return nil
	}
	cert, err := (*get)(nil)
	if err != nil {
		return nil
	}
	return certfiles.Leaf(cert)
}

// Routes are the non-S3 endpoints of a strata process (server or gateway):
// health, metrics, and the admin API when c also implements
// admin.Informer.
func Routes(c health.Checker, metricsHandler http.Handler, users admin.Users, rootAccess, rootSecret string, adminOverHTTP bool) []s3http.Route {
	routes := []s3http.Route{
		{Method: http.MethodGet, Path: health.PathLive, Handler: health.Live()},
		{Method: http.MethodGet, Path: health.PathReady, Handler: health.Ready(c)},
		{Method: http.MethodGet, Path: health.PathCluster, Handler: health.Cluster(c)},
		{Method: http.MethodGet, Path: "/strata/metrics", Handler: metricsHandler},
	}
	if a, ok := c.(admin.Informer); ok {
		h := admin.Handler(a, users, rootAccess, rootSecret, adminOverHTTP)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			routes = append(routes, s3http.Route{Method: m, Path: "/strata/admin/v1/*", Handler: h})
		}
	}
	return routes
}
