package erasure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// DanglingGrace is how old a version held by too few drives to be read
// must be before healing removes it. Younger ones may be writes still
// committing on the other drives.
const DanglingGrace = 5 * time.Minute

// HealResult says what healing did.
type HealResult struct {
	// Versions is the number of versions examined.
	Versions int
	// Shards is the number of drive copies rewritten.
	Shards int
	// Bytes is the object bytes rebuilt.
	Bytes int64
	// Purged is the number of dangling versions removed.
	Purged int
	// Unrecoverable is the number of versions too few drives could rebuild.
	Unrecoverable int
	// Skipped is the number of drives that could not be examined (offline
	// or failing): the object must be healed again when they return.
	Skipped int
	// SkippedDrives has bit i set when the drive at position i was skipped.
	SkippedDrives uint32
	// SkipReason is the first such drive's error.
	SkipReason string
}

func (r *HealResult) add(o HealResult) {
	r.Versions += o.Versions
	r.Shards += o.Shards
	r.Bytes += o.Bytes
	r.Purged += o.Purged
	r.Unrecoverable += o.Unrecoverable
	r.Skipped = max(r.Skipped, o.Skipped)
	r.SkippedDrives |= o.SkippedDrives
}

// HealObject brings every online drive of the set to the agreed state of an
// object: each version held intact by read quorum is rewritten on drives
// that miss it, hold another copy of it, or (deep) hold a shard that fails
// its checksum; a version held by too few drives to ever be read, and older
// than DanglingGrace, is removed. Without deep, shard files are checked for
// presence and size, not read.
func (s *Set) HealObject(ctx context.Context, bucket, object string, deep bool) (HealResult, error) {
	return s.healObject(ctx, bucket, object, deep, 0)
}

// healObject is HealObject leaving alone versions younger than settle: a
// walk over everything (a drive rebuild, the scan) meets writes still
// committing, which their own partial-write heal covers once they end.
func (s *Set) healObject(ctx context.Context, bucket, object string, deep bool, settle time.Duration) (HealResult, error) {
	drives := s.Drives()
	lists := make([][]*drive.Record, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		var err error
		lists[pos], err = d.Versions(ctx, bucket, object)
		return err
	})
	skipped := len(errs) - countNil(errs)
	var skippedDrives uint32
	reason := ""
	if skipped > 0 {
		reason = detail(errs)
		for pos, err := range errs {
			if err != nil {
				skippedDrives |= 1 << pos
			}
		}
	}
	if countNil(errs) < s.layout.ReadQuorum() {
		return HealResult{Skipped: skipped, SkippedDrives: skippedDrives, SkipReason: reason}, fmt.Errorf("%w: %d of %d drives answered (%s)", objlayer.ErrReadQuorum, countNil(errs), len(errs), detail(errs))
	}
	byKey := map[versionKey][]*drive.Record{}
	var order []versionKey
	for pos, l := range lists {
		for _, r := range l {
			k := keyOf(r)
			if byKey[k] == nil {
				byKey[k] = make([]*drive.Record, len(drives))
				order = append(order, k)
			}
			byKey[k][pos] = r
		}
	}
	res := HealResult{Skipped: skipped, SkippedDrives: skippedDrives, SkipReason: reason}
	var firstErr error
	for _, k := range order {
		if settle > 0 && time.Since(time.Unix(0, k.modTime)) < settle {
			continue
		}
		r, err := s.healVersion(ctx, drives, errs, bucket, object, byKey[k], deep)
		res.add(r)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return res, firstErr
}

