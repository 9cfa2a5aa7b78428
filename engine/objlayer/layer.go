package objlayer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Layer is the storage under the S3 front end. Every method answers the
// errors of errors.go (wrapped with detail), never S3 codes; the front end
// maps them once (engine/s3err).
type Layer interface {
	// CreateBucket creates a bucket with its record (ErrBucketExists when
	// the name is taken).
	CreateBucket(ctx context.Context, info BucketInfo) error
	// StatBucket returns a bucket's record (ErrBucketNotFound).
	StatBucket(ctx context.Context, name string) (BucketInfo, error)
	// UpdateBucket changes a bucket's record through fn, as one
	// read-modify-write.
	UpdateBucket(ctx context.Context, name string, fn func(b *BucketInfo)) error
	// ListBuckets lists every bucket in name order.
	ListBuckets(ctx context.Context) ([]BucketInfo, error)
	// DeleteBucket removes an empty bucket (ErrBucketNotEmpty).
	DeleteBucket(ctx context.Context, name string) error

	// PutObject stores an object of size bytes (-1 when unknown) read from
	// r: the version is visible once it returns, complete, or not at all.
	PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)
	// OpenObject resolves a version (the latest when versionID is nil) to
	// read it (ErrObjectNotFound; a delete marker is returned as one).
	OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (Handle, error)
	// OpenObjectMeta resolves a version whose data is not read (a HEAD):
	// it may cost less than OpenObject; its WriteRange may fail.
	OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (Handle, error)
	// DeleteObject removes a version, or without versionID acts as mode
	// says. Deleting what does not exist succeeds.
	DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode DeleteMode) (DeleteResult, error)
	// UpdateObjectMeta changes a version's metadata through fn, which
	// returns the new map (the data and the version's identity stay).
	UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (ObjectInfo, error)
	// ListObjects lists the latest versions (no delete markers) in key
	// order after marker, grouping keys by delimiter after prefix.
	ListObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int) (ListResult, error)
	// ListObjectVersions lists every version and delete marker, newest
	// first within a key, after (keyMarker, versionMarker).
	ListObjectVersions(ctx context.Context, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (ListResult, error)

	// NewMultipartUpload starts an upload; its ID names it from now on.
	NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (UploadInfo, error)
	// StatUpload returns an upload (ErrUploadNotFound).
	StatUpload(ctx context.Context, bucket, object string, uploadID [16]byte) (UploadInfo, error)
	// PutObjectPart stores one part (replacing an earlier one of the same
	// number).
	PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts PartOptions) (PartInfo, error)
	// ListParts lists an upload's parts after partMarker, at most
	// maxParts; the bool reports a truncated list.
	ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (UploadInfo, []PartInfo, bool, error)
	// CompleteMultipartUpload assembles the object from the parts named.
	CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []CompletePart, opts PutOptions) (ObjectInfo, error)
	// AbortMultipartUpload discards an upload and its parts.
	AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error
	// ListMultipartUploads lists uploads in progress in key order, then
	// by upload ID, after (keyMarker, uploadIDMarker).
	ListMultipartUploads(ctx context.Context, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (UploadList, error)
}

// ReadObject reads the latest version of a small object whole (the
// engine's own records: the IAM directory's, the notification queue's).
func ReadObject(ctx context.Context, l Layer, bucket, object string) ([]byte, error) {
	h, err := l.OpenObject(ctx, bucket, object, nil)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var b bytes.Buffer
	if err := h.WriteRange(ctx, &b, 0, -1); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EnsureBucket makes one of the engine's own buckets when it is missing
// (the object layer leaves checking that a bucket exists to its caller).
func EnsureBucket(ctx context.Context, l Layer, name string) error {
	_, err := l.StatBucket(ctx, name)
	if errors.Is(err, ErrBucketNotFound) {
		if err := l.CreateBucket(ctx, BucketInfo{Name: name}); err != nil && !errors.Is(err, ErrBucketExists) {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
		return nil
	}
	return err
}

type noSyncKey struct{}

// WithoutSync marks ctx's metadata changes (UpdateObjectMeta) as ones a
// layer may commit without waiting for the disk to have them: a process
// crash keeps them (they reached the operating system), a power failure
// may lose them. For metadata that can be made again, such as a version's
// replication status (a resync copies a version that lost its COMPLETED).
func WithoutSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, noSyncKey{}, true)
}

// SyncWaived reports whether ctx was marked by WithoutSync.
func SyncWaived(ctx context.Context) bool {
	v, _ := ctx.Value(noSyncKey{}).(bool)
	return v
}

type modTimeKey struct{}

// WithModTime gives the delete marker a DeleteObject makes in mode
// DeleteMarkerAs its time (a replica's marker keeps the source's, so it
// sorts among the key's versions as it does there).
func WithModTime(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, modTimeKey{}, t)
}

// ModTimeOf is the time WithModTime gave ctx (zero: none).
func ModTimeOf(ctx context.Context) time.Time {
	t, _ := ctx.Value(modTimeKey{}).(time.Time)
	return t
}
