package s3err

import (
	"errors"

	"github.com/strata-storage/strata/engine/objlayer"
)

// objectMeanings is what each object-layer error means in S3, in one
// table: the first entry whose error the returned one wraps answers.
var objectMeanings = []struct {
	err    error
	answer func(bucket, key string) *Error
}{
	{objlayer.ErrBucketNotFound, func(b, _ string) *Error { return Bucket(NoSuchBucket, b) }},
	{objlayer.ErrBucketNotEmpty, func(b, _ string) *Error { return Bucket(BucketNotEmpty, b) }},
	{objlayer.ErrBucketExists, func(b, _ string) *Error { return Bucket(BucketAlreadyOwnedByYou, b) }},
	{objlayer.ErrObjectNotFound, func(_, k string) *Error { return Key(NoSuchKey, k) }},
	{objlayer.ErrIncompleteBody, func(string, string) *Error { return IncompleteBody }},
	{objlayer.ErrBodyTooLong, func(string, string) *Error {
		return BadRequest.With("The request body is longer than its Content-Length.")
	}},
	{objlayer.ErrInvalidVersionID, func(string, string) *Error { return InvalidArgument.With("Invalid version id specified") }},
	{objlayer.ErrUploadNotFound, func(string, string) *Error { return NoSuchUpload }},
	{objlayer.ErrInvalidPart, func(string, string) *Error { return InvalidPart }},
	{objlayer.ErrInvalidPartOrder, func(string, string) *Error { return InvalidPartOrder }},
	{objlayer.ErrPartTooSmall, func(string, string) *Error { return EntityTooSmall }},
	{objlayer.ErrInvalidKey, func(_, k string) *Error {
		return InvalidArgument.With("This object key cannot be stored: it is not a path inside its bucket.").Field("Key", k)
	}},
	{objlayer.ErrKeyTooLong, func(string, string) *Error {
		return KeyTooLong.With("Your key is too long: a name between slashes is longer than the filesystem stores.")
	}},
	{objlayer.ErrKeyConflict, func(_, k string) *Error {
		return Key(KeyConflict, k)
	}},
	{objlayer.ErrOutsideBucket, func(string, string) *Error {
		return AccessDenied.With("Access Denied: the key leads out of its bucket through a symbolic link.")
	}},
	{objlayer.ErrNoSpace, func(string, string) *Error { return InsufficientStorage }},
	{objlayer.ErrQuotaExceeded, func(string, string) *Error { return QuotaExceeded }},
	{objlayer.ErrReadQuorum, func(string, string) *Error { return quorumLost }},
	{objlayer.ErrWriteQuorum, func(string, string) *Error { return quorumLost }},
	{objlayer.ErrBusy, func(string, string) *Error {
		return SlowDown.With("Please reduce your request rate: another request is changing this object; retry shortly.")
	}},
}

// quorumLost answers a read or write that too few drives could serve:
// retryable from the client's view, and nothing half-written is visible.
// The client is not told the cluster's internal endpoints.
var quorumLost = SlowDown.With("Please reduce your request rate: this object's erasure set has lost its quorum of drives; retry shortly.")

// FromObject is the S3 answer to an object-layer error of a request on
// bucket and key; nil when err is none of the layer's (an internal fault).
func FromObject(err error, bucket, key string) *Error {
	for _, m := range objectMeanings {
		if errors.Is(err, m.err) {
			return m.answer(bucket, key).Because(err)
		}
	}
	return nil
}
