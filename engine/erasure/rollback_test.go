package erasure

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// TestOverwriteThatMissesQuorumKeepsTheObject: an overwrite that three of
// six drives (4+2) commit misses write quorum (4) and is rolled back on
// those three. The object it replaced must then still be there: it was
// on every drive, and the failed write must not take it from the three
// that committed, which would leave it on three, fewer than the four a
// read needs (before the drives kept replaced versions for a rollback,
// it was lost for good).
func TestOverwriteThatMissesQuorumKeepsTheObject(t *testing.T) {
	tp := newTestPool(t, 1, 6, 2)
	up := &atomic.Bool{}
	up.Store(true)
	set := tp.Sets()[0]
	for pos := 3; pos < 6; pos++ {
		set.SetDrive(pos, alwaysOnline{flaky{Drive: tp.drives[pos], up: up}})
	}
	for _, size := range []int{1000, 3 << 20} { // inline, shard files
		key := "object"
		if size > 1000 {
			key = "large"
		}
		old := randomBytes(size)
		tp.put(t, key, old)
		up.Store(false) // three drives refuse the overwrite
		_, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(randomBytes(size)), int64(size), objlayer.PutOptions{})
		up.Store(true)
		if !errors.Is(err, objlayer.ErrWriteQuorum) {
			t.Fatalf("%s: an overwrite on 3 of 6 drives: %v, want ErrWriteQuorum", key, err)
		}
		if got := getObject(t, tp.Pool, key, nil); !bytes.Equal(got, old) {
			t.Fatalf("%s: after the failed overwrite a GET returned %d other bytes", key, len(got))
		}
		// Every drive holds it again, not only the three that missed the
		// write: a read needs any four.
		for pos := range 3 {
			if _, err := tp.drives[pos].GetVersion(t.Context(), "bk", key, nil); err != nil {
				t.Fatalf("%s: drive %d, which committed the failed write, lost the object: %v", key, pos, err)
			}
		}
	}
}
