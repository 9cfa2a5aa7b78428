package drive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strata-storage/strata/engine/objlayer"
)

// An object's newest version lives under its head key; every older one
// under a key of its own, named by its version ID:
//
//	o\x00<bucket>\x00<object>               -> version list of the newest
//	                                          version, then [0xE1][older count]
//	v\x00<bucket>\x00<object>\x00<version ID> -> record of an older version
//
// The hot paths stay point operations whatever the number of versions: a
// GET or HEAD reads the head, a PUT reads the head and writes it (moving
// the version it replaces as newest to its own key), a listing of latest
// versions reads one head per object. A head is a version list of one
// record, so a build from before this layout reads an object's newest
// version from it (and ignores the count after it).
//
// The layout before kept all versions, newest first, in the head's list
// (no count after it). Such heads are still read as they are, and an
// object's versions move to their own keys at its first write. Each record
// keeps its own checksum, so a damaged record is detected on its own.

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
	recs, _, err := decodeList(data, limit, true)
	return recs, err
}

// decodeList decodes up to limit versions (limit < 0: all) of a list and
// returns what follows the last one decoded; inline data only withData.
func decodeList(data []byte, limit int, withData bool) ([]*Record, []byte, error) {
	if len(data) < 3 || data[0] != versionsMagic {
		return nil, nil, fmt.Errorf("%w: not a version list", ErrCorruptRecord)
	}
	if data[1] != versionsVersion {
		return nil, nil, fmt.Errorf("%w: version list encoding %d, this build reads %d", ErrCorruptRecord, data[1], versionsVersion)
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
		r, err := unmarshalRecord(d.buf[:size], withData)
		if err != nil {
			return nil, nil, err
		}
		d.buf = d.buf[size:]
		out = append(out, r)
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorruptRecord, d.err)
	}
	return out, d.buf, nil
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
	// Replaced is the null version this write replaced, if any. The drive
	// keeps it for UndoWindow, for a rollback of the write to put it back
	// (undo.go); then its data directory is removed.
	Replaced *Record
}

// NotStaged is the stage ID of a record without staged shard files.
var NotStaged [16]byte

// headExt follows the newest version in a head of this layout; the number
// of older versions (keys of their own) follows it.
const headExt = 0xE1

// object is what a drive holds of one object: its newest version and the
// number of older versions under keys of their own, or, for a head of the
// layout before (legacy), every older version.
type object struct {
	bucket, name string
	latest       *Record // nil: the drive holds no version
	older        int
	legacy       []*Record // the layout before: older versions, newest first
	isLegacy     bool
}

// readObject reads an object's head.
func (d *Local) readObject(bucket, name string) (*object, error) {
	return d.readObjectData(bucket, name, true)
}

