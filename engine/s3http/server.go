// Package s3http is the HTTP server under Strata's S3 front end, on
// net/http. It knows nothing of S3 operations: it accepts connections,
// defends them (header, handshake, idle and body-rate deadlines, a bound
// on connections that sheds the ones not doing work, limits on requests in
// flight) and hands each request, with an ID, to the S3 handler it is
// given. Endpoints of Strata's own (health, metrics, admin) are served
// beside it as Routes, before the S3 handler and outside its limits.
//
// It exists because the server it replaces had no read, idle or handshake
// timeouts: 17,000 connections each trickling a header byte every five
// seconds denied service to everyone else.
package s3http

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// Config describes a server.
type Config struct {
	// Address is where to listen ("host:port"), unless Listener is set.
	Address string
	// Listener, when set, is used instead of listening on Address (for
	// tests, and callers that bound it already). Serve closes it.
	Listener net.Listener
	// Handler serves S3 requests. Required.
	Handler Handler
	// Routes are served before Handler, without the request limits, so
	// health answers under load.
	Routes []Route
	// TLS, when set, serves HTTPS. The caller sets GetCertificate (to
	// reload certificates); the server uses a clone limited to HTTP/1.1.
	TLS *tls.Config
	// OnListen is called once, when the server is accepting.
	OnListen func()
	// Log receives the server's own messages; nil discards them.
	Log *slog.Logger
	// Limits bound what connections and clients can hold.
	Limits Limits
	// Refuse answers requests beyond MaxRequests or MaxRequestsPerClient.
	// Default: a plain-text 503 with Retry-After: 1.
	Refuse RefuseFunc
	// DrainTimeout is how long requests in flight may run once the context
	// of Serve ends. Default 10 s.
	DrainTimeout time.Duration
	// HostID is the value of the X-Amz-Id-2 header. Default: random, per
	// Server.
	HostID string
}

// Route is an endpoint of Strata's own served beside S3. Routes are matched
// in order, before the S3 handler; they are not subject to MaxRequests or
// MaxRequestsPerClient and get no request ID, but their bodies and
// responses have the same rate and stall guards.
type Route struct {
	// Method matches the request method; "" matches any.
	Method string
	// Path matches the URL path exactly or, ending in "*", as a prefix
	// ("/strata/admin/v1/*").
	Path string
	// Handler serves the matched requests.
	Handler http.Handler
}

func (rt *Route) matches(r *http.Request) bool {
	if rt.Method != "" && rt.Method != r.Method {
		return false
	}
	if prefix, ok := strings.CutSuffix(rt.Path, "*"); ok {
		return strings.HasPrefix(r.URL.Path, prefix)
	}
	return r.URL.Path == rt.Path
}

// Server is an S3 HTTP server. Make it with NewServer, run it once with
// Serve, and read its Stats at any time.
type Server struct {
	cfg      Config
	limits   Limits
	log      *slog.Logger
	refuse   RefuseFunc
	hostID   string
	ids      *requestIDs
	counters counters
	conns    *tracker
	requests *requestLimiter
	clock    *coarseClock
	fdLimit  uint64
}

// NewServer checks cfg and fills its defaults.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("s3http: Config.Handler is nil")
	}
	if cfg.Listener == nil && cfg.Address == "" {
		return nil, errors.New("s3http: neither Config.Address nor Config.Listener is set")
	}
	for i, rt := range cfg.Routes {
		if rt.Handler == nil || rt.Path == "" {
			return nil, fmt.Errorf("s3http: route %d (%s %q) lacks a path or a handler", i, rt.Method, rt.Path)
		}
	}
	if cfg.TLS != nil && cfg.TLS.GetCertificate == nil && len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetConfigForClient == nil {
		return nil, errors.New("s3http: Config.TLS has no certificate")
	}
	s := &Server{cfg: cfg, log: cfg.Log, refuse: cfg.Refuse, hostID: cfg.HostID, ids: newRequestIDs(), clock: newCoarseClock()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.refuse == nil {
		s.refuse = refusePlain
	}
	if s.hostID == "" {
		var b [24]byte
		rand.Read(b[:])
		s.hostID = base64.StdEncoding.EncodeToString(b[:])
	}
	if s.cfg.DrainTimeout == 0 {
		s.cfg.DrainTimeout = DefaultDrainTimeout
	}
	s.fdLimit = descriptorSoftLimit()
	s.limits = cfg.Limits.withDefaults(s.fdLimit)
	s.conns = newTracker(s.limits.MaxConnections, s.limits.HeaderTimeout, &s.counters)
	s.requests = newRequestLimiter(s.limits.MaxRequests, s.limits.MaxRequestsPerClient)
	return s, nil
}

