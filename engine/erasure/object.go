package erasure

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
)

// ObjectInfo describes one object version as the object layer resolved it.
type ObjectInfo struct {
	Bucket, Name string
	// VersionID is all zero for the null version.
	VersionID    [16]byte
	ModTime      time.Time
	Size         int64
	ETag         string
	Meta         map[string]string
	DeleteMarker bool
	// IsLatest is set by listings of versions.
	IsLatest bool
	// Parts lists the parts of a multipart object (empty otherwise).
	Parts []drive.Part
}

// Errors of object operations.
var (
	// ErrObjectNotFound: no such object (or version).
	ErrObjectNotFound = errors.New("object not found")
	// ErrBucketNotFound: no such bucket.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrBucketExists: the bucket exists already.
	ErrBucketExists = errors.New("bucket already exists")
	// ErrBucketNotEmpty: the bucket still holds objects.
	ErrBucketNotEmpty = errors.New("bucket not empty")
	// ErrIncompleteBody: the request body ended before its declared size.
	ErrIncompleteBody = errors.New("request body shorter than its Content-Length")
	// ErrInvalidVersionID: a version ID that this engine never issued.
	ErrInvalidVersionID = errors.New("invalid version ID")
	// ErrBodyTooLong: the request body ran past its declared size.
	ErrBodyTooLong = errors.New("request body longer than its Content-Length")
)

// mapDriveErr turns a drive's sentinel into the object layer's.
func mapDriveErr(err error) error {
	switch {
	case errors.Is(err, drive.ErrVersionNotFound):
		return ErrObjectNotFound
	case errors.Is(err, drive.ErrBucketNotFound):
		return ErrBucketNotFound
	case errors.Is(err, drive.ErrBucketExists):
		return ErrBucketExists
	case errors.Is(err, drive.ErrBucketNotEmpty):
		return ErrBucketNotEmpty
	}
	return err
}

func infoFromRecord(bucket, object string, r *drive.Record) ObjectInfo {
	return ObjectInfo{
		Bucket:       bucket,
		Name:         object,
		VersionID:    r.VersionID,
		ModTime:      time.Unix(0, r.ModTime).UTC(),
		Size:         r.Size,
		ETag:         r.ETag,
		Meta:         r.Meta,
		DeleteMarker: r.IsDeleteMarker(),
		Parts:        r.Parts,
	}
}

// NullVersion is the version ID of the S3 "null" version.
var NullVersion [16]byte

// FormatVersionID renders a version ID as S3 shows it: "null" for the null
// version, a UUID otherwise.
func FormatVersionID(id [16]byte) string {
	if id == NullVersion {
		return "null"
	}
	return uuid.UUID(id).String()
}

// ParseVersionID parses what FormatVersionID renders.
func ParseVersionID(s string) ([16]byte, error) {
	if s == "null" {
		return NullVersion, nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return NullVersion, ErrInvalidVersionID
	}
	return id, nil
}

func formatID(id [16]byte) string { return FormatVersionID(id) }

// BucketInfo is a bucket's record.
type BucketInfo = drive.BucketInfo
