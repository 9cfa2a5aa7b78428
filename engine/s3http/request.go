package s3http

import (
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"
)

// Request is what the S3 handler is given: the HTTP request and what the
// server knows of it. It is passed as a value, not through the context, so
// the handler can neither lose it nor type-switch for it.
type Request struct {
	*http.Request
	// ID is this request's ID, 16 upper-case hex digits, unique within the
	// Server; it is also sent as X-Amz-Request-Id. It shares the memory of
	// the whole exchange (request, response, connection buffers): what
	// outlives the request keeps a copy (strings.Clone).
	ID string
	// Client is the peer's address (IPv4 unmapped); it is the key of
	// MaxRequestsPerClient. Proxies are not looked through.
	Client netip.Addr
	// Received is when the server handed the request to the handler.
	Received time.Time
	// Secure is true when the request came over TLS.
	Secure bool
}

// Handler serves S3 requests. It is all the S3 front end gives this
// package: the server knows nothing of S3 operations.
type Handler interface {
	ServeS3(w http.ResponseWriter, r *Request)
}

// HandlerFunc lets an ordinary function be a Handler.
type HandlerFunc func(w http.ResponseWriter, r *Request)

// ServeS3 calls f(w, r).
func (f HandlerFunc) ServeS3(w http.ResponseWriter, r *Request) { f(w, r) }

// Response headers the server sets on every request it hands the handler.
const (
	headerRequestID = "X-Amz-Request-Id"
	headerHostID    = "X-Amz-Id-2"
)

// requestIDs makes request IDs: a counter, offset by a random key and put
// through a bijective mix, so IDs are distinct for 2^64 requests, cost an
// atomic add, and do not read as a sequence.
type requestIDs struct {
	key  uint64
	next atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [8]byte
	rand.Read(b[:])
	return &requestIDs{key: binary.LittleEndian.Uint64(b[:])}
}

// fill writes the next ID into buf as hex.
func (g *requestIDs) fill(buf *[16]byte) {
	formatID(buf, mix64(g.key+g.next.Add(1)))
}

// mix64 is SplitMix64's finalizer: each step (xor-shift, multiply by an
// odd constant) is invertible, so distinct inputs stay distinct.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func formatID(buf *[16]byte, v uint64) {
	const digits = "0123456789ABCDEF"
	for i := len(buf) - 1; i >= 0; i-- {
		buf[i] = digits[v&15]
		v >>= 4
	}
}

// exchange is everything the server adds to one request, in one
// allocation: the Request value, the guarded writer, and the backing of
// the ID string and of the two header values.
type exchange struct {
	req     Request
	out     stallWriter
	body    *rateBody // nil without a guarded body
	idBytes [16]byte
	headers [2]string
}

// guardedRequest is the request a handler gets when its body is guarded:
// a shallow copy of net/http's, with Body replaced. net/http's own request
// keeps its own Body, because net/http looks at that Body's type when it
// answers (to close rather than read a large unread body, or one whose
// 100 Continue was never sent); given our wrapper it would read up to 256
// KiB of an unwanted body before answering.
type guardedRequest struct {
	req  http.Request
	body rateBody
}

// guard puts the write-stall guard, and for a request with a body the
// body-rate guard, between the handler and net/http. It returns the
// request to hand the handler.
func (x *exchange) guard(w http.ResponseWriter, hr *http.Request, tc *trackedConn, clock *coarseClock, lim *Limits, c *counters) *http.Request {
	x.out.init(w, tc, clock, lim.WriteStall, c)
	if lim.MinBodyRate <= 0 || hr.Body == nil || hr.Body == http.NoBody || hr.ContentLength == 0 {
		return hr
	}
	d, ok := w.(readDeadliner)
	if !ok {
		return hr
	}
	g := &guardedRequest{req: *hr}
	g.body = rateBody{
		src:       hr.Body,
		deadliner: d,
		rate:      lim.MinBodyRate,
		grace:     lim.BodyGrace,
		length:    hr.ContentLength,
		counters:  c,
	}
	g.req.Body = &g.body
	x.body = &g.body
	return &g.req
}

// identify gives the request its ID and sets the ID headers. The ID string
// shares the exchange's memory (it is never written again), sparing an
// allocation per request.
func (x *exchange) identify(ids *requestIDs, hostID string) {
	ids.fill(&x.idBytes)
	x.req.ID = unsafe.String(&x.idBytes[0], len(x.idBytes))
	x.headers[0] = x.req.ID
	x.headers[1] = hostID
	// Full slice expressions: a handler's Header().Add appends to a copy.
	h := x.out.Header()
	h[headerRequestID] = x.headers[0:1:1]
	h[headerHostID] = x.headers[1:2:2]
}

// finish runs after the handler: keeps the final flush under a deadline,
// and makes sure a connection whose body was cut off is not reused (the
// rest of that body would be read as the next request).
func (x *exchange) finish(tc *trackedConn) {
	x.out.finish()
	if x.body != nil && x.body.tooSlow.Load() {
		if !x.out.wroteHeader {
			x.out.Header().Set("Connection", "close")
		}
		if tc != nil {
			tc.closeWhenIdle.Store(true)
		}
	}
}
