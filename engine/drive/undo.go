package drive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Undoing a replaced null version.
//
// A write of a null version replaces the null version a drive holds (an
// overwrite in an unversioned bucket). When the write then misses write
// quorum, the erasure layer rolls it back on the drives that committed it
// (RollbackVersion), and the version it replaced must come back there:
// otherwise the object is gone from those drives and lives on only on the
// drives that missed the write, which may be fewer than the set needs to
// read it. So a drive keeps what a write replaced for UndoWindow: the
// replaced record under an undo key, committed in the write's own batch,
// and its shard files where they are. A rollback within the window puts
// the record back; past it, a sweep drops the key and removes the files.
//
//	r\x00<the write's stamp, 8 bytes big-endian><bucket>\x00<object>  an undo entry
//
// An entry is a flags byte, then the replaced record (undoHasRecord). A
// write rolled back after another write replaced it here has its entry
// marked undoRolledBack (made if it had none), so that the rollback of
// that other write brings back what the first one replaced, not the first
// write. Keys sort by the write's stamp, so a sweep reads only expired
// entries.

// UndoWindow is how long a drive keeps a null version a write replaced. A
// rollback comes once the writer has its drives' answers, within the
// request's time; a minute is far beyond that, and bounds the space that
// overwrites of large objects hold on to. A variable for tests.
var UndoWindow = time.Minute

// sweepEvery is how often a drive sweeps expired undo entries. A variable
// for tests.
var sweepEvery = 10 * time.Second

const (
	undoHasRecord  = 1 << 0
	undoRolledBack = 1 << 1
	undoKnownFlags = undoHasRecord | undoRolledBack
)

var undoPrefix = []byte{'r', sep}

func undoKey(stamp int64, bucket, object string) []byte {
	k := binary.BigEndian.AppendUint64(append([]byte(nil), undoPrefix...), uint64(stamp))
	return append(append(append(k, bucket...), sep), object...)
}

func parseUndoKey(k []byte) (bucket, object string, ok bool) {
	if len(k) < len(undoPrefix)+8 {
		return "", "", false
	}
	b, o, ok := bytes.Cut(k[len(undoPrefix)+8:], []byte{sep})
	return string(b), string(o), ok
}

// undoEntry is a decoded undo entry.
type undoEntry struct {
	rolledBack bool
	replaced   *Record // nil: the write replaced nothing
}

func (e undoEntry) marshal() []byte {
	flags := byte(0)
	if e.rolledBack {
		flags |= undoRolledBack
	}
	if e.replaced == nil {
		return []byte{flags}
	}
	return MarshalRecord([]byte{flags | undoHasRecord}, e.replaced)
}

func unmarshalUndo(v []byte) (undoEntry, error) {
	if len(v) == 0 || v[0]&^undoKnownFlags != 0 {
		return undoEntry{}, fmt.Errorf("%w: bad undo entry", ErrCorruptRecord)
	}
	e := undoEntry{rolledBack: v[0]&undoRolledBack != 0}
	if v[0]&undoHasRecord == 0 {
		return e, nil
	}
	r, err := UnmarshalRecord(v[1:])
	e.replaced = r
	return e, err
}

// readUndo reads the entry under key (ok false when there is none).
func readUndo(kv kvReader, key []byte) (e undoEntry, ok bool, err error) {
	v, closer, err := kv.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return e, false, nil
	}
	if err != nil {
		return e, false, err
	}
	defer closer.Close()
	e, err = unmarshalUndo(v)
	return e, err == nil, err
}

// sameWrite reports whether two records are one write stamped twice
// (erasure.commitVersion stamps a write again when a drive held a newer
// version): every write has a data directory ID of its own. (Writers of
// builds before undo entries leave inline objects and delete markers
// without one.)
func sameWrite(a, b *Record) bool {
	return a.DataDir == b.DataDir && a.DataDir != [16]byte{}
}

// keepReplaced records in t's batch that rec replaced the null version
// existing, for a rollback of rec to put it back.
func (t *objectTxn) keepReplaced(rec, existing *Record) error {
	key := undoKey(rec.ModTime, t.o.bucket, t.o.name)
	if !sameWrite(rec, existing) {
		return t.b.Set(key, undoEntry{replaced: existing}.marshal(), nil)
	}
	// The same write stamped again: a rollback brings back what its first
	// stamp replaced, if anything.
	old := undoKey(existing.ModTime, t.o.bucket, t.o.name)
	e, ok, err := readUndo(t.b, old)
	if err != nil || !ok {
		return err
	}
	if err := t.b.Delete(old, nil); err != nil {
		return err
	}
	return t.b.Set(key, e.marshal(), nil)
}

