package erasure

import (
	"context"
	"fmt"
	"maps"
)

// UpdateObjectMeta rewrites one version's metadata on every drive holding
// it (tags are metadata): fn gets a copy of the resolved metadata and
// returns the new one. The version's data and identity do not change.
func (s *Set) UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (ObjectInfo, error) {
	h, err := s.openObject(ctx, bucket, object, versionID, true)
	if err != nil {
		return ObjectInfo{}, err
	}
	if h.rec.IsDeleteMarker() {
		return h.Info, ErrObjectNotFound
	}
	meta := fn(maps.Clone(h.rec.Meta))
	want := h.rec
	errs := forEachDrive(h.drives, func(pos int, d Drive) error {
		if h.agreeing[pos] == nil {
			return errDriveOffline
		}
		return d.SetVersionMeta(committing(ctx), bucket, object, want, meta)
	})
	if n := countNil(errs); n < s.layout.WriteQuorum() {
		return ObjectInfo{}, fmt.Errorf("%w: %d of %d drives updated %s/%s, %d needed (%s)",
			ErrWriteQuorum, n, len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
	}
	if countNil(errs) < len(errs) {
		s.partialWrite(bucket, object, want.VersionID)
	}
	info := h.Info
	info.Meta = meta
	return info, nil
}
