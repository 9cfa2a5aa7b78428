package drive

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Multipart uploads on a drive. An upload is a record under the object's
// name plus one record per uploaded part; each part's shard is a file in the
// upload's data directory, named by the part upload's own ID so that two
// uploads of the same part number never overwrite each other's shard:
//
//	u\x00<bucket>\x00<object>\x00<uploadID>   Upload (JSON)
//	p\x00<uploadID><partNumber BE32>           PartRecord (JSON)
//	data/<xx>/<upload.DataDir>/part.<N>.<partID hex>
//
// Completing renames the chosen parts to part.<N> (no data is copied) and
// commits the object's version record pointing at the directory.

// ErrUploadNotFound means the drive holds no such multipart upload.
var ErrUploadNotFound = errors.New("upload not found")

// ErrPartMissing means the drive holds the upload but not one of the parts
// a completion chose (it missed that upload of the part).
var ErrPartMissing = errors.New("part missing")

// Upload is a multipart upload as one drive stores it.
type Upload struct {
	ID        [16]byte          `json:"id"`
	Bucket    string            `json:"bucket"`
	Object    string            `json:"object"`
	Initiated int64             `json:"initiated"`
	DataDir   [16]byte          `json:"dataDir"`
	Meta      map[string]string `json:"meta,omitempty"`
	Erasure   ErasureInfo       `json:"erasure"`
}

// PartRecord is one uploaded part as one drive stores it.
type PartRecord struct {
	Number  int      `json:"number"`
	ID      [16]byte `json:"id"`
	ModTime int64    `json:"modTime"`
	Size    int64    `json:"size"`
	ETag    string   `json:"etag"`
	// Checksum is the part's checksum (algorithm:value) when the client sent one.
	Checksum string `json:"checksum,omitempty"`
}

// Missed reports whether p, in the parts a completion chose, stands for a
// part this drive does not hold (its ID left zero): the drive completes
// the upload without that part's shard, which the set then heals (see
// CompleteUpload).
func (p PartRecord) Missed() bool { return p.ID == [16]byte{} }

var (
	uploadPrefix = []byte{'u', sep}
	partPrefix   = []byte{'p', sep}
)

func uploadsPrefix(bucket string) []byte {
	k := append(append([]byte(nil), uploadPrefix...), bucket...)
	return append(k, sep)
}

func uploadKey(bucket, object string, id [16]byte) []byte {
	k := append(uploadsPrefix(bucket), object...)
	k = append(k, sep)
	return append(k, id[:]...)
}

func partsPrefix(uploadID [16]byte) []byte {
	return append(append([]byte(nil), partPrefix...), uploadID[:]...)
}

func partKey(uploadID [16]byte, number int) []byte {
	return binary.BigEndian.AppendUint32(partsPrefix(uploadID), uint32(number))
}

func stagedPartName(number int, id [16]byte) string {
	return fmt.Sprintf("part.%d.%s", number, hexID(id))
}

// PutUpload records a new multipart upload.
func (d *Local) PutUpload(ctx context.Context, u *Upload) error {
	v, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return d.meta.Set(uploadKey(u.Bucket, u.Object, u.ID), v, d.writeOpts())
}

