package s3front

import (
	"context"
	"io"
	"time"

	"github.com/strata-storage/strata/engine/erasure"
)

// ObjectLayer is what the front end needs of the storage below it: one
// erasure pool today (*erasure.Pool), the pools of a cluster tomorrow.
type ObjectLayer interface {
	CreateBucket(ctx context.Context, info erasure.BucketInfo) error
	StatBucket(ctx context.Context, name string) (erasure.BucketInfo, error)
	UpdateBucket(ctx context.Context, name string, fn func(b *erasure.BucketInfo)) error
	ListBuckets(ctx context.Context) ([]erasure.BucketInfo, error)
	DeleteBucket(ctx context.Context, name string) error

	PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts erasure.PutOptions) (erasure.ObjectInfo, error)
	OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (*erasure.ObjectHandle, error)
	// OpenObjectMeta resolves a version whose data is not read (a HEAD).
	OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (*erasure.ObjectHandle, error)
	DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode erasure.DeleteMode) (erasure.DeleteResult, error)
	UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (erasure.ObjectInfo, error)
	ListObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int) (erasure.ListResult, error)
	ListObjectVersions(ctx context.Context, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (erasure.ListResult, error)

	NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (erasure.UploadInfo, error)
	StatUpload(ctx context.Context, bucket, object string, uploadID [16]byte) (erasure.UploadInfo, error)
	PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts erasure.PartOptions) (erasure.PartInfo, error)
	ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (erasure.UploadInfo, []erasure.PartInfo, bool, error)
	CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []erasure.CompletePart, opts erasure.PutOptions) (erasure.ObjectInfo, error)
	AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error
	ListMultipartUploads(ctx context.Context, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (erasure.UploadList, error)
}

var (
	_ ObjectLayer = (*erasure.Pool)(nil)
	_ ObjectLayer = (*erasure.Pools)(nil)
)

// Hooks let the server observe what the front end does; nil fields are
// skipped.
type Hooks struct {
	// Heal is told about an object read with a missing, stale or corrupt
	// shard.
	Heal func(bucket, object string)
	// FirstByte is told how long after the request started a GET's body
	// produced its first byte.
	FirstByte func(d time.Duration)
}

// requestStart is when the request began, when ctx is the front end's
// request context.
func requestStart(ctx context.Context) time.Time {
	if rc, ok := frontCtx(ctx); ok {
		return rc.Time()
	}
	return time.Now()
}

// queryArg returns a query argument of the request, when ctx is the front
// end's request context (arguments the front end does not pass on, such as
// encoding-type).
func queryArg(ctx context.Context, name string) string {
	if rc, ok := frontCtx(ctx); ok {
		return string(rc.QueryArgs().Peek(name))
	}
	return ""
}

// setResponseHeader sets a header on the response, when ctx is the front
// end's request context: for headers an error answer carries (a 304's ETag),
// which the front end's error path does not set.
func setResponseHeader(ctx context.Context, name, value string) {
	if rc, ok := frontCtx(ctx); ok {
		rc.Response.Header.Set(name, value)
	}
}

// queryHas reports whether the request's query names an argument, empty or
// not.
func queryHas(ctx context.Context, name string) bool {
	rc, ok := frontCtx(ctx)
	return ok && rc.QueryArgs().Has(name)
}
