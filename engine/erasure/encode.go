package erasure

import (
	"cmp"
	"errors"
	"hash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// An encode hands each block's shards to the writers through a queue per
// writer, each drained by a goroutine of its own, so drives write in
// parallel and a drive that pauses holds up nobody until it is
// encodeDepth blocks behind. Past that the encoder waits for it within
// the write's allowance (slowwrite.go) and then leaves it behind.

// encodeDepth is how many blocks a writer may be behind the encoder: two
// lets drives write one block while the next is read and encoded. Each
// may cost a block buffer (data and parity shards) per write in flight
// (the second only while the drives lag: takeBuffer), and a deeper queue
// measured no faster (BenchmarkPut8MiB, four blocks), so the
// allowance, not the queue, is what stands between a slow drive and the
// write.
const encodeDepth = 2

// finisher is implemented by block writers with work after their last
// block (a staged shard file: flushed and closed when complete, removed
// when not). It runs in the writer's goroutine; complete is false when the
// writer failed, was left behind, or the encode failed. A writer left
// behind while it finished complete is discarded after.
type finisher interface {
	finish(complete bool) error
	discard()
}

// lane is one writer's queue and goroutine.
type lane struct {
	w     BlockWriter
	queue chan []byte
	// stop: take no more blocks (left behind, or the encode failed).
	stop atomic.Bool
	// release, set under encoding.mu when the lane is left behind, is
	// called once the lane's work is over.
	release func()
}

// encoding is the state an encode shares with its lanes.
type encoding struct {
	lanes    []*lane // by shard; nil for a missing writer
	quorum   int
	wait     *writeWait // nil: wait for every lane
	pos      []int      // lanes' set positions, for wait
	progress chan struct{}

	mu       sync.Mutex
	written  []int   // blocks each lane wrote
	failed   []error // each lane's first failure
	finished []bool  // the lane's goroutine is done (finish ran)

	// The encoder's own: lanes still fed, lanes left behind, blocks sent,
	// and the ring of block buffers: block b is in ring[b % encodeDepth]
	// until every lane fed wrote it.
	fed  []bool
	left []bool
	sent int
	ring [encodeDepth]*[]byte
	// spares: the ring's buffers taken from spareBlocks.
	spares int
}

func newEncoding(writers []BlockWriter, quorum int, w *writeWait, pos []int) *encoding {
	n := len(writers)
	e := &encoding{
		lanes: make([]*lane, n), quorum: quorum, wait: w, pos: pos,
		progress: make(chan struct{}, 1),
		written:  make([]int, n), failed: make([]error, n), finished: make([]bool, n),
		fed: make([]bool, n), left: make([]bool, n),
	}
	for i, wr := range writers {
		if wr == nil {
			e.failed[i], e.finished[i] = errors.New("erasure: no writer"), true
			continue
		}
		e.lanes[i] = &lane{w: wr, queue: make(chan []byte, encodeDepth)}
		e.fed[i] = true
		go e.run(i, e.lanes[i])
	}
	return e
}

// run is lane i's goroutine.
func (e *encoding) run(i int, l *lane) {
	var err error
	for shard := range l.queue {
		if err != nil || l.stop.Load() {
			continue // drained: the encoder sends no more once it knows
		}
		err = l.w.WriteBlock(shard)
		e.report(i, err)
	}
	complete := err == nil && !l.stop.Load()
	f, ok := l.w.(finisher)
	if ok {
		if ferr := f.finish(complete); err == nil {
			err = ferr
		}
	}
	// Left behind while finishing (a last flush to a slow drive): nobody
	// will commit the shard.
	left, release := e.end(i, err)
	if left && ok && complete && err == nil {
		f.discard()
	}
	if release != nil {
		release()
	}
}

// report records a lane's block written, or its failure.
func (e *encoding) report(i int, err error) {
	e.mu.Lock()
	if err != nil {
		e.failed[i] = cmp.Or(e.failed[i], err)
	} else {
		e.written[i]++
	}
	e.mu.Unlock()
	e.notify()
}

// end records that lane i finished, and says whether it had been left
// behind (and what to release then). Under the lock, so a lane is either
// finished or left behind, never both unknown to the other side.
func (e *encoding) end(i int, err error) (left bool, release func()) {
	e.mu.Lock()
	if err != nil {
		e.failed[i] = cmp.Or(e.failed[i], err)
	}
	e.finished[i] = true
	left, release = e.left[i], e.lanes[i].release
	e.mu.Unlock()
	e.notify()
	return left, release
}

func (e *encoding) notify() {
	select {
	case e.progress <- struct{}{}:
	default:
	}
}

// send queues a block's shards to every lane still fed. The queues have
// room: await saw each of them within encodeDepth-1 blocks.
func (e *encoding) send(shards [][]byte) {
	for i, l := range e.lanes {
		if e.fed[i] {
			l.queue <- shards[i]
		}
	}
}

// unfeed closes lane i's queue.
func (e *encoding) unfeed(i int) {
	if e.fed[i] {
		e.fed[i] = false
		close(e.lanes[i].queue)
	}
}

// await waits until every lane not left behind has reached a point: wrote
// block (the count written exceeds it) or, with block < 0, finished. Lanes
// that failed are no longer fed; while blocks are being sent they are not
// waited for, and at the end they are, for their clean-up. Once write quorum
// of healthy lanes reached it, the rest get the write's allowance and are
// then left behind. Fewer than quorum healthy lanes fail with ErrWriteQuorum.
func (e *encoding) await(block int) error {
	st := stall{w: e.wait}
	defer st.end()
	for {
		healthy, done := 0, 0
		var waiting []int
		e.mu.Lock()
		for i, l := range e.lanes {
			if l == nil || e.left[i] {
				continue
			}
			failed := e.failed[i] != nil
			if failed {
				e.unfeed(i)
			} else {
				healthy++
			}
			reached := e.finished[i] || (block >= 0 && e.written[i] > block)
			switch {
			case reached && !failed:
				done++
			case reached || (failed && block >= 0):
			default:
				waiting = append(waiting, i)
			}
		}
		e.mu.Unlock()
		if healthy < e.quorum {
			return objlayer.ErrWriteQuorum
		}
		if len(waiting) == 0 || e.pause(&st, waiting, e.wait != nil && done >= e.quorum) {
			return nil
		}
	}
}

// pause waits for a lane's progress. With budget, the lanes waited for
// get what is left of the write's allowance and are left behind once it
// runs out; pause says whether they were.
func (e *encoding) pause(st *stall, waiting []int, budget bool) bool {
	var expired <-chan time.Time
	if budget {
		var passed bool
		if expired, passed = st.expiry(e.positions(waiting)); passed {
			e.leaveBehind(waiting)
			return true
		}
	}
	select {
	case <-e.progress:
		return false
	case <-expired:
		e.leaveBehind(waiting)
		return true
	}
}

func (e *encoding) positions(lanes []int) []int {
	out := make([]int, len(lanes))
	for k, i := range lanes {
		out[k] = e.pos[i]
	}
	return out
}

// leaveBehind stops feeding the lanes given that have not finished
// meanwhile: they skip what is queued and finish incomplete (or discard a
// shard they were finishing); their set positions count as behind until
// then. A lane may still be writing from a block it had not written: the
// buffers of those blocks leave the ring (and are not recycled).
func (e *encoding) leaveBehind(lanes []int) {
	for _, i := range lanes {
		l := e.lanes[i]
		e.mu.Lock()
		if e.finished[i] {
			e.mu.Unlock()
			continue
		}
		pos := e.pos[i]
		e.left[i] = true
		e.wait.lags.leave(pos)
		l.release = func() { e.wait.lags.done(pos) }
		from := e.written[i]
		e.mu.Unlock()
		l.stop.Store(true)
		e.unfeed(i)
		for b := max(from, e.sent-encodeDepth); b < e.sent; b++ {
			e.ring[b%encodeDepth] = nil
		}
	}
}

// abandon stops every lane and waits for them to finish (and so remove
// what they staged); with a budget, those still busy after the write's
// allowance are left behind to do it on their own.
func (e *encoding) abandon() {
	for i, l := range e.lanes {
		if l != nil && !e.left[i] {
			l.stop.Store(true)
			e.unfeed(i)
		}
	}
	st := stall{w: e.wait}
	defer st.end()
	for {
		var waiting []int
		e.mu.Lock()
		for i, l := range e.lanes {
			if l != nil && !e.left[i] && !e.finished[i] {
				waiting = append(waiting, i)
			}
		}
		e.mu.Unlock()
		if len(waiting) == 0 || e.pause(&st, waiting, e.wait != nil) {
			return
		}
	}
}

// errs is each lane's outcome: nil when its shard is complete.
func (e *encoding) errs() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	errs := make([]error, len(e.lanes))
	for i := range e.lanes {
		errs[i] = e.failed[i]
		if errs[i] == nil && e.left[i] {
			errs[i] = errLeftBehind
		}
	}
	return errs
}