// Serve runs a server for cfg until ctx ends; see Server.Serve.
func Serve(ctx context.Context, cfg Config) error {
	s, err := NewServer(cfg)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Limits returns the limits in force, defaults filled in.
func (s *Server) Limits() Limits { return s.limits }

// Stats returns a snapshot of connections and counters.
func (s *Server) Stats() Stats {
	var st Stats
	open := s.conns.openByPhase()
	st.Handshaking = open[phaseHandshaking]
	st.AwaitingHeader = open[phaseAwaitingHeader]
	st.Serving = open[phaseServing]
	st.Idle = open[phaseIdle]
	st.InFlight = int(s.requests.inFlight.Load())
	s.counters.fill(&st)
	return st
}

// Serve listens and serves until ctx ends, then drains: it stops
// accepting, closes connections that are idle or have not sent a whole
// header, lets requests in flight finish for up to DrainTimeout, closes
// what is left and returns nil. It returns an error only when it cannot
// listen or the listener fails. Request contexts do not end with ctx (only
// when their client goes or the drain times out), but keep its values.
func (s *Server) Serve(ctx context.Context) error {
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Address); err != nil {
			return fmt.Errorf("s3http: listen on %s: %w", s.cfg.Address, err)
		}
	}
	acc := newAcceptor(ln, s.conns, s.log)
	var httpLn net.Listener = plainListener{acc}
	if s.cfg.TLS != nil {
		httpLn = newTLSListener(acc, s.cfg.TLS, s.limits.TLSHandshakeTimeout)
	}
	srv := s.httpServer(ctx)
	if budget := connectionBudget(s.fdLimit); s.limits.MaxConnections > budget {
		s.log.Warn("s3http: MaxConnections exceeds the descriptor budget; connections will be shed when accept runs out of descriptors",
			"max_connections", s.limits.MaxConnections, "budget", budget, "fd_soft_limit", s.fdLimit)
	}
	s.log.Info("s3http: serving",
		"address", ln.Addr().String(), "tls", s.cfg.TLS != nil,
		"max_connections", s.limits.MaxConnections, "fd_soft_limit", s.fdLimit,
		"max_requests", s.limits.MaxRequests, "max_requests_per_client", s.limits.MaxRequestsPerClient)

	clockCtx, stopClock := context.WithCancel(context.Background())
	defer stopClock()
	go s.clock.run(clockCtx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpLn) }()
	if s.cfg.OnListen != nil {
		s.cfg.OnListen()
	}
	select {
	case err := <-served:
		httpLn.Close()
		s.conns.closeAll()
		return fmt.Errorf("s3http: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.drain(srv, acc)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("s3http: serve on %s: %w", ln.Addr(), err)
	}
	return nil
}

// httpServer configures net/http for this server.
func (s *Server) httpServer(ctx context.Context) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	base := context.WithoutCancel(ctx)
	readHeader := max(s.limits.HeaderTimeout, 0)
	idle := max(s.limits.IdleTimeout, 0)
	return &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: readHeader,
		IdleTimeout:       idle,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		Protocols:         protocols,
		ConnState:         s.connState,
		ConnContext:       connContext,
		BaseContext:       func(net.Listener) context.Context { return base },
		// net/http's own complaints (bad requests, handshake errors) come
		// by the thousand under attack: debug level only.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// drain stops the server: no more connections or keep-alives, waiting
