package s3http

import (
	"context"
	"sync/atomic"
	"time"
)

// coarseTick is how often coarseClock advances.
const coarseTick = 100 * time.Millisecond

// coarseClock is a clock read with one atomic load, behind real time by up
// to about coarseTick. It serves decisions that tolerate that error, such
// as whether a write deadline needs moving: time.Now costs tens of
// nanoseconds, which add up when taken several times per request.
type coarseClock struct {
	now atomic.Int64 // unix ns
}

func newCoarseClock() *coarseClock {
	c := new(coarseClock)
	c.now.Store(time.Now().UnixNano())
	return c
}

// unixNano is the time at the last tick.
func (c *coarseClock) unixNano() int64 { return c.now.Load() }

// run advances the clock until ctx ends.
func (c *coarseClock) run(ctx context.Context) {
	c.now.Store(time.Now().UnixNano())
	tick := time.NewTicker(coarseTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.now.Store(time.Now().UnixNano())
		}
	}
}