// headSmall is how much of a body is read into a buffer of its own before
// a block buffer is taken for it: a client that sends its headers and then
// trickles holds this much, not a block (TestSlowClientFlood).
const headSmall = 64 << 10

// firstBlock is a body's first block, read before anything is staged: data
// holds the bytes, in pooled (a block buffer of the codec's pool, which the
// encode then encodes in place) or, for up to headSmall bytes, a buffer of
// its own.
type firstBlock struct {
	pooled *[]byte
	data   []byte
}

// release gives the block buffer back when no encode took it.
func (h firstBlock) release(pool *sync.Pool) {
	if h.pooled != nil {
		pool.Put(h.pooled)
	}
}

// readHead reads up to limit (at most a block) of r: limit bytes, or fewer
// when the body ended.
func (c *Codec) readHead(r io.Reader, limit int64) (firstBlock, error) {
	small := min(limit, headSmall)
	buf := make([]byte, small)
	n, err := readInto(r, buf)
	if err != nil || n < len(buf) || small == limit {
		return firstBlock{data: buf[:n]}, err
	}
	p := c.blocks.Get().(*[]byte)
	b := (*p)[:limit]
	copy(b, buf)
	m, err := readInto(r, b[n:])
	return firstBlock{pooled: p, data: b[:n+m]}, err
}

