package drive

import (
	"errors"
	"io"
	"os"
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

// TestWritesStartSweeps: an overwrite starts a sweep once none ran for
// sweepEvery, in the background, and Close waits for it.
func TestWritesStartSweeps(t *testing.T) {
	window := UndoWindow
	UndoWindow = time.Millisecond
	t.Cleanup(func() { UndoWindow = window })
	d := openTestDrive(t, t.TempDir(), nil)
	old := putShards(t, d, time.Now().UnixNano(), "old", [16]byte{})
	time.Sleep(5 * time.Millisecond)
	d.lastSweep.Store(0)
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
	_ = d.Close()
	d.lastSweep.Store(0)
	d.maybeSweep() // after Close: starts nothing
}
