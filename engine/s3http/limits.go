package s3http

import (
	"encoding/binary"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound what one connection or client can hold of the server. A
// zero field takes its default; a negative one turns that bound off.
type Limits struct {
	// HeaderTimeout bounds the arrival of a whole request header: from the
	// start of a new connection, and from the first byte of the next
	// request on a keep-alive connection. Default 10 s.
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for
	// this long. Default 30 s.
	IdleTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake, apart from the header.
	// Default 10 s.
	TLSHandshakeTimeout time.Duration

	// MinBodyRate (bytes/s) is the slowest average a request body may
	// arrive at, once BodyGrace has been spent; slower bodies are cut off
	// with ErrBodyTooSlow. Only time the handler spends waiting in Read
	// counts, so a handler that pauses between reads is not held against
	// the client. Default 1 KiB/s.
	MinBodyRate int64
	// BodyGrace is the waiting allowed before MinBodyRate applies.
	// Default 10 s.
	BodyGrace time.Duration
	// WriteStall fails a response write that makes no progress for this
	// long. Default 60 s.
	WriteStall time.Duration

	// MaxHeaderBytes bounds a request header. Default 32 KiB (negative
	// also takes the default: net/http always has a bound).
	MaxHeaderBytes int
	// MaxConnections is the number of connections open at once; beyond
	// it, new connections shed old waiting ones. Default 16,384 but no more
	// than the RLIMIT_NOFILE soft limit less max(1024, limit/8) kept for
	// drives, stores and internode connections. An explicit value is used
	// as given; running out of descriptors sheds too.
	MaxConnections int
	// MaxRequests is the number of S3 requests in handlers at once;
	// beyond, requests are answered through Config.Refuse. Default 4,096.
	MaxRequests int
	// MaxRequestsPerClient is MaxRequests for one client address.
	// Default 1,024.
	MaxRequestsPerClient int
}

// Defaults of Limits and Config.
const (
	DefaultHeaderTimeout        = 10 * time.Second
	DefaultIdleTimeout          = 30 * time.Second
	DefaultTLSHandshakeTimeout  = 10 * time.Second
	DefaultMinBodyRate          = 1 << 10
	DefaultBodyGrace            = 10 * time.Second
	DefaultWriteStall           = 60 * time.Second
	DefaultMaxHeaderBytes       = 32 << 10
	DefaultMaxConnections       = 16384
	DefaultMaxRequests          = 4096
	DefaultMaxRequestsPerClient = 1024
	DefaultDrainTimeout         = 10 * time.Second
)

// withDefaults fills zero fields, given the process's descriptor soft
// limit (0 when unknown).
func (l Limits) withDefaults(fdSoftLimit uint64) Limits {
	dur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	num := func(n *int, def int) {
		if *n == 0 {
			*n = def
		}
	}
	dur(&l.HeaderTimeout, DefaultHeaderTimeout)
	dur(&l.IdleTimeout, DefaultIdleTimeout)
	dur(&l.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	dur(&l.BodyGrace, DefaultBodyGrace)
	dur(&l.WriteStall, DefaultWriteStall)
	if l.MinBodyRate == 0 {
		l.MinBodyRate = DefaultMinBodyRate
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	num(&l.MaxConnections, connectionBudget(fdSoftLimit))
	num(&l.MaxRequests, DefaultMaxRequests)
	num(&l.MaxRequestsPerClient, DefaultMaxRequestsPerClient)
	return l
}

// connectionBudget is the default MaxConnections for a descriptor soft
// limit: the rest of the process needs descriptors too, so a reserve of
// max(1024, limit/8) is kept back. A limit too small for the reserve gets
// half of it.
func connectionBudget(fdSoftLimit uint64) int {
	if fdSoftLimit == 0 {
		return DefaultMaxConnections
	}
	reserve := max(uint64(1024), fdSoftLimit/8)
	if fdSoftLimit <= reserve {
		return int(max(1, fdSoftLimit/2))
	}
	return int(min(uint64(DefaultMaxConnections), fdSoftLimit-reserve))
}

// descriptorSoftLimit is RLIMIT_NOFILE's soft limit, 0 when unknown.
func descriptorSoftLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// RefuseReason says which limit a refused request ran into.
type RefuseReason uint8

const (
	// RefuseServerBusy: MaxRequests requests were in flight.
	RefuseServerBusy RefuseReason = iota + 1
	// RefuseClientBusy: MaxRequestsPerClient requests from the same client
	// address were in flight.
	RefuseClientBusy
)

// String says what the reason means, for logs and the default answer.
func (r RefuseReason) String() string {
	switch r {
	case RefuseServerBusy:
		return "server busy"
	case RefuseClientBusy:
		return "too many requests from this client"
	default:
		return "refused"
	}
}

// RefuseFunc answers a request the server will not run, in the caller's
// error format (S3's SlowDown). It must not read the body: the client may
// be waiting for 100 Continue, which is then never sent.
type RefuseFunc func(w http.ResponseWriter, r *Request, reason RefuseReason)

// refusePlain is the default RefuseFunc: a plain-text 503 with Retry-After.
func refusePlain(w http.ResponseWriter, _ *Request, reason RefuseReason) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "503 Service Unavailable: "+reason.String(), http.StatusServiceUnavailable)
}

// requestLimiter counts S3 requests in flight, overall and per client.
type requestLimiter struct {
	max, perClient int64
	inFlight       atomic.Int64
}

func newRequestLimiter(max, perClient int) *requestLimiter {
	return &requestLimiter{max: int64(max), perClient: int64(perClient)}
}

// acquire admits one request from client (nil: not counted per client),
// or reports the limit it hit. Every admitted request must be released.
func (l *requestLimiter) acquire(client *clientCount) (RefuseReason, bool) {
	if n := l.inFlight.Add(1); l.max > 0 && n > l.max {
		l.inFlight.Add(-1)
		return RefuseServerBusy, false
	}
	if client != nil && l.perClient > 0 {
		if n := client.inFlight.Add(1); n > l.perClient {
			client.inFlight.Add(-1)
			l.inFlight.Add(-1)
			return RefuseClientBusy, false
		}
	}
	return 0, true
}

// release ends a request acquire admitted.
func (l *requestLimiter) release(client *clientCount) {
	if client != nil && l.perClient > 0 {
		client.inFlight.Add(-1)
	}
	l.inFlight.Add(-1)
}

// clientCount is one client address's count of requests in flight. Its
// connections share it, looked up once per connection, so a request costs
// an atomic add rather than a map lookup under a lock.
type clientCount struct {
	addr     netip.Addr
	inFlight atomic.Int64
	// conns is the number of connections holding it (clientShard.mu).
	conns int
}

// clientShards spreads the client table over several locks so accepts and
// closes from different clients rarely meet on one.
const clientShards = 16

// clientTable holds a clientCount for every address with a connection open.
type clientTable struct {
	shards [clientShards]clientShard
}

type clientShard struct {
	mu      sync.Mutex
	clients map[netip.Addr]*clientCount
	_       [40]byte // keep neighbouring shards' locks off one cache line
}

func newClientTable() *clientTable {
	t := new(clientTable)
	for i := range t.shards {
		t.shards[i].clients = make(map[netip.Addr]*clientCount)
	}
	return t
}

func (t *clientTable) shard(a netip.Addr) *clientShard {
	b := a.As16()
	h := binary.LittleEndian.Uint64(b[:8]) ^ binary.LittleEndian.Uint64(b[8:])
	h *= 0x9e3779b97f4a7c15
	return &t.shards[h>>60]
}

// join returns addr's count for one more connection.
func (t *clientTable) join(addr netip.Addr) *clientCount {
	s := t.shard(addr)
	s.mu.Lock()
	c := s.clients[addr]
	if c == nil {
		c = &clientCount{addr: addr}
		s.clients[addr] = c
	}
	c.conns++
	s.mu.Unlock()
	return c
}

// leave gives back a count join returned, forgetting the address with its
// last connection.
func (t *clientTable) leave(c *clientCount) {
	if c == nil {
		return
	}
	s := t.shard(c.addr)
	s.mu.Lock()
	if c.conns--; c.conns == 0 {
		delete(s.clients, c.addr)
	}
	s.mu.Unlock()
}
