package drive

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// switchable injects errorfs.ErrInjected into metadata-store operations of
// one kind (reads or writes) while it is on.
type switchable struct {
	on   atomic.Bool
	kind errorfs.OpReadWrite
}

func (s *switchable) String() string { return "switchable" }

func (s *switchable) MaybeError(op errorfs.Op) error {
	if s.on.Load() && op.Kind.ReadOrWrite() == s.kind {
		return errorfs.ErrInjected
	}
	return nil
}

// TestMetadataStoreUsesTheSeam: the metadata store lives on the filesystem
// Options.MetaFS names (an in-memory one here: nothing of it reaches the
// disk), and its messages go to Options.Log.
func TestMetadataStoreUsesTheSeam(t *testing.T) {
	root := t.TempDir()
	mem := pebblevfs.NewMem()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := OpenLocal(root, Options{MetaFS: mem, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MakeBucket(t.Context(), BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.StatBucket(t.Context(), "bkt"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(filepath.Join(root, metaDir, "meta")); err == nil && len(ents) > 0 {
		t.Fatalf("the metadata store wrote %d entries to the disk, not to MetaFS", len(ents))
	}
	if ents, err := mem.List(filepath.Join(root, metaDir, "meta")); err != nil || len(ents) == 0 {
		t.Fatalf("MetaFS holds no store: %v %v", ents, err)
	}
	if !strings.Contains(logs.String(), "metadata store") || !strings.Contains(logs.String(), root) {
		t.Fatalf("the store's messages did not reach the log:\n%s", logs.String())
	}
}

// TestMetadataFaultsAreErrors: a metadata store whose files cannot be
// written fails to open with an error naming the drive, and one whose
// reads fail answers errors to lookups, in both cases without taking the
// process down.
func TestMetadataFaultsAreErrors(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))

	writes := &switchable{kind: errorfs.OpIsWrite}
	writes.on.Store(true)
	root := t.TempDir()
	_, err := OpenLocal(root, Options{MetaFS: errorfs.Wrap(pebblevfs.NewMem(), writes), Log: quiet})
	if err == nil || !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), root) {
		t.Fatalf("open over a failing store: %v", err)
	}

	reads := &switchable{kind: errorfs.OpIsRead}
	mem := pebblevfs.NewMem()
	root = t.TempDir()
	d, err := OpenLocal(root, Options{MetaFS: errorfs.Wrap(mem, reads), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Enough buckets after "b" that its record's block is not the one
	// the open reads (the drive's usage mark, which sorts after them).
	names := []string{"a", "b"}
	for i := range 2000 {
		names = append(names, fmt.Sprintf("c%04d", i))
	}
	for _, name := range names {
		if err := d.MakeBucket(t.Context(), BucketInfo{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.meta.db.Flush(); err != nil { // the records now live in a table file
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = OpenLocal(root, Options{MetaFS: errorfs.Wrap(mem, reads), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	reads.on.Store(true)
	if _, err := d.StatBucket(t.Context(), "b"); err == nil {
		t.Fatal("a lookup over failing reads succeeded")
	}
	reads.on.Store(false)
	if _, err := d.StatBucket(t.Context(), "b"); err != nil {
		t.Fatalf("after the fault cleared: %v", err)
	}
}

// TestStoreFailureTakesTheDriveOffline: a metadata store that cannot write
// its log fails fatally in pebble's terms. The drive answers
// ErrStoreFailed to the write that met it (pebble's commit would otherwise
// report success) and to every call after, the process goes on, and the
// drive opens again once its disk works.
func TestStoreFailureTakesTheDriveOffline(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	writes := &switchable{kind: errorfs.OpIsWrite}
	mem := pebblevfs.NewMem()
	root := t.TempDir()
	opts := Options{MetaFS: errorfs.Wrap(mem, writes), Log: log}
	d, err := OpenLocal(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MakeBucket(t.Context(), BucketInfo{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	if !d.Online() {
		t.Fatal("a working drive says it is offline")
	}
	writes.on.Store(true)
	err = d.MakeBucket(t.Context(), BucketInfo{Name: "lost"})
	if !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("a write to a store whose log fails: %v, want ErrStoreFailed", err)
	}
	if d.Online() || d.Failed() == nil {
		t.Fatal("the drive still says it is online")
	}
	writes.on.Store(false) // the disk is fine again: the store stays failed
	if _, err := d.StatBucket(t.Context(), "kept"); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("a read from a failed store: %v, want ErrStoreFailed", err)
	}
	if _, err := d.ListBuckets(t.Context()); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("a walk of a failed store: %v, want ErrStoreFailed", err)
	}
	if !strings.Contains(logs.String(), "metadata store failed") {
		t.Fatalf("the failure was not logged:\n%s", logs.String())
	}
	_ = d.Close() // may report the failure; must return
	d, err = OpenLocal(root, opts)
	if err != nil {
		t.Fatalf("reopening once the disk works: %v", err)
	}
	defer d.Close()
	if _, err := d.StatBucket(t.Context(), "kept"); err != nil {
		t.Fatalf("an acknowledged bucket after reopening: %v", err)
	}
}