// healVersion heals one version given each drive's record of it (nil where
// the drive has none) and each drive's listing error.
func (s *Set) healVersion(ctx context.Context, drives []Drive, listErrs []error, bucket, object string, held []*drive.Record, deep bool) (HealResult, error) {
	res := HealResult{Versions: 1}
	// The record most drives agree on.
	var best *drive.Record
	bestN := 0
	for _, r := range held {
		if r == nil {
			continue
		}
		n := 0
		for _, o := range held {
			if o != nil && sameVersion(r, o) {
				n++
			}
		}
		if n > bestN {
			best, bestN = r, n
		}
	}
	if bestN < s.layout.ReadQuorum() {
		lacking := 0
		for pos, r := range held {
			if r == nil && listErrs[pos] == nil && drives[pos] != nil {
				lacking++
			}
		}
		if lacking > len(drives)-s.layout.ReadQuorum() && time.Since(time.Unix(0, best.ModTime)) > DanglingGrace {
			// A completion whose coordinator died is finished where its
			// upload is still held, not rolled back without it.
			if found, completed, err := s.resumeFromHeal(ctx, drives, bucket, object, best, held); found {
				if err != nil {
					res.Unrecoverable = 1
					return res, fmt.Errorf("healing %s/%s: %w", bucket, object, err)
				}
				res.Shards = completed
				return res, nil
			}
			forEachDrive(drives, func(pos int, d Drive) error {
				if held[pos] != nil {
					_, _ = d.RollbackVersion(committing(ctx), bucket, object, held[pos])
				}
				return nil
			})
			res.Purged = 1
			return res, nil
		}
		res.Unrecoverable = 1
		return res, nil
	}

	agreeing := make([]*drive.Record, len(held))
	for pos, r := range held {
		if r != nil && sameVersion(r, best) {
			agreeing[pos] = r
		}
	}
	h := &ObjectHandle{set: s, drives: drives, rec: best, agreeing: agreeing, Info: infoFromRecord(bucket, object, best)}
	var targets []int
	for pos, d := range drives {
		switch {
		case d == nil || listErrs[pos] != nil:
			// Offline or failing: healed when it answers again.
		case agreeing[pos] == nil:
			targets = append(targets, pos)
		case !s.shardIntact(ctx, d, best, agreeing[pos], deep):
			agreeing[pos] = nil // not a source for the rebuild
			targets = append(targets, pos)
		}
	}
	if len(targets) == 0 {
		return res, nil
	}
	if n := countNonNil(agreeing); n < s.layout.ReadQuorum() {
		res.Unrecoverable = 1
		return res, fmt.Errorf("%w: %s/%s: %d intact copies, %d needed", objlayer.ErrReadQuorum, bucket, object, n, s.layout.ReadQuorum())
	}
	dropCompletedUpload(ctx, drives, targets, bucket, object, best)
	if err := s.rebuild(ctx, h, targets); err != nil {
		if errors.Is(err, errHealOutdated) {
			return res, nil // what replaced or deleted it is healed as itself
		}
		return res, fmt.Errorf("healing %s/%s: %w", bucket, object, err)
	}
	res.Shards = len(targets)
	res.Bytes = best.Size
	return res, nil
}

func countNonNil(rs []*drive.Record) int {
	n := 0
	for _, r := range rs {
		if r != nil {
			n++
		}
	}
	return n
}

// shardIntact checks one drive's copy of a version: inline shards are
// always verified (they are in memory); shard files are checked for size,
// and read and verified when deep.
func (s *Set) shardIntact(ctx context.Context, d Drive, rec, own *drive.Record, deep bool) bool {
	if rec.IsDeleteMarker() || rec.Size == 0 {
		return true
	}
	if rec.IsInline() {
		br := drive.NewBitrotReader(bytes.NewReader(own.Inline), s.codec.ShardSize(rec.Size), s.codec.ShardBlockSize())
		return verifyAll(br) == nil
	}
	for i, size := range partSizes(rec) {
		f, err := d.OpenShard(ctx, rec.DataDir, i+1)
		if err != nil {
			return false
		}
		shardSize := s.codec.ShardSize(size)
		fi, err := f.Stat()
		ok := err == nil && fi.Size() == drive.BitrotSize(shardSize, s.codec.ShardBlockSize())
		if ok && deep {
			ok = verifyAll(drive.NewBitrotReader(f, shardSize, s.codec.ShardBlockSize())) == nil
		}
		_ = f.Close()
		if !ok {
			return false
		}
	}
	return true
}

