package hlc

import (
	"sync"
	"testing"
	"time"
)

func TestNowNeverRepeatsNorGoesBack(t *testing.T) {
	wall := int64(1000)
	c := New(func() int64 { return wall })
	a, b := c.Now(), c.Now()
	if a != 1000 || b != 1001 {
		t.Fatalf("with a stopped wall clock: %d then %d, want 1000 then 1001", a, b)
	}
	wall = 500 // the wall clock stepped back
	if got := c.Now(); got != 1002 {
		t.Fatalf("after the wall clock stepped back: %d, want 1002", got)
	}
	wall = 5000
	if got := c.Now(); got != 5000 {
		t.Fatalf("wall clock ahead again: %d, want 5000", got)
	}
}

func TestObserveFollowsAPeerAheadWithinBounds(t *testing.T) {
	wall := int64(time.Hour)
	c := New(func() int64 { return wall })
	peer := wall + int64(30*time.Second)
	if !c.Observe(peer) {
		t.Fatal("a peer 30 s ahead was not followed")
	}
	if got := c.Now(); got <= peer {
		t.Fatalf("after a peer's time %d: Now %d, want later", peer, got)
	}
	if c.Peek() <= peer {
		t.Fatalf("Peek %d behind the observed %d", c.Peek(), peer)
	}
	far := wall + int64(MaxAhead) + 1
	if c.Observe(far) {
		t.Fatal("a peer more than MaxAhead ahead was followed")
	}
	if got := c.Now(); got >= far {
		t.Fatalf("Now %d followed a peer too far ahead (%d)", got, far)
	}
	before := c.Peek()
	c.Observe(wall - int64(time.Minute)) // a peer behind changes nothing
	if c.Peek() != before {
		t.Fatalf("a peer behind moved the clock: %d -> %d", before, c.Peek())
	}
}

func TestNowIsUniqueAcrossGoroutines(t *testing.T) {
	c := New(func() int64 { return 42 })
	const n, per = 8, 1000
	seen := make(chan int64, n*per)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range per {
				seen <- c.Now()
			}
		})
	}
	wg.Wait()
	close(seen)
	uniq := map[int64]bool{}
	for v := range seen {
		if uniq[v] {
			t.Fatalf("time %d given twice", v)
		}
		uniq[v] = true
	}
}

func TestAPeerAheadPullsThePhysicalPartUntilItIsFixed(t *testing.T) {
	wall := int64(time.Hour)
	c := New(func() int64 { return wall })
	if off := c.PeerWall(wall + int64(5*time.Second)); off != 5*time.Second {
		t.Fatalf("offset %s, want 5s", off)
	}
	// Without any message since, a later Now still runs 5 s ahead of the
	// wall clock: a write through this node after one through the peer is
	// stamped later.
	wall += int64(time.Second)
	if got := c.Now(); got != wall+int64(5*time.Second) {
		t.Fatalf("Now %d, want the wall clock plus the peer's lead %d", got, wall+int64(5*time.Second))
	}
	c.PeerWall(wall - int64(time.Second)) // a peer behind: no lead
	// The peer's clock fixed: its lead is forgotten within two windows,
	// and the clock waits for the wall clock to catch up (never back).
	wall += 2 * window
	c.PeerWall(wall)
	before := c.Peek()
	if got := c.Now(); got != before+1 && got != wall {
		t.Fatalf("after the lead expired: Now %d (Peek %d, wall %d)", got, before, wall)
	}
	wall += int64(10 * time.Second)
	if got := c.Now(); got != wall {
		t.Fatalf("lead forgotten: Now %d, want the wall clock %d", got, wall)
	}
	if off := c.PeerWall(wall + int64(MaxAhead) + 1); off <= MaxAhead {
		t.Fatalf("offset %s", off)
	}
	if got := c.Now(); got != wall+1 {
		t.Fatalf("a peer beyond MaxAhead was followed: Now %d, wall %d", got, wall)
	}
}
