package internode

// The framed channel (protocol 3) carries the calls on the hot path of small
// objects — the per-node batches of a PUT or GET and shard range reads — as
// length-prefixed frames on one plain TCP (or TLS) connection per peer,
// multiplexed by call id. It exists because HTTP/2 costs more CPU per call
// than the drive work it carries: on a 4-node loopback cluster a 4 KiB HEAD
// cost about 500 µs of CPU summed over the nodes against 100 µs on one node,
// most of it in the HTTP/2 framer, its per-stream goroutines and headers.
//
// The channel opens as an HTTP/1.1 request to the internode service, signed
// like every other call, that the server answers with 101 and then hijacks;
// everything after is frames:
//
//	request:  uint32 length of the rest | uint64 call id | byte op     | body
//	answer:   uint32 length of the rest | uint64 call id | byte status | body
//
// A failed call answers status frameErr with the (code, message) pair of the
// HTTP batches, so drive sentinels survive the trip the same way. When the
// connection breaks, every call in flight fails as a transport error (the
// peer did not answer) and the next call dials again.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// framesProtocol is the first protocol version with the framed channel.
const framesProtocol = 3

const (
	framesUpgrade = "strata-frames/1"
	frameHeader   = 4 + 8 + 1
	// maxFrame bounds a frame: the largest batch, with room for its header.
	maxFrame = maxBatch + frameHeader
	// maxFramesInFlight bounds the calls one channel runs at once.
	maxFramesInFlight = 256
	// frameWriteTimeout bounds one write of a frame to a stalled peer.
	frameWriteTimeout = 30 * time.Second
)

// Frame operations and answer statuses.
const (
	frameBatchGet  byte = 1
	frameBatchPut  byte = 2
	frameShardRead byte = 3
	frameBatchStat byte = 4 // from statProtocol on
	// frameBatchPutEvents is frameBatchPut whose items carry events
	// (from eventsProtocol on).
	frameBatchPutEvents byte = 5

	frameOK  byte = 0
	frameErr byte = 1
)

func appendFrame(dst []byte, id uint64, kind byte, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(8+1+len(body)))
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = append(dst, kind)
	return append(dst, body...)
}

// readFrameHeader reads a frame's header: its call id, its op or status,
// and the size of its body.
func readFrameHeader(r *bufio.Reader) (id uint64, kind byte, size int, err error) {
	h, err := r.Peek(frameHeader)
	if err != nil {
		if errors.Is(err, io.EOF) && len(h) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, 0, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if n < 9 || n > maxFrame {
		return 0, 0, 0, fmt.Errorf("internode: frame of %d bytes refused", n)
	}
	id, kind = binary.BigEndian.Uint64(h[4:12]), h[12]
	_, _ = r.Discard(frameHeader)
	return id, kind, int(n - 9), nil
}

// readFrame reads a frame; its body is a pooled buffer (putFrameBuf).
func readFrame(r *bufio.Reader) (id uint64, kind byte, body []byte, err error) {
	id, kind, size, err := readFrameHeader(r)
	if err != nil {
		return 0, 0, nil, err
	}
	body = getFrameBuf(size)
	if _, err = io.ReadFull(r, body); err != nil {
		return 0, 0, nil, err
	}
	return id, kind, body, nil
}

// serveFrames turns an upgrade request into a framed channel.
func (s *Server) serveFrames(w http.ResponseWriter, r *http.Request) error {
	if r.ProtoMajor != 1 || !strings.EqualFold(r.Header.Get("Upgrade"), framesUpgrade) {
		return errors.New("internode: the framed channel opens with an HTTP/1.1 upgrade")
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errors.New("internode: this connection cannot carry frames")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return err
	}
	if !s.track(conn) {
		conn.Close()
		return nil
	}
	defer s.untrack(conn)
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s: %d\r\n\r\n", framesUpgrade, hdrProtocol, s.Version)
	if err := rw.Flush(); err != nil {
		return nil
	}
	var wmu sync.Mutex
	// At most maxFramesInFlight calls of one channel run at once; reading
	// the next frame waits for one to finish (the peer's writes then back
	// up in TCP), so a peer cannot make this node start unbounded work.
	inFlight := make(chan struct{}, maxFramesInFlight)
	for {
		id, op, body, err := readFrame(rw.Reader)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.Log.Debug("internode frames closed", "from", r.RemoteAddr, "err", err)
			}
			return nil
		}
		inFlight <- struct{}{}
		go func() {
			defer func() { <-inFlight }()
			frame := s.serveFrame(r.Context(), id, op, body)
			putFrameBuf(body) // what the call kept of it, it copied
			wmu.Lock()
			_ = conn.SetWriteDeadline(time.Now().Add(frameWriteTimeout))
			_, werr := conn.Write(frame)
			wmu.Unlock()
			putFrameBuf(frame)
			if werr != nil {
				conn.Close()
			}
		}()
	}
}