// hasher hashes the blocks an encode reads in a goroutine of its own, so
// that hashing one block (MD5, the ETag: the largest CPU cost of a large
// PUT) overlaps reading and encoding the next instead of adding to the
// request's time. Blocks are hashed in order; a block's buffer stays out
// of reuse until its hash is in (wait).
type hasher struct {
	in     chan []byte
	done   chan struct{} // one per block hashed
	waited int           // blocks whose hashing was waited for
	fed    int
}

func newHasher(h hash.Hash) *hasher {
	if h == nil {
		return nil
	}
	x := &hasher{in: make(chan []byte, encodeDepth), done: make(chan struct{}, encodeDepth)}
	go func() {
		for b := range x.in {
			h.Write(b)
			x.done <- struct{}{}
		}
		close(x.done)
	}()
	return x
}

// add queues a block (nothing without a hash).
func (x *hasher) add(b []byte) {
	if x != nil {
		x.in <- b
		x.fed++
	}
}

// wait returns once the first blocks blocks were hashed.
func (x *hasher) wait(blocks int) {
	for x != nil && x.waited < min(blocks, x.fed) {
		<-x.done
		x.waited++
	}
}

// hashed reports, without waiting, whether the first blocks blocks were
// hashed.
func (x *hasher) hashed(blocks int) bool {
	for x != nil && x.waited < min(blocks, x.fed) {
		select {
		case <-x.done:
			x.waited++
		default:
			return false
		}
	}
	return true
}

// end waits for every block queued; the hash is then complete.
func (x *hasher) end() {
	if x != nil {
		close(x.in)
		for range x.done {
		}
	}
}