// markRolledBack marks the entry of rec, a null version rolled back here
// after another write replaced it (made if rec replaced nothing).
func (t *objectTxn) markRolledBack(rec *Record) error {
	key := undoKey(rec.ModTime, t.o.bucket, t.o.name)
	e, _, err := readUndo(t.b, key)
	if err != nil {
		return err
	}
	e.rolledBack = true
	return t.b.Set(key, e.marshal(), nil)
}

// restoreReplaced puts back, in t's batch, the null version that removed
// (a null version being rolled back) replaced, if the drive still keeps
// it; a version replaced by removed that was itself rolled back is
// skipped for what it replaced. It returns the version put back and the
// rolled-back versions skipped (whose files the caller removes).
func (t *objectTxn) restoreReplaced(removed *Record) (restored *Record, skipped []*Record, err error) {
	if removed.VersionID != ([16]byte{}) {
		return nil, nil, nil
	}
	key := undoKey(removed.ModTime, t.o.bucket, t.o.name)
	for {
		e, ok, err := readUndo(t.b, key)
		if err != nil || !ok {
			return nil, skipped, err
		}
		if err := t.b.Delete(key, nil); err != nil {
			return nil, skipped, err
		}
		prev := e.replaced
		if prev == nil {
			return nil, skipped, nil
		}
		key = undoKey(prev.ModTime, t.o.bucket, t.o.name)
		if next, ok, err := readUndo(t.b, key); err != nil {
			return nil, skipped, err
		} else if ok && next.rolledBack {
			skipped = append(skipped, prev)
			continue
		}
		if hasShardFiles(prev) && !t.d.hasShards(prev.DataDir) {
			return nil, skipped, nil // swept meanwhile: nothing to put back
		}
		res, err := t.put(prev)
		if err != nil || res.Superseded {
			return nil, skipped, err
		}
		return prev, skipped, nil
	}
}

// exists reports whether path can be found (an error finding it counts as
// not).
func (d *Local) exists(path string) bool {
	_, err := d.fs.Stat(path)
	return err == nil
}

// hasShardFiles reports whether r's data lives in shard files.
func hasShardFiles(r *Record) bool {
	return !r.IsInline() && !r.IsDeleteMarker() && r.DataDir != [16]byte{}
}

// removeUnreferenced removes the shard files of records that are gone,
// unless the object's null version uses them (a write stamped again keeps
// its data directory). The caller holds the object's lock.
func (d *Local) removeUnreferenced(bucket, object string, gone ...*Record) {
	o, err := d.readObject(bucket, object)
	if err != nil {
		return // keep the files rather than guess
	}
	null, _, err := d.find(d.meta, o, [16]byte{})
	if err != nil {
		return
	}
	var current [16]byte
	if null != nil {
		current = null.DataDir
	}
	for _, r := range gone {
		if r != nil && r.DataDir != current {
			d.removeData(r)
		}
	}
}

// sweeper sweeps expired undo entries every sweepEvery until stop closes.
func (d *Local) sweeper(stop <-chan struct{}) {
	defer close(d.swept)
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			if err := d.sweepUndo(now); err != nil && d.Failed() == nil {
				d.log.Warn("sweeping replaced versions", "err", err)
			}
		}
	}
}

// sweepUndo drops the undo entries older than UndoWindow and removes the
// shard files of the versions they kept.
func (d *Local) sweepUndo(now time.Time) error {
	upper := binary.BigEndian.AppendUint64(append([]byte(nil), undoPrefix...), uint64(now.Add(-UndoWindow).UnixNano()))
	for {
		var keys [][]byte
		it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: undoPrefix, UpperBound: upper})
		if err != nil {
			return err
		}
		for it.First(); it.Valid() && len(keys) < 512; it.Next() {
			keys = append(keys, bytes.Clone(it.Key()))
		}
		if err := d.meta.after(errors.Join(it.Error(), it.Close())); err != nil {
			return err
		}
		for _, k := range keys {
			if err := d.dropUndo(k); err != nil {
				return err
			}
		}
		if len(keys) < 512 {
			return nil
		}
	}
}

// dropUndo drops one undo entry and removes the files of the version it
// kept, under its object's lock so that no rollback puts the version back
// meanwhile.
func (d *Local) dropUndo(k []byte) error {
	bucket, object, ok := parseUndoKey(k)
	if !ok {
		return d.meta.Delete(k, pebble.NoSync)
	}
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	e, ok, err := readUndo(d.meta, k)
	if !ok && err == nil {
		return nil
	}
	// Unsynced: an entry a crash brings back is dropped again, and its
	// files' removal is harmless twice.
	if derr := d.meta.Delete(k, pebble.NoSync); derr != nil {
		return derr
	}
	if err == nil && e.replaced != nil {
		d.removeUnreferenced(bucket, object, e.replaced)
	}
	return nil
}