// serveFrame answers one call. A panic in it becomes an error answer,
// logged with its stack: one bad call never takes the node down.
func (s *Server) serveFrame(ctx context.Context, id uint64, op byte, body []byte) (frame []byte) {
	defer func() {
		if p := recover(); p != nil {
			s.Log.Error("internode call panicked", "op", op, "panic", p, "stack", string(debug.Stack()))
			frame = answerFrame(id, nil, fmt.Errorf("internode: the call failed on the peer: %v", p))
		}
	}()
	if op == frameShardRead {
		return s.shardReadFrame(ctx, id, body)
	}
	// The answer is written after room for its header, which is filled
	// in once its size is known: the frame is not copied again.
	frame, err := s.runFrame(ctx, op, getFrameBuf(frameHeader), body)
	if err != nil {
		return answerFrame(id, nil, err)
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	binary.BigEndian.PutUint64(frame[4:], id)
	frame[12] = frameOK
	return frame
}

func (s *Server) runFrame(ctx context.Context, op byte, dst, body []byte) ([]byte, error) {
	switch {
	case op == frameBatchGet:
		return s.batchGet(ctx, dst, body)
	case op == frameBatchStat && s.Version >= statProtocol:
		return s.batchStat(ctx, dst, body)
	case op == frameBatchPut:
		return s.batchPut(ctx, dst, body)
	case op == frameBatchPutEvents && s.Version >= eventsProtocol:
		return s.batchPutEvents(ctx, dst, body)
	}
	return nil, fmt.Errorf("internode: unknown frame operation %d", op)
}

// answerFrame is the frame of a call's answer.
func answerFrame(id uint64, out []byte, err error) []byte {
	status := frameOK
	if err != nil {
		status, out = frameErr, appendError(nil, err)
	}
	return appendFrame(make([]byte, 0, frameHeader+len(out)), id, status, out)
}

// shardReadFrame answers a shard range read, reading the bytes straight
// into the answer's frame (a pooled buffer: shard reads are the bulk of
// what the channel carries).
func (s *Server) shardReadFrame(ctx context.Context, id uint64, body []byte) []byte {
	in := reader{buf: body}
	path := in.string()
	dataDir := in.id()
	part, off, n := in.uvarint(), in.uvarint(), in.uvarint()
	if in.err != nil {
		return answerFrame(id, nil, in.err)
	}
	d := s.Drive(path)
	if d == nil {
		return answerFrame(id, nil, fmt.Errorf("%w: %s", ErrDriveNotServed, path))
	}
	if n > maxShardRead {
		return answerFrame(id, nil, fmt.Errorf("internode: read of %d bytes refused", n))
	}
	f, err := d.OpenShard(ctx, dataDir, int(part))
	if err != nil {
		return answerFrame(id, nil, err)
	}
	defer f.Close()
	frame := getFrameBuf(frameHeader + int(n))
	got, err := f.ReadAt(frame[frameHeader:], int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		putFrameBuf(frame)
		return answerFrame(id, nil, err)
	}
	frame = frame[:frameHeader+got]
	binary.BigEndian.PutUint32(frame, uint32(8+1+got))
	binary.BigEndian.PutUint64(frame[4:], id)
	frame[12] = frameOK
	return frame
}

// maxShardRead bounds one shard range read.
const maxShardRead = 64 << 20

// Frames are read and written in pooled buffers of three sizes: the calls
// and answers of small objects (a node's records of a 4 KiB object are
// about 2.5 KiB), those of inline objects up to their limit, and shard
// blocks with their header. Larger frames are allocated. Pooling them
// takes about a quarter of a small GET's allocated bytes, on both nodes,
// off the garbage collector. A buffer is an array, so putting it back
// allocates nothing.
type (
	smallFrame  [4 << 10]byte
	mediumFrame [160 << 10]byte
	largeFrame  [1<<20 + frameHeader]byte
)

var (
	smallFrames  = sync.Pool{New: func() any { return new(smallFrame) }}
	mediumFrames = sync.Pool{New: func() any { return new(mediumFrame) }}
	largeFrames  = sync.Pool{New: func() any { return new(largeFrame) }}
)

// getFrameBuf returns a buffer of n bytes (of any content), pooled when it
// fits one of the pooled sizes.
func getFrameBuf(n int) []byte {
	switch {
	case n <= len(smallFrame{}):
		return smallFrames.Get().(*smallFrame)[:n]
	case n <= len(mediumFrame{}):
		return mediumFrames.Get().(*mediumFrame)[:n]
	case n <= len(largeFrame{}):
		return largeFrames.Get().(*largeFrame)[:n]
	}
	return make([]byte, n)
}

// growFrame makes room for n more bytes in a frame buffer, moving it to a
// larger pooled buffer when it has too little (giving the smaller back).
func growFrame(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	grown := getFrameBuf(len(b) + n)[:len(b)]
	copy(grown, b)
	putFrameBuf(b)
	return grown
}

// putFrameBuf gives back a buffer of getFrameBuf (others are left to the
// collector), once nothing uses it.
func putFrameBuf(b []byte) {
	switch cap(b) {
	case len(smallFrame{}):
		smallFrames.Put((*smallFrame)(b[:cap(b)]))
	case len(mediumFrame{}):
		mediumFrames.Put((*mediumFrame)(b[:cap(b)]))
	case len(largeFrame{}):
		largeFrames.Put((*largeFrame)(b[:cap(b)]))
	}
}

// track records a hijacked connection so Close can end it; false when the
// server is closed.
func (s *Server) track(c net.Conn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.connMu.Lock()
	delete(s.conns, c)
	s.connMu.Unlock()
}

// Close ends the framed channels (the HTTP server does not know them once
// hijacked) and refuses new ones.
func (s *Server) Close() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

// frameConn is the client end of a framed channel.
type frameConn struct {
	c   net.Conn
	wmu sync.Mutex

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*call
	err     error         // set once the connection is dead
	done    chan struct{} // closed when readLoop returns
}

// call is a call in flight: where its answer goes.
type call struct {
	ch chan frameResult
	// dst, when set, receives an OK answer's body directly.
	dst  []byte
	sent time.Time
}

type frameResult struct {
	status byte
	body   []byte
	at     time.Time // when the answer was read
	err    error
}

func (fc *frameConn) readLoop(r *bufio.Reader) {
	defer close(fc.done)
	for {
		id, status, size, err := readFrameHeader(r)
		if err != nil {
			fc.fail(err)
			return
		}
		fc.mu.Lock()
		c := fc.pending[id]
		delete(fc.pending, id)
		fc.mu.Unlock()
		var body []byte
		if c != nil && c.dst != nil && status == frameOK && size <= len(c.dst) {
			body = c.dst[:size]
		} else {
			body = getFrameBuf(size) // the caller may give it back
		}
		if _, err := io.ReadFull(r, body); err != nil {
			if c != nil {
				c.ch <- frameResult{err: fmt.Errorf("internode frames: %w", err)}
			}
			fc.fail(err)
			return
		}
		if c != nil {
			c.ch <- frameResult{status: status, body: body, at: time.Now()}
		}
	}
}

// fail ends the connection: every call in flight gets err.
func (fc *frameConn) fail(err error) {
	fc.mu.Lock()
	if fc.err == nil {
		fc.err = fmt.Errorf("internode frames: %w", err)
	}
	pending := fc.pending
	fc.pending = map[uint64]*call{}
	fc.mu.Unlock()
	fc.c.Close()
	for _, c := range pending {
		c.ch <- frameResult{err: fc.err}
	}
}

func (fc *frameConn) dead() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.err != nil
}

