package s3http

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// connPhase is where a connection stands in its life. Shedding chooses its
// victim by phase: a connection that has not yet given us a whole request
// header costs us a descriptor and gives nothing back, so it goes first.
type connPhase int32

const (
	// phaseHandshaking: accepted, TLS handshake not finished.
	phaseHandshaking connPhase = iota
	// phaseAwaitingHeader: accepted (or a keep-alive connection whose next
	// request has started to arrive) and the handler not yet called.
	phaseAwaitingHeader
	// phaseServing: a handler is running (or the connection was hijacked).
	phaseServing
	// phaseIdle: a keep-alive connection waiting for its next request.
	phaseIdle
	// phaseClosed: no longer tracked.
	phaseClosed

	numPhases = int(phaseClosed)
)

// Queues hold connections in the order they entered them, so the oldest is
// always at the head. Handshaking and awaiting-header connections share one
// queue: a TLS connection keeps its age when its handshake completes, and
// "waiting the longest for a header" means the same thing for both.
const (
	queueWaiting = iota
	queueServing
	queueIdle
	numQueues
)

func queueOf(p connPhase) int {
	switch p {
	case phaseHandshaking, phaseAwaitingHeader:
		return queueWaiting
	case phaseServing:
		return queueServing
	default:
		return queueIdle
	}
}

// connQueue is an intrusive doubly linked list of connections; linking and
// unlinking are O(1) and need no allocation.
type connQueue struct {
	head, tail *trackedConn
}

