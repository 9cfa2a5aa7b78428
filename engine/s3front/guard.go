package s3front

import (
	"io"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3err"
)

// ReservedBucket is the bucket name the server's own endpoints
// (/strata/health, /strata/metrics, /strata/admin...) occupy: a bucket of
// that name would be created and then be unreachable behind them.
const ReservedBucket = "strata"

// MaxRequestDocument bounds the body of every request that is not object
// data: configuration documents, DeleteObjects lists, the part list of
// CompleteMultipartUpload (10,000 parts fit in about 1.3 MiB). The front
// end reads such bodies whole into memory, so without a bound any client,
// authenticated or not, could make the server hold gigabytes.
const MaxRequestDocument = 4 << 20

// guardRequests refuses, before anything is read or stored, requests
// whose bodies would be read into memory beyond MaxRequestDocument, and
// the creation of the reserved bucket.
func guardRequests() fiber.Handler {
	return func(c fiber.Ctx) error {
		if err := guard(c); err != nil {
			return writeError(c, err)
		}
		return c.Next()
	}
}

func guard(c fiber.Ctx) *s3err.APIError {
	bucket, object := splitBucketPath(c.Path())
	q := c.RequestCtx().QueryArgs()
	if bucket == ReservedBucket && object == "" && c.Method() == http.MethodPut && q.Len() == 0 {
		return &s3err.APIError{Code: "InvalidBucketName", HTTPStatusCode: http.StatusBadRequest,
			Description: "The bucket name " + ReservedBucket + " is reserved for the server's own endpoints (/" + ReservedBucket + "/...)."}
	}
	if exp := q.Peek("X-Amz-Expires"); len(exp) > 0 && exp[0] == '-' && q.Has("X-Amz-Signature") {
		// A presigned URL made to expire before it was signed has expired
		// (S3 answers 403, as for any expired URL, not a parameter error).
		return &s3err.APIError{Code: "AccessDenied", HTTPStatusCode: http.StatusForbidden, Description: "Request has expired"}
	}
	if carriesData(c.Method(), bucket, object, q.Has) {
		return nil
	}
	n := c.Request().Header.ContentLength()
	switch {
	case n > MaxRequestDocument:
		return tooBig()
	case n == -1: // chunked: read it here, up to the bound
		stream := c.Request().BodyStream()
		if stream == nil {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(stream, MaxRequestDocument+1))
		if err != nil {
			return &s3err.APIError{Code: "IncompleteBody", HTTPStatusCode: http.StatusBadRequest,
				Description: "The request body could not be read."}
		}
		if len(body) > MaxRequestDocument {
			return tooBig()
		}
		c.Request().SetBody(body)
	}
	return nil
}

func tooBig() *s3err.APIError {
	return &s3err.APIError{Code: "MaxMessageLengthExceeded", HTTPStatusCode: http.StatusBadRequest,
		Description: "Your request was too big: request documents are limited to 4 MiB."}
}

// carriesData: the request's body is object data, streamed to the drives
// (PutObject, UploadPart, a browser form upload), not a document the front
// end reads whole.
func carriesData(method, bucket, object string, has func(string) bool) bool {
	switch {
	case bucket == "":
		return false
	case method == http.MethodPut && object != "":
		for _, sub := range []string{"tagging", "acl", "retention", "legal-hold"} {
			if has(sub) {
				return false
			}
		}
		return true
	case method == http.MethodPost && object == "":
		return !has("delete")
	}
	return false
}

// splitBucketPath splits a path-style request path into bucket and key.
func splitBucketPath(path string) (bucket, object string) {
	path = strings.TrimLeft(path, "/")
	bucket, object, _ = strings.Cut(path, "/")
	return bucket, object
}