// send writes a call's frame; its answer is waited for with wait, and an
// OK answer that fits dst is read into it. A failed write fails the
// connection, which answers the call.
func (fc *frameConn) send(op byte, body, dst []byte) *call {
	c := &call{ch: make(chan frameResult, 1), dst: dst, sent: time.Now()}
	fc.mu.Lock()
	if fc.err != nil {
		c.ch <- frameResult{err: fc.err}
		fc.mu.Unlock()
		return c
	}
	id := fc.next
	fc.next++
	fc.pending[id] = c
	fc.mu.Unlock()

	frame := appendFrame(getFrameBuf(frameHeader + len(body))[:0], id, op, body)
	fc.wmu.Lock()
	_ = fc.c.SetWriteDeadline(time.Now().Add(frameWriteTimeout))
	_, err := fc.c.Write(frame)
	fc.wmu.Unlock()
	putFrameBuf(frame)
	if err != nil {
		fc.fail(err) // answers c
	}
	return c
}

// wait waits for the answer of a call sent on fc: its body and when it
// was read.
func (c *call) wait(ctx context.Context, fc *frameConn) ([]byte, time.Time, error) {
	select {
	case r := <-c.ch:
		if r.err != nil {
			return nil, r.at, r.err
		}
		if r.status != frameOK {
			in := reader{buf: r.body}
			if err := in.error(); err != nil {
				return nil, r.at, err
			}
			return nil, r.at, errors.New("internode: malformed error frame")
		}
		return r.body, r.at, nil
	case <-ctx.Done():
		// A peer that does not answer within the call's deadline is not
		// trusted with the connection either: the next call dials again.
		// The reader is waited for, so it writes into dst no more.
		fc.fail(ctx.Err())
		<-fc.done
		return nil, time.Now(), ctx.Err()
	}
}

