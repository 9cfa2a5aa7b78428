package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// readCounter counts the record reads a drive answers, with data or not.
type readCounter struct {
	*drive.Local
	gets, stats *atomic.Int64
}

func (c readCounter) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	c.gets.Add(1)
	return c.Local.GetVersion(ctx, bucket, object, versionID)
}

func (c readCounter) StatVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	c.stats.Add(1)
	return c.Local.StatVersion(ctx, bucket, object, versionID)
}

// TestOpenObjectMetaReadsNoData: a version opened for its metadata (a
// HEAD) resolves to what OpenObject resolves, from record reads that leave
// inline data out, and its handle refuses to be read.
func TestOpenObjectMetaReadsNoData(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	gets, stats := &atomic.Int64{}, &atomic.Int64{}
	set := tp.Sets()[0]
	for i, d := range tp.drives {
		set.SetDrive(i, readCounter{Local: d, gets: gets, stats: stats})
	}
	for _, size := range []int{4096, 3 << 20} {
		key := fmt.Sprintf("obj-%d", size)
		data := randomBytes(size)
		tp.put(t, key, data)
		gets.Store(0)
		stats.Store(0)
		meta, err := tp.OpenObjectMeta(t.Context(), "bk", key, nil)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if gets.Load() != 0 || stats.Load() < int64(set.layout.ReadQuorum()) {
			t.Fatalf("size %d: opened for metadata with %d reads of data and %d without", size, gets.Load(), stats.Load())
		}
		full, err := tp.OpenObject(t.Context(), "bk", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", meta.Info) != fmt.Sprintf("%+v", full.Info) {
			t.Fatalf("size %d: metadata handle %+v, read handle %+v", size, meta.Info, full.Info)
		}
		if _, err := meta.WriteRange(t.Context(), &bytes.Buffer{}, 0, -1); err == nil {
			t.Fatalf("size %d: a handle opened without data was read", size)
		}
		var buf bytes.Buffer
		if _, err := full.WriteRange(t.Context(), &buf, 0, -1); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("size %d: read back wrong (%v)", size, err)
		}
	}
}

// A write's Condition is asked, just before the commit, about the key's
// current version (nil for none, the version otherwise, inline or
// streamed), and its error refuses the write with nothing stored.
func TestWriteConditionBeforeCommit(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	refuse := errors.New("refused")
	for _, size := range []int{100, 3 << 20} {
		key := fmt.Sprintf("cond-%d", size)
		var seen []*objlayer.ObjectInfo
		cond := func(cur *objlayer.ObjectInfo) error {
			seen = append(seen, cur)
			if cur != nil {
				return refuse
			}
			return nil
		}
		first := randomBytes(size)
		if _, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(first), int64(size), objlayer.PutOptions{Condition: cond}); err != nil {
			t.Fatalf("size %d: a new key's conditional write: %v", size, err)
		}
		_, err := tp.PutObject(t.Context(), "bk", key, bytes.NewReader(randomBytes(size)), int64(size), objlayer.PutOptions{Condition: cond})
		if !errors.Is(err, refuse) {
			t.Fatalf("size %d: the refused write answered %v", size, err)
		}
		if len(seen) != 2 || seen[0] != nil || seen[1] == nil || seen[1].Size != int64(size) {
			t.Fatalf("size %d: the condition saw %v", size, seen)
		}
		if got := tp.get(t, key); !bytes.Equal(got, first) {
			t.Fatalf("size %d: a refused conditional write changed the object", size)
		}
	}
}
