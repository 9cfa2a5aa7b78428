package erasure

import (
	"sync/atomic"
	"time"
)

// workerPool runs functions on goroutines kept between calls. The calls a
// request makes to each of its drives (a record read, a commit) used a new
// goroutine each; a new goroutine starts with a small stack, and a drive
// call (pebble's Get, an allocation under it) outgrew it every time: the
// stack's growth and copy were 13% of a HEAD's CPU in BenchmarkHeadObject
// (engine/s3api). A kept goroutine has grown its stack already.
type workerPool struct {
	// idle takes a function when a worker waits on it (unbuffered: a send
	// succeeds only then).
	idle chan func()
	// idleFor is how long a worker waits for work before it ends.
	idleFor time.Duration
	// workers counts the pool's goroutines, busy or idle.
	workers atomic.Int64
}

// driveWork runs the per-drive calls of requests.
var driveWork = &workerPool{idle: make(chan func()), idleFor: 10 * time.Second}

// run runs f on an idle worker, or on a new one when none is idle: it
// never waits for a worker, so calls that block (a slow drive) hold up
// nothing but their own.
func (p *workerPool) run(f func()) {
	select {
	case p.idle <- f:
	default:
		go p.work(f)
	}
}

func (p *workerPool) work(f func()) {
	p.workers.Add(1)
	defer p.workers.Add(-1)
	t := time.NewTimer(p.idleFor)
	defer t.Stop()
	for {
		f()
		f = nil // what the function holds is not kept while idle
		t.Reset(p.idleFor)
		select {
		case f = <-p.idle:
		case <-t.C:
			return
		}
	}
}
