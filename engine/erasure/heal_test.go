package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// replaceDrive wipes the drive at pos of set 0 and puts a fresh, formatted
// one in its place (a replaced disk).
func (tp *testPool) replaceDrive(t *testing.T, pos int) {
	t.Helper()
	old := tp.drives[pos]
	_ = old.Close()
	if err := os.RemoveAll(tp.roots[pos]); err != nil {
		t.Fatal(err)
	}
	d, err := drive.OpenLocal(tp.roots[pos], drive.Options{ShardFiles: testShardFiles()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	tp.drives[pos] = d
	tp.Sets()[0].SetDrive(pos, d)
}

func (tp *testPool) offline(t *testing.T, positions ...int) func() {
	set := tp.Sets()[0]
	saved := set.Drives()
	for _, p := range positions {
		set.SetDrive(p, nil)
	}
	return func() {
		for p := range saved {
			set.SetDrive(p, saved[p])
		}
	}
}

func TestHealRebuildsAReplacedDrive(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	objs := map[string][]byte{}
	for _, size := range []int{0, 10, 4096, DefaultInlineLimit + 1, 3<<20 + 5} {
		key := fmt.Sprintf("o%d", size)
		objs[key] = randomBytes(size)
		tp.put(t, key, objs[key])
	}
	if _, err := tp.DeleteObject(t.Context(), "bk", "o10", nil, objlayer.DeleteVersioned); err != nil { // a delete marker heals too
		t.Fatal(err)
	}
	tp.replaceDrive(t, 1)
	if n, err := tp.HealBuckets(t.Context()); err != nil || n == 0 {
		t.Fatalf("bucket records not healed onto the new drive: %d %v", n, err)
	}
	set := tp.Sets()[0]
	for key := range objs {
		res, err := set.HealObject(t.Context(), "bk", key, false)
		if err != nil {
			t.Fatalf("heal %s: %v", key, err)
		}
		if res.Shards == 0 {
			t.Fatalf("heal %s wrote nothing onto the new drive", key)
		}
		// A second heal finds nothing to do.
		if res, _ := set.HealObject(t.Context(), "bk", key, true); res.Shards != 0 {
			t.Fatalf("heal %s is not idempotent: %+v", key, res)
		}
	}
	// Only the new drive and one other remain: every object reads back.
	restore := tp.offline(t, 2, 3)
	defer restore()
	for key, want := range objs {
		if key == "o10" {
			if info, err := tp.StatObject(t.Context(), "bk", key, nil); err != nil || !info.DeleteMarker {
				t.Fatalf("delete marker not healed: %+v %v", info, err)
			}
			continue
		}
		if got := tp.get(t, key); !bytes.Equal(got, want) {
			t.Fatalf("%s after heal: wrong bytes", key)
		}
	}
}

func TestDeepHealRepairsCorruptShards(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	data := randomBytes(2<<20 + 9)
	tp.put(t, "big", data)
	corrupted := 0
	_ = filepath.Walk(filepath.Join(tp.roots[3], ".strata", "data"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			b, _ := os.ReadFile(p)
			b[10] ^= 1
			corrupted++
			return os.WriteFile(p, b, 0o644)
		}
		return nil
	})
	if corrupted == 0 {
		t.Fatal("nothing to corrupt")
	}
	set := tp.Sets()[0]
	if res, _ := set.HealObject(t.Context(), "bk", "big", false); res.Shards != 0 {
		t.Fatal("a shallow heal cannot see bitrot, yet it rewrote shards")
	}
	res, err := set.HealObject(t.Context(), "bk", "big", true)
	if err != nil || res.Shards != 1 {
		t.Fatalf("deep heal: %+v %v", res, err)
	}
	restore := tp.offline(t, 0, 1)
	defer restore()
	if got := tp.get(t, "big"); !bytes.Equal(got, data) {
		t.Fatal("bytes wrong after repairing the corrupt drive")
	}
}

func TestHealPurgesDanglingVersionsOnlyWhenOld(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	// A version on one drive only: what a crashed, never-acknowledged
	// write leaves.
	rec := &drive.Record{ModTime: time.Now().UnixNano(), VersionID: uuid.New(), Flags: drive.FlagDeleteMarker}
	if _, err := tp.drives[0].PutVersion(t.Context(), "bk", "ghost", rec, drive.NotStaged); err != nil {
		t.Fatal(err)
	}
	set := tp.Sets()[0]
	res, _ := set.HealObject(t.Context(), "bk", "ghost", false)
	if res.Purged != 0 || res.Unrecoverable != 1 {
		t.Fatalf("a young dangling version must be left alone (it may still be committing): %+v", res)
	}
	old := *rec
	old.VersionID = uuid.New()
	old.ModTime = time.Now().Add(-2 * DanglingGrace).UnixNano()
	if _, err := tp.drives[0].PutVersion(t.Context(), "bk", "ghost", &old, drive.NotStaged); err != nil {
		t.Fatal(err)
	}
	res, _ = set.HealObject(t.Context(), "bk", "ghost", false)
	if res.Purged != 1 {
		t.Fatalf("an old dangling version was not purged: %+v", res)
	}
	if _, err := tp.drives[0].GetVersion(t.Context(), "bk", "ghost", &old.VersionID); !errors.Is(err, drive.ErrVersionNotFound) {
		t.Fatalf("purged version still on the drive: %v", err)
	}
}

func TestHealerQueueAndDriveRebuild(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	// A write that misses a drive is queued and healed.
	restore := tp.offline(t, 2)
	data := randomBytes(500 << 10)
	tp.put(t, "partial", data)
	restore()
	waitUntil(t, func() bool { return h.Status().ShardsHealed >= 1 })
	if _, err := tp.drives[2].GetVersion(ctx, "bk", "partial", nil); err != nil {
		t.Fatalf("partial write not healed onto the drive that missed it: %v", err)
	}
	// A replaced drive is rebuilt in the background.
	for i := 0; i < 20; i++ {
		tp.put(t, fmt.Sprintf("k%02d", i), randomBytes(1000*i))
	}
	tp.replaceDrive(t, 0)
	h.HealDrive(ctx, 0, 0)
	if !h.Healing(0, 0) && !h.Status().Drives[0].Done {
		t.Fatal("drive rebuild not reported")
	}
	waitUntil(t, func() bool { st := h.Status(); return len(st.Drives) == 1 && st.Drives[0].Done })
	if n := h.Status().Drives[0].Objects; n < 21 {
		t.Fatalf("rebuild visited %d objects, want 21", n)
	}
	// A full queue drops (the scanner catches up) instead of blocking.
	h2 := NewHealer(tp.Pool, HealerOptions{QueueSize: 1, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	h2.Enqueue("bk", "a")
	h2.Enqueue("bk", "b")
	h2.Enqueue("bk", "a")
	if st := h2.Status(); st.Queued != 1 || st.Dropped != 1 {
		t.Fatalf("queue accounting: %+v", st)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFullDrive fills drives through the filesystem seam: one full drive
// does not stop writes (quorum) and is healed once it has room; a full
// set refuses the write and shows nothing.
func TestFullDrive(t *testing.T) {
	fp := newFaultPool(t, 4, 2)
	fss, locals, set, pool := fp.fss, fp.drives, fp.set, fp.Pool
	data := randomBytes(600 << 10)
	fss[1].SetFree(1000)
	if _, err := pool.PutObject(t.Context(), "bk", "one-full", bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{}); err != nil {
		t.Fatalf("one full drive of four must not stop a write: %v", err)
	}
	if u, _ := locals[1].DiskInfo(t.Context()); u.Free > 1000 {
		t.Fatalf("the seam's free space is not reported: %d", u.Free)
	}
	fss[1].SetFree(-1)
	if res, err := set.HealObject(t.Context(), "bk", "one-full", false); err != nil || res.Shards != 1 {
		t.Fatalf("heal after space came back: %+v %v", res, err)
	}
	for _, f := range fss {
		f.SetFree(1000)
	}
	_, err := pool.PutObject(t.Context(), "bk", "all-full", bytes.NewReader(data), int64(len(data)), objlayer.PutOptions{})
	if !errors.Is(err, objlayer.ErrWriteQuorum) {
		t.Fatalf("write to a full set: %v, want ErrWriteQuorum", err)
	}
	for _, f := range fss {
		f.SetFree(-1)
	}
	if _, err := pool.StatObject(t.Context(), "bk", "all-full", nil); !errors.Is(err, objlayer.ErrObjectNotFound) {
		t.Fatalf("a write refused for space is visible: %v", err)
	}
	if got := getObject(t, pool, "one-full", nil); !bytes.Equal(got, data) {
		t.Fatal("object written while a drive was full: wrong bytes")
	}
}

// flaky is a drive that can be unreachable while present (a remote one).
type flaky struct {
	Drive
	up *atomic.Bool
}

func (f flaky) Online() bool { return f.up.Load() }

func (f flaky) Versions(ctx context.Context, bucket, object string) ([]*drive.Record, error) {
	if !f.up.Load() {
		return nil, errors.New("node offline")
	}
	return f.Drive.Versions(ctx, bucket, object)
}

func (f flaky) PutVersion(ctx context.Context, bucket, object string, rec *drive.Record, stage [16]byte) (drive.PutResult, error) {
	if !f.up.Load() {
		return drive.PutResult{}, errors.New("node offline")
	}
	return f.Drive.PutVersion(ctx, bucket, object, rec, stage)
}

func TestHealerRetriesWhenADriveReturns(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	up := &atomic.Bool{}
	up.Store(true)
	set := tp.Sets()[0]
	set.SetDrive(3, flaky{Drive: tp.drives[3], up: up})
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	up.Store(false)
	tp.put(t, "missed", randomBytes(1000)) // 3 of 4: partial write, queued
	waitUntil(t, func() bool { return h.Status().Deferred == 1 })
	up.Store(true)
	waitUntil(t, func() bool { return h.Status().Deferred == 0 && h.Status().ShardsHealed == 1 })
	if _, err := tp.drives[3].GetVersion(ctx, "bk", "missed", nil); err != nil {
		t.Fatalf("the returned drive was not healed: %v", err)
	}
}

// TestHealerRetriesADriveThatNeverLookedAway: a node restarted between
// two pings never looks offline to its peers, so no return is seen; the
// objects its drive missed are still healed within retryEvery seconds
// (the gate waits on them), not at the next 30 s sweep.
func TestHealerRetriesADriveThatNeverLookedAway(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	up := &atomic.Bool{}
	up.Store(true)
	tp.Sets()[0].SetDrive(3, alwaysOnline{flaky{Drive: tp.drives[3], up: up}})
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	up.Store(false)
	tp.put(t, "missed", randomBytes(1000))
	waitUntil(t, func() bool { return h.Status().Deferred == 1 })
	up.Store(true)
	began := time.Now()
	waitUntil(t, func() bool { return len(h.Behind()) == 0 })
	if took := time.Since(began); took > (retryEvery+2)*time.Second {
		t.Fatalf("healed after %s, want within %d s", took, retryEvery+2)
	}
	if _, err := tp.drives[3].GetVersion(ctx, "bk", "missed", nil); err != nil {
		t.Fatalf("the drive was not healed: %v", err)
	}
}

// alwaysOnline is a drive whose node always answers its pings.
type alwaysOnline struct{ flaky }

func (alwaysOnline) Online() bool { return true }

// TestHealerReportsDrivesBehind: a drive that missed a write while away
// is reported behind until the object is healed onto it (a maintenance
// gate must not count it as holding every object before then).
func TestHealerReportsDrivesBehind(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	up := &atomic.Bool{}
	up.Store(true)
	tp.Sets()[0].SetDrive(3, flaky{Drive: tp.drives[3], up: up})
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	if b := h.Behind(); len(b) != 0 {
		t.Fatalf("behind before anything was missed: %v", b)
	}
	up.Store(false)
	tp.put(t, "missed", randomBytes(1000))
	waitUntil(t, func() bool { return h.Status().Deferred == 1 })
	if b := h.Behind(); b[0] != 1<<3 {
		t.Fatalf("behind with drive 3 away: %v, want set 0: drive 3", b)
	}
	up.Store(true) // back, but still without the object until healed
	waitUntil(t, func() bool { return len(h.Behind()) == 0 })
	if _, err := tp.drives[3].GetVersion(ctx, "bk", "missed", nil); err != nil {
		t.Fatalf("reported caught up before the object was healed: %v", err)
	}
}

// TestDriveRebuildWaitsForQuorum: a drive rebuild started while its set
// lacks read quorum (its other nodes still starting) waits for it instead
// of stopping for good.
func TestDriveRebuildWaitsForQuorum(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	tp.put(t, "kept", randomBytes(1000))
	up := &atomic.Bool{}
	for pos := 1; pos < 4; pos++ {
		tp.Sets()[0].SetDrive(pos, flakyAll{flaky{Drive: tp.drives[pos], up: up}})
	}
	h := NewHealer(tp.Pool, HealerOptions{QueueSize: 10, BytesPerSecond: 1 << 30, ScanInterval: time.Hour}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.HealDrive(ctx, 0, 0)
	time.Sleep(200 * time.Millisecond)
	if st := h.Status().Drives[0]; st.Done || st.Error != "" || !h.Healing(0, 0) {
		t.Fatalf("rebuild without quorum: %+v, want it waiting", st)
	}
	if b := h.Behind(); b[0] != 1 {
		t.Fatalf("a drive being rebuilt is not reported behind: %v", b)
	}
	up.Store(true)
	waitUntil(t, func() bool { return h.Status().Drives[0].Done })
}

// flakyAll is flaky for every call a walk makes.
type flakyAll struct{ flaky }

func (f flakyAll) ListBuckets(ctx context.Context) ([]drive.BucketInfo, error) {
	if !f.up.Load() {
		return nil, errors.New("node offline")
	}
	return f.Drive.ListBuckets(ctx)
}

func (f flakyAll) StatBucket(ctx context.Context, name string) (drive.BucketInfo, error) {
	if !f.up.Load() {
		return drive.BucketInfo{}, errors.New("node offline")
	}
	return f.Drive.StatBucket(ctx, name)
}

func (f flakyAll) WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(string, []*drive.Record) bool) error {
	if !f.up.Load() {
		return errors.New("node offline")
	}
	return f.Drive.WalkObjects(ctx, bucket, prefix, startAfter, latestOnly, fn)
}

// keyMissedByDrive3 is a 2+2 set whose key "k", of size bytes, drive 3
// missed (it was away): what a heal writes to it. The test's heal hook is
// cleared when the test ends.
func keyMissedByDrive3(t *testing.T, size int) *testPool {
	t.Helper()
	tp := newTestPool(t, 1, 4, 2)
	restore := tp.offline(t, 3)
	tp.put(t, "k", randomBytes(size)) // drives 0, 1, 2
	restore()
	t.Cleanup(func() { healCommitHook.Store(nil) })
	return tp
}

// TestHealDoesNotBringBackADeletedVersion: a heal rebuilds a version for
// the drive that missed it; while it does, the object is overwritten and
// then deleted (unversioned), with another drive away for both, so that
// drive keeps the version. Written to its target after that, the version
// would be on two drives, a read quorum of this 2+2 set, and served again
// after an acknowledged DELETE. The heal must write nothing: the object
// stays deleted. Inline and shard-file objects.
func TestHealDoesNotBringBackADeletedVersion(t *testing.T) {
	for _, size := range []int{4096, DefaultInlineLimit + 1<<20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			tp := keyMissedByDrive3(t, size)

			hook := func() {
				healCommitHook.Store(nil)
				back := tp.offline(t, 2) // away for the overwrite and the delete
				tp.put(t, "k", randomBytes(100))
				if _, err := tp.DeleteObject(t.Context(), "bk", "k", nil, objlayer.DeleteUnversioned); err != nil {
					t.Fatal(err)
				}
				back()
			}
			healCommitHook.Store(&hook)
			if _, err := tp.Sets()[0].HealObject(t.Context(), "bk", "k", false); err != nil {
				t.Fatalf("heal: %v", err)
			}
			if healCommitHook.Load() != nil {
				t.Fatal("the heal never came to write drive 3 its missing version (the test's premise)")
			}
			for pos, d := range tp.drives {
				vs, err := d.Versions(t.Context(), "bk", "k")
				if err != nil {
					t.Fatal(err)
				}
				if pos != 2 && len(vs) > 0 {
					t.Errorf("drive %d holds %d version(s) of the deleted key after the heal", pos, len(vs))
				}
			}
			if _, _, err := tp.GetObject(t.Context(), &bytes.Buffer{}, "bk", "k", nil, 0, -1); !errors.Is(err, objlayer.ErrObjectNotFound) {
				t.Fatalf("GET after the delete: %v, want ErrObjectNotFound", err)
			}
		})
	}
}

// TestHealTakesBackAVersionDeletedAsItWrote: the delete reaches the drives
// the heal read the version from after the heal's check and before its
// second one (its drive writes straddle the heal's write): the heal takes
// the version back from the drive it wrote it to.
func TestHealTakesBackAVersionDeletedAsItWrote(t *testing.T) {
	for _, size := range []int{4096, DefaultInlineLimit + 1<<20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			tp := keyMissedByDrive3(t, size)

			checks := 0
			hook := func() {
				if checks++; checks != 2 {
					return
				}
				for pos := range 3 { // the delete's writes to the sources
					if _, err := tp.drives[pos].DeleteVersion(t.Context(), "bk", "k", [16]byte{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			healCommitHook.Store(&hook)
			if _, err := tp.Sets()[0].HealObject(t.Context(), "bk", "k", false); err != nil {
				t.Fatalf("heal: %v", err)
			}
			if checks != 2 {
				t.Fatalf("the heal checked %d times, want 2 (before and after its write)", checks)
			}
			for pos, d := range tp.drives {
				if vs, err := d.Versions(t.Context(), "bk", "k"); err != nil || len(vs) > 0 {
					t.Errorf("drive %d holds %d version(s) of the deleted key after the heal (%v)", pos, len(vs), err)
				}
			}
		})
	}
}
