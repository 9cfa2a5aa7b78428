package erasure

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerPool: every function runs once; a function that blocks holds
// up no other (run never waits for a worker); idle workers are reused, and
// end once idle for idleFor.
func TestWorkerPool(t *testing.T) {
	p := &workerPool{idle: make(chan func()), idleFor: 200 * time.Millisecond}

	release := make(chan struct{})
	blocked := make(chan struct{})
	p.run(func() { close(blocked); <-release })
	<-blocked

	var ran atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		p.run(func() { ran.Add(1); wg.Done() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of 1000 functions ran while one function blocked", ran.Load())
	}
	if n := ran.Load(); n != 1000 {
		t.Fatalf("%d functions ran, want 1000", n)
	}
	close(release)

	// One at a time, the calls reuse a worker: the goroutine count stays.
	time.Sleep(20 * time.Millisecond) // the workers above are idle now
	before := p.workers.Load()
	if before == 0 {
		t.Fatal("no worker left after 1001 calls")
	}
	for range 100 {
		ch := make(chan struct{})
		p.run(func() { close(ch) })
		<-ch
	}
	if after := p.workers.Load(); after > before {
		t.Errorf("100 calls one after another: %d workers, %d before: idle workers were not reused", after, before)
	}

	deadline := time.Now().Add(5 * time.Second)
	for p.workers.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.workers.Load(); n > 0 {
		t.Errorf("%d workers a while after the last call: idle workers did not end", n)
	}
}
