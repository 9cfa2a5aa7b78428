package erasure

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
)

// TestWriteDroppedAsOlderIsNeverAcknowledged: drives drop a null version
// older than the one they hold; such a write is never answered as done.
// The newer version here is stamped one second ahead of this node's clock
// (written through a node whose clock ran ahead). An inline object is
// stamped again past it and committed: it ends as the latest. A write of
// shard files fails as ErrWriteQuorum (503, retried by clients) wrapping
// ErrSuperseded, with this node's clock moved past the newer stamp, so the
// retry wins.
func TestWriteDroppedAsOlderIsNeverAcknowledged(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	var ahead time.Time
	defer func() { time.Sleep(time.Until(ahead)) }() // leave no lead to later tests
	for _, size := range []int{1000, DefaultInlineLimit + 1} {
		ahead = time.Unix(0, hlc.Default.Peek()).Add(time.Second)
		key := "k" + string(rune('0'+size%10))
		newer := randomBytes(size)
		if _, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(newer), int64(size), PutOptions{ModTime: ahead}); err != nil {
			t.Fatal(err)
		}
		mine := randomBytes(size)
		info, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(mine), int64(size), PutOptions{})
		if size <= DefaultInlineLimit {
			if err != nil {
				t.Fatalf("inline: %v", err)
			}
			if !info.ModTime.After(ahead) {
				t.Fatalf("inline: stamped %s, not after the newer version's %s", info.ModTime, ahead)
			}
		} else {
			if !errors.Is(err, ErrWriteQuorum) || !errors.Is(err, drive.ErrSuperseded) {
				t.Fatalf("size %d: a write every drive dropped as older answered %v", size, err)
			}
			if p := hlc.Default.Peek(); p < ahead.UnixNano() {
				t.Fatalf("size %d: the clock did not move past the newer stamp (%d < %d)", size, p, ahead.UnixNano())
			}
			if got := tp.get(t, key); !bytes.Equal(got, newer) {
				t.Fatalf("size %d: the failed write changed the object", size)
			}
			tp.put(t, key, mine) // the retry
		}
		if got := tp.get(t, key); !bytes.Equal(got, mine) {
			t.Fatalf("size %d: the acknowledged write is not what a read returns", size)
		}
	}
}
