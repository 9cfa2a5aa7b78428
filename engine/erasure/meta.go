package erasure

import (
	"context"
	"fmt"
	"maps"

	"github.com/strata-storage/strata/engine/objlayer"
)

// UpdateObjectMeta rewrites one version's metadata on every drive holding
// it (tags are metadata): fn gets a copy of the resolved metadata and
// returns the new one. The version's data and identity do not change.
func (s *Set) UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (objlayer.ObjectInfo, error) {
	w := s.newWriteWait()
	h, err := s.openObject(ctx, bucket, object, versionID, openAll)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if h.rec.IsDeleteMarker() {
		return h.Info, objlayer.ErrObjectNotFound
	}
	meta := fn(maps.Clone(h.rec.Meta))
	want := h.rec
	// A drive still updating when write quorum of drives did is left to
	// finish, and healed if it fails.
	_, errs := forEachDriveWait(w, h.drives, func(pos int, d Drive) (struct{}, error) {
		if h.agreeing[pos] == nil {
			return struct{}{}, errDriveOffline
		}
		return struct{}{}, d.SetVersionMeta(committing(ctx), bucket, object, want, meta)
	}, errStillCommitting, func(_ int, _ struct{}, err error) {
		if err != nil {
			s.partialWrite(bucket, object, want.VersionID)
		}
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return objlayer.ObjectInfo{}, fmt.Errorf("%w: %d of %d drives updated %s/%s, %d needed (%s)",
			objlayer.ErrWriteQuorum, n, len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
	}
	if countNil(errs)+countIs(errs, errStillCommitting) < len(errs) {
		s.partialWrite(bucket, object, want.VersionID)
	}
	info := h.Info
	info.Meta = meta
	return info, nil
}
