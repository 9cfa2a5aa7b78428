package drive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// An object's versions live under one key, newest first:
//
//	o\x00<bucket>\x00<object>  -> [magic 0xD6][list version][count][len record]...
//
// One key per object makes the hot paths point operations: a GET or HEAD is
// one lookup, a PUT one read-modify-write of the same key, an overwrite
// replaces a value instead of leaving a tombstone for the next read to
// step over, and a listing reads one entry per object. Each record keeps its
// own checksum, so a damaged record is detected on its own.

const (
	versionsMagic   = 0xD6
	versionsVersion = 1
)

// EncodeVersions renders an object's versions (newest first), for the
// internode protocol.
func EncodeVersions(recs []*Record) []byte { return encodeVersions(recs) }

// DecodeVersions decodes up to limit versions (limit < 0: all).
func DecodeVersions(data []byte, limit int) ([]*Record, error) { return decodeVersions(data, limit) }

// encodeVersions renders an object's versions (newest first).
func encodeVersions(recs []*Record) []byte {
	out := []byte{versionsMagic, versionsVersion}
	out = binary.AppendUvarint(out, uint64(len(recs)))
	var buf []byte
	for _, r := range recs {
		buf = MarshalRecord(buf[:0], r)
		out = binary.AppendUvarint(out, uint64(len(buf)))
		out = append(out, buf...)
	}
	return out
}

// decodeVersions decodes up to limit versions (limit < 0: all) of a list.
func decodeVersions(data []byte, limit int) ([]*Record, error) {
	if len(data) < 3 || data[0] != versionsMagic {
		return nil, fmt.Errorf("%w: not a version list", ErrCorruptRecord)
	}
	if data[1] != versionsVersion {
		return nil, fmt.Errorf("%w: version list encoding %d, this build reads %d", ErrCorruptRecord, data[1], versionsVersion)
	}
	d := decoder{buf: data[2:]}
	n := d.count()
	if limit >= 0 && limit < n {
		n = limit
	}
	out := make([]*Record, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		size := d.length()
		if d.err != nil {
			break
		}
		r, err := UnmarshalRecord(d.buf[:size])
		if err != nil {
			return nil, err
		}
		d.buf = d.buf[size:]
		out = append(out, r)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, d.err)
	}
	return out, nil
}

// ErrSuperseded: the drive already held a newer null version of the object,
// so the write was dropped (last writer wins). The erasure layer does not
// report such a write as done: see erasure.Set.finishPut.
var ErrSuperseded = errors.New("a newer version of the object is committed")

// PutResult says what a PutVersion did.
type PutResult struct {
	// Superseded: the drive already held a newer null version, so this
	// (older) write was dropped: last writer wins.
	Superseded bool
	// Replaced is the null version this write replaced, if any; its data
	// directory is removed.
	Replaced *Record
}

// NotStaged is the stage ID of a record without staged shard files.
var NotStaged [16]byte

// loadVersions reads an object's versions (nil when it has none).
func (d *Local) loadVersions(bucket, object string, limit int) ([]*Record, error) {
	v, closer, err := d.meta.Get(objectKey(bucket, object))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	recs, err := decodeVersions(v, limit)
	if err != nil {
		return nil, fmt.Errorf("drive %s: %s/%s: %w", d.root, bucket, object, err)
	}
	return recs, nil
}

// storeVersions writes an object's versions (none: removes the key).
func (d *Local) storeVersions(bucket, object string, recs []*Record) error {
	if len(recs) == 0 {
		return d.meta.Delete(objectKey(bucket, object), d.writeOpts())
	}
	return d.meta.Set(objectKey(bucket, object), encodeVersions(recs), d.writeOpts())
}

// insertVersion adds rec to a version list (newest first). A null version
// replaces the list's null version unless that one is newer; a version
// already present (same ID and time) is replaced, as a heal does.
func insertVersion(recs []*Record, rec *Record) (out []*Record, res PutResult) {
	out = make([]*Record, 0, len(recs)+1)
	for _, r := range recs {
		switch {
		case r.VersionID == rec.VersionID && r.ModTime == rec.ModTime:
			continue // the same version, rewritten
		case r.VersionID == ([16]byte{}) && rec.VersionID == ([16]byte{}):
			if r.Newer(rec) {
				return recs, PutResult{Superseded: true}
			}
			res.Replaced = r
			continue
		}
		out = append(out, r)
	}
	i, _ := slices.BinarySearchFunc(out, rec, func(a, b *Record) int {
		if a.Newer(b) {
			return -1
		}
		return 1
	})
	return slices.Insert(out, i, rec), res
}