func (q *connQueue) pushBack(c *trackedConn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *connQueue) unlink(c *trackedConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// tracker knows every open connection and its phase, and picks the one to
// close when there is no room for another.
type tracker struct {
	mu     sync.Mutex
	queues [numQueues]connQueue
	open   [numPhases]int
	total  int

	// max is the number of connections admitted at once; <= 0 is no limit.
	max int
	// headerTimeout bounds a keep-alive connection's next header from its
	// first byte; <= 0 leaves net/http's own deadlines alone.
	headerTimeout time.Duration
	// clients counts requests per client address, for the connections'
	// share of the request limit.
	clients  *clientTable
	counters *counters
}

func newTracker(max int, headerTimeout time.Duration, c *counters) *tracker {
	return &tracker{max: max, headerTimeout: headerTimeout, clients: newClientTable(), counters: c}
}

// insertLocked starts tracking c in phase p.
func (t *tracker) insertLocked(c *trackedConn, p connPhase) {
	c.phase.Store(int32(p))
	t.queues[queueOf(p)].pushBack(c)
	t.open[p]++
	t.total++
}

// removeLocked stops tracking c; it reports false when c was not tracked.
func (t *tracker) removeLocked(c *trackedConn) bool {
	p := connPhase(c.phase.Load())
	if p == phaseClosed {
		return false
	}
	t.queues[queueOf(p)].unlink(c)
	t.open[p]--
	t.total--
	c.phase.Store(int32(phaseClosed))
	t.clients.leave(c.clientCount)
	return true
}

// victimLocked is the connection to close for room: the one waiting longest
// for its header (or handshake), else the one idle longest. A connection
// being served is never a victim: its request is real work under way.
func (t *tracker) victimLocked() *trackedConn {
	if c := t.queues[queueWaiting].head; c != nil {
		return c
	}
	return t.queues[queueIdle].head
}

// admit starts tracking a newly accepted connection in phase p. With the
// limit reached it closes a victim first; when there is none it reports
// false and the caller closes the new connection.
func (t *tracker) admit(c *trackedConn, p connPhase) bool {
	t.mu.Lock()
	var victim *trackedConn
	if t.max > 0 && t.total >= t.max {
		victim = t.victimLocked()
		if victim == nil {
			t.mu.Unlock()
			t.clients.leave(c.clientCount)
			t.counters.rejectedAtLimit.Add(1)
			return false
		}
		t.removeLocked(victim)
	}
	t.insertLocked(c, p)
	t.mu.Unlock()
	t.counters.accepted.Add(1)
	if victim != nil {
		t.counters.shedAtLimit.Add(1)
		victim.closeUntracked()
	}
	return true
}

// shedOne closes the best victim to free a descriptor after accept failed
// with EMFILE or ENFILE; it reports false when every connection is being
// served. (Shedding at MaxConnections is admit's.)
func (t *tracker) shedOne() bool {
	t.mu.Lock()
	victim := t.victimLocked()
	if victim != nil {
		t.removeLocked(victim)
	}
	t.mu.Unlock()
	if victim == nil {
		return false
	}
	t.counters.shedNoDescriptors.Add(1)
	// Close returns once the descriptor is released, so the caller's retry
	// of accept can use it.
	victim.closeUntracked()
	return true
}

// move puts c in phase p, at the back of p's queue unless c stays in the
// same queue (a handshake completing keeps the connection's age).
func (t *tracker) move(c *trackedConn, p connPhase) {
	c.headerDeadline.Store(0)
	t.mu.Lock()
	from := connPhase(c.phase.Load())
	if from != phaseClosed && from != p {
		if queueOf(from) != queueOf(p) {
			t.queues[queueOf(from)].unlink(c)
			t.queues[queueOf(p)].pushBack(c)
		}
		t.open[from]--
		t.open[p]++
		c.phase.Store(int32(p))
	}
	t.mu.Unlock()
}

// wake moves an idle connection whose next request has begun to arrive
// (got bytes read) to the back of the waiting queue, and bounds the rest of
// its header by headerTimeout from this first byte. net/http starts its own
// header deadline only once four bytes have come (its idle Peek), which
// would let a keep-alive trickler hold the connection for
// IdleTimeout+HeaderTimeout.
func (t *tracker) wake(c *trackedConn, got int) {
	t.mu.Lock()
	woke := connPhase(c.phase.Load()) == phaseIdle
	if woke {
		t.queues[queueIdle].unlink(c)
		t.queues[queueWaiting].pushBack(c)
		t.open[phaseIdle]--
		t.open[phaseAwaitingHeader]++
		c.phase.Store(int32(phaseAwaitingHeader))
	}
	t.mu.Unlock()
	// With four bytes in hand net/http's idle Peek returns at once and
	// sets its header deadline from now, which is all that is needed;
	// doing it here too would cost a clock read and a timer update per
	// request. Under TLS those bytes may not be four of plaintext.
	if woke && t.headerTimeout > 0 && (got < 4 || c.underTLS) {
		dl := time.Now().Add(t.headerTimeout)
		c.headerDeadline.Store(dl.UnixNano())
		// Fails only once the connection is closed, when there is no header
		// left to bound.
		_ = c.Conn.SetReadDeadline(dl)
	}
}

// remove stops tracking c (idempotent).
func (t *tracker) remove(c *trackedConn) {
	t.mu.Lock()
	t.removeLocked(c)
	t.mu.Unlock()
}

// noteTimeout counts a read that failed with err if it hit its deadline,
// by what was awaited. Timeouts while serving are not counted here (the
// body guard counts its own; net/http ends its background read with one
// after every request).
func (t *tracker) noteTimeout(c *trackedConn, err error) {
	switch connPhase(c.phase.Load()) {
	case phaseAwaitingHeader:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.counters.headerTimeouts.Add(1)
		}
	case phaseIdle:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.counters.idleTimeouts.Add(1)
		}
	}
}

// closeWaiting closes every connection that is not being served (waiting
// for a header or idle); used when draining, so tricklers do not hold the
// drain open.
func (t *tracker) closeWaiting() {
	t.closeQueues(queueWaiting, queueIdle)
}

// closeAll closes every tracked connection.
func (t *tracker) closeAll() {
	t.closeQueues(queueWaiting, queueIdle, queueServing)
}

func (t *tracker) closeQueues(queues ...int) {
	var doomed []*trackedConn
	t.mu.Lock()
	for _, q := range queues {
		for c := t.queues[q].head; c != nil; c = t.queues[q].head {
			t.removeLocked(c)
			doomed = append(doomed, c)
		}
	}
	t.mu.Unlock()
	for _, c := range doomed {
		c.closeUntracked()
	}
}

// openByPhase returns how many connections are in each phase.
func (t *tracker) openByPhase() [numPhases]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open
}

