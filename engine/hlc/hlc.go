// Package hlc is the node's hybrid logical clock: the time a version is
// stamped with, which last-writer-wins orders versions by.
//
// Two things keep a node whose wall clock is behind from stamping a write
// older than the writes it follows:
//   - causality: every internode request and ping answer carries the
//     sender's clock, and this clock never gives a time at or before one it
//     has seen (nor one it gave before);
//   - the physical part follows the peers: pings also carry each node's
//     wall clock, and a node whose wall clock is behind a peer's reads its
//     own wall clock plus that difference (the largest seen in the last
//     10-20 s). Walls, not hybrid clocks, are compared there, so two nodes
//     cannot keep each other ahead once the clock that was ahead is fixed.
//
// A peer more than MaxAhead ahead is not followed at all.
package hlc

import (
	"sync"
	"sync/atomic"
	"time"
)

// MaxAhead bounds how far ahead of this node's wall clock a peer may pull
// the clock: further than internode's signatures allow (2 minutes), its
// requests are refused anyway.
const MaxAhead = 2 * time.Minute

// window is how long a peer's lead is remembered without a new ping
// saying it again (between one and two windows).
const window = int64(10 * time.Second)

// Clock is a hybrid logical clock in Unix nanoseconds.
type Clock struct {
	last atomic.Int64
	wall func() int64

	mu         sync.Mutex
	windowFrom int64 // wall time the current window began
	cur, prev  int64 // the largest peer lead seen in this window and the one before
}

// New returns a clock reading wall (Unix nanoseconds).
func New(wall func() int64) *Clock { return &Clock{wall: wall} }

// physical is the wall clock plus the lead of the peers ahead of it.
func (c *Clock) physical() int64 {
	w := c.wall()
	c.mu.Lock()
	c.roll(w)
	lead := max(c.cur, c.prev)
	c.mu.Unlock()
	return w + lead
}

// roll starts a new window when the current one is over.
func (c *Clock) roll(w int64) {
	switch {
	case w-c.windowFrom < window:
		return
	case w-c.windowFrom < 2*window:
		c.prev = c.cur
	default:
		c.prev = 0
	}
	c.cur, c.windowFrom = 0, w
}

// Now returns a time later than every time Now returned or Observe saw,
// and not earlier than the (peer-corrected) wall clock.
func (c *Clock) Now() int64 {
	p := c.physical()
	for {
		last := c.last.Load()
		next := max(p, last+1)
		if c.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Peek is the clock's time without advancing it (what a message carries).
func (c *Clock) Peek() int64 { return max(c.physical(), c.last.Load()) }

// Observe moves the clock forward to t, a peer's hybrid clock, unless t is
// more than MaxAhead ahead of the wall clock; it reports whether t was
// taken.
func (c *Clock) Observe(t int64) bool {
	if t > c.wall()+int64(MaxAhead) {
		return false
	}
	for {
		last := c.last.Load()
		if t <= last || c.last.CompareAndSwap(last, t) {
			return true
		}
	}
}

// PeerWall records a peer's wall clock (read when it answered a ping); a
// peer ahead pulls this clock's physical part forward, within MaxAhead. It
// returns the peer's offset: its wall clock minus this node's.
func (c *Clock) PeerWall(t int64) time.Duration {
	w := c.wall()
	d := t - w
	if d > 0 && d <= int64(MaxAhead) {
		c.mu.Lock()
		c.roll(w)
		c.cur = max(c.cur, d)
		c.mu.Unlock()
	}
	return time.Duration(d)
}

// Wall is the clock's wall clock (Unix nanoseconds), uncorrected.
func (c *Clock) Wall() int64 { return c.wall() }

// Default is the process's clock.
var Default = New(func() int64 { return time.Now().UnixNano() })

// Now is Default's time.
func Now() time.Time { return time.Unix(0, Default.Now()) }

// Skew makes Default read the wall clock shifted by d: a node with a wrong
// clock, for tests (STRATA_TEST_CLOCK_SKEW). Call it before anything reads
// the clock.
func Skew(d time.Duration) {
	Default.wall = func() int64 { return time.Now().Add(d).UnixNano() }
}
