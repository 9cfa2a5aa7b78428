package erasure

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// slowDrive answers reads after a delay.
type slowDrive struct {
	*drive.Local
	delay *atomic.Int64
}

func (s slowDrive) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.Local.GetVersion(ctx, bucket, object, versionID)
}

func (s slowDrive) StatVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.Local.StatVersion(ctx, bucket, object, versionID)
}

func (s slowDrive) OpenShard(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return s.Local.OpenShard(ctx, dataDir, part)
}

// TestSlowDriveIsReadLast: a drive that answers 200 ms late costs the
// reads that meet it only until its set has seen it is slow: then GETs
// take records from the other drives and rebuild its shards from parity,
// and answer in the time of the fast drives. Inline and shard-file
// objects; the slow drive holds a data shard of both.
func TestSlowDriveIsReadLast(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	delay := &atomic.Int64{}
	set := tp.Sets()[0]
	set.SetDrive(0, slowDrive{Local: tp.drives[0], delay: delay})
	// A key whose data shard 0 or 1 is on the slow drive (position 0).
	big := ""
	for i := 0; big == ""; i++ {
		if k := "big" + string(rune('a'+i)); set.erasureInfo("bk", k).Distribution[0] < set.layout.Data {
			big = k
		}
	}
	objs := map[string][]byte{"small": randomBytes(1000), big: randomBytes(3 << 20)}
	for k, v := range objs {
		tp.put(t, k, v)
	}
	const slow = 200 * time.Millisecond
	delay.Store(int64(slow))
	for k, want := range objs {
		var took []time.Duration
		for range 8 {
			start := time.Now()
			if got := tp.get(t, k); !bytes.Equal(got, want) {
				t.Fatalf("%s: wrong bytes", k)
			}
			took = append(took, time.Since(start))
		}
		for i, d := range took[3:] {
			if d >= slow/2 {
				t.Fatalf("%s: GET %d took %s with one drive 200 ms slow (all: %v)", k, i+3, d, took)
			}
		}
		t.Logf("%s: %v", k, took)
	}
}
