package erasure

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
)

// DeleteMode says how a DELETE without a version ID behaves, by the bucket's
// versioning state.
type DeleteMode int

// Delete modes.
const (
	// DeleteUnversioned removes the null version.
	DeleteUnversioned DeleteMode = iota
	// DeleteVersioned adds a delete marker with a new version ID.
	DeleteVersioned
	// DeleteSuspended adds a delete marker as the null version.
	DeleteSuspended
)

// DeleteResult says what a delete did, for the S3 response headers.
type DeleteResult struct {
	// VersionID is the version removed, or the delete marker created.
	VersionID [16]byte
	// DeleteMarker: a delete marker was created, or the version removed
	// was one.
	DeleteMarker bool
}

// DeleteObject deletes an object. With versionID it removes that version;
// otherwise mode decides (see DeleteMode). Deleting what does not exist
// succeeds, as S3 does.
func (s *Set) DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode DeleteMode) (DeleteResult, error) {
	drives := s.writeDrives()
	w := s.newWriteWait()
	if versionID == nil && mode != DeleteUnversioned {
		// The data directory ID names the write (see putInline).
		marker := &drive.Record{ModTime: hlc.Default.Now(), Flags: drive.FlagDeleteMarker, DataDir: uuid.New()}
		if mode == DeleteVersioned {
			marker.VersionID = uuid.New()
		}
		errs := s.commitVersion(ctx, drives, bucket, object, marker, false,
			s.commitRecords(ctx, w, drives, bucket, object, marker, func(int) *drive.Record { return marker }))
		if _, err := s.finishPut(ctx, drives, bucket, object, marker, errs); err != nil {
			return DeleteResult{}, err
		}
		return DeleteResult{VersionID: marker.VersionID, DeleteMarker: true}, nil
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
		return DeleteResult{}, fmt.Errorf("%w: %d of %d drives deleted %s/%s, %d needed (%s)",
			ErrWriteQuorum, n, len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
	}
	if countNil(errs)+countIs(errs, errStillCommitting) < len(errs) {
		s.partialWrite(bucket, object, id)
	}
	res := DeleteResult{VersionID: id}
	for _, r := range removed {
		if r != nil && r.IsDeleteMarker() {
			res.DeleteMarker = true
		}
	}
	return res, nil
}
