package s3front

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/versity/versitygw/s3err"
)

// What the gateway's backend (versitygw's posix backend behind
// engine/gateway) needs to answer as `strata server` answers: S3's rules,
// implemented once here.

// PutConditions is S3's answer to a conditional write (If-Match,
// If-None-Match) given the current object (etag "" and exists false when
// there is none).
func PutConditions(etag string, exists bool, ifMatch, ifNoneMatch *string) error {
	return putConditions(etag, exists, ifMatch, ifNoneMatch)
}

// StoredEncoding is the Content-Encoding an object keeps (without
// aws-chunked).
func StoredEncoding(v *string) *string { return storedEncoding(v) }

// ErrPartNumberBeyond answers a partNumber past an object's last part.
func ErrPartNumberBeyond(parts, asked int) error { return partNumberBeyond(parts, asked) }

// RangeBeyond reports a copy range ending past a source of size bytes.
func RangeBeyond(r string, size int64) bool { return rangeBeyond(r, size) }

// ErrInvalidRange is S3's answer to such a range.
func ErrInvalidRange(r string, size int64) error { return s3err.GetInvalidRangeErr(r, size) }

// ErrInvalidURI answers a key that is not UTF-8.
var ErrInvalidURI = s3err.APIError{Code: "InvalidURI", Description: "Couldn't parse the specified URI.", HTTPStatusCode: http.StatusBadRequest}

// ErrTooManyKeys answers a DeleteObjects naming more than 1,000 keys.
func ErrTooManyKeys(n int) error {
	if n > maxDeleteKeys {
		return s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	return nil
}

// ErrVersioningLocked refuses to suspend versioning in a bucket with object
// lock: S3's InvalidBucketState is a 409 (versitygw answers 400).
var ErrVersioningLocked = s3err.APIError{
	Code:           "InvalidBucketState",
	Description:    "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.",
	HTTPStatusCode: http.StatusConflict,
}

// IsStatus reports whether err is an S3 error with the HTTP status.
func IsStatus(err error, status int) bool {
	var s3e s3err.S3Error
	return errors.As(err, &s3e) && s3e.StatusCode() == status
}

// NotModifiedHeaders sets what a 304 answer carries: the object's ETag
// (quoted) and Last-Modified.
func NotModifiedHeaders(ctx context.Context, etag string, modTime time.Time) {
	setResponseHeader(ctx, "ETag", etag)
	setResponseHeader(ctx, "Last-Modified", modTime.UTC().Format(http.TimeFormat))
}

// ListingEncoder is how a listing request wants keys rendered: as they are,
// or URL-encoded (encoding-type=url), with the EncodingType to answer.
func ListingEncoder(ctx context.Context) (func(string) string, string, error) {
	e, et, err := encoderFor(ctx)
	return e.enc, string(et), err
}

// QueryHas reports whether the request's query names an argument.
func QueryHas(ctx context.Context, name string) bool { return queryHas(ctx, name) }
