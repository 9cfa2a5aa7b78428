package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// readRecords reads one version's record from every drive.
func (s *Set) readRecords(bucket, object string, versionID *[16]byte) ([]*drive.Record, []error) {
	recs := make([]*drive.Record, len(s.drives))
	errs := s.forEach(func(pos int, d Drive) error {
		r, err := d.GetVersion(bucket, object, versionID)
		recs[pos] = r
		return err
	})
	return recs, errs
}

func sameVersion(a, b *drive.Record) bool {
	return a.ModTime == b.ModTime && a.VersionID == b.VersionID && a.ETag == b.ETag &&
		a.Size == b.Size && a.Flags == b.Flags && a.DataDir == b.DataDir
}

// resolve picks the version the set agrees on: the newest record held by at
// least read quorum of drives (last writer wins). Drives holding another
// record are marked stale in the returned slice (nil) so reads skip them.
// When too few drives answer to know, it returns ErrReadQuorum; when enough
// say there is no such version, ErrObjectNotFound.
func (s *Set) resolve(recs []*drive.Record, errs []error) (*drive.Record, []*drive.Record, error) {
	quorum := s.layout.ReadQuorum()
	var best *drive.Record
	for _, r := range recs {
		if r == nil || (best != nil && !r.Newer(best)) {
			continue
		}
		n := 0
		for _, o := range recs {
			if o != nil && sameVersion(r, o) {
				n++
			}
		}
		if n >= quorum {
			best = r
		}
	}
	if best == nil {
		notFound := 0
		for _, err := range errs {
			if errors.Is(err, drive.ErrVersionNotFound) {
				notFound++
			}
		}
		// Fewer drives than a read quorum could hold a committed version.
		if notFound > len(recs)-quorum {
			return nil, nil, ErrObjectNotFound
		}
		return nil, nil, fmt.Errorf("%w: %d of %d drives answered (%s)", ErrReadQuorum, countNil(errs), len(errs), detail(errs))
	}
	agreeing := make([]*drive.Record, len(recs))
	for pos, r := range recs {
		if r != nil && sameVersion(r, best) {
			agreeing[pos] = r
		}
	}
	return best, agreeing, nil
}

// StatObject resolves an object version (the latest when versionID is nil).
func (s *Set) StatObject(bucket, object string, versionID *[16]byte) (ObjectInfo, error) {
	rec, _, err := s.resolve(s.readRecords(bucket, object, versionID))
	if err != nil {
		return ObjectInfo{}, err
	}
	return infoFromRecord(bucket, object, rec), nil
}

// ObjectHandle is an object version resolved once: its info is fixed, and
// reads return exactly that version's bytes.
type ObjectHandle struct {
	set      *Set
	rec      *drive.Record
	agreeing []*drive.Record
	Info     ObjectInfo
}

// OpenObject resolves an object version (the latest when versionID is nil).
// A delete marker resolves too (Info.DeleteMarker); reading it fails.
func (s *Set) OpenObject(bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	rec, agreeing, err := s.resolve(s.readRecords(bucket, object, versionID))
	if err != nil {
		return nil, err
	}
	return &ObjectHandle{set: s, rec: rec, agreeing: agreeing, Info: infoFromRecord(bucket, object, rec)}, nil
}

// WriteRange writes bytes [offset, offset+length) of the version to w
// (length < 0: to the end). Blocks are decoded as they are read, so the first
// byte goes out before the whole object is read; only the blocks of the range
// are touched. Shards found missing or corrupt are returned in bad (set
// positions), for healing.
func (h *ObjectHandle) WriteRange(w io.Writer, offset, length int64) (bad []int, err error) {
	rec := h.rec
	if rec.IsDeleteMarker() {
		return nil, ErrObjectNotFound
	}
	if length < 0 {
		length = rec.Size - offset
	}
	if offset < 0 || offset > rec.Size || offset+length > rec.Size {
		return nil, fmt.Errorf("erasure: range %d+%d outside an object of %d bytes", offset, length, rec.Size)
	}
	if rec.Size == 0 || length == 0 {
		return nil, nil
	}
	readers, files := h.set.shardReaders(rec, h.agreeing)
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	badShards, err := h.set.codec.Decode(w, readers, offset, length, rec.Size)
	for _, shard := range badShards {
		for pos, sh := range rec.Erasure.Distribution {
			if sh == shard {
				bad = append(bad, pos)
			}
		}
	}
	return bad, err
}

// GetObject writes a range of an object version to w (see WriteRange).
func (s *Set) GetObject(w io.Writer, bucket, object string, versionID *[16]byte, offset, length int64) (ObjectInfo, []int, error) {
	h, err := s.OpenObject(bucket, object, versionID)
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	bad, err := h.WriteRange(w, offset, length)
	return h.Info, bad, err
}

// shardReaders opens each agreeing drive's shard as a BlockReader indexed by
// shard number.
func (s *Set) shardReaders(rec *drive.Record, agreeing []*drive.Record) ([]BlockReader, []vfs.File) {
	readers := make([]BlockReader, len(s.drives))
	shardSize := s.codec.ShardSize(rec.Size)
	var files []vfs.File
	for pos, r := range agreeing {
		if r == nil || s.drives[pos] == nil {
			continue
		}
		shard := r.Erasure.Index
		if shard < 0 || shard >= len(readers) {
			continue
		}
		if rec.IsInline() {
			readers[shard] = drive.NewBitrotReader(bytes.NewReader(r.Inline), shardSize, s.codec.ShardBlockSize())
			continue
		}
		f, err := s.drives[pos].OpenShard(rec.DataDir, 1)
		if err != nil {
			continue // missing shard file: decoded from parity
		}
		files = append(files, f)
		readers[shard] = drive.NewBitrotReader(f, shardSize, s.codec.ShardBlockSize())
	}
	return readers, files
}
