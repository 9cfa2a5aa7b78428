package erasure

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
	"github.com/strata-storage/strata/engine/objlayer"
)

// DeleteObject deletes an object. With versionID it removes that version;
// otherwise mode decides (see DeleteMode). Deleting what does not exist
// succeeds, as S3 does.
func (s *Set) DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode objlayer.DeleteMode) (objlayer.DeleteResult, error) {
	drives := s.writeDrives()
	w := s.newWriteWait()
	if versionID == nil && mode != objlayer.DeleteUnversioned || mode == objlayer.DeleteMarkerAs {
		// The data directory ID names the write (see putInline).
		marker := &drive.Record{ModTime: hlc.Default.Now(), Flags: drive.FlagDeleteMarker, DataDir: uuid.New()}
		switch {
		case mode == objlayer.DeleteMarkerAs && versionID != nil:
			marker.VersionID = *versionID
			if t := objlayer.ModTimeOf(ctx); !t.IsZero() {
				marker.ModTime = t.UnixNano()
			}
		case mode == objlayer.DeleteVersioned:
			marker.VersionID = uuid.Must(uuid.NewV7()) // time-ordered, as the front end makes version IDs
		}
		errs := s.commitVersion(ctx, drives, bucket, object, marker, false, nil,
			s.commitRecords(ctx, w, drives, bucket, object, marker, func(int) *drive.Record { return marker }))
		if _, err := s.finishPut(ctx, drives, bucket, object, marker, errs); err != nil {
			return objlayer.DeleteResult{}, err
		}
		return objlayer.DeleteResult{VersionID: marker.VersionID, DeleteMarker: true}, nil
	}
	var id [16]byte
	if versionID != nil {
		id = *versionID
	}
	// A drive still deleting when write quorum of drives did is left to
	// finish, and healed if it fails.
	removed, errs := forEachDriveWait(w, drives, func(pos int, d Drive) (*drive.Record, error) {
		r, err := d.DeleteVersion(committing(ctx), bucket, object, id)
		if errors.Is(err, drive.ErrVersionNotFound) {
			return r, nil
		}
		return r, err
	}, errStillCommitting, func(_ int, _ *drive.Record, err error) {
		if err != nil {
			s.partialWrite(bucket, object, id)
		}
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return objlayer.DeleteResult{}, fmt.Errorf("%w: %d of %d drives deleted %s/%s, %d needed (%s)",
			objlayer.ErrWriteQuorum, n, len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
	}
	if countNil(errs)+countIs(errs, errStillCommitting) < len(errs) {
		s.partialWrite(bucket, object, id)
	}
	res := objlayer.DeleteResult{VersionID: id}
	for _, r := range removed {
		if r != nil && r.IsDeleteMarker() {
			res.DeleteMarker = true
		}
	}
	return res, nil
}