func verifyAll(br *drive.BitrotReader) error {
	for i := 0; i < br.Blocks(); i++ {
		if _, err := br.ReadBlock(i); err != nil {
			return err
		}
	}
	return nil
}

// discardBlocks is the writer of shards nobody needs during a rebuild.
type discardBlocks struct{}

func (discardBlocks) WriteBlock([]byte) error { return nil }

// rebuild decodes a version from the drives whose copy is intact and writes
// the shards of the target positions. Long because staging, decoding,
// committing and cleaning up share the staged files' lifetime: every exit
// path must abort what was staged, which one function keeps visible.
func (s *Set) rebuild(ctx context.Context, h *ObjectHandle, targets []int) error {
	rec := h.rec
	if rec.IsDeleteMarker() || rec.IsInline() || rec.Size == 0 {
		var shards [][]byte
		if rec.IsInline() && rec.Size > 0 {
			var buf bytes.Buffer
			if _, err := h.WriteRange(ctx, &buf, 0, -1); err != nil {
				return err
			}
			var err error
			if shards, err = s.inlineShards(buf.Bytes()); err != nil {
				return err
			}
		}
		if !s.stillAgreed(ctx, h) {
			return errHealOutdated
		}
		written := make([]bool, len(h.drives))
		errs := forEachDrive(h.drives, func(pos int, d Drive) error {
			if !contains(targets, pos) {
				return nil
			}
			res, err := d.PutVersion(ctx, h.Info.Bucket, h.Info.Name, ownRecord(rec, pos, shards), drive.NotStaged)
			written[pos] = err == nil && !res.Superseded
			return err
		})
		if err := s.undoIfOutdated(ctx, h, written); err != nil {
			return err
		}
		return errors.Join(errs...)
	}

	// Shard files: every part is decoded and re-encoded; only the targets'
	// shards are written, staged under a name of this heal's own and moved
	// into place as the version's data directory with the record.
	stage := uuid.New()
	errs := make([]error, len(h.drives))
	for i, size := range partSizes(rec) {
		part := i + 1
		writers := make([]BlockWriter, len(h.drives))
		for shard := range writers {
			writers[shard] = discardBlocks{}
		}
		var opened []int
		for _, pos := range targets {
			if errs[pos] != nil {
				continue
			}
			f, err := h.drives[pos].CreateStaged(ctx, stage, part)
			if err != nil {
				errs[pos] = err
				continue
			}
			writers[rec.Erasure.Distribution[pos]] = newShardSink(ctx, h.drives[pos], stage, f, s.codec.ShardBlockSize())
			opened = append(opened, pos)
		}
		pr, pw := io.Pipe()
		go func() {
			_, err := h.decodePart(ctx, pw, part, size, 0, size)
			pw.CloseWithError(err)
		}()
		// The sinks flush and close their shards, or remove them when the
		// encode failed (shardSink.finish).
		_, werrs, err := s.codec.Encode(pr, writers, 0)
		_ = pr.CloseWithError(io.ErrClosedPipe)
		for _, pos := range opened {
			if errs[pos] = err; err == nil {
				errs[pos] = werrs[rec.Erasure.Distribution[pos]]
			}
		}
	}
	if !s.stillAgreed(ctx, h) {
		for _, pos := range targets {
			_ = h.drives[pos].AbortStaged(ctx, stage)
		}
		return errHealOutdated
	}
	written := make([]bool, len(h.drives))
	for _, pos := range targets {
		d := h.drives[pos]
		if errs[pos] == nil {
			var res drive.PutResult
			if res, errs[pos] = d.PutVersion(ctx, h.Info.Bucket, h.Info.Name, ownRecord(rec, pos, nil), stage); errs[pos] == nil && res.Superseded {
				_ = d.AbortStaged(ctx, stage) // a newer version is there: nothing to heal
			}
			written[pos] = errs[pos] == nil && !res.Superseded
		}
		if errs[pos] != nil {
			_ = d.AbortStaged(ctx, stage)
		}
	}
	if err := s.undoIfOutdated(ctx, h, written); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// undoIfOutdated checks again, after the heal wrote the version to the
// drives marked written, that it is still agreed (stillAgreed), and takes
// it back from them if not: a replacement or delete that reached the
// sources between the check before the write and the write itself.
func (s *Set) undoIfOutdated(ctx context.Context, h *ObjectHandle, written []bool) error {
	if !slices.Contains(written, true) || s.stillAgreed(ctx, h) {
		return nil
	}
	forEachDrive(h.drives, func(pos int, d Drive) error {
		if written[pos] {
			_, _ = d.RollbackVersion(committing(ctx), h.Info.Bucket, h.Info.Name, ownRecord(h.rec, pos, nil))
		}
		return nil
	})
	return errHealOutdated
}

func contains(s []int, v int) bool { return slices.Contains(s, v) }

// errHealOutdated: the version a heal rebuilt was replaced or deleted
// while it was being rebuilt; nothing is written.
var errHealOutdated = errors.New("the version was replaced or deleted while it was healed")

// healCommitHook, when set (tests), runs at each stillAgreed check, before
// it reads the drives.
var healCommitHook atomic.Pointer[func()]

// stillAgreed reports whether a read quorum of the drives a heal rebuilt a
// version from still hold it, just before the heal writes it to the drives
// that miss it (and again just after: undoIfOutdated). A heal can take
// long (a large object's decode, a drive that stopped answering mid-read);
// if meanwhile the version was replaced or deleted (an unversioned
// overwrite or DELETE, a version's delete), the heal would write it back
// on its targets, which had taken the overwrite and the delete, and with
// drives that were away for both still holding it, a read quorum could
// serve the deleted version again (TestCrashConsistency saw a key read as
// its second-to-last PUT after an acknowledged DELETE). What stays open is
// a delete whose drive writes straddle the heal's write and its second
// check (docs/reliability.md).
func (s *Set) stillAgreed(ctx context.Context, h *ObjectHandle) bool {
	if hook := healCommitHook.Load(); hook != nil {
		(*hook)()
	}
	still := make([]*drive.Record, len(h.drives))
	forEachDrive(h.drives, func(pos int, d Drive) error {
		if h.agreeing[pos] == nil {
			return nil
		}
		vs, err := d.Versions(ctx, h.Info.Bucket, h.Info.Name)
		if i := slices.IndexFunc(vs, func(r *drive.Record) bool { return sameVersion(r, h.rec) }); err == nil && i >= 0 {
			still[pos] = vs[i]
		}
		return err
	})
	return countNonNil(still) >= s.layout.ReadQuorum()
}

// HealBuckets copies bucket records to drives of the pool that miss them
// (a replaced drive) and settles disagreements by the latest change.
func (p *Pool) HealBuckets(ctx context.Context) (int, error) {
	buckets, err := p.ListBuckets(ctx)
	if err != nil {
		return 0, err
	}
	var healed atomic.Int64
	for _, b := range buckets {
		for _, s := range p.sets {
			errs := s.forEach(func(_ int, d Drive) error {
				cur, err := d.StatBucket(ctx, b.Name)
				if err == nil && !cur.Updated.Before(b.Updated) {
					return nil
				}
				if err != nil && !errors.Is(err, drive.ErrBucketNotFound) {
					return err
				}
				healed.Add(1)
				return d.SetBucket(ctx, drive.BucketInfo(b))
			})
			if err := errors.Join(errs...); err != nil && !errors.Is(err, errDriveOffline) {
				return int(healed.Load()), err
			}
		}
	}
	return int(healed.Load()), nil
}
