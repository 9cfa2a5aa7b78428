package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// readRecords reads one version's record from every drive of a snapshot.
func readRecords(drives []Drive, bucket, object string, versionID *[16]byte) ([]*drive.Record, []error) {
	return getVersions(drives, bucket, object, versionID)
}

func sameVersion(a, b *drive.Record) bool { return a.SameVersion(b) }

// resolve picks the version the set agrees on: the newest record held by at
// least read quorum of drives (last writer wins). Drives holding another
// record are left out of the returned agreeing slice (nil) so reads skip
// them. When too few drives answer to know, it returns ErrReadQuorum; when
// enough say there is no such version, ErrObjectNotFound.
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
	h, err := s.OpenObject(bucket, object, versionID)
	if err != nil {
		return ObjectInfo{}, err
	}
	return h.Info, nil
}

// ObjectHandle is an object version resolved once: its info is fixed, and
// reads return exactly that version's bytes.
type ObjectHandle struct {
	set      *Set
	drives   []Drive
	rec      *drive.Record
	agreeing []*drive.Record
	// Stale lists the set positions whose drive answered with another
	// record or none (candidates for healing).
	Stale []int
	Info  ObjectInfo
}

// OpenObject resolves an object version (the latest when versionID is nil).
// A delete marker resolves too (Info.DeleteMarker); reading it fails.
func (s *Set) OpenObject(bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	drives := s.Drives()
	rec, agreeing, err := s.resolve(readRecords(drives, bucket, object, versionID))
	if err != nil {
		return nil, err
	}
	h := &ObjectHandle{set: s, drives: drives, rec: rec, agreeing: agreeing, Info: infoFromRecord(bucket, object, rec)}
	for pos, r := range agreeing {
		if r == nil && drives[pos] != nil {
			h.Stale = append(h.Stale, pos)
		}
	}
	return h, nil
}

// partSizes lists the sizes of a version's parts: one part for a plain PUT.
func partSizes(rec *drive.Record) []int64 {
	if len(rec.Parts) == 0 {
		return []int64{rec.Size}
	}
	sizes := make([]int64, len(rec.Parts))
	for i, p := range rec.Parts {
		sizes[i] = p.Size
	}
	return sizes
}

// WriteRange writes bytes [offset, offset+length) of the version to w
// (length < 0: to the end). Blocks are decoded as they are read, so the first
// byte goes out before the whole object is read; only the blocks (and parts)
// of the range are touched. Shards found missing or corrupt are returned in
// bad (set positions), for healing.
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
	badSet := map[int]bool{}
	start := int64(0)
	for i, size := range partSizes(rec) {
		end := start + size
		if end > offset && start < offset+length {
			from := max(offset, start) - start
			to := min(offset+length, end) - start
			badShards, err := h.decodePart(w, i+1, size, from, to-from)
			for _, sh := range badShards {
				badSet[sh] = true
			}
			if err != nil {
				return h.positions(badSet), err
			}
		}
		start = end
	}
	return h.positions(badSet), nil
}

// positions maps shard numbers to the set positions holding them.
func (h *ObjectHandle) positions(shards map[int]bool) []int {
	var out []int
	for pos, sh := range h.rec.Erasure.Distribution {
		if shards[sh] {
			out = append(out, pos)
		}
	}
	return out
}

func (h *ObjectHandle) decodePart(w io.Writer, part int, size, offset, length int64) ([]int, error) {
	readers := h.set.partReaders(h.drives, h.rec, h.agreeing, part, size)
	defer closeReaders(readers)
	return h.set.codec.Decode(w, blockReaders(readers), offset, length, size)
}

// shardReader reads one drive's shard of one part, opening the file on the
// first block read so shards that are never needed (parity, when every data
// shard is intact) cost no open.
type shardReader struct {
	open   func() (vfs.File, error)
	file   vfs.File
	reader *drive.BitrotReader
	size   int64
	block  int
	pool   *sync.Pool
	err    error
}

func (r *shardReader) ReadBlock(i int) ([]byte, error) {
	if r.reader == nil && r.err == nil {
		r.file, r.err = r.open()
		if r.err == nil {
			r.reader = drive.NewBitrotReaderBuf(r.file, r.size, r.block, r.pool.Get().([]byte))
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.reader.ReadBlock(i)
}

func (r *shardReader) Close() {
	if r.file != nil {
		_ = r.file.Close()
	}
	if r.reader != nil && r.open != nil {
		r.pool.Put(r.reader.Buffer()[:0]) //nolint:staticcheck // a slice header is cheap beside a shard block
	}
}

func closeReaders(rs []*shardReader) {
	for _, r := range rs {
		if r != nil {
			r.Close()
		}
	}
}

func blockReaders(rs []*shardReader) []BlockReader {
	out := make([]BlockReader, len(rs))
	for i, r := range rs {
		if r != nil {
			out[i] = r
		}
	}
	return out
}

// partReaders returns a reader per shard number of one part (1-based) of a
// version, from the drives whose record agrees; nil where none.
func (s *Set) partReaders(drives []Drive, rec *drive.Record, agreeing []*drive.Record, part int, size int64) []*shardReader {
	readers := make([]*shardReader, len(drives))
	shardSize := s.codec.ShardSize(size)
	for pos, r := range agreeing {
		if r == nil || drives[pos] == nil {
			continue
		}
		shard := r.Erasure.Index
		if shard < 0 || shard >= len(readers) {
			continue
		}
		sr := &shardReader{size: shardSize, block: s.codec.ShardBlockSize(), pool: &s.codec.shardBufs}
		if rec.IsInline() {
			sr.reader = drive.NewBitrotReader(bytes.NewReader(r.Inline), shardSize, s.codec.ShardBlockSize())
		} else {
			d, dataDir := drives[pos], rec.DataDir
			sr.open = func() (vfs.File, error) { return d.OpenShard(dataDir, part) }
		}
		readers[shard] = sr
	}
	return readers
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
