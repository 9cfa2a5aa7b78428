package erasure

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// A completion is committed drive by drive: each drive's CompleteUpload
// writes the version and removes the upload in one batch, and only the
// coordinator checks write quorum and undoes a completion that missed it
// (reopenUpload). A coordinator that dies on the way (its node killed)
// leaves some drives holding the version and the others the upload.
// Counted by upload alone, the drives that committed look as if they never
// had it: the client's retry got NoSuchUpload, and the version, on fewer
// than read quorum of drives, was rolled back by the heal after
// DanglingGrace, taking the upload with it. So the completion is resumed
// instead, by the client's retry or by the heal: the drives still holding
// the upload complete it with the record the others committed (same
// version ID and stamp), and the retry answers with that version.

// resumeCompletion finishes upload's completion when a drive lacking the
// upload (errs) holds a version made from it. resumed is false when none
// does: nothing was committed, and the completion goes on as a first one.
// The client's parts must be those the version was made of; otherwise the
// upload was completed with others, and this completion is
// ErrUploadNotFound, as after a whole completion.
func (s *Set) resumeCompletion(ctx context.Context, drives []Drive, bucket, object string, ups []*drive.Upload, errs []error,
	parts []objlayer.CompletePart) (info objlayer.ObjectInfo, resumed bool, err error) {
	u := firstUpload(ups)
	if u == nil || countIs(errs, drive.ErrUploadNotFound) == 0 {
		return objlayer.ObjectInfo{}, false, nil
	}
	lacking := make([]bool, len(drives))
	for pos, err := range errs {
		lacking[pos] = err != nil
	}
	rec, committed := committedFrom(ctx, drives, bucket, object, u, lacking)
	if rec == nil {
		return objlayer.ObjectInfo{}, false, nil
	}
	info, _, err = s.finishCompletion(ctx, drives, u, ups, rec, committed)
	if err != nil {
		return objlayer.ObjectInfo{}, true, err
	}
	if !madeOf(rec, parts) {
		return objlayer.ObjectInfo{}, true, fmt.Errorf("%w: upload %s of %s/%s was completed with other parts",
			objlayer.ErrUploadNotFound, uuid.UUID(u.ID), bucket, object)
	}
	return info, true, nil
}

func firstUpload(ups []*drive.Upload) *drive.Upload {
	for _, u := range ups {
		if u != nil {
			return u
		}
	}
	return nil
}

// committedFrom looks, on the drives marked lacking, for a version made
// from upload u (its data directory is the upload's): the record, and
// which drives hold it. A drive that cannot be read counts as not holding
// it.
func committedFrom(ctx context.Context, drives []Drive, bucket, object string, u *drive.Upload, lacking []bool) (*drive.Record, []bool) {
	held := make([]*drive.Record, len(drives))
	forEachDrive(drives, func(pos int, d Drive) error {
		if !lacking[pos] {
			return nil
		}
		versions, err := d.Versions(ctx, bucket, object)
		for _, r := range versions {
			if r.DataDir == u.DataDir && !r.IsDeleteMarker() {
				held[pos] = r
				break
			}
		}
		return err
	})
	var rec *drive.Record
	committed := make([]bool, len(drives))
	for pos, r := range held {
		if r != nil {
			rec = r
			committed[pos] = true
		}
	}
	return rec, committed
}

