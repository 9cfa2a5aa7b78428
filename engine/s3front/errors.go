package s3front

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3err"
)

// s3Meanings is what each object-layer error means in S3, in one table:
// the first entry whose error the returned one wraps answers.
var s3Meanings = []struct {
	err error
	s3  func(bucket string) s3err.S3Error
}{
	{objlayer.ErrBucketNotFound, func(b string) s3err.S3Error { return s3err.GetBucketErr(s3err.ErrNoSuchBucket, b) }},
	{objlayer.ErrBucketNotEmpty, func(b string) s3err.S3Error { return s3err.GetBucketErr(s3err.ErrBucketNotEmpty, b) }},
	{objlayer.ErrBucketExists, canned(s3err.ErrBucketAlreadyOwnedByYou)},
	{objlayer.ErrObjectNotFound, canned(s3err.ErrNoSuchKey)},
	{objlayer.ErrIncompleteBody, canned(s3err.ErrIncompleteBody)},
	{objlayer.ErrBodyTooLong, func(string) s3err.S3Error {
		return s3err.APIError{Code: "BadRequest", Description: "The request body is longer than its Content-Length.", HTTPStatusCode: http.StatusBadRequest}
	}},
	{objlayer.ErrInvalidVersionID, func(string) s3err.S3Error { return s3err.GetInvalidArgumentErr(s3err.InvalidArgVersionId, "") }},
	{objlayer.ErrUploadNotFound, canned(s3err.ErrNoSuchUpload)},
	{objlayer.ErrInvalidPart, canned(s3err.ErrInvalidPart)},
	{objlayer.ErrInvalidPartOrder, canned(s3err.ErrInvalidPartOrder)},
	{objlayer.ErrPartTooSmall, canned(s3err.ErrEntityTooSmall)},
	{errStopped, func(string) s3err.S3Error {
		return s3err.APIError{Code: "RequestTimeout", Description: "The request ended before its answer was ready.", HTTPStatusCode: http.StatusBadRequest}
	}},
	{objlayer.ErrNoSpace, func(string) s3err.S3Error {
		return s3err.APIError{Code: "InsufficientStorage", Description: "No pool has room for new objects: every active pool has a drive over 85% full.", HTTPStatusCode: http.StatusInsufficientStorage}
	}},
}

// errStopped is the error of a request whose context ended (its client went
// away) before the answer was ready: whatever failed, failed because the
// work was stopped, so it is neither logged as a fault nor worth detail.
var errStopped = errors.New("s3: request stopped")

// stopped is err, or errStopped when ctx has ended.
func stopped(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%w): %w", errStopped, context.Cause(ctx), err)
	}
	return err
}

func canned(code s3err.ErrorCode) func(string) s3err.S3Error {
	return func(string) s3err.S3Error { return s3err.GetAPIError(code) }
}

// toS3 maps object-layer errors to S3 errors. Backend's methods return
// errors as they come; the generated decorator (s3Errors) calls this once
// per request, naming the request's bucket. The front end recognises S3
// errors by type assertion, so they are returned unwrapped; anything
// unknown becomes InternalError (and is logged here, as its detail never
// reaches the client).
func (b *Backend) toS3(err error, bucket string) error {
	if err == nil {
		return nil
	}
	var s3e s3err.S3Error
	if errors.As(err, &s3e) {
		return s3e
	}
	for _, m := range s3Meanings {
		if errors.Is(err, m.err) {
			return m.s3(bucket)
		}
	}
	if errors.Is(err, objlayer.ErrReadQuorum) || errors.Is(err, objlayer.ErrWriteQuorum) {
		// Too many drives are gone for this set: retryable from the
		// client's view, and nothing half-written is visible. The log
		// names what was lost; the client is not told the cluster's
		// internal endpoints.
		b.log.Warn("quorum lost", "bucket", bucket, "err", err)
		return s3err.APIError{
			Code:           "SlowDown",
			Description:    "Please reduce your request rate: this object's erasure set has lost its quorum of drives; retry shortly.",
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
