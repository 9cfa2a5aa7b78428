package s3front

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/adaptor"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/embedgw"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"

	"github.com/strata-storage/strata/engine/certfiles"
)

// Route is an extra HTTP endpoint on the S3 listener (health, metrics,
// admin), registered ahead of the S3 routes. It is not SigV4-authenticated:
// the handler authenticates if it must.
type Route struct {
	Method, Path string
	Handler      http.Handler
}

// Default concurrency bounds of the S3 port, per process.
const (
	DefaultMaxConnections = 16384
	DefaultMaxRequests    = 4096
	// DefaultMaxRequestsPerClient leaves three quarters of the process to
	// other clients. Behind a proxy every client shares its address.
	DefaultMaxRequestsPerClient = DefaultMaxRequests / 4
)

// ServeConfig configures the S3 listener shared by `strata server` and
// `strata gateway`.
type ServeConfig struct {
	// Address is host:port to listen on.
	Address string
	// RootAccess and RootSecret are the root credentials.
	RootAccess, RootSecret string
	// IAM resolves users other than root.
	IAM auth.IAMService
	// CertsDir holds tls.crt and tls.key (a mounted kubernetes.io/tls
	// Secret); empty serves plain HTTP. The files are re-read when they
	// change, without a restart.
	CertsDir string
	// CertsReloadInterval is how often the certificate files are checked
	// for changes; default 10 s.
	CertsReloadInterval time.Duration
	// Region answered to clients; default us-east-1.
	Region string
	// Routes are extra endpoints; Middleware wraps every S3 request
	// (metrics).
	Routes     []Route
	Middleware fiber.Handler
	Limits
	// SSE says the backend implements server-side encryption; otherwise
	// requests asking for it are refused with NotImplemented.
	SSE bool
	// OnListen is called once the listener accepts connections.
	OnListen func()
	// Served, when set, is told which certificate the listener serves.
	Served *ServedCertificate
	Log    *slog.Logger
}

// Limits bound the S3 port's concurrency; 0 takes the default.
type Limits struct {
	// MaxConnections and MaxRequests bound concurrency per process;
	// requests beyond MaxRequests are refused with SlowDown.
	MaxConnections, MaxRequests int
	// MaxRequestsPerClient bounds the requests one client address has in
	// flight; beyond, SlowDown.
	MaxRequestsPerClient int
}

// TLS file names inside CertsDir (those of a kubernetes.io/tls Secret).
const (
	CertFile = certfiles.CertFile
	KeyFile  = certfiles.KeyFile
)

// Serve runs the S3 front end over be until ctx ends, then finishes the
// requests in flight (up to 10 s) and returns.
func Serve(ctx context.Context, be backend.Backend, cfg ServeConfig) error {
	// Each open connection holds buffers and each request in flight may
	// hold a block per drive: the defaults keep a flood of either within
	// a pod's memory (fasthttp's own default is 256k connections).
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = DefaultMaxRequests
	}
	// Each request gets its own context first (request.go). The
	// body-finishing middleware comes next, so the body reader it sets is
	// the one versitygw's readers wrap; requests refused as unsupported are
	// measured like any other.
	if cfg.MaxRequestsPerClient == 0 {
		cfg.MaxRequestsPerClient = DefaultMaxRequestsPerClient
	}
	opts := []s3api.Option{s3api.WithMiddleware("/", requestContexts(cfg.MaxRequestsPerClient)), s3api.WithMiddleware("/", finishBodies())}
	for _, r := range cfg.Routes {
		opts = append(opts, s3api.WithRoute(r.Method, r.Path, adaptor.HTTPHandler(r.Handler)))
	}
	if cfg.Middleware != nil {
		opts = append(opts, s3api.WithMiddleware("/", cfg.Middleware))
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts = append(opts, s3api.WithMiddleware("/", guardRequests()), s3api.WithMiddleware("/", sigV2(secrets(cfg.RootAccess, cfg.RootSecret, cfg.IAM), region)),
		s3api.WithMiddleware("/", fixResponses()), s3api.WithMiddleware("/", refuseUnsupported(cfg.SSE)))
	if enc, ok := be.(bucketEncrypter); ok && cfg.SSE {
		opts = append(opts, s3api.WithMiddleware("/", serveBucketEncryption(be, enc, cfg.IAM)))
	}
	if pab, ok := be.(publicAccessBlocker); ok {
		if acls, ok := be.(publicACLChecker); ok {
			opts = append(opts, s3api.WithMiddleware("/", servePublicAccessBlock(be, pab, acls, cfg.IAM)))
		}
	}
	if k, ok := be.(ownCaller); ok {
		root := middlewares.RootUserConfig{Access: cfg.RootAccess, Secret: cfg.RootSecret}
		opts = append(opts, s3api.WithMiddleware("/", serveOwnCalls(be, k, root, cfg.IAM, region)))
	}
	if lc, ok := be.(bucketLifecycler); ok {
		opts = append(opts, s3api.WithMiddleware("/", serveBucketLifecycle(be, lc, cfg.IAM)))
	}
	if cfg.OnListen != nil {
		opts = append(opts, s3api.WithOnListen(cfg.OnListen))
	}
	if cfg.Served != nil {
		opts = append(opts, cfg.Served.observe())
	}
	gw := &embedgw.Config{
		RootUserAccess: cfg.RootAccess, RootUserSecret: cfg.RootSecret, Region: cfg.Region,
		Ports: []string{cfg.Address}, MaxConnections: cfg.MaxConnections, MaxRequests: cfg.MaxRequests,
		MultipartMaxParts: 10000, Quiet: true, KeepAlive: true, IAMService: cfg.IAM, S3Options: opts,
	}
	if cfg.CertsDir != "" {
		gw.CertFile, gw.KeyFile = filepath.Join(cfg.CertsDir, CertFile), filepath.Join(cfg.CertsDir, KeyFile)
		reload := make(chan struct{}, 1)
		gw.SigHup = reload
		go watchFiles(ctx, []string{gw.CertFile, gw.KeyFile}, certfiles.Interval(cfg.CertsReloadInterval), reload, cfg.Log)
	}
	err := embedgw.RunVersityGW(ctx, be, gw)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("S3 front end on %s: %w", cfg.Address, err)
	}
	return nil
}

// secrets looks access keys up: the root account's, then the users'.
func secrets(rootAccess, rootSecret string, users auth.IAMService) SecretLookup {
	return func(access string) (string, bool) {
		if access == rootAccess {
			return rootSecret, true
		}
		if users == nil {
			return "", false
		}
		acct, err := users.GetUserAccount(access)
		if err != nil {
			return "", false
		}
		return acct.Secret, true
	}
}

// watchFiles signals on changed whenever the content of the files changes
// (kubelet swaps a mounted Secret's files when cert-manager renews it).
func watchFiles(ctx context.Context, paths []string, every time.Duration, changed chan<- struct{}, log *slog.Logger) {
	sum := func() []byte {
		h := sha256.New()
		for _, p := range paths {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return h.Sum(nil)
	}
	last := sum()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if cur := sum(); !bytes.Equal(cur, last) {
				last = cur
				log.Info("TLS certificate changed on disk; reloading", "files", paths)
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}
}
