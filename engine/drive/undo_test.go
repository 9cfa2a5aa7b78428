package drive

import (
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// putShards writes a null version of b/o whose shard file holds content,
// stamped at stamp (or, with dataDir set, the same write stamped again).
func putShards(t *testing.T, d *Local, stamp int64, content string, dataDir [16]byte) *Record {
	t.Helper()
	rec := &Record{ModTime: stamp, ETag: content, DataDir: dataDir}
	stage := NotStaged
	if dataDir == ([16]byte{}) {
		rec.DataDir = [16]byte(uuid.New())
		stage = rec.DataDir
		f, err := d.CreateStaged(t.Context(), stage, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, content); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if _, err := d.PutVersion(t.Context(), "b", "o", rec, stage); err != nil {
		t.Fatal(err)
	}
	return rec
}

// current is the ETag of b/o's null version and its shard's content ("" if
// none).
func current(t *testing.T, d *Local) (etag, shard string) {
	t.Helper()
	rec, err := d.GetVersion(t.Context(), "b", "o", nil)
	if errors.Is(err, ErrVersionNotFound) {
		return "", ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if rec.IsInline() {
		return rec.ETag, string(rec.Inline)
	}
	f, err := d.OpenShard(t.Context(), rec.DataDir, 1)
	if err != nil {
		t.Fatalf("%s: %v", rec.ETag, err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	return rec.ETag, string(b)
}

// TestRollbackPutsBackTheReplacedVersion: a write that replaced the null
// version and is rolled back (it missed write quorum) leaves the drive with
// the version it replaced, data included; before, the drive held neither.
func TestRollbackPutsBackTheReplacedVersion(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	now := time.Now().UnixNano()
	old := putShards(t, d, now, "old", [16]byte{})
	failed := putShards(t, d, now+1, "new", [16]byte{})
	if etag, _ := current(t, d); etag != "new" {
		t.Fatalf("after the overwrite: %q", etag)
	}
	if _, err := d.OpenShard(t.Context(), old.DataDir, 1); err != nil {
		t.Fatalf("the replaced version's files were removed at once: %v", err)
	}
	if removed, err := d.RollbackVersion(t.Context(), "b", "o", failed); err != nil || !removed {
		t.Fatalf("rollback: removed=%v err=%v", removed, err)
	}
	if etag, shard := current(t, d); etag != "old" || shard != "old" {
		t.Fatalf("after the rollback the drive holds %q (shard %q), want the replaced version back", etag, shard)
	}
	if _, err := d.OpenShard(t.Context(), failed.DataDir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rolled-back write's data stayed: %v", err)
	}

	// A write stamped again (a drive held a newer version meanwhile) is one
	// write: its rollback brings back what it replaced first, not itself.
	again := putShards(t, d, now+2, "again", [16]byte{})
	restamped := *again
	restamped.ModTime = now + 3
	putShards(t, d, restamped.ModTime, "again", again.DataDir)
	if _, err := d.RollbackVersion(t.Context(), "b", "o", &restamped); err != nil {
		t.Fatal(err)
	}
	if etag, shard := current(t, d); etag != "old" || shard != "old" {
		t.Fatalf("after rolling back a write stamped twice the drive holds %q (shard %q), want %q", etag, shard, "old")
	}

	// Inline versions and delete markers the same way.
	inline := &Record{ModTime: now + 4, ETag: "inline", Flags: FlagInline, Inline: []byte("inline"), DataDir: [16]byte(uuid.New())}
	if _, err := d.PutVersion(t.Context(), "b", "o", inline, NotStaged); err != nil {
		t.Fatal(err)
	}
	marker := &Record{ModTime: now + 5, Flags: FlagDeleteMarker, DataDir: [16]byte(uuid.New())}
	if _, err := d.PutVersion(t.Context(), "b", "o", marker, NotStaged); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "o", marker); err != nil {
		t.Fatal(err)
	}
	if etag, shard := current(t, d); etag != "inline" || shard != "inline" {
		t.Fatalf("after rolling back a delete marker the drive holds %q (%q)", etag, shard)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "o", inline); err != nil {
		t.Fatal(err)
	}
	if etag, shard := current(t, d); etag != "old" || shard != "old" {
		t.Fatalf("after rolling back the inline write the drive holds %q (%q)", etag, shard)
	}
}

// TestReplacedVersionsAreSwept: past UndoWindow, a replaced version's files
// go and a rollback has nothing to put back; within it, they stay.
func TestReplacedVersionsAreSwept(t *testing.T) {
	root := t.TempDir()
	d := openTestDrive(t, root, nil)
	now := time.Now()
	old := putShards(t, d, now.UnixNano(), "old", [16]byte{})
	newer := putShards(t, d, now.UnixNano()+1, "new", [16]byte{})
	if err := d.sweepUndo(now.Add(UndoWindow / 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenShard(t.Context(), old.DataDir, 1); err != nil {
		t.Fatalf("the replaced version's files went within the window: %v", err)
	}
	if err := d.sweepUndo(now.Add(UndoWindow + time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenShard(t.Context(), old.DataDir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced version's files outlived the window: %v", err)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "o", newer); err != nil {
		t.Fatal(err)
	}
	if etag, _ := current(t, d); etag != "" {
		t.Fatalf("a rollback past the window put back %q", etag)
	}

	// Entries of a drive closed within their window are swept when it opens
	// after it.
	gone := putShards(t, d, time.Now().Add(-2*UndoWindow).UnixNano(), "a", [16]byte{})
	putShards(t, d, time.Now().Add(-2*UndoWindow).UnixNano()+1, "b", [16]byte{})
	before, _ := d.GetVersion(t.Context(), "b", "o", nil)
	_ = d.Close()
	d = openTestDrive(t, root, nil)
	it, err := d.meta.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.SeekGE(undoPrefix); it.Valid() && len(it.Key()) > 1 && it.Key()[0] == 'r'; it.Next() {
		n++
	}
	_ = it.Close()
	if n != 0 {
		t.Fatalf("%d undo entries past their window survive a reopen", n)
	}
	if after, err := d.GetVersion(t.Context(), "b", "o", nil); err != nil || !after.SameVersion(before) {
		t.Fatalf("the current version changed at the sweep: %+v %v", after, err)
	}
	if _, err := d.OpenShard(t.Context(), gone.DataDir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced version's files outlived a reopen past the window: %v", err)
	}
}

// TestDrivesSweepInTheBackground: an open drive sweeps expired entries
// every sweepEvery, writes or none.
func TestDrivesSweepInTheBackground(t *testing.T) {
	window, every := UndoWindow, sweepEvery
	UndoWindow, sweepEvery = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { UndoWindow, sweepEvery = window, every })
	d := openTestDrive(t, t.TempDir(), nil)
	old := putShards(t, d, time.Now().UnixNano(), "old", [16]byte{})
	putShards(t, d, time.Now().UnixNano(), "new", [16]byte{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := d.OpenShard(t.Context(), old.DataDir, 1)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sweep removed the replaced version's files: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if etag, shard := current(t, d); etag != "new" || shard != "new" {
		t.Fatalf("the sweep touched the current version: %q %q", etag, shard)
	}
}

// TestSweepKeepsTheFilesOfAWriteStampedAgain: a write V that another write
// X replaced here, then stamped again over X (the other drives held X
// first), is current again with its first data directory; the sweep of
// X's entry, which kept V's first stamp, must not remove V's files.
func TestSweepKeepsTheFilesOfAWriteStampedAgain(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	now := time.Now()
	v := putShards(t, d, now.UnixNano(), "v", [16]byte{})
	putShards(t, d, now.UnixNano()+1, "x", [16]byte{})
	putShards(t, d, now.UnixNano()+2, "v", v.DataDir) // V again, no files staged
	if err := d.sweepUndo(now.Add(UndoWindow + time.Second)); err != nil {
		t.Fatal(err)
	}
	if etag, shard := current(t, d); etag != "v" || shard != "v" {
		t.Fatalf("after the sweep the drive holds %q (shard %q)", etag, shard)
	}
}

// TestRollbackOfTwoFailedWrites: writes V and X both miss quorum; this
// drive took V then X, and V's rollback arrived after X committed (it
// finds nothing to remove). X's rollback must bring back the object both
// replaced, not V, which was never acknowledged.
func TestRollbackOfTwoFailedWrites(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	now := time.Now().UnixNano()
	putShards(t, d, now, "old", [16]byte{})
	v := putShards(t, d, now+1, "v", [16]byte{})
	x := putShards(t, d, now+2, "x", [16]byte{})
	if removed, err := d.RollbackVersion(t.Context(), "b", "o", v); err != nil || removed {
		t.Fatalf("rollback of a write replaced since: removed=%v err=%v", removed, err)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "o", x); err != nil {
		t.Fatal(err)
	}
	if etag, shard := current(t, d); etag != "old" || shard != "old" {
		t.Fatalf("after both rollbacks the drive holds %q (shard %q), want %q", etag, shard, "old")
	}
	if _, err := d.OpenShard(t.Context(), v.DataDir, 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the files of the write skipped stayed: %v", err)
	}

	// V replaced nothing: X's rollback leaves no object.
	d2 := openTestDrive(t, t.TempDir(), nil)
	v = putShards(t, d2, now, "v", [16]byte{})
	x = putShards(t, d2, now+1, "x", [16]byte{})
	_, _ = d2.RollbackVersion(t.Context(), "b", "o", v)
	if _, err := d2.RollbackVersion(t.Context(), "b", "o", x); err != nil {
		t.Fatal(err)
	}
	if etag, _ := current(t, d2); etag != "" {
		t.Fatalf("after both rollbacks the drive holds %q, want nothing", etag)
	}
}

// TestRollbackOfANullVersionUnderNewerVersions: the null version rolled
// back is not the newest (a versioned write came after it) and the object
// has other older versions; the null version it replaced comes back.
func TestRollbackOfANullVersionUnderNewerVersions(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	now := time.Now().UnixNano()
	first := &Record{ModTime: now, ETag: "v1", VersionID: [16]byte(uuid.New()), Flags: FlagInline, DataDir: [16]byte(uuid.New())}
	if _, err := d.PutVersion(t.Context(), "b", "o", first, NotStaged); err != nil {
		t.Fatal(err)
	}
	putShards(t, d, now+1, "old", [16]byte{})
	failed := putShards(t, d, now+2, "new", [16]byte{})
	newest := &Record{ModTime: now + 3, ETag: "v4", VersionID: [16]byte(uuid.New()), Flags: FlagInline, DataDir: [16]byte(uuid.New())}
	if _, err := d.PutVersion(t.Context(), "b", "o", newest, NotStaged); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "o", failed); err != nil {
		t.Fatal(err)
	}
	recs, err := d.Versions(t.Context(), "b", "o")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.ETag)
	}
	if want := []string{"v4", "old", "v1"}; !slices.Equal(got, want) {
		t.Fatalf("versions after the rollback %v, want %v", got, want)
	}
}
