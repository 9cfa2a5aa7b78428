package s3front

import (
	"errors"
	"net/http"

	"github.com/versity/versitygw/s3err"

	"github.com/strata-storage/strata/engine/erasure"
)

// toS3 maps object-layer errors to S3 errors, in this one place. The front
// end recognises S3 errors by type assertion, so they are returned
// unwrapped; anything unknown becomes InternalError (and is logged here, as
// its detail never reaches the client).
func (b *Backend) toS3(err error, bucket string) error {
	if err == nil {
		return nil
	}
	var s3e s3err.S3Error
	if errors.As(err, &s3e) {
		return s3e
	}
	switch {
	case errors.Is(err, erasure.ErrBucketNotFound):
		return s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	case errors.Is(err, erasure.ErrBucketNotEmpty):
		return s3err.GetBucketErr(s3err.ErrBucketNotEmpty, bucket)
	case errors.Is(err, erasure.ErrBucketExists):
		return s3err.GetAPIError(s3err.ErrBucketAlreadyOwnedByYou)
	case errors.Is(err, erasure.ErrObjectNotFound):
		return s3err.GetAPIError(s3err.ErrNoSuchKey)
	case errors.Is(err, erasure.ErrIncompleteBody):
		return s3err.GetAPIError(s3err.ErrIncompleteBody)
	case errors.Is(err, erasure.ErrBodyTooLong):
		return s3err.APIError{Code: "BadRequest", Description: "The request body is longer than its Content-Length.", HTTPStatusCode: http.StatusBadRequest}
	case errors.Is(err, erasure.ErrInvalidVersionID):
		return s3err.GetInvalidArgumentErr(s3err.InvalidArgVersionId, "")
	case errors.Is(err, erasure.ErrUploadNotFound):
		return s3err.GetAPIError(s3err.ErrNoSuchUpload)
	case errors.Is(err, erasure.ErrInvalidPart):
		return s3err.GetAPIError(s3err.ErrInvalidPart)
	case errors.Is(err, erasure.ErrInvalidPartOrder):
		return s3err.GetAPIError(s3err.ErrInvalidPartOrder)
	case errors.Is(err, erasure.ErrPartTooSmall):
		return s3err.GetAPIError(s3err.ErrEntityTooSmall)
	case errors.Is(err, erasure.ErrReadQuorum), errors.Is(err, erasure.ErrWriteQuorum):
		// Too many drives are gone for this set: retryable from the
		// client's view, and nothing half-written is visible. The message
		// names what was lost.
		b.log.Warn("quorum lost", "bucket", bucket, "err", err)
		return s3err.APIError{
			Code:           "SlowDown",
			Description:    "Please reduce your request rate: " + err.Error(),
			HTTPStatusCode: http.StatusServiceUnavailable,
		}
	}
	b.log.Error("internal error", "bucket", bucket, "err", err)
	return s3err.GetAPIError(s3err.ErrInternalError)
}

// invalidArgument is S3's InvalidArgument for arguments versitygw has no
// canned error for.
func invalidArgument(description string) error {
	return s3err.APIError{Code: "InvalidArgument", Description: description, HTTPStatusCode: http.StatusBadRequest}
}
