package s3front

import (
	"crypto/md5"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
)

// What Strata does not implement is refused before anything is stored,
// never answered with a success that did not do what was asked. The front
// end already answers NotImplemented for the operations our backends leave
// out (website, logging, replication, notifications, lifecycle, bucket
// encryption, public access blocks...); this middleware covers what it
// would pass through as if it were done: server-side encryption asked for in
// request headers, storage classes other than STANDARD, and sub-resources
// it would serve as a plain GET (torrent, session). The table in
// docs/engine.md lists every S3 operation and header with its state.

// notImplemented is S3's NotImplemented with a message naming the feature.
func notImplemented(what string) s3err.APIError {
	return s3err.APIError{Code: "NotImplemented", HTTPStatusCode: http.StatusNotImplemented,
		Description: what + " is not implemented."}
}

func invalidArg(msg string) s3err.APIError {
	return s3err.APIError{Code: "InvalidArgument", Description: msg, HTTPStatusCode: http.StatusBadRequest}
}

// Server-side encryption request headers.
const (
	hdrSSE          = "X-Amz-Server-Side-Encryption"
	hdrSSEKMSKey    = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	hdrSSEContext   = "X-Amz-Server-Side-Encryption-Context"
	hdrSSEBucketKey = "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"
	hdrSSECAlg      = "X-Amz-Server-Side-Encryption-Customer-Algorithm"
	hdrSSECKey      = "X-Amz-Server-Side-Encryption-Customer-Key"
	hdrSSECKeyMD5   = "X-Amz-Server-Side-Encryption-Customer-Key-Md5"
	hdrCopySSEC     = "X-Amz-Copy-Source-Server-Side-Encryption-Customer-"
)

// refuseUnsupported answers requests that ask for what is not
// implemented, after checking them the way S3 checks them (a malformed
// request gets the 400 S3 gives it, a well-formed one 501). sse says the
// backend implements server-side encryption (then only malformed
// encryption headers are refused here).
func refuseUnsupported(sse bool) fiber.Handler {
	return func(c fiber.Ctx) error {
		if err := unsupported(c, sse); err != nil {
			return writeError(c, err)
		}
		return c.Next()
	}
}

func unsupported(c fiber.Ctx, sse bool) *s3err.APIError {
	h := &c.Request().Header
	get := func(name string) string { return string(h.Peek(name)) }
	read := c.Method() == http.MethodGet || c.Method() == http.MethodHead
	if !sse || !sseCheckedAfterAccess(c) {
		if err := checkSSE(get, read, sse); err != nil {
			return err
		}
	}
	if sc := get("X-Amz-Storage-Class"); sc != "" && sc != "STANDARD" {
		return &s3err.APIError{Code: "InvalidStorageClass", HTTPStatusCode: http.StatusBadRequest,
			Description: "The storage class you specified is not valid: only STANDARD is offered."}
	}
	q := c.RequestCtx().QueryArgs()
	for _, sub := range []string{"torrent", "session"} {
		if q.Has(sub) {
			e := notImplemented("The ?" + sub + " sub-resource")
			return &e
		}
	}
	return nil
}

// sseCheckedAfterAccess says the encryption headers of a request are
// checked by the backend, after authentication and the access decision,
// rather than here: object uploads (PUT of an object or a part, copies
// included) and CreateMultipartUpload, which read them through customerKey.
// A bucket policy denying uploads whose encryption header is not AES256 is
// then what answers an upload asking for AES192 (403, as S3 answers), not
// the malformed header (400); a request the policy lets through still gets
// the 400, before anything is stored.
func sseCheckedAfterAccess(c fiber.Ctx) bool {
	q := c.RequestCtx().QueryArgs()
	switch c.Method() {
	case http.MethodPut:
		if _, object := splitBucketPath(c.Path()); object == "" {
			return false
		}
		// Only a query of an upload: its part, the SDKs' x-id and a
		// presigned URL's parameters (V4 and V2); any other names a
		// sub-resource (?tagging, ?acl, ?retention...), checked here.
		for k := range q.All() {
			switch s := string(k); {
			case s == "uploadId", s == "partNumber", s == "x-id",
				s == "AWSAccessKeyId", s == "Expires", s == "Signature",
				strings.HasPrefix(s, "X-Amz-"):
			default:
				return false
			}
		}
		return true
	case http.MethodPost:
		_, object := splitBucketPath(c.Path())
		return object != "" && q.Has("uploads")
	}
	return false
}

