package s3sig

import (
	"net/http"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// Secrets gives the secret key of an access key; ok is false for a key
// that does not exist. It is the only thing the package needs to know of
// users.
type Secrets interface {
	Secret(accessKey string) (secret string, ok bool)
}

// SecretsFunc adapts a function to Secrets.
type SecretsFunc func(accessKey string) (secret string, ok bool)

// Secret calls f.
func (f SecretsFunc) Secret(accessKey string) (string, bool) { return f(accessKey) }

// Options are the server's side of a signature check.
type Options struct {
	// Region is the region credentials must be scoped to (default
	// us-east-1).
	Region string
	// Now is the server's clock (default time.Now); tests set it.
	Now func() time.Time
	// MaxSkew is how far a signed request's time may be from Now (default
	// 15 minutes, as S3).
	MaxSkew time.Duration
	// Bucket is the bucket a virtual-hosted-style request names in its
	// Host header: Signature V2's resource starts with it although the
	// path does not ("" for path-style requests).
	Bucket string
}

func (o Options) region() string {
	if o.Region == "" {
		return "us-east-1"
	}
	return o.Region
}

func (o Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

func (o Options) maxSkew() time.Duration {
	if o.MaxSkew <= 0 {
		return 15 * time.Minute
	}
	return o.MaxSkew
}

// Scheme is how a request was authenticated.
type Scheme int

// The schemes.
const (
	// Anonymous: no credentials at all.
	Anonymous Scheme = iota
	// V4Header: Signature Version 4 in the Authorization header.
	V4Header
	// V4Query: a presigned URL, Signature Version 4.
	V4Query
	// V2Header: Signature Version 2 in the Authorization header.
	V2Header
	// V2Query: a presigned URL, Signature Version 2.
	V2Query
	// PostV4: a browser form upload signed with Signature Version 4.
	PostV4
	// PostV2: a browser form upload signed with Signature Version 2.
	PostV2
)

// String names the scheme for logs and metrics.
func (s Scheme) String() string {
	switch s {
	case Anonymous:
		return "anonymous"
	case V4Header:
		return "v4-header"
	case V4Query:
		return "v4-query"
	case V2Header:
		return "v2-header"
	case V2Query:
		return "v2-query"
	case PostV4:
		return "post-v4"
	case PostV2:
		return "post-v2"
	}
	return "unknown"
}

// The payload declarations a request may make in x-amz-content-sha256
// besides the hex SHA-256 of its body.
const (
	// UnsignedPayload: the body is not covered by the signature.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// StreamingSigned: aws-chunked, each chunk signed.
	StreamingSigned = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// StreamingSignedTrailer: aws-chunked, each chunk and the trailer
	// signed.
	StreamingSignedTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	// StreamingUnsignedTrailer: aws-chunked, unsigned, with a trailer
	// (a checksum, typically).
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// Auth is who sent a request, how, and what it declared of its body.
type Auth struct {
	// AccessKey is the authenticated access key, "" when anonymous.
	AccessKey string
	// Scheme is how the request was authenticated.
	Scheme Scheme
	// Payload is the declared payload: a lower-case hex SHA-256 of the
	// body, one of the payload constants (UnsignedPayload,
	// StreamingSigned, ...), or "" when the request declared nothing
	// (Signature V2, anonymous, forms), which is as unsigned.
	Payload string
	// Time is when the request was signed (zero when anonymous).
	Time time.Time
	// Expires is when a presigned URL or form policy stops being valid
	// (zero otherwise).
	Expires time.Time
	// Scope is a Signature V4 credential scope
	// (20060102/region/s3/aws4_request), "" otherwise.
	Scope string

	// amzDate is the request's time as Signature V4 writes it, and key
	// and signature the signing key and the request's own signature: the
	// seed of a signed aws-chunked body's chain.
	amzDate   string
	key       [32]byte
	signature [32]byte
}

// Streaming reports whether the body is aws-chunked (Payload is one of
// the STREAMING- declarations).
func (a *Auth) Streaming() bool { return strings.HasPrefix(a.Payload, "STREAMING-") }

// Verify authenticates r from its method, path (as the client sent it),
// query and headers; it never reads the body. A request without any
// credentials is Anonymous, for the caller to allow or refuse; a POST form
// upload is Anonymous here too, its signature being in its body (ReadForm,
// VerifyPost). A CORS preflight (OPTIONS) is never signed, even when sent
// to a presigned URL: callers answer it without Verify. Every refusal is
// an *s3err.Error.
func Verify(r *http.Request, secrets Secrets, opts Options) (*Auth, error) {
	authz := firstHeader(r.Header, "Authorization")
	raw := r.URL.RawQuery
	v4q := hasQueryParam(raw, "X-Amz-Algorithm") || hasQueryParam(raw, "X-Amz-Credential") || hasQueryParam(raw, "X-Amz-Signature")
	v2q := hasQueryParam(raw, "AWSAccessKeyId") || hasQueryParam(raw, "Signature")
	if (authz != "" && (v4q || v2q)) || (v4q && v2q) {
		return nil, errOneMechanism(authz)
	}
	switch {
	case authz != "":
		return verifyAuthorization(r, authz, secrets, opts)
	case v4q:
		return verifyV4Query(r, secrets, opts)
	case v2q:
		return verifyV2Query(r, secrets, opts)
	}
	payload, err := unsignedPayload(r.Header, "Anonymous requests")
	if err != nil {
		return nil, err
	}
	return &Auth{Scheme: Anonymous, Payload: payload}, nil
}

// verifyAuthorization dispatches on the Authorization header's scheme.
func verifyAuthorization(r *http.Request, authz string, secrets Secrets, opts Options) (*Auth, error) {
	scheme, rest, _ := strings.Cut(authz, " ")
	switch scheme {
	case v4Algorithm:
		return verifyV4Header(r, rest, secrets, opts)
	case "AWS":
		return verifyV2Header(r, rest, secrets, opts)
	case "AWS4-ECDSA-P256-SHA256":
		return nil, s3err.InvalidRequest.With("The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
	}
	return nil, s3err.InvalidArgumentNamed("Unsupported Authorization Type", "Authorization", authz)
}

// unsignedPayload is the payload declaration of a request whose signature
// (V2) or lack of one (anonymous) cannot seed a signed chunk chain: a hex
// SHA-256 or an unsigned declaration is kept, a signed streaming one
// refused.
func unsignedPayload(h http.Header, who string) (string, error) {
	v, ok := headerValue(h, "X-Amz-Content-Sha256")
	if !ok {
		return "", nil
	}
	switch {
	case v == UnsignedPayload || v == StreamingUnsignedTrailer || isHexSHA256(v):
		return v, nil
	case v == StreamingSigned || v == StreamingSignedTrailer || strings.HasPrefix(v, "STREAMING-AWS4-ECDSA"):
		return "", s3err.InvalidRequest.With(who + " don't support this x-amz-content-sha256 value. Please use UNSIGNED-PAYLOAD or STREAMING-UNSIGNED-PAYLOAD-TRAILER.")
	}
	return "", errPayloadValue(v)
}

// checkPayload validates a V4 request's payload declaration.
func checkPayload(v string) error {
	switch {
	case v == UnsignedPayload, v == StreamingSigned, v == StreamingSignedTrailer, v == StreamingUnsignedTrailer, isHexSHA256(v):
		return nil
	case strings.HasPrefix(v, "STREAMING-AWS4-ECDSA"):
		return s3err.NotImplemented.With("Signature Version 4A (ECDSA) streaming payloads are not supported.")
	}
	return errPayloadValue(v)
}

// isHexSHA256 reports a lower-case hex SHA-256, as SDKs write it.
func isHexSHA256(v string) bool {
	if len(v) != 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if unhex(v[i]) < 0 {
			return false
		}
	}
	return true
}

// headerValue is the first value of a header (by its canonical name) and
// whether the header was sent at all (an empty value counts: S3 tells an
// empty Content-MD5 from a missing one).
func headerValue(h http.Header, canonical string) (string, bool) {
	vs, ok := h[canonical]
	if !ok || len(vs) == 0 {
		return "", ok
	}
	return vs[0], true
}

// firstHeader is the first value of a header, "" when missing.
func firstHeader(h http.Header, canonical string) string {
	v, _ := headerValue(h, canonical)
	return v
}

// requestTime is a signed request's time: x-amz-date when sent (even
// empty: it then wins and is invalid, as S3 has it), else Date. The V4
// form (20060102T150405Z) and HTTP dates (GMT or a numeric zone) are
// accepted for either.
func requestTime(h http.Header) (time.Time, bool) {
	v, ok := headerValue(h, "X-Amz-Date")
	if !ok {
		v, ok = headerValue(h, "Date")
		if !ok {
			return time.Time{}, false
		}
	}
	if t, ok := parseAmzDate(v); ok {
		return t, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		t, err = time.Parse(time.RFC1123Z, v) // "+0000", as AWS's examples write it
	}
	if err != nil || t.Year() < 1970 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// parseAmzDate parses Signature V4's ISO 8601 basic form,
// 20060102T150405Z, without allocating.
func parseAmzDate(v string) (time.Time, bool) {
	if len(v) != 16 || v[8] != 'T' || v[15] != 'Z' {
		return time.Time{}, false
	}
	num := func(s string) int {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return -1
			}
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	y, mo, d := num(v[0:4]), num(v[4:6]), num(v[6:8])
	hh, mm, ss := num(v[9:11]), num(v[11:13]), num(v[13:15])
	if y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, hh, mm, ss, 0, time.UTC)
	if t.Day() != d { // 31 February and the like
		return time.Time{}, false
	}
	return t, true
}

// skewed reports whether t is further than the allowed skew from now.
func skewed(t time.Time, opts Options) (time.Time, bool) {
	now := opts.now()
	d := now.Sub(t)
	return now, d > opts.maxSkew() || d < -opts.maxSkew()
}
