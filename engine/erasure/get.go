package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs"
)

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
			return nil, nil, objlayer.ErrObjectNotFound
		}
		return nil, nil, fmt.Errorf("%w: %d of %d drives answered (%s)", objlayer.ErrReadQuorum, countNil(errs), len(errs), detail(errs))
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
func (s *Set) StatObject(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.ObjectInfo, error) {
	h, err := s.OpenObject(ctx, bucket, object, versionID)
	if err != nil {
		return objlayer.ObjectInfo{}, err
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
	// read marks the positions whose record was read (nil: all were);
	// the others are asked only when a shard of theirs is needed.
	read []bool
	// Stale lists the set positions whose drive answered with another
	// record or none (candidates for healing).
	Stale []int
	Info  objlayer.ObjectInfo
	// withoutData: opened by OpenObjectMeta, its records may lack their
	// inline data, and it is not read.
	withoutData bool
}

// How openObject reads a version's records.
type openMode uint8

const (
	// openRead: from a read quorum of drives, to read the object.
	openRead openMode = iota
	// openMeta: from a read quorum of drives, without inline data.
	openMeta
	// openAll: from every drive, without inline data (to change the
	// version's metadata everywhere it is held).
	openAll
)

// OpenObject resolves an object version (the latest when versionID is nil).
// A delete marker resolves too (Info.DeleteMarker); reading it fails.
func (s *Set) OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	return s.openObject(ctx, bucket, object, versionID, openRead)
}

// OpenObjectMeta is OpenObject for a caller that reads no data (a HEAD):
// inline objects' shards are not read from the drives nor sent between
// nodes, and the handle's WriteRange fails.
func (s *Set) OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	return s.openObject(ctx, bucket, object, versionID, openMeta)
}

// openObject resolves a version from a read quorum of drives, or from every
// drive (openAll).
func (s *Set) openObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode openMode) (*ObjectHandle, error) {
	drives := s.Drives()
	get := GetItem{Bucket: bucket, Object: object, VersionID: versionID, WithoutData: mode != openRead}
	var read []bool
	var recs []*drive.Record
	var errs []error
	if mode == openAll {
		recs, errs = getVersionsTimed(ctx, drives, get, nil)
	} else {
		read, recs, errs = s.readQuorumFirst(ctx, drives, get)
	}
	rec, agreeing, err := s.resolve(recs, errs)
	if err != nil {
		return nil, err
	}
	h := &ObjectHandle{set: s, drives: drives, rec: rec, agreeing: agreeing, read: read,
		Info: infoFromRecord(bucket, object, rec), withoutData: mode != openRead}
	for pos, r := range agreeing {
		if r == nil && drives[pos] != nil && (read == nil || read[pos]) {
			h.Stale = append(h.Stale, pos)
		}
	}
	return h, nil
}

// readQuorumFirst reads a version's record from read-quorum drives chosen
// to cost the fewest round trips (this node's drives, then the nodes
// holding the most drives of the set), and from the others only when those
// do not all answer the same. Read quorum and write quorum overlap (data +
// write quorum > set size), so read-quorum drives that all hold the same
// record (or all lack it) cannot have missed a newer committed version.
// read marks the positions read.
func (s *Set) readQuorumFirst(ctx context.Context, drives []Drive, get GetItem) (read []bool, recs []*drive.Record, errs []error) {
	need := s.layout.ReadQuorum()
	first := make([]Drive, len(drives))
	read = make([]bool, len(drives))
	picked := 0
	groups, single := groupByNode(drives)
	// Slow drives last (slow.go).
	slices.SortStableFunc(single, func(a, b int) int { return cmpBool(s.lat.slow(a), s.lat.slow(b)) })
	for _, pos := range single {
		if picked < need {
			first[pos], read[pos] = drives[pos], true
			picked++
		}
	}
	// Then nodes without a slow drive before others, those holding the
	// most drives first; among equals, any (shuffled: the reads of this
	// node's requests spread over them).
	hasSlow := func(g nodeGroup) bool { return slices.ContainsFunc(g.positions, s.lat.slow) }
	rand.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	slices.SortStableFunc(groups, func(a, b nodeGroup) int {
		if c := cmpBool(hasSlow(a), hasSlow(b)); c != 0 {
			return c
		}
		return len(b.positions) - len(a.positions)
	})
	for _, g := range groups {
		if picked >= need {
			break
		}
		for _, pos := range g.positions {
			first[pos], read[pos] = drives[pos], true
			picked++
		}
	}
	recs, errs = getVersionsTimed(ctx, first, get, s.lat)
	if picked >= need && agreeOnOne(recs, errs, read) {
		for pos := range errs {
			if !read[pos] {
				errs[pos] = errNotRead
			}
		}
		return read, recs, errs
	}
	// Disagreement, failures or too few drives: read the rest too.
	rest := make([]Drive, len(drives))
	for pos, d := range drives {
		if !read[pos] {
			rest[pos] = d
		}
	}
	more, moreErrs := getVersionsTimed(ctx, rest, get, s.lat)
	for pos := range drives {
		if !read[pos] {
			recs[pos], errs[pos] = more[pos], moreErrs[pos]
			read[pos] = drives[pos] != nil
		}
	}
	return read, recs, errs
}