// checkSSE validates server-side-encryption headers as S3 does and, when
// the backend does not implement encryption (implemented false), refuses
// them: a write asking for encryption would be a false success, and a read
// naming a customer key can only be for an object that is not encrypted.
func checkSSE(get func(string) string, read, implemented bool) *s3err.APIError {
	sse, kmsKey := get(hdrSSE), get(hdrSSEKMSKey)
	alg, key, keyMD5 := get(hdrSSECAlg), get(hdrSSECKey), get(hdrSSECKeyMD5)
	customer := alg != "" || key != "" || keyMD5 != ""
	fail := func(msg string) *s3err.APIError { e := invalidArg(msg); return &e }
	refuse := func(what string) *s3err.APIError {
		if implemented {
			return nil
		}
		e := notImplemented(what)
		return &e
	}
	if err := checkCustomerKey(alg, key, keyMD5, fail); err != nil {
		return err
	}
	cAlg, cKey, cMD5 := get(hdrCopySSEC+"Algorithm"), get(hdrCopySSEC+"Key"), get(hdrCopySSEC+"Key-Md5")
	if err := checkCustomerKey(cAlg, cKey, cMD5, fail); err != nil {
		return err
	}
	switch {
	case customer && sse != "":
		return fail("Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	case customer && read:
		if implemented {
			return nil
		}
		return &s3err.APIError{Code: "InvalidRequest", HTTPStatusCode: http.StatusBadRequest,
			Description: "The encryption parameters are not applicable to this object."}
	case customer:
		return refuse("Server-side encryption with customer-provided keys (SSE-C)")
	case sse != "" && read:
		return fail("x-amz-server-side-encryption header is not supported for this operation.")
	case sse != "" && sse != "AES256" && sse != "aws:kms" && sse != "aws:kms:dsse":
		return fail("The encryption method specified is not supported")
	case sse == "" && (kmsKey != "" || get(hdrSSEContext) != "" || get(hdrSSEBucketKey) != ""):
		return fail("Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms")
	case sse == "AES256" && kmsKey != "":
		return fail("Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms")
	case sse == "AES256":
		return refuse("Server-side encryption with Strata-managed keys (SSE-S3)")
	case sse != "":
		return refuse("Server-side encryption with KMS keys (SSE-KMS)")
	case cKey != "":
		return refuse("Copying from an object encrypted with a customer-provided key")
	}
	return nil
}

// checkCustomerKey checks a set of SSE-C headers (all empty: none).
func checkCustomerKey(alg, key, keyMD5 string, fail func(string) *s3err.APIError) *s3err.APIError {
	switch {
	case alg == "" && key == "" && keyMD5 == "":
		return nil
	case alg != "AES256":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.")
	case key == "":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.")
	case keyMD5 == "":
		return fail("Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.")
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		return fail("The secret key was invalid for the specified algorithm.")
	}
	sum := md5.Sum(raw)
	if base64.StdEncoding.EncodeToString(sum[:]) != keyMD5 {
		return fail("The calculated MD5 hash of the key did not match the hash that was provided.")
	}
	return nil
}

// writeError answers a request with an S3 error document.
func writeError(c fiber.Ctx, err *s3err.APIError) error {
	requestID, hostID := utils.EnsureRequestIDs(c)
	c.Response().Header.SetContentType(fiber.MIMEApplicationXML)
	return c.Status(err.HTTPStatusCode).Send(err.XMLBody(requestID, hostID))
}