// readObjectData is readObject with inline data only withData.
func (d *Local) readObjectData(bucket, name string, withData bool) (*object, error) {
	v, closer, err := d.meta.Get(objectKey(bucket, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return &object{bucket: bucket, name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return d.parseObject(bucket, name, v, withData)
}

// parseObject decodes an object's head (inline data only withData).
func (d *Local) parseObject(bucket, name string, v []byte, withData bool) (*object, error) {
	o := &object{bucket: bucket, name: name}
	recs, rest, err := decodeList(v, -1, withData)
	if err == nil && len(recs) == 0 {
		err = fmt.Errorf("%w: an empty version list", ErrCorruptRecord)
	}
	if err != nil {
		return nil, fmt.Errorf("drive %s: %s/%s: %w", d.root, bucket, name, err)
	}
	o.latest = recs[0]
	if len(rest) > 0 && rest[0] == headExt {
		n, k := binary.Uvarint(rest[1:])
		if k <= 0 || len(recs) != 1 || n > math.MaxInt32 {
			return nil, fmt.Errorf("drive %s: %s/%s: %w: bad head", d.root, bucket, name, ErrCorruptRecord)
		}
		o.older = int(n)
		return o, nil
	}
	o.isLegacy, o.legacy = true, recs[1:]
	o.older = len(o.legacy)
	return o, nil
}

// olderVersions reads an object's older versions, newest first (inline
// data only withData).
func (d *Local) olderVersions(kv kvReader, o *object, withData bool) ([]*Record, error) {
	if o.isLegacy {
		return o.legacy, nil
	}
	if o.older == 0 {
		return nil, nil
	}
	p := objectVersionsPrefix(o.bucket, o.name)
	it, err := kv.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*Record
	for it.First(); it.Valid(); it.Next() {
		r, err := unmarshalRecord(it.Value(), withData)
		if err != nil {
			return nil, fmt.Errorf("drive %s: %s/%s: %w", d.root, o.bucket, o.name, err)
		}
		out = append(out, r)
	}
	if err := d.meta.after(it.Error()); err != nil {
		return nil, err
	}
	sortNewestFirst(out)
	return out, nil
}

func sortNewestFirst(recs []*Record) {
	slices.SortStableFunc(recs, func(a, b *Record) int {
		switch {
		case a.Newer(b):
			return -1
		case b.Newer(a):
			return 1
		}
		return 0
	})
}

// allVersions is every version of an object, newest first (inline data
// only withData).
func (d *Local) allVersions(o *object, withData bool) ([]*Record, error) {
	if o.latest == nil {
		return nil, nil
	}
	older, err := d.olderVersions(d.meta, o, withData)
	if err != nil {
		return nil, err
	}
	return append([]*Record{o.latest}, older...), nil
}

// find returns the version with the given ID and whether it is the newest.
func (d *Local) find(kv kvReader, o *object, id [16]byte) (*Record, bool, error) {
	return d.findData(kv, o, id, true)
}

// findData is find with inline data only withData (o read likewise).
func (d *Local) findData(kv kvReader, o *object, id [16]byte, withData bool) (*Record, bool, error) {
	switch {
	case o.latest == nil:
		return nil, false, nil
	case o.latest.VersionID == id:
		return o.latest, true, nil
	case o.isLegacy:
		for _, r := range o.legacy {
			if r.VersionID == id {
				return r, false, nil
			}
		}
		return nil, false, nil
	case o.older == 0:
		return nil, false, nil
	}
	v, closer, err := kv.Get(versionKey(o.bucket, o.name, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	r, err := unmarshalRecord(v, withData)
	if err != nil {
		return nil, false, fmt.Errorf("drive %s: %s/%s: %w", d.root, o.bucket, o.name, err)
	}
	return r, false, nil
}

// objectTxn stages changes to one object's versions in a batch, which the
// caller commits (with whatever else the change needs) or discards. The
// batch is indexed: what the change reads (an older version, the next
// newest) it reads through the batch, its own changes included.
type objectTxn struct {
	d *Local
	b *indexedBatch
	o *object
	// delta is what the staged changes add to the bucket's usage, applied
	// to the drive's figures once the batch commits (commit).
	delta Usage
	// noSync: commit without waiting for the disk (objlayer.WithoutSync).
	noSync bool
	// heldBefore: put found a version of the same ID on the drive (a
	// write stamped again, a heal, a null version replaced), so the
	// record's events may be stored already (setEvents).
	heldBefore bool
}

// begin starts changing an object: an object in the layout before has its
// older versions moved to keys of their own in the same batch.
func (d *Local) begin(b *indexedBatch, o *object) (*objectTxn, error) {
	t := &objectTxn{d: d, b: b, o: o}
	if !o.isLegacy {
		return t, nil
	}
	// Keys already there count too: a roll-back to a build before this
	// layout leaves them (that build sees only the newest version).
	ids := map[[16]byte]bool{}
	p := objectVersionsPrefix(o.bucket, o.name)
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) == len(p)+16 {
			ids[[16]byte(k[len(p):])] = true
		}
	}
	if err := d.meta.after(errors.Join(it.Error(), it.Close())); err != nil {
		return nil, err
	}
	// Oldest first, so of two records with one ID the newer is kept.
	for i := len(o.legacy) - 1; i >= 0; i-- {
		r := o.legacy[i]
		ids[r.VersionID] = true
		if err := b.Set(versionKey(o.bucket, o.name, r.VersionID), MarshalRecord(nil, r), nil); err != nil {
			return nil, err
		}
	}
	if ids[o.latest.VersionID] {
		delete(ids, o.latest.VersionID)
		if err := b.Delete(versionKey(o.bucket, o.name, o.latest.VersionID), nil); err != nil {
			return nil, err
		}
	}
	o.older, o.isLegacy, o.legacy = len(ids), false, nil
	return t, nil
}

// setHead makes r the newest version.
func (t *objectTxn) setHead(r *Record) error {
	t.o.latest = r
	return t.writeHead()
}

func (t *objectTxn) writeHead() error {
	if t.o.latest == nil {
		return t.b.Delete(objectKey(t.o.bucket, t.o.name), nil)
	}
	return t.b.Set(objectKey(t.o.bucket, t.o.name), encodeHead(t.o.latest, t.o.older), nil)
}

// encodeHead renders an object's head: a version list of the newest
// version, then the number of older ones.
func encodeHead(latest *Record, older int) []byte {
	v := encodeVersions([]*Record{latest})
	return binary.AppendUvarint(append(v, headExt), uint64(older))
}

// setOlder stores r as an older version; exists says whether a key for
// its ID is already there (the count is kept by writeHead).
func (t *objectTxn) setOlder(r *Record, exists bool) error {
	if !exists {
		t.o.older++
	}
	return t.b.Set(versionKey(t.o.bucket, t.o.name, r.VersionID), MarshalRecord(nil, r), nil)
}

// deleteOlder removes the older version with the given ID.
func (t *objectTxn) deleteOlder(id [16]byte) error {
	t.o.older--
	return t.b.Delete(versionKey(t.o.bucket, t.o.name, id), nil)
}

// put adds rec: a version with its ID is replaced (a null version unless
// the one held is newer: then nothing changes and the result says
// Superseded), and the newest version takes the head.
func (t *objectTxn) put(rec *Record) (PutResult, error) {
	var res PutResult
	existing, atHead, err := t.d.find(t.b, t.o, rec.VersionID)
	if err != nil {
		return res, err
	}
	t.heldBefore = existing != nil
	if existing != nil && existing.ModTime != rec.ModTime && rec.VersionID == ([16]byte{}) {
		if existing.Newer(rec) {
			return PutResult{Superseded: true}, nil
		}
		res.Replaced = existing
		if err := t.keepReplaced(rec, existing); err != nil {
			return res, err
		}
	}
	if err := t.count(rec, existing); err != nil {
		return res, err
	}
	latest := t.o.latest
	switch {
	case latest == nil || atHead:
		// The first version, or the newest one rewritten (a heal) or
		// replaced by a newer null version.
		err = t.setHead(rec)
	case rec.Newer(latest):
		if existing != nil {
			if err := t.deleteOlder(rec.VersionID); err != nil {
				return res, err
			}
		}
		if err := t.setOlder(latest, false); err != nil {
			return res, err
		}
		err = t.setHead(rec)
	default:
		if err := t.setOlder(rec, existing != nil); err != nil {
			return res, err
		}
		err = t.writeHead()
	}
	return res, err
}

// remove removes the version with the given ID when match accepts it; the
// next newest takes the head when it was the newest. It returns the
// version removed (nil when there was none to remove).
func (t *objectTxn) remove(id [16]byte, match func(*Record) bool) (*Record, error) {
	found, atHead, err := t.d.find(t.b, t.o, id)
	if err != nil || found == nil || !match(found) {
		return nil, err
	}
	if err := t.count(nil, found); err != nil {
		return nil, err
	}
	if !atHead {
		if err := t.deleteOlder(id); err != nil {
			return nil, err
		}
		return found, t.writeHead()
	}
	older, err := t.d.olderVersions(t.b, t.o, true)
	if err != nil {
		return nil, err
	}
	if len(older) == 0 {
		t.o.latest = nil
		return found, t.writeHead()
	}
	if err := t.deleteOlder(older[0].VersionID); err != nil {
		return nil, err
	}
	return found, t.setHead(older[0])
}

// change runs fn on an object's versions and commits what it staged,
// under the object's lock.
func (d *Local) change(bucket, name string, fn func(t *objectTxn) error) error {
	return d.changeSynced(bucket, name, true, fn)
}

// changeSynced is change, its commit waiting for the disk or not.
func (d *Local) changeSynced(bucket, name string, sync bool, fn func(t *objectTxn) error) error {
	o, err := d.readObject(bucket, name)
	if err != nil {
		return err
	}
	b, err := d.meta.NewIndexedBatch()
	if err != nil {
		return err
	}
	defer b.Close()
	t, err := d.begin(b, o)
	if err != nil {
		return err
	}
	t.noSync = !sync
	if err := fn(t); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	if err := t.commit(); err != nil {
		return fmt.Errorf("drive %s: committing record: %w", d.root, err)
	}
	return nil
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

	var res PutResult
	err := d.change(bucket, object, func(t *objectTxn) error {
		var err error
		if res, err = t.put(rec); err != nil || res.Superseded {
			// The staged files stay: the writer may stamp the version
			// again and commit it with them, or abort them (AbortStaged).
			return err
		}
		if err := t.setEvents(rec); err != nil {
			return err
		}
		if stageID != NotStaged {
			return d.commitStaged(stageID, rec)
		}
		return nil
	})
	if err != nil {
		return res, err
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
	return d.changeSynced(bucket, object, !objlayer.SyncWaived(ctx), func(t *objectTxn) error {
		cur, atHead, err := d.find(t.b, t.o, rec.VersionID)
		if err != nil {
			return err
		}
		if cur == nil || !cur.SameVersion(rec) {
			return ErrVersionNotFound
		}
		cur.Meta = meta
		if atHead {
			return t.setHead(cur)
		}
		if err := t.setOlder(cur, true); err != nil {
			return err
		}
		return t.writeHead()
	})
}

// GetVersion returns one version of an object: the newest when versionID is
// nil, else the one with that ID (all zero = the null version).
func (d *Local) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*Record, error) {
	return d.getVersion(ctx, bucket, object, versionID, true)
}

// StatVersion is GetVersion without an inline object's data (Inline is
// nil): what answers a HEAD, without copying the object's shard.
func (d *Local) StatVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*Record, error) {
	return d.getVersion(ctx, bucket, object, versionID, false)
}

// AppendVersion appends to dst the encoding (MarshalRecord's) of what
// GetVersion returns, or StatVersion's when !withData: a peer's answer.
// The newest version is not decoded: its record is copied as the store
// holds it, checked by whoever decodes it, or, without its data, checked
// and copied without it (AppendWithoutData).
func (d *Local) AppendVersion(ctx context.Context, dst []byte, bucket, object string, versionID *[16]byte, withData bool) ([]byte, error) {
	if versionID != nil {
		r, err := d.getVersion(ctx, bucket, object, versionID, withData)
		if err != nil {
			return dst, err
		}
		return MarshalRecord(dst, r), nil
	}
	if err := ended(ctx); err != nil {
		return dst, err
	}
	v, closer, err := d.meta.Get(objectKey(bucket, object))
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, ErrVersionNotFound
	}
	if err != nil {
		return dst, err
	}
	defer closer.Close()
	newest, err := firstInList(v)
	if err == nil && withData {
		return append(dst, newest...), nil
	}
	if err == nil {
		dst, err = AppendWithoutData(dst, newest)
	}
	if err != nil {
		return dst, fmt.Errorf("drive %s: %s/%s: %w", d.root, bucket, object, err)
	}
	return dst, nil
}

// firstInList returns the encoded first record of a version list (an
// object's newest version: see decodeList).
func firstInList(data []byte) ([]byte, error) {
	if len(data) < 3 || data[0] != versionsMagic {
		return nil, fmt.Errorf("%w: not a version list", ErrCorruptRecord)
	}
	if data[1] != versionsVersion {
		return nil, fmt.Errorf("%w: version list encoding %d, this build reads %d", ErrCorruptRecord, data[1], versionsVersion)
	}
	d := decoder{buf: data[2:]}
	n := d.count()
	size := d.length()
	switch {
	case d.err != nil:
		return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, d.err)
	case n == 0:
		return nil, fmt.Errorf("%w: an empty version list", ErrCorruptRecord)
	}
	return d.buf[:size], nil
}