// GetUpload returns an upload's record.
func (d *Local) GetUpload(ctx context.Context, bucket, object string, id [16]byte) (*Upload, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	v, closer, err := d.meta.Get(uploadKey(bucket, object, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrUploadNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	u := &Upload{}
	if err := json.Unmarshal(v, u); err != nil {
		return nil, fmt.Errorf("drive %s: upload record: %w", d.root, err)
	}
	return u, nil
}

// UploadPos is a place in a listing of uploads, which runs in (object,
// upload ID) order; the zero UploadPos is before the first.
type UploadPos struct {
	Object string
	ID     [16]byte
}

// Less orders positions as listings run.
func (p UploadPos) Less(q UploadPos) bool {
	if p.Object != q.Object {
		return p.Object < q.Object
	}
	return string(p.ID[:]) < string(q.ID[:])
}

// Pos is the upload's place in a listing.
func (u *Upload) Pos() UploadPos { return UploadPos{u.Object, u.ID} }

// WalkUploads calls fn for each upload of a bucket whose object starts with
// prefix and that comes after after, in (object, upload ID) order, until fn
// returns false.
func (d *Local) WalkUploads(ctx context.Context, bucket, prefix string, after UploadPos, fn func(u *Upload) bool) error {
	lower := append(uploadsPrefix(bucket), prefix...)
	upper := prefixEnd(lower)
	if after != (UploadPos{}) {
		if past := append(uploadKey(bucket, after.Object, after.ID), 0); bytes.Compare(past, lower) > 0 {
			lower = past
		}
	}
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		if n++; n%walkCheck == 0 {
			if err := ended(ctx); err != nil {
				return err
			}
		}
		u := &Upload{}
		if err := json.Unmarshal(it.Value(), u); err != nil {
			return fmt.Errorf("drive %s: upload record: %w", d.root, err)
		}
		if !fn(u) {
			break
		}
	}
	return d.meta.after(it.Error())
}

// CommitPart moves a part's staged shard (staged with CreateStaged under the
// part's own ID) into the upload's data directory and records the part. An
// earlier upload of the same part number is replaced when this one is newer
// (last writer wins) and its shard removed.
func (d *Local) CommitPart(ctx context.Context, u *Upload, p *PartRecord) error {
	lock := d.lockFor(u.Bucket, u.Object)
	lock.Lock()
	defer lock.Unlock()
	if _, err := d.GetUpload(ctx, u.Bucket, u.Object, u.ID); err != nil {
		_ = d.AbortStaged(ctx, p.ID)
		return err
	}
	old, err := d.getPart(u.ID, p.Number)
	if err != nil && !errors.Is(err, ErrUploadNotFound) {
		return err
	}
	if old != nil && (old.ModTime > p.ModTime || old.ModTime == p.ModTime && string(old.ID[:]) > string(p.ID[:])) {
		_ = d.AbortStaged(ctx, p.ID)
		return nil // a newer upload of this part already won
	}
	dir := d.dataDirPath(u.DataDir)
	made, err := d.mkdirs(dir)
	if err != nil {
		return err
	}
	final := filepath.Join(dir, stagedPartName(p.Number, p.ID))
	if err := d.fs.Rename(d.stagedShard(p.ID, 1), final); err != nil {
		return fmt.Errorf("drive %s: moving part into place: %w", d.root, err)
	}
	if !d.shardFiles {
		_ = d.fs.RemoveAll(d.stagedPath(p.ID))
	}
	// The part's data, its entry and the upload directory's own entry
	// (and a new fan-out directory's) are durable before the part is
	// recorded.
	files := []string{final}
	if d.shardFiles {
		files = nil // synced as it was closed (createStagedFile)
	}
	if err := d.syncAll(files, append([]string{dir}, made...)); err != nil {
		return err
	}
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := d.meta.Set(partKey(u.ID, p.Number), v, d.writeOpts()); err != nil {
		return err
	}
	if old != nil && old.ID != p.ID {
		_ = d.fs.Remove(filepath.Join(dir, stagedPartName(old.Number, old.ID)))
	}
	return nil
}

func (d *Local) getPart(uploadID [16]byte, number int) (*PartRecord, error) {
	v, closer, err := d.meta.Get(partKey(uploadID, number))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrUploadNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	p := &PartRecord{}
	if err := json.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("drive %s: part record: %w", d.root, err)
	}
	return p, nil
}

// ListParts returns an upload's parts in part-number order.
func (d *Local) ListParts(ctx context.Context, uploadID [16]byte) ([]PartRecord, error) {
	if err := ended(ctx); err != nil {
		return nil, err
	}
	p := partsPrefix(uploadID)
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []PartRecord
	for it.First(); it.Valid(); it.Next() {
		var pr PartRecord
		if err := json.Unmarshal(it.Value(), &pr); err != nil {
			return nil, fmt.Errorf("drive %s: part record: %w", d.root, err)
		}
		out = append(out, pr)
	}
	return out, d.meta.after(it.Error())
}

