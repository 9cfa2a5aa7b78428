package s3front

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3err"
)

// AWS Signature Version 2: the aws CLI's `s3 presign` makes V2 URLs by
// default, and older tools sign V2 headers. The front end speaks only
// Signature Version 4, so a V2 request is verified here, against the same
// credentials, and then handed on signed with V4 (the same access key, an
// unsigned payload) for the front end to authenticate, authorise and serve
// as usual. A V2 request that fails verification is answered here with the
// error S3 gives it. Form uploads (POST object) signed with V2 are
// translated too: postv2.go.

// SecretLookup returns the secret of an access key.
type SecretLookup func(access string) (secret string, ok bool)

// maxSkew is how far a V2 request's date may be from the server's clock.
const maxSkew = 15 * time.Minute

// v2SubResources are the query arguments a V2 signature covers.
var v2SubResources = map[string]bool{
	"accelerate": true, "acl": true, "cors": true, "delete": true, "lifecycle": true, "location": true,
	"logging": true, "notification": true, "object-lock": true, "partNumber": true, "policy": true,
	"replication": true, "requestPayment": true, "restore": true, "select": true, "select-type": true,
	"tagging": true, "torrent": true, "uploadId": true, "uploads": true, "versionId": true,
	"versioning": true, "versions": true, "website": true, "analytics": true, "metrics": true,
	"inventory": true, "storageClass": true, "response-content-type": true, "response-content-language": true,
	"response-expires": true, "response-cache-control": true, "response-content-disposition": true,
	"response-content-encoding": true,
}

func authError(code, msg string, status int) *s3err.APIError {
	return &s3err.APIError{Code: code, Description: msg, HTTPStatusCode: status}
}

// sigV2 verifies V2-signed requests and re-signs them with V4.
func sigV2(lookup SecretLookup, region string) fiber.Handler {
	return func(c fiber.Ctx) error {
		if c.Method() == fiber.MethodOptions {
			// A CORS preflight is never signed, whatever URL it is sent to
			// (a presigned one included): the front end answers it.
			return c.Next()
		}
		h := &c.Request().Header
		q := c.RequestCtx().QueryArgs()
		authz := string(h.Peek("Authorization"))
		var err *s3err.APIError
		switch {
		case strings.HasPrefix(authz, "AWS "):
			err = headerV2(c, authz[len("AWS "):], lookup, region)
		case authz == "" && q.Has("AWSAccessKeyId") && q.Has("Signature"):
			err = queryV2(c, lookup, region)
		case authz == "" && c.Method() == fiber.MethodPost:
			err = postForm(c, lookup, region) // a form upload, maybe signed with V2
		default:
			return c.Next()
		}
		if err != nil {
			return writeError(c, err)
		}
		return c.Next()
	}
}

// headerV2 checks `Authorization: AWS access:signature`.
func headerV2(c fiber.Ctx, cred string, lookup SecretLookup, region string) *s3err.APIError {
	access, sig, ok := strings.Cut(cred, ":")
	if !ok || access == "" || sig == "" {
		return authError("InvalidArgument", "AWS authorization header is invalid. Expected AwsAccessKeyId:signature", http.StatusBadRequest)
	}
	h := &c.Request().Header
	date := string(h.Peek("Date"))
	if amz := h.Peek("X-Amz-Date"); amz != nil {
		date = string(amz) // x-amz-date, when sent, is the request's date
	}
	t, err := http.ParseTime(date)
	if err != nil || t.Year() < 1970 {
		return authError("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header", http.StatusForbidden)
	}
	if d := time.Since(t); d > maxSkew || d < -maxSkew {
		return authError("RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.", http.StatusForbidden)
	}
	secret, ok := lookup(access)
	if !ok {
		return authError("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", http.StatusForbidden)
	}
	// The Date line holds the Date header; signers differ on whether it is
	// left empty when x-amz-date is sent, so both forms are accepted.
	dateLines := []string{string(h.Peek("Date"))}
	if h.Peek("X-Amz-Date") != nil {
		dateLines = append(dateLines, "")
	}
	if !v2Matches(c, secret, sig, dateLines) {
		return authError("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", http.StatusForbidden)
	}
	return resignV4(c, access, secret, region)
}

// queryV2 checks a presigned V2 URL (AWSAccessKeyId, Expires, Signature).
func queryV2(c fiber.Ctx, lookup SecretLookup, region string) *s3err.APIError {
	q := c.RequestCtx().QueryArgs()
	access, sig := string(q.Peek("AWSAccessKeyId")), string(q.Peek("Signature"))
	expires, err := strconv.ParseInt(string(q.Peek("Expires")), 10, 64)
	if err != nil {
		return authError("AccessDenied", "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters", http.StatusForbidden)
	}
	if time.Now().Unix() > expires {
		return authError("AccessDenied", "Request has expired", http.StatusForbidden)
	}
	secret, ok := lookup(access)
	if !ok {
		return authError("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", http.StatusForbidden)
	}
	if !v2Matches(c, secret, sig, []string{strconv.FormatInt(expires, 10)}) {
		return authError("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", http.StatusForbidden)
	}
	// The V2 arguments are not the front end's business any more.
	kept := url.Values{}
	for k, v := range q.All() {
		switch string(k) {
		case "AWSAccessKeyId", "Expires", "Signature":
		default:
			kept.Add(string(k), string(v))
		}
	}
	c.Request().URI().SetQueryString(kept.Encode())
	return resignV4(c, access, secret, region)
}