func (d *Local) getVersion(ctx context.Context, bucket, object string, versionID *[16]byte, withData bool) (*Record, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	o, err := d.readObjectData(bucket, object, withData)
	if err != nil {
		return nil, err
	}
	if versionID == nil {
		if o.latest == nil {
			return nil, ErrVersionNotFound
		}
		return o.latest, nil
	}
	r, _, err := d.findData(d.meta, o, *versionID, withData)
	if err == nil && r == nil {
		err = ErrVersionNotFound
	}
	return r, err
}

// Versions returns every version of an object, newest first.
func (d *Local) Versions(ctx context.Context, bucket, object string) ([]*Record, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	o, err := d.readObject(bucket, object)
	if err != nil {
		return nil, err
	}
	return d.allVersions(o, true)
}

// DeleteVersion removes one version record and its data.
func (d *Local) DeleteVersion(ctx context.Context, bucket, object string, versionID [16]byte) (*Record, error) {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	var found *Record
	err := d.change(bucket, object, func(t *objectTxn) error {
		var err error
		found, err = t.remove(versionID, func(*Record) bool { return true })
		if err == nil && found == nil {
			err = ErrVersionNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	d.removeData(found)
	return found, nil
}

// removeData removes the shard files of a record that is gone. A failure
// leaves an orphan directory, which wastes space but is never read.
func (d *Local) removeData(r *Record) {
	if hasShardFiles(r) {
		d.removeShards(r)
	}
}

// RollbackVersion removes rec if this drive still holds exactly it (a write
// that missed quorum is undone), leaving alone a newer record that replaced
// it meanwhile. A null version rec replaced is put back if the drive still
// keeps it (UndoWindow; undo.go). It reports whether it removed anything.
func (d *Local) RollbackVersion(ctx context.Context, bucket, object string, rec *Record) (bool, error) {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	var found *Record
	var skipped []*Record
	err := d.change(bucket, object, func(t *objectTxn) error {
		var err error
		if rec.EventID != ([16]byte{}) {
			// The write failed: nothing is to tell of it.
			if err := t.b.Delete(eventKey(rec.EventID), nil); err != nil {
				return err
			}
		}
		if found, err = t.remove(rec.VersionID, rec.SameVersion); err != nil {
			return err
		}
		if found == nil {
			if rec.VersionID != ([16]byte{}) {
				return nil
			}
			// Replaced here by another write since: should that one be
			// rolled back too, what rec replaced comes back, not rec.
			return t.markRolledBack(rec)
		}
		_, skipped, err = t.restoreReplaced(found)
		return err
	})
	if err != nil || found == nil {
		return false, err
	}
	d.removeUnreferenced(bucket, object, append(skipped, found)...)
	return true, nil
}

// WalkObjects calls fn, in key order, for each object of a bucket whose name
// starts with prefix and sorts after startAfter, with its versions newest
// first (only the newest when latestOnly), until fn returns false.
func (d *Local) WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(object string, versions []*Record) bool) error {
	return d.walk(ctx, bucket, prefix, "", startAfter, latestOnly, fn)
}

// WalkDelimited is WalkObjects of the latest versions for a listing with a
// delimiter: after an object whose name rolls up into a common prefix
// (CommonPrefix) and whose newest version is not a delete marker, it seeks
// past every other name under that prefix instead of reading them. A
// listing of 100 directories of 1,000 objects reads about 100 records
// here, not 100,000. What a listing makes of the prefix (whether it holds
// an object at all, across drives that may disagree) is the caller's: a
// prefix whose first name here is a delete marker is walked on until a
// name that is not.
func (d *Local) WalkDelimited(ctx context.Context, bucket, prefix, delimiter, startAfter string, fn func(object string, versions []*Record) bool) error {
	return d.walk(ctx, bucket, prefix, delimiter, startAfter, true, fn)
}

// CommonPrefix returns the common prefix key rolls up into in a listing of
// prefix with delimiter, if any: key up to and including the first
// delimiter after prefix.
func CommonPrefix(key, prefix, delimiter string) (string, bool) {
	if delimiter == "" || !strings.HasPrefix(key, prefix) {
		return "", false
	}
	if i := strings.Index(key[len(prefix):], delimiter); i >= 0 {
		return key[:len(prefix)+i+len(delimiter)], true
	}
	return "", false
}

// PastPrefix sorts after every valid UTF-8 key that starts with a prefix
// it is appended to: 0xff never occurs in UTF-8.
const PastPrefix = "\xff"

func (d *Local) walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, latestOnly bool, fn func(object string, versions []*Record) bool) error {
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
	n := 0
	for valid := it.First(); valid; {
		if n++; n%walkCheck == 0 {
			if err := ended(ctx); err != nil {
				return err
			}
		}
		name := string(it.Key()[len(bp):])
		var recs []*Record
		if latestOnly {
			recs, _, err = decodeList(it.Value(), 1, false)
			if err != nil {
				return fmt.Errorf("drive %s: %s/%s: %w", d.root, bucket, name, err)
			}
		} else {
			o, err := d.parseObject(bucket, name, it.Value(), false)
			if err != nil {
				return err
			}
			if recs, err = d.allVersions(o, false); err != nil {
				return err
			}
		}
		if len(recs) == 0 {
			valid = it.Next()
			continue
		}
		if !fn(name, recs) {
			return nil
		}
		if cp, ok := CommonPrefix(name, prefix, delimiter); ok && !recs[0].IsDeleteMarker() {
			valid = it.SeekGE(objectKey(bucket, cp+PastPrefix))
		} else {
			valid = it.Next()
		}
	}
	return d.meta.after(it.Error())
}
