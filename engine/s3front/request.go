package s3front

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3err"
)

// The front end gives the backend the HTTP server's request context, which
// ends only when the server shuts down. Each request gets a context of its
// own instead (request, below), which ends when the request is over or its
// client goes away, so the engine stops the work the request started.

// errClientGone is the cause of a request's context whose client closed or
// reset its connection before the answer was sent.
var errClientGone = errors.New("s3: the client closed the connection")

// errRequestOver is the cause once the answer has been sent.
var errRequestOver = errors.New("s3: request over")

// Client-gone checks: the first after watchAfter (most requests are over by
// then and never look), then every watchEvery.
const (
	watchAfter = 200 * time.Millisecond
	watchEvery = 200 * time.Millisecond
)

// request is the context of one front-end request. It wraps the HTTP
// server's context, so the helpers that read the request (headers, query,
// start time) still find it.
type request struct {
	context.Context
	rc     *fasthttp.RequestCtx
	cancel context.CancelCauseFunc
	conn   net.Conn

	mu    sync.Mutex
	timer *time.Timer
	over  bool
	// held: the response body ends the request when it is closed (a GET
	// whose body is still to be read from the drives).
	held bool
	// release gives back the client's in-flight slot; nil once given.
	release func()
}

type requestKey struct{}

// requestContexts is the middleware giving each request its context. It
// also bounds the requests one client address has in flight (perClient),
// so one client cannot take every slot of the process.
func requestContexts(perClient int) fiber.Handler {
	inFlight := &clients{max: perClient, n: map[netip.Addr]int{}}
	return func(c fiber.Ctx) error {
		rc := c.RequestCtx()
		addr, _ := netip.AddrFromSlice(rc.RemoteIP())
		addr = addr.Unmap()
		if !inFlight.acquire(addr) {
			return writeError(c, &s3err.APIError{Code: "SlowDown", HTTPStatusCode: http.StatusServiceUnavailable,
				Description: fmt.Sprintf("Please reduce your request rate: this client has %d requests in flight.", perClient)})
		}
		r := newRequest(rc, rc.Conn())
		r.release = func() { inFlight.release(addr) }
		rc.SetUserValue(requestKey{}, r)
		err := c.Next()
		r.mu.Lock()
		held := r.held && rc.Response.IsBodyStream()
		r.mu.Unlock()
		if !held {
			r.end()
		}
		return err
	}
}

func newRequest(rc *fasthttp.RequestCtx, conn net.Conn) *request {
	// The request's context lives on its own: a server shutting down
	// lets the requests in flight finish (Serve waits for them).
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &request{Context: ctx, rc: rc, cancel: cancel, conn: conn}
	if conn != nil && watchable(conn) {
		// Set under the lock check takes: the timer may fire before the
		// assignment is seen otherwise.
		r.mu.Lock()
		r.timer = time.AfterFunc(watchAfter, r.check)
		r.mu.Unlock()
	}
	return r
}

// check cancels the request when its client has gone; else it looks again
// later.
func (r *request) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over {
		return
	}
	if clientGone(r.conn) {
		r.cancel(errClientGone)
		return
	}
	r.timer.Reset(watchEvery)
}

// end is called once the answer is sent (or abandoned): the work the
// request started stops, and the client is no longer watched.
func (r *request) end() {
	r.mu.Lock()
	r.over = true
	if r.timer != nil {
		r.timer.Stop()
	}
	release := r.release
	r.release = nil
	r.mu.Unlock()
	if release != nil {
		release()
	}
	r.cancel(errRequestOver)
}

// clients counts requests in flight per client address.
type clients struct {
	mu  sync.Mutex
	max int
	n   map[netip.Addr]int
}

// acquire takes a slot for addr; false when it has max in flight.
func (c *clients) acquire(addr netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[addr] >= c.max {
		return false
	}
	c.n[addr]++
	return true
}

func (c *clients) release(addr netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[addr] <= 1 {
		delete(c.n, addr)
		return
	}
	c.n[addr]--
}

// hold makes the response body end the request: it returns the function
// the body calls when closed. Without a request (ctx is not a front-end
// request), it returns a no-op.
func hold(ctx context.Context) func() {
	r, ok := ctx.(*request)
	if !ok {
		return func() {}
	}
	r.mu.Lock()
	r.held = true
	r.mu.Unlock()
	return r.end
}

// operation is the context the backend works under for a request whose
// HTTP server context is ctx: the request's own when the middleware made
// one, else ctx (tests, callers outside the front end).
func operation(ctx context.Context) context.Context {
	if rc, ok := ctx.(*fasthttp.RequestCtx); ok {
		if r, ok := rc.UserValue(requestKey{}).(*request); ok {
			return r
		}
	}
	return ctx
}

// frontCtx is the HTTP server's context of a request, when ctx is one or a
// request's own context.
func frontCtx(ctx context.Context) (*fasthttp.RequestCtx, bool) {
	switch c := ctx.(type) {
	case *fasthttp.RequestCtx:
		return c, true
	case *request:
		return c.rc, c.rc != nil
	}
	return nil, false
}
