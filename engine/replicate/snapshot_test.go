package replicate

import (
	"io"
	"runtime"
	"testing"
	"time"
)

// TestSnapshotBudget: snapshots count their bytes against the budget
// until their copy is made (done, once) or, for one never copied, until
// it is collected; a write beyond the budget or SnapshotMax keeps none.
func TestSnapshotBudget(t *testing.T) {
	base := SnapshotBytes()
	if Reserve(SnapshotMax+1) || Reserve(-1) {
		t.Fatal("a reservation beyond SnapshotMax was taken")
	}
	if !Reserve(4) {
		t.Fatal("4 bytes refused")
	}
	s := NewSnapshot("v1", []byte("desc"), []byte("data"))
	for range 2 { // a retry reads the body again
		r, ok := s.bodyOf("v1")
		if !ok {
			t.Fatal("no body")
		}
		b, err := io.ReadAll(r)
		if err != nil || string(b) != "data" || string(s.Desc) != "desc" {
			t.Fatalf("snapshot body %q, %v", b, err)
		}
	}
	if _, ok := s.bodyOf("v2"); ok {
		t.Fatal("a snapshot gave its body for another version")
	}
	s.done()
	s.done()
	if _, ok := s.bodyOf("v1"); ok {
		t.Fatal("a snapshot kept its bytes after its copy was made")
	}
	if got := SnapshotBytes() - base; got != 0 {
		t.Fatalf("%d bytes held after the copy", got)
	}

	// One never copied gives its bytes back once collected.
	func() {
		if !Reserve(8) {
			t.Fatal("8 bytes refused")
		}
		NewSnapshot("v2", nil, make([]byte, 8))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for SnapshotBytes() != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held by a dropped snapshot", SnapshotBytes()-base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}

	// The budget holds.
	n := 0
	for Reserve(SnapshotMax) {
		n++
	}
	if n == 0 || int64(n)*SnapshotMax > snapshotBudget {
		t.Fatalf("%d reservations of %d bytes within a budget of %d", n, SnapshotMax, snapshotBudget)
	}
	Unreserve(int64(n) * SnapshotMax)
}
