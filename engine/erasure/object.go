package erasure

import (
	"errors"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// mapDriveErr turns a drive's sentinel into the object layer's.
func mapDriveErr(err error) error {
	switch {
	case errors.Is(err, drive.ErrVersionNotFound):
		return objlayer.ErrObjectNotFound
	case errors.Is(err, drive.ErrBucketNotFound):
		return objlayer.ErrBucketNotFound
	case errors.Is(err, drive.ErrBucketExists):
		return objlayer.ErrBucketExists
	case errors.Is(err, drive.ErrBucketNotEmpty):
		return objlayer.ErrBucketNotEmpty
	}
	return err
}

func infoFromRecord(bucket, object string, r *drive.Record) objlayer.ObjectInfo {
	return objlayer.ObjectInfo{
		Bucket:       bucket,
		Name:         object,
		VersionID:    r.VersionID,
		ModTime:      time.Unix(0, r.ModTime).UTC(),
		Size:         r.Size,
		ETag:         r.ETag,
		Meta:         r.Meta,
		DeleteMarker: r.IsDeleteMarker(),
		Parts:        partsOf(r.Parts),
	}
}

// partsOf is a record's parts as the object layer describes them.
func partsOf(ps []drive.Part) []objlayer.Part {
	if len(ps) == 0 {
		return nil
	}
	out := make([]objlayer.Part, len(ps))
	for i, p := range ps {
		out[i] = objlayer.Part(p)
	}
	return out
}

func formatID(id [16]byte) string { return objlayer.FormatVersionID(id) }