// encode reads r to EOF and writes shard i of every block to writers[i],
// each writer in a goroutine of its own behind a queue of encodeDepth
// blocks. A writer that fails is dropped and its error recorded in errs[i];
// the encode goes on while at least quorum writers remain and fails with
// ErrWriteQuorum otherwise. With a budget (w, and pos giving each writer's
// set position), a writer more than its allowance behind write quorum of
// the others is left behind (errLeftBehind). Writers that are finishers
// finish in their goroutine; encode returns when every writer not left
// behind has finished. It returns the object bytes read. head, when it
// holds bytes, is the first block (a full one unless the body ended in it)
// and r the rest; encode takes its buffer. sum, when not nil, is written
// every byte read, in order (hasher), complete when encode returns.
func (c *Codec) encode(head firstBlock, r io.Reader, writers []BlockWriter, quorum int, w *writeWait, pos []int, sum hash.Hash) (n int64, errs []error, err error) {
	e := newEncoding(writers, quorum, w, pos)
	hs := newHasher(sum)
	defer func() {
		hs.end() // before a buffer it may still read goes back to the pool
		e.giveBack(e.spares)
		head.release(&c.blocks)
		for _, b := range e.ring {
			if b != nil {
				c.blocks.Put(b)
			}
		}
	}()
	fail := func(err error) (int64, []error, error) {
		e.abandon()
		return n, e.errs(), err
	}
	for {
		if e.sent >= encodeDepth {
			if err := e.await(e.sent - encodeDepth); err != nil {
				return fail(err)
			}
		} else if err := e.checkQuorum(); err != nil {
			return fail(err)
		}
		// The slot's last block must be hashed before the slot is refilled.
		hs.wait(e.sent - encodeDepth + 1)
		slot := e.sent % encodeDepth
		var buf []byte
		var got int
		var rerr error
		switch {
		case e.sent == 0 && head.pooled != nil:
			e.ring[slot], head.pooled = head.pooled, nil
			buf, got = head.data, len(head.data)
		case e.sent == 0 && len(head.data) > 0:
			e.ring[slot] = c.blocks.Get().(*[]byte)
			buf = (*e.ring[slot])[:c.blockSize]
			got = copy(buf, head.data)
		default:
			e.shrinkRing(c, hs)
			if e.ring[slot] == nil {
				// A body that ended with the last block takes no buffer to
				// find that out (a PUT of one block holds one, not two).
				var first [1]byte
				if _, rerr = io.ReadFull(r, first[:]); rerr != nil {
					break
				}
				if err := e.takeBuffer(c, hs, slot); err != nil {
					return fail(err)
				}
				buf = (*e.ring[slot])[:c.blockSize]
				buf[0] = first[0]
				got, rerr = io.ReadFull(r, buf[1:])
				got++
			} else {
				buf = (*e.ring[slot])[:c.blockSize]
				got, rerr = io.ReadFull(r, buf)
			}
		}
		if got > 0 {
			n += int64(got)
			hs.add(buf[:got])
			shards, err := c.EncodeBlock(buf[:got])
			if err != nil {
				return fail(err)
			}
			e.send(shards)
			e.sent++
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	for i, l := range e.lanes {
		if l != nil && !e.left[i] {
			e.unfeed(i)
		}
	}
	if err := e.await(-1); err != nil {
		return fail(err)
	}
	return n, e.errs(), nil
}

// shrinkRing keeps one block buffer, not encodeDepth, while the lanes keep
// up: when the block before the one about to be read is already written
// by every lane (and hashed), its buffer takes the empty slot of the next,
// or goes back to the pool when that slot has one. A PUT whose drives are
// faster than its client then holds one block buffer, not two.
func (e *encoding) shrinkRing(c *Codec, hs *hasher) {
	if e.sent == 0 {
		return
	}
	prev := (e.sent - 1) % encodeDepth
	if e.ring[prev] == nil || !e.wrote(e.sent-1) || !hs.hashed(e.sent) {
		return
	}
	slot := e.sent % encodeDepth
	if e.ring[slot] == nil {
		e.ring[slot] = e.ring[prev]
	} else {
		c.blocks.Put(e.ring[prev])
		e.giveBack(1)
	}
	e.ring[prev] = nil
}

// takeBuffer gives the empty slot a block buffer. A second buffer (the
// other slot holds the block before, still being written) takes one of the
// process's spare blocks (spareBlocks); when none is left, the encode waits
// for the lanes to write the block before and reuses its buffer.
func (e *encoding) takeBuffer(c *Codec, hs *hasher, slot int) error {
	prev := (slot + encodeDepth - 1) % encodeDepth
	if e.sent > 0 && e.ring[prev] != nil {
		if spareBlocks.take() {
			e.spares++
		} else {
			if err := e.await(e.sent - 1); err != nil {
				return err
			}
			hs.wait(e.sent)
			if e.ring[prev] != nil { // not lost to a lane left behind
				e.ring[slot], e.ring[prev] = e.ring[prev], nil
				return nil
			}
		}
	}
	e.ring[slot] = c.blocks.Get().(*[]byte)
	return nil
}

// giveBack returns up to n of the encode's spare blocks.
func (e *encoding) giveBack(n int) {
	n = min(n, e.spares)
	e.spares -= n
	spareBlocks.give(n)
}

// spares counts the block buffers PUTs hold beyond their first, against a
// bound. A second buffer lets a PUT read its next block while its drives
// write the one before; that overlap needs a core with nothing else to do,
// so more than two such buffers a core only hold memory: with 16 PUTs of
// 16 MiB at once on 2 cores, one buffer each ran as fast as two and held
// 30-37 MiB less (docs/benchmarks.md, "One block buffer a PUT").
type spares struct {
	used atomic.Int64
	// bound: how many at once; spareBound unless a test sets it.
	bound func() int64
}

// spareBound is two spare block buffers for each core the runtime uses
// (GOMAXPROCS follows the container's CPU limit).
func spareBound() int64 { return 2 * int64(runtime.GOMAXPROCS(0)) }

func (s *spares) take() bool {
	bound := s.bound()
	for {
		u := s.used.Load()
		if u >= bound {
			return false
		}
		if s.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

func (s *spares) give(n int) {
	if n > 0 {
		s.used.Add(int64(-n))
	}
}

// spareBlocks is the process's count: the bound is on its memory, whichever
// set's codec a PUT encodes with.
var spareBlocks = &spares{bound: spareBound}

// wrote reports whether no lane will read block any more: each wrote it,
// failed or finished (a lane left behind lost the block's buffer then:
// leaveBehind).
func (e *encoding) wrote(block int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, l := range e.lanes {
		if l != nil && !e.left[i] && !e.finished[i] && e.failed[i] == nil && e.written[i] <= block {
			return false
		}
	}
	return true
}

// checkQuorum fails when fewer than quorum lanes are healthy.
func (e *encoding) checkQuorum() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	healthy := 0
	for i, l := range e.lanes {
		if l != nil && !e.left[i] && e.failed[i] == nil {
			healthy++
		}
	}
	if healthy < e.quorum {
		return objlayer.ErrWriteQuorum
	}
	return nil
}
