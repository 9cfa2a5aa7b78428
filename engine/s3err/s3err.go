// Package s3err is the one table of the errors Strata's S3 front end
// answers: every S3 error code it uses is named here once, with its HTTP
// status and the message clients see, and the object layer's errors are
// mapped to them here too (object.go). Handlers, signature checks and S3
// rules return these values (or the object layer's sentinels); the front
// end renders them (Render) and nothing else decides a code or a status.
package s3err

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Error is an S3 error answer.
type Error struct {
	// Code is S3's error code (AccessDenied, NoSuchKey, ...).
	Code string
	// Status is the HTTP status it is answered with.
	Status int
	// Message is the human-readable text.
	Message string
	// Fields are extra elements of the error document, in order (name,
	// value pairs: BucketName, Key, ArgumentName, ...).
	Fields []string
	// cause, when set, is what made this answer (logged, never sent).
	cause error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Code + ": " + e.Message + ": " + e.cause.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap gives the cause, so errors.Is sees through an answer to what made
// it.
func (e *Error) Unwrap() error { return e.cause }

// Is matches another answer with the same code (errors.Is(err,
// s3err.NoSuchKey) whatever the message).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Status == e.Status
}

// With returns a copy of e with another message.
func (e *Error) With(message string) *Error {
	c := *e
	c.Message = message
	return &c
}

// Withf returns a copy of e with a formatted message.
func (e *Error) Withf(format string, args ...any) *Error {
	return e.With(fmt.Sprintf(format, args...))
}

// Field returns a copy of e with an extra element in its document.
func (e *Error) Field(name, value string) *Error {
	c := *e
	c.Fields = append(append([]string(nil), e.Fields...), name, value)
	return &c
}