// errNotRead marks drives a read did not need to ask.
var errNotRead = errors.New("not read")

// agreeOnOne reports whether every drive read answered, with the same
// record or all with no such version.
func agreeOnOne(recs []*drive.Record, errs []error, read []bool) bool {
	var first *drive.Record
	notFound, found := 0, 0
	for pos := range recs {
		if !read[pos] {
			continue
		}
		switch {
		case errs[pos] == nil:
			if first == nil {
				first = recs[pos]
			} else if !sameVersion(first, recs[pos]) {
				return false
			}
			found++
		case errors.Is(errs[pos], drive.ErrVersionNotFound):
			notFound++
		default:
			return false
		}
	}
	// A version missing from every drive read is resolved by all of them:
	// a failed write can sit on a read quorum of the others.
	return found > 0 && notFound == 0
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
func (h *ObjectHandle) WriteRange(ctx context.Context, w io.Writer, offset, length int64) (bad []int, err error) {
	if h.withoutData {
		return nil, errors.New("erasure: a version opened without its data is not read")
	}
	rec := h.rec
	if rec.IsDeleteMarker() {
		return nil, objlayer.ErrObjectNotFound
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
			badShards, err := h.decodePart(ctx, w, i+1, size, from, to-from)
			for _, sh := range badShards {
				badSet[sh] = true
			}
			if err != nil && ctx.Err() != nil {
				// The reader went away: shards cut short are not damaged.
				return nil, context.Cause(ctx)
			}
			if err != nil {
				return h.positions(badSet), err
			}
		}
		start = end
	}
	if ctx.Err() != nil {
		clear(badSet) // shards cut short by an ended read are not damaged
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

func (h *ObjectHandle) decodePart(ctx context.Context, w io.Writer, part int, size, offset, length int64) ([]int, error) {
	readers := h.set.partReaders(ctx, h.drives, h.rec, h.agreeing, part, size)
	h.addUnread(ctx, readers, part, size)
	defer closeReaders(readers)
	return h.set.codec.Decode(w, blockReaders(readers), offset, length, size)
}

// shardReader reads one drive's shard of one part, opening the file on the
// first block read so shards that are never needed (parity, when every data
// shard is intact) cost no open.
type shardReader struct {
	open func() (vfs.File, error)
	// inline fetches the shard of a small object kept in a record not
	// read when the version was resolved.
	inline func() ([]byte, error)
	// remote: the shard file is on another node.
	remote bool
	// slow reports that the drive is slow (ReadCost), observe records how
	// long a block took (both nil for shards in memory).
	slow    func() bool
	observe func(time.Duration)
	file    vfs.File
	reader  *drive.BitrotReader
	size    int64
	block   int
	pool    *sync.Pool
	err     error
}

func (r *shardReader) ReadBlock(i int) ([]byte, error) {
	if r.observe != nil {
		start := time.Now()
		defer func() { r.observe(time.Since(start)) }()
	}
	if r.reader == nil && r.err == nil && r.inline != nil {
		var data []byte
		data, r.err = r.inline()
		if r.err == nil {
			r.reader = drive.NewBitrotReader(bytes.NewReader(data), r.size, r.block)
		}
	}
	if r.reader == nil && r.err == nil {
		r.file, r.err = openShard(r.open)
		if r.err == nil {
			r.reader = drive.NewBitrotReaderBuf(r.file, r.size, r.block, r.pool.Get().([]byte))
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return r.reader.ReadBlock(i)
}

// openShard opens a shard file, waiting up to a second for a descriptor
// when the process has none left (a flood of connections the S3 listener
// is shedding): that shard is not damaged, and reporting it so would heal
// a healthy object and fail the read.
func openShard(open func() (vfs.File, error)) (vfs.File, error) {
	f, err := open()
	for wait := 10 * time.Millisecond; outOfDescriptors(err) && wait <= 640*time.Millisecond; wait *= 2 {
		time.Sleep(wait)
		f, err = open()
	}
	return f, err
}

func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// timeShard makes a shard file's reader count its drive's speed.
func (s *Set) timeShard(sr *shardReader, pos int) {
	sr.slow = func() bool { return s.lat.slow(pos) }
	sr.observe = func(d time.Duration) { s.lat.observe(pos, d) }
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// ReadCost says where the shard is read from: a record in memory, a file
// on this node, or a file on a peer.
func (r *shardReader) ReadCost() int {
	switch {
	case r.slow != nil && r.slow():
		return costSlow
	case r.inline != nil && r.reader == nil:
		return costPeer // a record still to fetch
	case r.open == nil:
		return costMemory
	case r.remote:
		return costPeer
	}
	return costDrive
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
func (s *Set) partReaders(ctx context.Context, drives []Drive, rec *drive.Record, agreeing []*drive.Record, part int, size int64) []*shardReader {
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
			sr.open = func() (vfs.File, error) { return d.OpenShard(ctx, dataDir, part) }
			_, sr.remote = d.(NodeBatcher)
			s.timeShard(sr, pos)
		}
		readers[shard] = sr
	}
	return readers
}

// addUnread gives readers for the shards of the positions whose record was
// not read, so a missing or corrupt shard among those read still leaves the
// object readable. They cost nothing unless the decoder needs them: a shard
// file is opened under the version's own data directory (unique to the
// version, so it cannot be another version's), and an inline shard fetches
// that drive's record and checks it is the same version.
func (h *ObjectHandle) addUnread(ctx context.Context, readers []*shardReader, part int, size int64) {
	rec, s := h.rec, h.set
	shardSize := s.codec.ShardSize(size)
	for pos, d := range h.drives {
		if d == nil || h.read == nil || h.read[pos] || pos >= len(rec.Erasure.Distribution) {
			continue
		}
		shard := rec.Erasure.Distribution[pos]
		if shard < 0 || shard >= len(readers) || readers[shard] != nil {
			continue
		}
		sr := &shardReader{size: shardSize, block: s.codec.ShardBlockSize(), pool: &s.codec.shardBufs}
		if rec.IsInline() {
			bucket, object, vid := h.Info.Bucket, h.Info.Name, rec.VersionID
			sr.inline = func() ([]byte, error) {
				r, err := d.GetVersion(ctx, bucket, object, &vid)
				if err != nil {
					return nil, err
				}
				if !sameVersion(r, rec) || r.Erasure.Index != shard {
					return nil, fmt.Errorf("erasure: drive %d holds another record of this version", pos)
				}
				return r.Inline, nil
			}
		} else {
			dataDir := rec.DataDir
			sr.open = func() (vfs.File, error) { return d.OpenShard(ctx, dataDir, part) }
			_, sr.remote = d.(NodeBatcher)
			s.timeShard(sr, pos)
		}
		readers[shard] = sr
	}
}

// GetObject writes a range of an object version to w (see WriteRange).
func (s *Set) GetObject(ctx context.Context, w io.Writer, bucket, object string, versionID *[16]byte, offset, length int64) (objlayer.ObjectInfo, []int, error) {
	h, err := s.OpenObject(ctx, bucket, object, versionID)
	if err != nil {
		return objlayer.ObjectInfo{}, nil, err
	}
	bad, err := h.WriteRange(ctx, w, offset, length)
	return h.Info, bad, err
}
