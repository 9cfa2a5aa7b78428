package erasure

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
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

// DeleteObject deletes an object. With versionID it removes that version;
// otherwise mode decides (see DeleteMode). Deleting what does not exist
// succeeds, as S3 does. It returns the delete marker created, if any.
func (s *Set) DeleteObject(bucket, object string, versionID *[16]byte, mode DeleteMode) (*ObjectInfo, error) {
	if versionID == nil && mode != DeleteUnversioned {
		marker := &drive.Record{ModTime: time.Now().UnixNano(), Flags: drive.FlagDeleteMarker}
		if mode == DeleteVersioned {
			marker.VersionID = uuid.New()
		}
		errs := s.forEach(func(_ int, d Drive) error {
			_, err := d.PutVersion(bucket, object, marker, false)
			return err
		})
		info, err := s.finishPut(bucket, object, marker, errs)
		if err != nil {
			return nil, err
		}
		return &info, nil
	}
	var id [16]byte
	if versionID != nil {
		id = *versionID
	}
	errs := s.forEach(func(_ int, d Drive) error {
		_, err := d.DeleteVersion(bucket, object, id)
		if errors.Is(err, drive.ErrVersionNotFound) {
			return nil
		}
		return err
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return nil, fmt.Errorf("%w: %d of %d drives deleted %s/%s, %d needed (%s)",
			ErrWriteQuorum, n, len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
	}
	return nil, nil
}