// PutVersion stores a version record. When its data lives in shard files
// staged under tmp/<stageID> (stageID not NotStaged), they are moved into
// place as the record's data directory first, so a record never points at
// missing data. (A PUT stages under the data directory's own name; a heal
// under a name of its own, so two heals of one object never mix files.)
// A null version replaces the existing null version unless that one is
// newer; then the write is dropped (Superseded) and its staged files are
// left for the writer to commit again or abort.
func (d *Local) PutVersion(ctx context.Context, bucket, object string, rec *Record, stageID [16]byte) (PutResult, error) {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()

	staged := stageID != NotStaged
	recs, err := d.loadVersions(bucket, object, -1)
	if err != nil {
		return PutResult{}, err
	}
	recs, res := insertVersion(recs, rec)
	if res.Superseded {
		// The staged files stay: the writer may stamp the version again
		// and commit it with them, or abort them (AbortStaged).
		return res, nil
	}
	if staged {
		if err := d.commitStaged(stageID, rec.DataDir); err != nil {
			return res, err
		}
	}
	if err := d.storeVersions(bucket, object, recs); err != nil {
		return res, fmt.Errorf("drive %s: committing record: %w", d.root, err)
	}
	if res.Replaced != nil && res.Replaced.DataDir != rec.DataDir {
		d.removeData(res.Replaced)
	}
	return res, nil
}

// SetVersionMeta replaces the metadata (tags, headers) of the version
// matching rec (same ID, time, ETag and data); its data is unchanged.
// ErrVersionNotFound when the drive holds no such version (it was replaced
// meanwhile).
func (d *Local) SetVersionMeta(ctx context.Context, bucket, object string, rec *Record, meta map[string]string) error {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	recs, err := d.loadVersions(bucket, object, -1)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(recs, func(r *Record) bool { return r.SameVersion(rec) })
	if i < 0 {
		return ErrVersionNotFound
	}
	recs[i].Meta = meta
	return d.storeVersions(bucket, object, recs)
}

// GetVersion returns one version of an object: the newest when versionID is
// nil, else the one with that ID (all zero = the null version).
func (d *Local) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*Record, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	limit := -1
	if versionID == nil {
		limit = 1
	}
	recs, err := d.loadVersions(bucket, object, limit)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if versionID == nil || r.VersionID == *versionID {
			return r, nil
		}
	}
	return nil, ErrVersionNotFound
}

// Versions returns every version of an object, newest first.
func (d *Local) Versions(ctx context.Context, bucket, object string) ([]*Record, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	return d.loadVersions(bucket, object, -1)
}

// DeleteVersion removes one version record and its data.
func (d *Local) DeleteVersion(ctx context.Context, bucket, object string, versionID [16]byte) (*Record, error) {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	recs, err := d.loadVersions(bucket, object, -1)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(recs, func(r *Record) bool { return r.VersionID == versionID })
	if i < 0 {
		return nil, ErrVersionNotFound
	}
	found := recs[i]
	if err := d.storeVersions(bucket, object, slices.Delete(recs, i, i+1)); err != nil {
		return nil, err
	}
	d.removeData(found)
	return found, nil
}

// removeData removes the shard files of a record that is gone. A failure
// leaves an orphan directory, which wastes space but is never read.
func (d *Local) removeData(r *Record) {
	if !r.IsInline() && r.DataDir != ([16]byte{}) {
		_ = d.fs.RemoveAll(d.dataDirPath(r.DataDir))
	}
}

// RollbackVersion removes rec if this drive still holds exactly it (a write
// that missed quorum is undone), leaving alone a newer record that replaced
// it meanwhile. It reports whether it removed anything.
func (d *Local) RollbackVersion(ctx context.Context, bucket, object string, rec *Record) (bool, error) {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	recs, err := d.loadVersions(bucket, object, -1)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(recs, func(r *Record) bool { return r.SameVersion(rec) })
	if i < 0 {
		return false, nil
	}
	cur := recs[i]
	if err := d.storeVersions(bucket, object, slices.Delete(recs, i, i+1)); err != nil {
		return false, err
	}
	d.removeData(cur)
	return true, nil
}

// WalkObjects calls fn, in key order, for each object of a bucket whose name
// starts with prefix and sorts after startAfter, with its versions newest
// first (only the newest when latestOnly), until fn returns false.
func (d *Local) WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(object string, versions []*Record) bool) error {
	bp := bucketObjectsPrefix(bucket)
	lower := append(slices.Clone(bp), prefix...)
	if startAfter != "" && startAfter >= prefix {
		lower = append(objectKey(bucket, startAfter), 0) // just past startAfter
	}
	upper := prefixEnd(append(slices.Clone(bp), prefix...))
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	limit := -1
	if latestOnly {
		limit = 1
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%walkCheck == 0 {
			if err := ended(ctx); err != nil {
				return err
			}
		}
		name := string(it.Key()[len(bp):])
		recs, err := decodeVersions(it.Value(), limit)
		if err != nil {
			return fmt.Errorf("drive %s: %s/%s: %w", d.root, bucket, name, err)
		}
		if len(recs) == 0 {
			continue
		}
		if !fn(name, recs) {
			return nil
		}
	}
	return d.meta.after(it.Error())
}