// trackedConn is an accepted connection as net/http (or crypto/tls, under
// net/http) sees it. It reports the bytes that end a keep-alive wait and
// the deadlines that expire, holds the write-stall deadline, and removes
// itself from the tracker when closed.
type trackedConn struct {
	net.Conn
	tracker *tracker
	// client is the peer's address, unmapped, and clientCount its share
	// of the request limit.
	client      netip.Addr
	clientCount *clientCount
	// phase is written under tracker.mu and read without it on every Read.
	phase atomic.Int32
	// prev and next link the connection in its queue (tracker.mu).
	prev, next *trackedConn
	// headerDeadline (unix ns, 0 = none) caps read deadlines while the next
	// keep-alive header arrives; see tracker.wake.
	headerDeadline atomic.Int64
	// closeWhenIdle asks for the connection to be closed once its current
	// response is out (after a request body was cut off).
	closeWhenIdle atomic.Bool
	// underTLS is set before the connection is shared.
	underTLS bool
	// stallDeadline (unix ns) is the write deadline the write-stall guard
	// set and still owns; 0 when someone else set the deadline since.
	stallDeadline atomic.Int64
}

// newTrackedConn wraps an accepted connection, to be admitted next.
func newTrackedConn(c net.Conn, t *tracker) *trackedConn {
	tc := &trackedConn{Conn: c, tracker: t, client: peerAddr(c)}
	tc.clientCount = t.clients.join(tc.client)
	return tc
}

// peerAddr is the connection's remote address without any IPv4-in-IPv6
// mapping, so one client has one key whichever way it connected.
func peerAddr(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	default:
		return peerAddrString(a.String())
	}
}

// peerAddrString is peerAddr for an address in "host:port" form.
func peerAddrString(hostport string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Read notes the first byte after a keep-alive wait and counts timeouts.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && connPhase(c.phase.Load()) == phaseIdle {
		c.tracker.wake(c, n)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.tracker.noteTimeout(c, err)
	}
	return n, err
}

// SetReadDeadline never lets a non-zero deadline run past the header
// deadline set by tracker.wake; zero (net/http clearing its deadline once
// the header is read) passes through.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if hd := c.headerDeadline.Load(); hd != 0 && !t.IsZero() && t.UnixNano() > hd {
		t = time.Unix(0, hd)
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline applies SetReadDeadline's cap to the read half.
func (c *trackedConn) SetDeadline(t time.Time) error {
	err := c.SetReadDeadline(t)
	if werr := c.SetWriteDeadline(t); err == nil {
		err = werr
	}
	return err
}

// holdWriteDeadline keeps the write deadline at least about 15/16 of stall
// ahead of now (a coarse clock reading). The deadline outlives the
// request: net/http clears it after each response and the next request
// would set it again, a timer update per request; kept, it is moved only
// every stall/16 or so.
func (c *trackedConn) holdWriteDeadline(now int64, stall time.Duration) {
	if cur := c.stallDeadline.Load(); cur != 0 && time.Duration(cur-now) >= stall-stall/stallRefreshDivisor {
		return
	}
	dl := time.Now().Add(stall)
	c.stallDeadline.Store(dl.UnixNano())
	// Fails only on a closed connection, whose writes fail anyway.
	_ = c.Conn.SetWriteDeadline(dl)
}

// SetWriteDeadline sets the write deadline, except that clearing it is
// ignored while the write-stall guard holds one (see holdWriteDeadline).
func (c *trackedConn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && c.stallDeadline.Load() != 0 {
		return nil
	}
	c.stallDeadline.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

// releaseWriteDeadline gives the write deadline up (when the connection is
// hijacked: its new owner sets its own).
func (c *trackedConn) releaseWriteDeadline() {
	c.stallDeadline.Store(0)
	// Fails only on a closed connection, which has no deadline to give up.
	_ = c.Conn.SetWriteDeadline(time.Time{})
}

// ReadFrom passes a file to the connection under (sendfile over TCP).
func (c *trackedConn) ReadFrom(r io.Reader) (int64, error) { return readFrom(c.Conn, r) }

// CloseWrite lets net/http half-close after an error answer so the client
// reads it before the reset (it looks for this method on the connection).
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close stops tracking the connection and closes it.
func (c *trackedConn) Close() error {
	c.tracker.remove(c)
	return c.Conn.Close()
}

// closeUntracked closes a connection the tracker already let go of. It
// closes the socket itself, not a TLS layer above it, so no alert write can
// block the shedder.
func (c *trackedConn) closeUntracked() {
	c.Conn.Close()
}

// trackedOf finds the trackedConn under a connection net/http hands to its
// hooks (under an expectConn, and a *tls.Conn over ours).
func trackedOf(c net.Conn) *trackedConn {
	for c != nil {
		if tc, ok := c.(*trackedConn); ok {
			return tc
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
	return nil
}