// connections closed at once, requests in flight given DrainTimeout.
func (s *Server) drain(srv *http.Server, acc *acceptor) {
	s.log.Info("s3http: draining", "timeout", s.cfg.DrainTimeout)
	srv.SetKeepAlivesEnabled(false)
	ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.DrainTimeout, 0))
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	// Shutdown closes the listener first (it must be the one to, or Serve
	// reports the closed listener as a failure). Once it has, no new
	// connection can come, and those not yet serving a request are closed
	// rather than waited for: a trickler would hold the drain for its
	// header timeout, net/http waiting 5 s for any new connection.
	select {
	case <-acc.done:
	case <-ctx.Done():
	}
	s.conns.closeWaiting()
	if err := <-shut; err != nil {
		s.log.Warn("s3http: drain timed out; closing requests still in flight", "in_flight", s.Stats().Serving)
		srv.Close()
	}
	s.conns.closeAll()
}

// connKey is the context key under which connContext stores the
// connection, for the handler to mark it serving.
type connKey struct{}

func connContext(ctx context.Context, c net.Conn) context.Context {
	ctx = withTLSState(ctx, c)
	if tc := trackedOf(c); tc != nil {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connState follows net/http's view of a connection. Only the transitions
// net/http alone sees are taken from it: a connection becomes idle here,
// starts serving in serveHTTP (ConnState's "active" comes at the same
// moment, but a handler is what makes it serving), and awaits a header
// from its first byte after idling (trackedConn.Read).
func (s *Server) connState(c net.Conn, state http.ConnState) {
	if ec, ok := c.(*expectConn); ok && state == http.StateIdle {
		ec.rearm()
	}
	tc := trackedOf(c)
	if tc == nil {
		return
	}
	switch state {
	case http.StateIdle:
		if tc.closeWhenIdle.Load() {
			s.conns.remove(tc)
			tc.closeUntracked()
			return
		}
		s.conns.move(tc, phaseIdle)
	case http.StateHijacked:
		// The handler owns it now; it stays counted until closed and is
		// never shed.
		s.conns.move(tc, phaseServing)
		tc.releaseWriteDeadline()
	case http.StateClosed:
		s.conns.remove(tc)
	}
}

// serveHTTP is net/http's handler: routes first, then S3 within limits.
func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	restoreRequest(hr)
	tc, _ := hr.Context().Value(connKey{}).(*trackedConn)
	if tc != nil {
		s.conns.move(tc, phaseServing)
	}
	x := &exchange{}
	hr = x.guard(w, hr, tc, s.clock, &s.limits, &s.counters)
	if rt := s.route(hr); rt != nil {
		defer x.finish(tc)
		rt.Handler.ServeHTTP(&x.out, hr)
		return
	}
	s.serveS3(x, hr, tc)
}

// route is the first route matching hr, or nil.
func (s *Server) route(hr *http.Request) *Route {
	for i := range s.cfg.Routes {
		if rt := &s.cfg.Routes[i]; rt.matches(hr) {
			return rt
		}
	}
	return nil
}

func (s *Server) serveS3(x *exchange, hr *http.Request, tc *trackedConn) {
	x.req.Request = hr
	x.req.Received = time.Now()
	x.req.Secure = hr.TLS != nil
	var count *clientCount
	if tc != nil {
		x.req.Client, count = tc.client, tc.clientCount
	} else {
		x.req.Client = peerAddrString(hr.RemoteAddr)
	}
	x.identify(s.ids, s.hostID)
	defer x.finish(tc)
	if reason, ok := s.requests.acquire(count); !ok {
		if reason == RefuseClientBusy {
			s.counters.refusedClient.Add(1)
		} else {
			s.counters.refusedServer.Add(1)
		}
		s.refuse(&x.out, &x.req, reason)
		return
	}
	defer s.requests.release(count)
	s.cfg.Handler.ServeS3(&x.out, &x.req)
}
