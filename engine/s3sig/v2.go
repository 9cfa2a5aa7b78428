package s3sig

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// Signature Version 2: `Authorization: AWS AKID:base64(HMAC-SHA1)` and
// presigned URLs (AWSAccessKeyId, Expires, Signature). The aws CLI's
// `s3 presign`, boto's generate_presigned_post and older tools still make
// them. The string to sign is
//
//	METHOD \n Content-MD5 \n Content-Type \n DATE \n x-amz-headers RESOURCE
//
// where DATE is the Date header (or Expires, presigned), the x-amz-
// headers are lower-cased, sorted, "name:v1,v2\n", and RESOURCE is the
// path as sent (preceded by /bucket for a virtual-hosted request) and the
// signed sub-resources of the query, sorted.

// isV2SubResource reports the query parameters a V2 signature covers.
func isV2SubResource(name string) bool {
	switch name {
	case "accelerate", "acl", "analytics", "cors", "delete", "inventory", "lifecycle", "location",
		"logging", "metrics", "notification", "object-lock", "partNumber", "policy", "replication",
		"requestPayment", "restore", "select", "select-type", "storageClass", "tagging", "torrent",
		"uploadId", "uploads", "versionId", "versioning", "versions", "website",
		"response-cache-control", "response-content-disposition", "response-content-encoding",
		"response-content-language", "response-content-type", "response-expires":
		return true
	}
	return false
}

// verifyV2Header checks `Authorization: AWS AKID:signature` (rest is what
// follows "AWS ").
func verifyV2Header(r *http.Request, rest string, secrets Secrets, opts Options) (*Auth, error) {
	access, sig, ok := strings.Cut(rest, ":")
	if !ok || access == "" || sig == "" || strings.ContainsAny(access, " \t") {
		return nil, s3err.InvalidArgumentNamed("AWS authorization header is invalid.  Expected AwsAccessKeyId:signature", "Authorization", "AWS "+rest)
	}
	t, ok := requestTime(r.Header)
	if !ok {
		return nil, errNoDate()
	}
	if now, bad := skewed(t, opts); bad {
		return nil, errSkewed(t, now, opts.maxSkew())
	}
	payload, err := unsignedPayload(r.Header, "Signature Version 2 requests")
	if err != nil {
		return nil, err
	}
	secret, ok := secrets.Secret(access)
	if !ok {
		return nil, errUnknownKey(access)
	}
	// Signers differ on the date line when x-amz-date is sent: botocore
	// keeps the Date header, the AWS documentation's text leaves it
	// empty, its example moves x-amz-date's value there (and out of the
	// x-amz- headers). Each binds the same date.
	dateLines := []v2Date{{line: firstHeader(r.Header, "Date")}}
	if amz, ok := headerValue(r.Header, "X-Amz-Date"); ok {
		dateLines = append(dateLines, v2Date{line: ""}, v2Date{line: amz, dropAmzDate: true})
	}
	if sts, ok := v2Matches(r, opts.Bucket, secret, sig, dateLines); !ok {
		return nil, errMismatch(access, sts, sig, "")
	}
	return &Auth{AccessKey: access, Scheme: V2Header, Payload: payload, Time: t}, nil
}

// verifyV2Query checks a V2 presigned URL.
func verifyV2Query(r *http.Request, secrets Secrets, opts Options) (*Auth, error) {
	raw := r.URL.RawQuery
	access, okA := queryParam(raw, "AWSAccessKeyId")
	sig, okS := queryParam(raw, "Signature")
	expStr, okE := queryParam(raw, "Expires")
	expires, err := strconv.ParseInt(expStr, 10, 64)
	if !okA || !okS || !okE || access == "" || sig == "" || err != nil {
		return nil, s3err.AccessDenied.With("Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
	}
	now, end := opts.now(), time.Unix(expires, 0)
	if now.After(end) {
		return nil, errExpired(now, end)
	}
	payload, err := unsignedPayload(r.Header, "Signature Version 2 requests")
	if err != nil {
		return nil, err
	}
	secret, ok := secrets.Secret(access)
	if !ok {
		return nil, errUnknownKey(access)
	}
	if sts, ok := v2Matches(r, opts.Bucket, secret, sig, []v2Date{{line: expStr}}); !ok {
		return nil, errMismatch(access, sts, sig, "")
	}
	return &Auth{AccessKey: access, Scheme: V2Query, Payload: payload, Expires: end}, nil
}

// v2Date is a way to write the date in a V2 string to sign.
type v2Date struct {
	line        string
	dropAmzDate bool // x-amz-date is on the date line, not with the headers
}

// v2Matches reports whether sig is r's V2 signature under secret with one
// of the date lines; when not, it gives the first string to sign tried.
func v2Matches(r *http.Request, bucket, secret, sig string, dateLines []v2Date) (string, bool) {
	want, err := base64.StdEncoding.DecodeString(sig)
	path := requestPath(r)
	if bucket != "" {
		path = "/" + bucket + path
	}
	paths := []string{path}
	if strings.Count(path, "/") == 1 && len(path) > 1 {
		// botocore signs a bucket's path with a trailing slash it does
		// not send.
		paths = append(paths, path+"/")
	}
	first := ""
	for _, d := range dateLines {
		for _, p := range paths {
			sts := v2StringToSign(r, d, p)
			if first == "" {
				first = sts
			}
			mac := hmac.New(sha1.New, []byte(secret))
			mac.Write([]byte(sts))
			if err == nil && hmac.Equal(mac.Sum(nil), want) {
				return sts, true
			}
		}
	}
	return first, false
}

// v2StringToSign is the V2 string to sign with a date line and resource
// path.
func v2StringToSign(r *http.Request, date v2Date, path string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(strings.TrimSpace(firstHeader(r.Header, "Content-Md5")) + "\n")
	b.WriteString(strings.TrimSpace(firstHeader(r.Header, "Content-Type")) + "\n")
	b.WriteString(date.line + "\n")
	var names []string
	for k := range r.Header {
		dateGiven := date.dropAmzDate && strings.EqualFold(k, "x-amz-date") // already the date line
		if len(k) > 6 && strings.EqualFold(k[:6], "x-amz-") && !dateGiven {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	for _, k := range names {
		b.WriteString(strings.ToLower(k) + ":")
		for i, v := range r.Header[k] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.TrimSpace(v))
		}
		b.WriteByte('\n')
	}
	b.WriteString(path)
	var subs [][2]string
	for raw := r.URL.RawQuery; raw != ""; {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		k, v, hasValue := strings.Cut(part, "=")
		if !isV2SubResource(k) {
			continue
		}
		if dv, ok := queryParam(part, k); ok {
			v = dv
		}
		if !hasValue {
			v = "\x00" // no '=': the name alone
		}
		subs = append(subs, [2]string{k, v})
	}
	slices.SortStableFunc(subs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	for i, s := range subs {
		b.WriteByte("?&"[min(i, 1)])
		b.WriteString(s[0])
		if s[1] != "\x00" {
			b.WriteString("=" + s[1])
		}
	}
	return b.String()
}