// CompleteUpload turns an upload into an object version: the chosen parts'
// shards are renamed to the version's part files (parts[i] becomes
// part.<i+1>), and the version record is committed together with the
// removal of the upload's records; then the shards of parts not chosen are
// removed. A chosen part marked missed (PartRecord.Missed: the set found
// this drive without it) has no part file in the version here, to be
// healed; a drive that lacks one of the other chosen parts
// (ErrPartMissing) or fails on the way changes nothing. Replacing a null version follows
// PutVersion's rules: when the drive holds a newer null version the
// completion is dropped (Superseded) and the upload left as it was, for
// the writer to complete again with a later stamp or abort. A drive that
// completed the upload as rec already (the version rec names, made from
// the upload's data directory) answers as it did: a completion resumed by
// a retry and its first coordinator may both reach it.
func (d *Local) CompleteUpload(ctx context.Context, u *Upload, chosen []PartRecord, rec *Record) (PutResult, error) {
	lock := d.lockFor(u.Bucket, u.Object)
	lock.Lock()
	defer lock.Unlock()
	if _, err := d.GetUpload(ctx, u.Bucket, u.Object, u.ID); errors.Is(err, ErrUploadNotFound) {
		if done, ferr := d.completedAs(u, rec); ferr != nil || done {
			return PutResult{}, ferr
		}
		return PutResult{}, err
	} else if err != nil {
		return PutResult{}, err
	}
	for _, p := range chosen {
		if p.Missed() {
			continue
		}
		have, err := d.getPart(u.ID, p.Number)
		if errors.Is(err, ErrUploadNotFound) || err == nil && have.ID != p.ID {
			return PutResult{}, fmt.Errorf("drive %s: %w: part %d of upload %s", d.root, ErrPartMissing, p.Number, hexID(u.ID))
		}
		if err != nil {
			return PutResult{}, err
		}
	}
	o, err := d.readObject(u.Bucket, u.Object)
	if err != nil {
		return PutResult{}, err
	}
	b, err := d.meta.NewIndexedBatch()
	if err != nil {
		return PutResult{}, err
	}
	defer b.Close()
	t, err := d.begin(b, o)
	if err != nil {
		return PutResult{}, err
	}
	res, err := t.put(rec)
	if err != nil || res.Superseded {
		return res, err
	}
	if err := b.Delete(uploadKey(u.Bucket, u.Object, u.ID), nil); err != nil {
		return res, err
	}
	pp := partsPrefix(u.ID)
	if err := b.DeleteRange(pp, prefixEnd(pp), nil); err != nil {
		return res, err
	}
	dir := d.dataDirPath(u.DataDir)
	undo, err := d.renameParts(dir, chosen, true)
	if err != nil {
		return PutResult{}, err
	}
	if err := t.commit(); err != nil {
		undo()
		return PutResult{}, fmt.Errorf("drive %s: committing completed upload: %w", d.root, err)
	}
	// Shards of parts uploaded but not chosen.
	if entries, err := d.fs.ReadDir(dir); err == nil {
		for _, e := range entries {
			if len(e.Name()) > len("part.") && !isFinalPartName(e.Name(), len(chosen)) {
				_ = d.fs.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return res, nil
}

// completedAs reports whether this drive holds version rec made from
// upload u.
func (d *Local) completedAs(u *Upload, rec *Record) (bool, error) {
	o, err := d.readObjectData(u.Bucket, u.Object, false)
	if err != nil {
		return false, err
	}
	r, _, err := d.findData(d.meta, o, rec.VersionID, false)
	return err == nil && r != nil && r.DataDir == u.DataDir, err
}

// renameParts gives the chosen parts' shards in dir their version names
// (toFinal) or back their upload names, and syncs dir. On failure what it
// renamed is renamed back; undo renames everything back after success.
func (d *Local) renameParts(dir string, chosen []PartRecord, toFinal bool) (undo func(), err error) {
	names := func(i int) (from, to string) {
		staged := filepath.Join(dir, stagedPartName(chosen[i].Number, chosen[i].ID))
		final := filepath.Join(dir, partName(i+1))
		if toFinal {
			return staged, final
		}
		return final, staged
	}
	back := func(n int) {
		for i := n - 1; i >= 0; i-- {
			if chosen[i].Missed() {
				continue
			}
			from, to := names(i)
			_ = d.fs.Rename(to, from)
		}
	}
	for i, p := range chosen {
		if p.Missed() {
			continue
		}
		from, to := names(i)
		if err := d.fs.Rename(from, to); err != nil {
			back(i)
			return nil, fmt.Errorf("drive %s: completing part %d: %w", d.root, p.Number, err)
		}
	}
	renamed := slices.ContainsFunc(chosen, func(p PartRecord) bool { return !p.Missed() })
	if renamed && !d.noSync {
		if err := d.fs.SyncDir(dir); err != nil {
			back(len(chosen))
			return nil, err
		}
	}
	return func() { back(len(chosen)) }, nil
}

// ReopenUpload undoes CompleteUpload(u, chosen, rec) on a drive that
// committed it, after the completion missed write quorum: in one batch the
// version rec (matched by its data directory, which is the upload's own)
// is removed, the null version it replaced is put back (as RollbackVersion
// does), and the upload and its chosen parts are recorded again, their
// shards renamed back first (parts marked missed stay missing). Parts not
// chosen are gone. A drive that still holds the upload, or where rec is no
// longer a version (replaced by a later write), is left as it is;
// reopened reports whether the upload is open here afterwards.
func (d *Local) ReopenUpload(ctx context.Context, u *Upload, chosen []PartRecord, rec *Record) (reopened bool, err error) {
	lock := d.lockFor(u.Bucket, u.Object)
	lock.Lock()
	defer lock.Unlock()
	if _, err := d.GetUpload(ctx, u.Bucket, u.Object, u.ID); err == nil {
		return true, nil
	} else if !errors.Is(err, ErrUploadNotFound) {
		return false, err
	}
	o, err := d.readObject(u.Bucket, u.Object)
	if err != nil {
		return false, err
	}
	b, err := d.meta.NewIndexedBatch()
	if err != nil {
		return false, err
	}
	defer b.Close()
	t, err := d.begin(b, o)
	if err != nil {
		return false, err
	}
	found, err := t.remove(rec.VersionID, func(r *Record) bool { return r.DataDir == u.DataDir })
	if err != nil || found == nil {
		return false, err
	}
	_, skipped, err := t.restoreReplaced(found)
	if err != nil {
		return false, err
	}
	v, err := json.Marshal(u)
	if err != nil {
		return false, err
	}
	if err := b.Set(uploadKey(u.Bucket, u.Object, u.ID), v, nil); err != nil {
		return false, err
	}
	for i := range chosen {
		if chosen[i].Missed() {
			continue // it missed the part before, and misses it again
		}
		pv, err := json.Marshal(&chosen[i])
		if err != nil {
			return false, err
		}
		if err := b.Set(partKey(u.ID, chosen[i].Number), pv, nil); err != nil {
			return false, err
		}
	}
	undo, err := d.renameParts(d.dataDirPath(u.DataDir), chosen, false)
	if err != nil {
		return false, err
	}
	if err := t.commit(); err != nil {
		undo()
		return false, fmt.Errorf("drive %s: reopening upload: %w", d.root, err)
	}
	// A heal may have written the completed version's shards as files of
	// their own (Options.ShardFiles): they are not the upload's, and a
	// completion with other parts must not read them.
	d.removeShardFiles(u.DataDir, len(chosen))
	d.removeUnreferenced(u.Bucket, u.Object, skipped...)
	return true, nil
}

func isFinalPartName(name string, parts int) bool {
	for i := 1; i <= parts; i++ {
		if name == partName(i) {
			return true
		}
	}
	return false
}

// AbortUpload removes an upload's records and its shards.
func (d *Local) AbortUpload(ctx context.Context, bucket, object string, id [16]byte) error {
	lock := d.lockFor(bucket, object)
	lock.Lock()
	defer lock.Unlock()
	u, err := d.GetUpload(ctx, bucket, object, id)
	if err != nil {
		return err
	}
	b := d.meta.NewBatch()
	defer b.Close()
	if err := b.Delete(uploadKey(bucket, object, id), nil); err != nil {
		return err
	}
	pp := partsPrefix(id)
	if err := b.DeleteRange(pp, prefixEnd(pp), nil); err != nil {
		return err
	}
	if err := d.meta.Commit(b, d.writeOpts()); err != nil {
		return err
	}
	return d.fs.RemoveAll(d.dataDirPath(u.DataDir))
}