// Because returns a copy of e that records what caused it (for logs).
func (e *Error) Because(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

// As returns err as an S3 answer, if it is one.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

func def(code string, status int, message string) *Error {
	return &Error{Code: code, Status: status, Message: message}
}

// The errors, by code. A message here is the default; handlers that know
// more say it with With.
var (
	AccessDenied                     = def("AccessDenied", http.StatusForbidden, "Access Denied")
	AccessForbidden                  = def("AccessForbidden", http.StatusForbidden, "Access Forbidden")
	AccessControlListNotSupported    = def("AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs")
	AccountProblem                   = def("AccountProblem", http.StatusForbidden, "There is a problem with your account that prevents the operation from completing successfully.")
	AuthorizationHeaderMalformed     = def("AuthorizationHeaderMalformed", http.StatusBadRequest, "The authorization header is malformed.")
	AuthorizationQueryParameters     = def("AuthorizationQueryParametersError", http.StatusBadRequest, "Error parsing the X-Amz-Credential parameter.")
	BadDigest                        = def("BadDigest", http.StatusBadRequest, "The Content-MD5 you specified did not match what we received.")
	BadRequest                       = def("BadRequest", http.StatusBadRequest, "Bad Request")
	BucketAlreadyExists              = def("BucketAlreadyExists", http.StatusConflict, "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.")
	BucketAlreadyOwnedByYou          = def("BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it.")
	BucketNotEmpty                   = def("BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty")
	EntityTooLarge                   = def("EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size.")
	EntityTooSmall                   = def("EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size.")
	ExpiredToken                     = def("ExpiredToken", http.StatusBadRequest, "The provided token has expired.")
	IllegalLocationConstraint        = def("IllegalLocationConstraintException", http.StatusBadRequest, "The unspecified location constraint is incompatible for the region specific endpoint this request was sent to.")
	IllegalVersioningConfig          = def("IllegalVersioningConfigurationException", http.StatusBadRequest, "The versioning configuration specified in the request is invalid.")
	IncompleteBody                   = def("IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	InsufficientStorage              = def("InsufficientStorage", http.StatusInsufficientStorage, "There is not enough free space to store the object.")
	InternalError                    = def("InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again.")
	InvalidAccessKeyID               = def("InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records.")
	InvalidArgument                  = def("InvalidArgument", http.StatusBadRequest, "Invalid Argument")
	InvalidBucketAclWithOwnership    = def("InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting")
	InvalidBucketName                = def("InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid.")
	InvalidBucketState               = def("InvalidBucketState", http.StatusConflict, "The request is not valid with the current state of the bucket.")
	InvalidDigest                    = def("InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid.")
	InvalidEncryptionAlgorithm       = def("InvalidEncryptionAlgorithmError", http.StatusBadRequest, "The encryption request you specified is not valid. The valid value is AES256.")
	InvalidLocationConstraint        = def("InvalidLocationConstraint", http.StatusBadRequest, "The specified location constraint is not valid.")
	InvalidObjectState               = def("InvalidObjectState", http.StatusForbidden, "The operation is not valid for the current state of the object.")
	InvalidPart                      = def("InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.")
	InvalidPartOrder                 = def("InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. Parts must be ordered by part number.")
	InvalidPolicyDocument            = def("InvalidPolicyDocument", http.StatusBadRequest, "The content of the form does not meet the conditions specified in the policy document.")
	InvalidRedirectLocation          = def("InvalidRedirectLocation", http.StatusBadRequest, "The website redirect location must have a prefix of 'http://' or 'https://' or '/'.")
	InvalidRange                     = def("InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable")
	InvalidRequest                   = def("InvalidRequest", http.StatusBadRequest, "Invalid Request")
	InvalidRetentionPeriod           = def("InvalidRetentionPeriod", http.StatusBadRequest, "The retention period specified is invalid.")
	InvalidStorageClass              = def("InvalidStorageClass", http.StatusBadRequest, "The storage class you specified is not valid: only STANDARD is offered.")
	KMSNotFound                      = def("KMS.NotFoundException", http.StatusBadRequest, "The KMS key does not exist.")
	InvalidTag                       = def("InvalidTag", http.StatusBadRequest, "The tag provided was not a valid tag.")
	InvalidToken                     = def("InvalidToken", http.StatusBadRequest, "The provided token is malformed or otherwise invalid.")
	InvalidURI                       = def("InvalidURI", http.StatusBadRequest, "Couldn't parse the specified URI.")
	KeyConflict                      = def("KeyConflict", http.StatusConflict, "The key conflicts with an existing object: a name on its path is an object, or the key names a directory that holds other objects.")
	KeyTooLong                       = def("KeyTooLongError", http.StatusBadRequest, "Your key is too long.")
	MalformedACL                     = def("MalformedACLError", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema.")
	MalformedTrailer                 = def("MalformedTrailerError", http.StatusBadRequest, "The request contained trailing data that was not well-formed or did not conform to our published schema.")
	MalformedPOSTRequest             = def("MalformedPOSTRequest", http.StatusBadRequest, "The body of your POST request is not well-formed multipart/form-data.")
	MalformedPolicy                  = def("MalformedPolicy", http.StatusBadRequest, "Policy has invalid resource.")
	MalformedXML                     = def("MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema.")
	MaxPostPreDataLengthExceeded     = def("MaxPostPreDataLengthExceededError", http.StatusBadRequest, "Your POST request fields preceding the upload file were too large.")
	MaxMessageLengthExceeded         = def("MaxMessageLengthExceeded", http.StatusBadRequest, "Your request was too big.")
	MetadataTooLarge                 = def("MetadataTooLarge", http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size.")
	MethodNotAllowed                 = def("MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource.")
	MissingContentLength             = def("MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header.")
	MissingRequestBody               = def("MissingRequestBodyError", http.StatusBadRequest, "Request Body is empty.")
	MissingSecurityHeader            = def("MissingSecurityHeader", http.StatusBadRequest, "Your request was missing a required header.")
	NoSuchBucket                     = def("NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist")
	NoSuchBucketPolicy               = def("NoSuchBucketPolicy", http.StatusNotFound, "The bucket policy does not exist")
	NoSuchCORSConfiguration          = def("NoSuchCORSConfiguration", http.StatusNotFound, "The CORS configuration does not exist")
	NoSuchKey                        = def("NoSuchKey", http.StatusNotFound, "The specified key does not exist.")
	ReplicationConfigurationNotFound = def("ReplicationConfigurationNotFoundError", http.StatusNotFound, "The replication configuration was not found")
	NoSuchLifecycleConfiguration     = def("NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist")
	NoSuchObjectLockConfiguration    = def("NoSuchObjectLockConfiguration", http.StatusNotFound, "The specified object does not have an ObjectLock configuration")
	NoSuchPublicAccessBlock          = def("NoSuchPublicAccessBlockConfiguration", http.StatusNotFound, "The public access block configuration was not found")
	NoSuchTagSet                     = def("NoSuchTagSet", http.StatusNotFound, "The TagSet does not exist")
	NoSuchUpload                     = def("NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	NoSuchVersion                    = def("NoSuchVersion", http.StatusNotFound, "The specified version does not exist.")
	NoSuchWebsiteConfiguration       = def("NoSuchWebsiteConfiguration", http.StatusNotFound, "The specified bucket does not have a website configuration")
	NotImplemented                   = def("NotImplemented", http.StatusNotImplemented, "A header you provided implies functionality that is not implemented.")
	NotModified                      = def("NotModified", http.StatusNotModified, "Not Modified")
	ObjectLockConfigNotFound         = def("ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket")
	OwnershipControlsNotFound        = def("OwnershipControlsNotFoundError", http.StatusNotFound, "The bucket ownership controls were not found")
	PreconditionFailed               = def("PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold")
	RequestHeaderSectionTooLarge     = def("RequestHeaderSectionTooLarge", http.StatusBadRequest, "Your request header section exceeds the maximum allowed size.")
	QuotaExceeded                    = def("QuotaExceeded", http.StatusForbidden, "The bucket's quota does not leave room for this write: delete objects or ask for a larger quota.")
	RequestTimeTooSkewed             = def("RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large.")
	RequestTimeout                   = def("RequestTimeout", http.StatusBadRequest, "Your socket connection to the server was not read from or written to within the timeout period.")
	ServerSideEncryptionNotFound     = def("ServerSideEncryptionConfigurationNotFoundError", http.StatusNotFound, "The server side encryption configuration was not found")
	SignatureDoesNotMatch            = def("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	SlowDown                         = def("SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate.")
	ServiceUnavailable               = def("ServiceUnavailable", http.StatusServiceUnavailable, "The server is shutting down; retry on another.")
	UnexpectedContent                = def("UnexpectedContent", http.StatusBadRequest, "This request does not support content.")
	UnresolvableGrantByEmail         = def("UnresolvableGrantByEmailAddress", http.StatusBadRequest, "The e-mail address you provided does not match any account on record.")
	XAmzContentSHA256Mismatch        = def("XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	InvalidChunkSize                 = def("InvalidChunkSizeError", http.StatusBadRequest, "Only the last chunk is allowed to have a size less than 8192 bytes")
	ObjectLocked                     = def("AccessDenied", http.StatusForbidden, "Access Denied because object protected by object lock.")
)

// InvalidArgumentNamed is InvalidArgument naming the argument and the value
// it was given, as S3's error document does.
func InvalidArgumentNamed(message, name, value string) *Error {
	return InvalidArgument.With(message).Field("ArgumentName", name).Field("ArgumentValue", value)
}

// Bucket returns e naming a bucket (BucketName in the document).
func Bucket(e *Error, bucket string) *Error { return e.Field("BucketName", bucket) }

// Key returns e naming an object key.
func Key(e *Error, key string) *Error { return e.Field("Key", key) }

// Render is the XML document of an error answer to a request for resource
// (its path), with the request's ID.
func Render(e *Error, resource, requestID, hostID string) []byte {
	var b strings.Builder
	b.Grow(256 + len(e.Message))
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>")
	escape(&b, e.Code)
	b.WriteString("</Code><Message>")
	escape(&b, e.Message)
	b.WriteString("</Message>")
	for i := 0; i+1 < len(e.Fields); i += 2 {
		b.WriteString("<" + e.Fields[i] + ">")
		escape(&b, e.Fields[i+1])
		b.WriteString("</" + e.Fields[i] + ">")
	}
	if resource != "" {
		b.WriteString("<Resource>")
		escape(&b, resource)
		b.WriteString("</Resource>")
	}
	b.WriteString("<RequestId>" + requestID + "</RequestId><HostId>" + hostID + "</HostId></Error>")
	return []byte(b.String())
}

// escape writes s as XML character data.
func escape(b *strings.Builder, s string) {
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
				// XML 1.0 cannot carry these, even as references: the
				// replacement character stands in, as in listings.
				r = utf8.RuneError
			}
			b.WriteRune(r)
		}
	}
}
