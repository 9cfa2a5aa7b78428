package drive

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// walkedUsage sums what a walk of every version of bucket b finds: the
// figure the counters must equal.
func walkedUsage(t *testing.T, d *Local) Usage {
	t.Helper()
	var u Usage
	if err := d.WalkObjects(t.Context(), "b", "", "", false, func(_ string, recs []*Record) bool {
		for _, r := range recs {
			w := weigh(r)
			u.Bytes += w.Bytes
			u.Objects += w.Objects
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return u
}

func checkUsage(t *testing.T, d *Local, step string) {
	t.Helper()
	got, err := d.BucketUsage(t.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if want := walkedUsage(t, d); got != want {
		t.Fatalf("after %s: usage %+v, the versions hold %+v", step, got, want)
	}
}

// TestUsageFollowsEveryChange: whatever adds, replaces, rolls back or
// removes versions (null and versioned, delete markers, superseded
// writes, multipart completions), the bucket's usage equals what its
// versions hold, after each change and after a reopen.
func TestUsageFollowsEveryChange(t *testing.T) {
	root := t.TempDir()
	d := openTestDrive(t, root, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var written []*Record
	objects := []string{"a", "b/c", "d"}
	for i := range 400 {
		obj := objects[rng.IntN(len(objects))]
		mod := int64(i + 1)
		switch op := rng.IntN(6); op {
		case 0, 1: // a null version (replacing the one there), sometimes late
			if rng.IntN(4) == 0 {
				mod -= 50
			}
			r := &Record{ModTime: mod, Size: int64(rng.IntN(1000)), ETag: fmt.Sprint(i)}
			if _, err := d.PutVersion(t.Context(), "b", obj, r, NotStaged); err != nil {
				t.Fatal(err)
			}
			written = append(written, r)
		case 2: // a version of its own, or a delete marker
			r := &Record{VersionID: [16]byte(uuid.New()), ModTime: mod, Size: int64(rng.IntN(1000))}
			if rng.IntN(3) == 0 {
				r.Flags, r.Size = FlagDeleteMarker, 0
			}
			if _, err := d.PutVersion(t.Context(), "b", obj, r, NotStaged); err != nil {
				t.Fatal(err)
			}
			written = append(written, r)
		case 3: // the same version written again (a heal)
			vs, err := d.Versions(t.Context(), "b", obj)
			if err != nil || len(vs) == 0 {
				continue
			}
			if _, err := d.PutVersion(t.Context(), "b", obj, vs[rng.IntN(len(vs))], NotStaged); err != nil {
				t.Fatal(err)
			}
		case 4: // a version deleted
			vs, err := d.Versions(t.Context(), "b", obj)
			if err != nil || len(vs) == 0 {
				continue
			}
			if _, err := d.DeleteVersion(t.Context(), "b", obj, vs[rng.IntN(len(vs))].VersionID); err != nil {
				t.Fatal(err)
			}
		case 5: // a write rolled back (what a null one replaced comes back)
			if len(written) == 0 {
				continue
			}
			r := written[rng.IntN(len(written))]
			for _, o := range objects {
				if _, err := d.RollbackVersion(t.Context(), "b", o, r); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkUsage(t, d, fmt.Sprintf("change %d", i))
	}
	before, _ := d.BucketUsage(t.Context(), "b")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTestDrive(t, root, nil)
	if after, _ := d.BucketUsage(t.Context(), "b"); after != before {
		t.Fatalf("reopened: usage %+v, before %+v", after, before)
	}
	checkUsage(t, d, "reopen")
	if before.Objects == 0 {
		t.Fatal("the test left no object to count")
	}
}

// TestUsageFromConcurrentWriters: writers to different objects of one
// bucket add their deltas without losing any, and the store folds the
// deltas into one figure when it compacts.
func TestUsageFromConcurrentWriters(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				r := &Record{VersionID: [16]byte(uuid.New()), ModTime: int64(i + 1), Size: 100}
				if _, err := d.PutVersion(t.Context(), "b", fmt.Sprintf("w%d/%d", w, i%10), r, NotStaged); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if u, err := d.BucketUsage(t.Context(), "b"); err != nil || u != (Usage{Bytes: 400 * 100, Objects: 400}) {
		t.Fatalf("usage %+v, %v; want 400 objects of 100 bytes", u, err)
	}
	if err := d.meta.db.Compact(t.Context(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	v, closer, err := d.meta.Get(usageKey("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if u, err := decodeUsage(v); len(v) != usageDeltaSize || err != nil || u.Objects != 400 {
		t.Fatalf("after a compaction the usage is %d bytes (%+v, %v); want one folded delta", len(v), u, err)
	}
}

// TestUsageCountedOnceForAnOlderDrive: a drive written before usage was
// kept (no usage keys, no mark) is counted when it opens, once.
func TestUsageCountedOnceForAnOlderDrive(t *testing.T) {
	root := t.TempDir()
	d := openTestDrive(t, root, nil)
	if err := d.MakeBucket(t.Context(), BucketInfo{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		r := &Record{VersionID: [16]byte(uuid.New()), ModTime: int64(i + 1), Size: int64(i)}
		if _, err := d.PutVersion(t.Context(), "b", fmt.Sprint(i%7), r, NotStaged); err != nil {
			t.Fatal(err)
		}
	}
	want := walkedUsage(t, d)
	// What a build before this one leaves: no counters, no mark.
	b := d.meta.NewBatch()
	if err := b.DeleteRange(usagePrefix, prefixEnd(usagePrefix), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(usageCountedKey, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.meta.Commit(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTestDrive(t, root, nil)
	if got, _ := d.BucketUsage(t.Context(), "b"); got != want || want.Objects != 30 {
		t.Fatalf("counted at open: %+v; the versions hold %+v", got, want)
	}
	if err := d.DeleteBucket(t.Context(), "b", true); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.BucketUsage(t.Context(), "b"); got != (Usage{}) {
		t.Fatalf("a deleted bucket keeps usage %+v", got)
	}
}
