package gateway

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLifecycleLease: one holder at a time; the holder renews; a lapsed or
// unreadable lease is taken; of two replicas taking a lapsed lease at
// once, exactly one holds it.
func TestLifecycleLease(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	hold := func(holder string, at time.Time) bool {
		t.Helper()
		ok, err := takeLease(dir, holder, time.Minute, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !hold("a", now) {
		t.Fatal("a did not take a free lease")
	}
	if hold("b", now.Add(30*time.Second)) {
		t.Fatal("b took a's lease while it held")
	}
	if !hold("a", now.Add(50*time.Second)) {
		t.Fatal("a could not renew its lease")
	}
	if hold("b", now.Add(100*time.Second)) {
		t.Fatal("b took the lease a renewed")
	}
	if !hold("b", now.Add(111*time.Second)) {
		t.Fatal("b did not take a lapsed lease")
	}
	if err := os.WriteFile(filepath.Join(dir, leaseFile), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !hold("c", now.Add(112*time.Second)) {
		t.Fatal("c did not take an unreadable lease")
	}

	// Two replicas at once on a lapsed lease: both write, both read back
	// the last writer's name.
	later := now.Add(time.Hour)
	got := make(chan bool, 2)
	for _, h := range []string{"d", "e"} {
		go func() {
			ok, err := takeLease(dir, h, time.Minute, later)
			if err != nil {
				t.Error(err)
			}
			got <- ok
		}()
	}
	if n := btoi(<-got) + btoi(<-got); n != 1 {
		t.Fatalf("%d replicas hold the lease taken at once, want 1", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
