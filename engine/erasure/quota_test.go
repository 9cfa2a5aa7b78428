package erasure

import (
	"bytes"
	"path/filepath"

	"github.com/google/uuid"

	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-storage/strata/engine/drive"

	"github.com/strata-storage/strata/engine/objlayer"
)

func quotaPools(t *testing.T, q objlayer.Quota) *Pools {
	t.Helper()
	ps := NewPools(NewPoolEntry("p", newTestPool(t, 2, 4, 2).Pool, StateActive))
	if err := ps.UpdateBucket(t.Context(), "bk", func(b *objlayer.BucketInfo) { b.Quota = &q }); err != nil {
		t.Fatal(err)
	}
	return ps
}

func putN(ps *Pools, t *testing.T, key string, n int) error {
	_, err := ps.PutObject(t.Context(), "bk", key, bytes.NewReader(make([]byte, n)), int64(n), objlayer.PutOptions{})
	return err
}

// TestQuotaRefusesWhatWouldPassIt: a write that would take the bucket past
// its bytes or objects is refused with ErrQuotaExceeded and changes
// nothing; deleting makes room again; usage counts every set.
func TestQuotaRefusesWhatWouldPassIt(t *testing.T) {
	ps := quotaPools(t, objlayer.Quota{Bytes: 1000, Objects: 5})
	for i := range 4 {
		if err := putN(ps, t, fmt.Sprintf("k%d", i), 200); err != nil {
			t.Fatal(err)
		}
	}
	if err := putN(ps, t, "big", 201); !errors.Is(err, objlayer.ErrQuotaExceeded) {
		t.Fatalf("a write past the byte quota: %v", err)
	}
	if err := putN(ps, t, "fits", 200); err != nil {
		t.Fatalf("a write that fills the quota exactly: %v", err)
	}
	if err := putN(ps, t, "empty", 0); !errors.Is(err, objlayer.ErrQuotaExceeded) {
		t.Fatalf("a sixth object: %v", err)
	}
	if _, err := ps.NewMultipartUpload(t.Context(), "bk", "mp", nil); !errors.Is(err, objlayer.ErrQuotaExceeded) {
		t.Fatalf("an upload into a full bucket: %v", err)
	}
	u, err := ps.BucketUsage(t.Context(), "bk")
	if err != nil || u != (objlayer.Usage{Bytes: 1000, Objects: 5}) {
		t.Fatalf("usage %+v, %v", u, err)
	}
	if _, err := ps.DeleteObject(t.Context(), "bk", "k0", nil, objlayer.DeleteUnversioned); err != nil {
		t.Fatal(err)
	}
	if err := putN(ps, t, "again", 150); err != nil {
		t.Fatalf("after a delete made room: %v", err)
	}
	if u, _ := ps.BucketUsage(t.Context(), "bk"); u != (objlayer.Usage{Bytes: 950, Objects: 5}) {
		t.Fatalf("usage %+v after the delete and the write", u)
	}
	// No quota: nothing is refused.
	if err := ps.UpdateBucket(t.Context(), "bk", func(b *objlayer.BucketInfo) { b.Quota = nil }); err != nil {
		t.Fatal(err)
	}
	if err := putN(ps, t, "free", 5000); err != nil {
		t.Fatal(err)
	}
}

// TestQuotaOvershootIsOneObjectPerWriter: writers racing for the last
// room of a bucket pass its quota by at most one object each.
func TestQuotaOvershootIsOneObjectPerWriter(t *testing.T) {
	const quota, writers = 40, 8
	ps := quotaPools(t, objlayer.Quota{Objects: quota})
	var stored atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := putN(ps, t, fmt.Sprintf("w%d/%d", w, i), 64)
				if errors.Is(err, objlayer.ErrQuotaExceeded) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				stored.Add(1)
			}
		})
	}
	wg.Wait()
	u, err := ps.BucketUsage(t.Context(), "bk")
	if err != nil {
		t.Fatal(err)
	}
	if u.Objects != stored.Load() || u.Objects < quota || u.Objects > quota+writers-1 {
		t.Fatalf("%d writers stored %d objects (usage %+v) under a quota of %d: want %d to %d",
			writers, stored.Load(), u, quota, quota, quota+writers-1)
	}
	t.Logf("%d writers stored %d objects under a quota of %d", writers, u.Objects, quota)
}

func TestCheckQuota(t *testing.T) {
	q := objlayer.Quota{Bytes: 100}
	for _, c := range []struct {
		used, size int64
		ok         bool
	}{{0, 100, true}, {1, 100, false}, {99, -1, true}, {100, -1, false}, {100, 0, true}} {
		err := checkQuota(q, objlayer.Usage{Bytes: c.used}, c.size, 1)
		if (err == nil) != c.ok {
			t.Errorf("used %d, writing %d: %v", c.used, c.size, err)
		}
	}
}

// BenchmarkPutTinyQuota: 4 KiB PUTs through the pools to a bucket without
// a quota and to one with a quota (usage read before each write), on
// drives without fsync so that the figure is CPU, for the A/B in
// docs/benchmarks.md.
func BenchmarkPutTinyQuota(b *testing.B) {
	for _, q := range []*objlayer.Quota{nil, {Bytes: 1 << 40, Objects: 1 << 30}} {
		name := "no-quota"
		if q != nil {
			name = "quota"
		}
		b.Run(name, func(b *testing.B) {
			var ds []Drive
			for i := range 4 {
				d, err := drive.OpenLocal(filepath.Join(b.TempDir(), fmt.Sprint(i)), drive.Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = d.Close() })
				ds = append(ds, d)
			}
			set, err := NewSet(ds, 2)
			if err != nil {
				b.Fatal(err)
			}
			pool, err := NewPool(uuid.New(), []*Set{set})
			if err != nil {
				b.Fatal(err)
			}
			ps := NewPools(NewPoolEntry("p", pool, StateActive))
			if err := ps.CreateBucket(b.Context(), objlayer.BucketInfo{Name: "bk", Quota: q}); err != nil {
				b.Fatal(err)
			}
			data := randomBytes(4096)
			b.SetBytes(int64(len(data)))
			i := 0
			for b.Loop() {
				i++
				if _, err := ps.PutObject(b.Context(), "bk", fmt.Sprintf("o-%d", i), bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
