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
//	r\x00<the write's stamp, 8 bytes big-endian><bucket>\x00<object>  the record it replaced
//
// Keys sort by the write's stamp, so a sweep reads only expired entries.

// UndoWindow is how long a drive keeps a null version a write replaced. A
// rollback comes once the writer has its drives' answers, within the
// request's time; a minute is far beyond that, and bounds the space that
// overwrites of large objects hold on to. A variable for tests.
var UndoWindow = time.Minute

// sweepEvery is how often writes start a sweep of expired undo entries.
const sweepEvery = 10 * time.Second

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

// sameWrite reports whether two records are one write stamped twice
// (erasure.commitVersion stamps a write again when a drive held a newer
// version): every write has a data directory ID of its own.
func sameWrite(a, b *Record) bool {
	return a.DataDir == b.DataDir && a.DataDir != [16]byte{}
}

// keepReplaced records in t's batch that rec replaced the null version
// existing, for a rollback of rec to put it back.
func (t *objectTxn) keepReplaced(rec, existing *Record) error {
	key := undoKey(rec.ModTime, t.o.bucket, t.o.name)
	if !sameWrite(rec, existing) {
		return t.b.Set(key, MarshalRecord(nil, existing), nil)
	}
	// The same write stamped again: a rollback brings back what its first
	// stamp replaced, if anything.
	old := undoKey(existing.ModTime, t.o.bucket, t.o.name)
	v, closer, err := t.d.meta.Get(old)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if err := t.b.Delete(old, nil); err != nil {
		return err
	}
	return t.b.Set(key, v, nil)
}

// restoreReplaced puts back, in t's batch, the null version that removed
// (a null version being rolled back) replaced, if the drive still keeps
// it. It returns the version put back.
func (t *objectTxn) restoreReplaced(removed *Record) (*Record, error) {
	if removed.VersionID != ([16]byte{}) {
		return nil, nil
	}
	key := undoKey(removed.ModTime, t.o.bucket, t.o.name)
	v, closer, err := t.d.meta.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prev, err := UnmarshalRecord(v)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("drive %s: undo record of %s/%s: %w", t.d.root, t.o.bucket, t.o.name, err)
	}
	if err := t.b.Delete(key, nil); err != nil {
		return nil, err
	}
	if hasShardFiles(prev) && !t.d.exists(t.d.dataDirPath(prev.DataDir)) {
		return nil, nil // swept meanwhile: nothing to put back
	}
	if _, err := t.put(prev); err != nil {
		return nil, err
	}
	return prev, nil
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

// maybeSweep starts a sweep of expired undo entries when none ran for
// sweepEvery.
func (d *Local) maybeSweep() {
	now := time.Now().UnixNano()
	last := d.lastSweep.Load()
	if now-last < int64(sweepEvery) || !d.lastSweep.CompareAndSwap(last, now) {
		return
	}
	d.sweepMu.Lock()
	defer d.sweepMu.Unlock()
	if d.closing {
		return
	}
	d.sweeps.Add(1)
	go func() {
		defer d.sweeps.Done()
		if err := d.sweepUndo(time.Now()); err != nil && d.Failed() == nil {
			d.log.Warn("sweeping replaced versions", "err", err)
		}
	}()
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

// dropUndo drops one undo entry, under its object's lock so that no
// rollback puts the version back while its files go.
func (d *Local) dropUndo(k []byte) error {
	bucket, object, ok := parseUndoKey(k)
	if !ok {
		return d.meta.Delete(k, pebble.NoSync)
	}
	lock := d.lockFor(bucket, object)
	lock.Lock()
	v, closer, err := d.meta.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		lock.Unlock()
		return nil
	}
	if err != nil {
		lock.Unlock()
		return err
	}
	prev, perr := UnmarshalRecord(v)
	closer.Close()
	// Unsynced: an entry a crash brings back is dropped again, and its
	// files' removal is harmless twice.
	err = d.meta.Delete(k, pebble.NoSync)
	lock.Unlock()
	if err == nil && perr == nil {
		d.removeData(prev)
	}
	return err
}
