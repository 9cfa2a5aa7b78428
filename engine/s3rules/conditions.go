package s3rules

import (
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// ReadConditions are a GET's or HEAD's conditional headers (nil: absent).
type ReadConditions struct {
	IfMatch, IfNoneMatch               *string
	IfModifiedSince, IfUnmodifiedSince *time.Time
}

// Any reports whether a condition was given.
func (c ReadConditions) Any() bool {
	return c.IfMatch != nil || c.IfNoneMatch != nil || c.IfModifiedSince != nil || c.IfUnmodifiedSince != nil
}

// etagMatches compares a condition's ETag list ("*", "a", "\"a\", \"b\"")
// with an object's ETag (unquoted).
func etagMatches(cond, etag string) bool {
	for _, c := range strings.Split(cond, ",") {
		c = strings.Trim(strings.TrimSpace(c), `"`)
		c = strings.TrimPrefix(c, "W/")
		c = strings.Trim(c, `"`)
		if c == "*" || c == etag {
			return true
		}
	}
	return false
}

// EvaluateRead applies RFC 7232's precedence as S3 does: If-Match, then
// If-Unmodified-Since only without If-Match, If-None-Match, then
// If-Modified-Since only without If-None-Match. The answer is nil (serve
// the object), s3err.NotModified (304) or s3err.PreconditionFailed (412).
// modTime is compared at whole seconds, as HTTP dates carry them.
func EvaluateRead(c ReadConditions, etag string, modTime time.Time) error {
	if !c.Any() {
		return nil
	}
	modTime = modTime.Truncate(time.Second)
	if c.IfMatch != nil {
		if !etagMatches(*c.IfMatch, etag) {
			return s3err.PreconditionFailed.Field("Condition", "If-Match")
		}
	} else if c.IfUnmodifiedSince != nil && modTime.After(*c.IfUnmodifiedSince) {
		return s3err.PreconditionFailed.Field("Condition", "If-Unmodified-Since")
	}
	if c.IfNoneMatch != nil {
		if etagMatches(*c.IfNoneMatch, etag) {
			return s3err.NotModified
		}
	} else if c.IfModifiedSince != nil && !modTime.After(*c.IfModifiedSince) {
		return s3err.NotModified
	}
	return nil
}

// EvaluateCopySource applies a copy's x-amz-copy-source-if-* conditions:
// where a read would answer 304, a copy fails with 412.
func EvaluateCopySource(c ReadConditions, etag string, modTime time.Time) error {
	if err := EvaluateRead(c, etag, modTime); err != nil {
		if e, ok := s3err.As(err); ok && e.Code == s3err.NotModified.Code {
			return s3err.PreconditionFailed
		}
		return err
	}
	return nil
}

// EvaluateWrite is S3's answer to a conditional write (PutObject,
// CompleteMultipartUpload, CopyObject) given the current object (etag ""
// and exists false when there is none): If-Match needs the object
// (NoSuchKey otherwise) and its ETag (or "*"); If-None-Match fails when the
// object exists and matches it ("*" matches any).
func EvaluateWrite(ifMatch, ifNoneMatch *string, etag string, exists bool) error {
	if ifMatch == nil && ifNoneMatch == nil {
		return nil
	}
	if ifMatch != nil {
		if !exists {
			return s3err.NoSuchKey
		}
		if !etagMatches(*ifMatch, etag) {
			return s3err.PreconditionFailed.Field("Condition", "If-Match")
		}
	}
	if ifNoneMatch != nil && exists && etagMatches(*ifNoneMatch, etag) {
		return s3err.PreconditionFailed.Field("Condition", "If-None-Match")
	}
	return nil
}

// DeleteConditions are a delete's x-amz-if-match-* conditions.
type DeleteConditions struct {
	IfMatch        *string
	IfMatchModTime *time.Time
	IfMatchSize    *int64
}

// Any reports whether a condition was given.
func (c DeleteConditions) Any() bool {
	return c.IfMatch != nil || c.IfMatchModTime != nil || c.IfMatchSize != nil
}

// EvaluateDelete checks a delete's conditions against the version it
// deletes.
func EvaluateDelete(c DeleteConditions, etag string, modTime time.Time, size int64) error {
	if c.IfMatch != nil && !etagMatches(*c.IfMatch, etag) {
		return s3err.PreconditionFailed.Field("Condition", "If-Match")
	}
	if c.IfMatchModTime != nil && c.IfMatchModTime.Unix() != modTime.Unix() {
		return s3err.PreconditionFailed.Field("Condition", "x-amz-if-match-last-modified-time")
	}
	if c.IfMatchSize != nil && *c.IfMatchSize != size {
		return s3err.PreconditionFailed.Field("Condition", "x-amz-if-match-size")
	}
	return nil
}

// ParseHTTPDate reads an HTTP date header (RFC 1123, RFC 850 or ANSI C, as
// HTTP allows); ok false when it is none of them (S3 then ignores the
// condition).
func ParseHTTPDate(v string) (time.Time, bool) {
	for _, layout := range []string{time.RFC1123, time.RFC1123Z, time.RFC850, time.ANSIC, time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