// frames runs one call on the peer's framed channel, dialling it when
// there is none.
func (p *Peer) frames(ctx context.Context, op byte, body []byte) ([]byte, error) {
	return p.framesInto(ctx, op, body, nil)
}

// framesInto is frames reading an OK answer into dst when it fits.
func (p *Peer) framesInto(ctx context.Context, op byte, body, dst []byte) ([]byte, error) {
	b, _, err := p.startFrames(ctx, op, body, dst)()
	return b, err
}

// startFrames sends a call on the peer's framed channel (dialling it when
// there is none) and returns what waits for its answer: its body and when
// it came. A call whose context has already ended is not sent.
func (p *Peer) startFrames(ctx context.Context, op byte, body, dst []byte) (answer func() ([]byte, time.Time, error)) {
	failed := func(err error) func() ([]byte, time.Time, error) {
		return func() ([]byte, time.Time, error) { return nil, time.Now(), err }
	}
	if err := ctx.Err(); err != nil {
		return failed(err)
	}
	fc, err := p.frameConn(ctx)
	if err != nil {
		return failed(err)
	}
	c := fc.send(op, body, dst)
	return func() ([]byte, time.Time, error) { return c.wait(ctx, fc) }
}

func (p *Peer) frameConn(ctx context.Context) (*frameConn, error) {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	if p.fc != nil && !p.fc.dead() {
		return p.fc, nil
	}
	select {
	case <-p.closed:
		return nil, net.ErrClosed
	default:
	}
	fc, err := p.dialFrames(ctx)
	if err != nil {
		return nil, err
	}
	p.fc = fc
	return fc, nil
}

func (p *Peer) dialFrames(ctx context.Context) (*frameConn, error) {
	d := net.Dialer{Timeout: 3 * time.Second, KeepAlive: 15 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if p.opts.TLS != nil {
		cfg := p.opts.TLS.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+opFrames.name, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", framesUpgrade)
	p.addressed(req)
	sign(req, p.opts.Secret, p.Version(), bodySum(nil))
	br := bufio.NewReader(conn)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		if err := p.answer(resp, nil); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("internode: framed channel refused (status %d)", resp.StatusCode)
	}
	_ = conn.SetDeadline(time.Time{})
	fc := &frameConn{c: conn, pending: map[uint64]*call{}, done: make(chan struct{})}
	go fc.readLoop(br)
	go fc.watch(p.opts.CallTimeout)
	return fc, nil
}

// watch fails the channel once a call has waited longer than timeout for
// its answer (looking every eighth of it): a peer that does not answer in
// time is not trusted with the connection either, and the next call dials
// again. This is the deadline of every call on the channel.
func (fc *frameConn) watch(timeout time.Duration) {
	t := time.NewTicker(timeout / 8)
	defer t.Stop()
	for {
		select {
		case <-fc.done:
			return
		case now := <-t.C:
			fc.mu.Lock()
			late := false
			for _, c := range fc.pending {
				late = late || now.Sub(c.sent) > timeout
			}
			fc.mu.Unlock()
			if late {
				fc.fail(fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded))
				return
			}
		}
	}
}

// closeFrames ends the peer's framed channel.
func (p *Peer) closeFrames() {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	if p.fc != nil {
		p.fc.fail(net.ErrClosed)
		p.fc = nil
	}
}
