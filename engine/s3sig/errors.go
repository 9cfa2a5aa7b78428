package s3sig

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// The package's refusals, named once. Codes, statuses and wording are
// S3's (the s3-tests functional suite pins the codes and statuses); each
// is a copy of an s3err entry with the message S3 gives in that case.

func errOneMechanism(authz string) *s3err.Error {
	return s3err.InvalidArgumentNamed("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified",
		"Authorization", authz)
}

// errMalformedHeader is a Signature V4 Authorization header S3 cannot
// read.
func errMalformedHeader(format string, args ...any) *s3err.Error {
	return s3err.AuthorizationHeaderMalformed.With("The authorization header is malformed; " + fmt.Sprintf(format, args...))
}

// errQueryParams is a presigned URL's V4 parameters S3 cannot read.
func errQueryParams(format string, args ...any) *s3err.Error {
	return s3err.AuthorizationQueryParameters.Withf(format, args...)
}

func errNoDate() *s3err.Error {
	return s3err.AccessDenied.With("AWS authentication requires a valid Date or x-amz-date header")
}

func errExpired(now, expires time.Time) *s3err.Error {
	return s3err.AccessDenied.With("Request has expired").
		Field("Expires", expires.UTC().Format(time.RFC3339)).
		Field("ServerTime", now.UTC().Format(time.RFC3339))
}

func errSkewed(t, now time.Time, max time.Duration) *s3err.Error {
	return s3err.RequestTimeTooSkewed.
		Field("RequestTime", t.UTC().Format(time.RFC3339)).
		Field("ServerTime", now.UTC().Format(time.RFC3339)).
		Field("MaxAllowedSkewMilliseconds", strconv.FormatInt(max.Milliseconds(), 10))
}

func errUnknownKey(access string) *s3err.Error {
	return s3err.InvalidAccessKeyID.Field("AWSAccessKeyId", access)
}

// errNotSigned: S3 requires every x-amz- header sent (and Host) to be
// signed, so none can be added to a signed request on its way.
func errNotSigned(names []string) *s3err.Error {
	return s3err.AccessDenied.With("There were headers present in the request which were not signed").
		Field("HeadersNotSigned", strings.Join(names, ", "))
}

// errMismatch carries what S3 gives a client to find its signing mistake.
func errMismatch(access, stringToSign, provided, canonical string) *s3err.Error {
	e := s3err.SignatureDoesNotMatch.Field("AWSAccessKeyId", access).
		Field("StringToSign", stringToSign).Field("SignatureProvided", provided)
	if canonical != "" {
		e = e.Field("CanonicalRequest", canonical)
	}
	return e
}

func errPayloadValue(v string) *s3err.Error {
	return s3err.InvalidArgumentNamed("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD, STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER or a valid sha256 value.",
		"x-amz-content-sha256", v)
}

// errChunked is aws-chunked framing that is not well-formed.
func errChunked(what string) *s3err.Error {
	return s3err.InvalidRequest.With("The aws-chunked body is malformed: " + what + ".")
}

// errShortBody: the body ended before what was declared of it. The end of
// the stream itself (io.EOF, io.ErrUnexpectedEOF) is not kept as the
// cause: a reader further on that asks errors.Is(err, io.EOF) would take
// the short body for its normal end (2026-11-28, FuzzChunkedSigned: a
// signed chunk cut before its CRLF, its signature never checked, ended the
// payload as if complete). Other causes (a reset connection) are kept.
func errShortBody(cause error) *s3err.Error {
	e := s3err.IncompleteBody
	if cause != nil && !errors.Is(cause, io.EOF) && !errors.Is(cause, io.ErrUnexpectedEOF) {
		e = e.Because(cause)
	}
	return e
}

func errChecksumValue(header string) *s3err.Error {
	return s3err.InvalidRequest.Withf("Value for %s header is invalid.", header)
}

func errChecksumMismatch(alg string) *s3err.Error {
	return s3err.BadDigest.Withf("The %s you specified did not match the calculated checksum.", alg)
}

func errUnknownAlgorithm() *s3err.Error {
	return s3err.InvalidRequest.With("Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, MD5, SHA1, SHA256, SHA512, XXHASH128, XXHASH3, XXHASH64]")
}

// errPostField: a form lacks a field its signature needs.
func errPostField(name string) *s3err.Error {
	return s3err.InvalidArgumentNamed("Bucket POST must contain a field named '"+name+"'.  If it is specified, please check the order of the fields.", name, "")
}

func errPolicyDocument(format string, args ...any) *s3err.Error {
	return s3err.InvalidPolicyDocument.With("Invalid Policy: " + fmt.Sprintf(format, args...))
}

func errPolicyDenied(format string, args ...any) *s3err.Error {
	return s3err.AccessDenied.With("Invalid according to Policy: " + fmt.Sprintf(format, args...))
}