// v2Matches reports whether sig is the V2 signature of the request with
// one of the given Date lines.
func v2Matches(c fiber.Ctx, secret, sig string, dateLines []string) bool {
	want, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	path := string(c.Request().URI().PathOriginal())
	paths := []string{path}
	if strings.Count(path, "/") == 1 && len(path) > 1 {
		// botocore signs a bucket's path with a trailing slash that it
		// does not send.
		paths = append(paths, path+"/")
	}
	for _, d := range dateLines {
		for _, p := range paths {
			mac := hmac.New(sha1.New, []byte(secret))
			mac.Write([]byte(v2StringToSign(c, d, p)))
			if subtle.ConstantTimeCompare(mac.Sum(nil), want) == 1 {
				return true
			}
		}
	}
	return false
}

// v2StringToSign is the V2 string to sign: method, Content-MD5,
// Content-Type, the date line, the x-amz- headers and the resource (path
// and signed sub-resources).
func v2StringToSign(c fiber.Ctx, dateLine, path string) string {
	h := &c.Request().Header
	var b strings.Builder
	b.WriteString(c.Method() + "\n")
	b.WriteString(strings.TrimSpace(string(h.Peek("Content-Md5"))) + "\n")
	b.WriteString(strings.TrimSpace(string(h.Peek("Content-Type"))) + "\n")
	b.WriteString(dateLine + "\n")
	amz := map[string][]string{}
	for k, v := range h.All() {
		name := strings.ToLower(string(k))
		if strings.HasPrefix(name, "x-amz-") {
			amz[name] = append(amz[name], strings.TrimSpace(string(v)))
		}
	}
	names := make([]string, 0, len(amz))
	for n := range amz {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(n + ":" + strings.Join(amz[n], ",") + "\n")
	}
	b.WriteString(path)
	var subs []string
	for k, v := range c.RequestCtx().QueryArgs().All() {
		if v2SubResources[string(k)] {
			if len(v) == 0 {
				subs = append(subs, string(k))
			} else {
				subs = append(subs, string(k)+"="+string(v))
			}
		}
	}
	if len(subs) > 0 {
		sort.Strings(subs)
		b.WriteString("?" + strings.Join(subs, "&"))
	}
	return b.String()
}

// resignV4 replaces a verified V2 signature with a V4 one over the
// request's method, path, query and host, with an unsigned payload.
func resignV4(c fiber.Ctx, access, secret, region string) *s3err.APIError {
	r := c.Request()
	path := string(r.URI().PathOriginal())
	decoded, err := url.PathUnescape(path)
	if err != nil {
		decoded = path
	}
	host := string(r.Header.Host())
	req, err := http.NewRequest(c.Method(), "http://"+host+"/", nil)
	if err != nil {
		return authError("InvalidRequest", "The request cannot be re-signed.", http.StatusBadRequest)
	}
	req.URL.Opaque = "//" + host + canonicalPath(decoded)
	req.URL.RawQuery = string(r.URI().QueryString())
	req.Host = host
	// Every x-amz- header is signed, as the front end requires, with the
	// content headers V2 covered.
	for k, v := range r.Header.All() {
		name := strings.ToLower(string(k))
		switch {
		case name == "x-amz-date" || name == "x-amz-content-sha256":
		case strings.HasPrefix(name, "x-amz-") || name == "content-md5" || name == "content-type":
			req.Header.Add(string(k), string(v))
		}
	}
	now := time.Now().UTC()
	const payload = "UNSIGNED-PAYLOAD"
	req.Header.Set("X-Amz-Content-Sha256", payload)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret},
		req, payload, "s3", region, now); err != nil {
		return authError("InvalidRequest", "The request cannot be re-signed.", http.StatusBadRequest)
	}
	r.Header.Del("X-Amz-Date")
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256"} {
		r.Header.Set(k, req.Header.Get(k))
	}
	return nil
}

// canonicalPath escapes a decoded path as S3's V4 canonical URI does:
// every byte but unreserved characters and '/' percent-encoded.
func canonicalPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if ch == '/' || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
			'A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' {
			b.WriteByte(ch)
		} else {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(ch)>>4, 16)+strconv.FormatUint(uint64(ch)&15, 16)))
		}
	}
	return b.String()
}