// finishCompletion completes upload u with rec on the drives still
// holding it (ups), the drives marked committed holding rec already. Each
// drive takes the parts of rec it holds, and completes without the others,
// which are then healed. Nothing changes unless write quorum of drives
// can hold rec; then it must, or the completion is ErrWriteQuorum (the
// drives that completed it keep it, and a retry goes on from there).
// completed is the number of drives that completed it here.
func (s *Set) finishCompletion(ctx context.Context, drives []Drive, u *drive.Upload, ups []*drive.Upload, rec *drive.Record, committed []bool) (info objlayer.ObjectInfo, completed int, err error) {
	wq := s.layout.WriteQuorum()
	if n := countTrue(committed) + countUploads(ups); n < wq {
		return objlayer.ObjectInfo{}, 0, fmt.Errorf("%w: upload %s of %s/%s is half completed: %d drives hold the version, %d the upload, %d needed; retry",
			objlayer.ErrWriteQuorum, uuid.UUID(u.ID), u.Bucket, u.Object, countTrue(committed), countUploads(ups), wq)
	}
	missed := make([]bool, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		switch {
		case committed[pos]:
			return nil
		case ups[pos] == nil:
			return drive.ErrUploadNotFound
		}
		have, err := d.ListParts(ctx, u.ID)
		if err != nil {
			return err
		}
		mine := make([]drive.PartRecord, len(rec.Parts))
		for i, p := range rec.Parts {
			mine[i] = drive.PartRecord{Number: p.Number} // missed
			for _, h := range have {
				if h.Number == p.Number && h.ETag == p.ETag && h.Size == p.Size {
					mine[i] = h
				}
			}
			missed[pos] = missed[pos] || mine[i].Missed()
		}
		res, err := d.CompleteUpload(committing(ctx), u, mine, ownRecord(rec, pos, nil))
		if err == nil && res.Superseded {
			return drive.ErrSuperseded
		}
		return err
	})
	completed = countNil(errs) - countTrue(committed)
	if n := countNil(errs); n < wq {
		return objlayer.ObjectInfo{}, completed, fmt.Errorf("%w: upload %s of %s/%s is half completed: %d of %d drives hold the version, %d needed; retry (%s)",
			objlayer.ErrWriteQuorum, uuid.UUID(u.ID), u.Bucket, u.Object, n, len(errs), wq, detail(errs))
	}
	if countTrue(missed) > 0 || countNil(errs) < len(errs) {
		s.partialWrite(u.Bucket, u.Object, rec.VersionID)
	}
	return infoFromRecord(u.Bucket, u.Object, rec), completed, nil
}

func countUploads(ups []*drive.Upload) int {
	n := 0
	for _, u := range ups {
		if u != nil {
			n++
		}
	}
	return n
}

// madeOf reports whether rec is made of exactly the parts a completion
// names.
func madeOf(rec *drive.Record, parts []objlayer.CompletePart) bool {
	if len(parts) != len(rec.Parts) {
		return false
	}
	for i, p := range parts {
		if p.Number != rec.Parts[i].Number || strings.Trim(p.ETag, `"`) != rec.Parts[i].ETag {
			return false
		}
	}
	return true
}

// resumeFromHeal finishes the completion that made best, a version on too
// few drives (held, by drive) to be read, when drives still hold its
// upload: the heal's answer to a coordinator that died completing. It
// reports whether the upload was found and on how many drives it was
// completed; err says why it could not finish (the version and the upload
// are then left for a later heal).
func (s *Set) resumeFromHeal(ctx context.Context, drives []Drive, bucket, object string, best *drive.Record, held []*drive.Record) (found bool, completed int, err error) {
	id, ok := completedUpload(best)
	if !ok {
		return false, 0, nil
	}
	lacking := make([]bool, len(drives))
	committed := make([]bool, len(drives))
	for pos, r := range held {
		committed[pos] = r != nil && r.DataDir == best.DataDir
		lacking[pos] = r == nil
	}
	ups := make([]*drive.Upload, len(drives))
	forEachDrive(drives, func(pos int, d Drive) error {
		if lacking[pos] {
			ups[pos], _ = d.GetUpload(ctx, bucket, object, id)
		}
		return nil
	})
	u := firstUpload(ups)
	if u == nil || u.DataDir != best.DataDir {
		return false, 0, nil
	}
	_, completed, err = s.finishCompletion(ctx, drives, u, ups, best, committed)
	return true, completed, err
}

// dropCompletedUpload removes, from the drives at targets, the upload a
// version readable from quorum was completed from: a drive away while the
// upload was completed kept it, and its parts share the version's data
// directory, which the heal is about to fill.
func dropCompletedUpload(ctx context.Context, drives []Drive, targets []int, bucket, object string, rec *drive.Record) {
	id, ok := completedUpload(rec)
	if !ok {
		return
	}
	for _, pos := range targets {
		if u, err := drives[pos].GetUpload(ctx, bucket, object, id); err == nil && u.DataDir == rec.DataDir {
			_ = drives[pos].AbortUpload(committing(ctx), bucket, object, id)
		}
	}
}

// completedUpload is the ID of the upload rec was completed from, if it
// was.
func completedUpload(rec *drive.Record) ([16]byte, bool) {
	id, err := uuid.Parse(rec.Meta[objlayer.MetaUploadID])
	return id, err == nil
}
