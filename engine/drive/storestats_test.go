package drive

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestStoreStats: a drive's store reports the bytes it was given and what
// it wrote for them, its tables' size and its cache's lookups, counts the
// times writes were held up and for how long (one still going on
// included), and reports nothing, without failing, once closed.
func TestStoreStats(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	putSmallObjects(t, d, 500)
	if err := d.meta.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.GetVersion(t.Context(), "bk", "o000007", nil); err != nil {
		t.Fatal(err)
	}
	st := d.StoreStats()
	// The records are flushed once: a little more than applied (tables
	// carry an index and filters), not twice.
	if st.AppliedBytes < 500*2048 || st.WALBytes < st.AppliedBytes || st.LiveBytes < 500*2048 ||
		st.FlushedBytes < 500*2048 || st.FlushedBytes > st.AppliedBytes*3/2 {
		t.Fatalf("after 500 records of 2 KiB and a flush: %+v", st)
	}
	if st.CacheHits+st.CacheMisses == 0 {
		t.Fatalf("a read after a flush looked nothing up in the block cache: %+v", st)
	}
	if st.Stalls != 0 || st.StallTime != 0 {
		t.Fatalf("stalls reported before any: %+v", st)
	}

	d.meta.writeStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	time.Sleep(20 * time.Millisecond)
	if st := d.StoreStats(); st.Stalls != 1 || st.StallTime < 20*time.Millisecond {
		t.Fatalf("during a stall of 20 ms: %d stalls, %v", st.Stalls, st.StallTime)
	}
	d.meta.writeStallEnd()
	ended := d.StoreStats()
	time.Sleep(20 * time.Millisecond)
	if st := d.StoreStats(); st.Stalls != 1 || st.StallTime != ended.StallTime || st.StallTime < 20*time.Millisecond {
		t.Fatalf("after a stall of 20 ms ended: %d stalls, %v (at its end %v)", st.Stalls, st.StallTime, ended.StallTime)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if st := d.StoreStats(); st != (StoreStats{}) {
		t.Fatalf("a closed store reported %+v", st)
	}
}
