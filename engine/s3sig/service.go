package s3sig

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// Requests of other AWS services on the S3 port: the IAM and STS Query
// APIs (a form POSTed to /) are signed with Signature V4 like S3's, but
// scoped to their own service, often to an empty region (boto3 with
// region_name='') or the global endpoints' us-east-1, and IAM's clients
// send no x-amz-content-sha256: the signature covers the body's SHA-256,
// which the server computes.

// Service is the service a request's Signature V4 Authorization header
// names in its credential scope ("" for any other request).
func Service(r *http.Request) string {
	rest, ok := strings.CutPrefix(firstHeader(r.Header, "Authorization"), v4Algorithm+" ")
	if !ok {
		return ""
	}
	cred, _, _, err := parseV4Header(rest)
	if err != nil {
		return ""
	}
	if parts := strings.Split(cred, "/"); len(parts) == 5 {
		return parts[3]
	}
	return ""
}

// VerifyService checks the Signature V4 Authorization header of a request
// to service ("iam", "sts") whose body was read whole: the scope's region
// may be empty, us-east-1 or opts' region; a body declared with
// x-amz-content-sha256 must match it.
func VerifyService(r *http.Request, body []byte, service string, secrets Secrets, opts Options) (*Auth, error) {
	rest, ok := strings.CutPrefix(firstHeader(r.Header, "Authorization"), v4Algorithm+" ")
	if !ok {
		return nil, errMalformedHeader("the %s API takes Signature Version 4 (AWS4-HMAC-SHA256) only.", service)
	}
	credStr, signed, sig, err := parseV4Header(rest)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(credStr, "/")
	if len(parts) != 5 || parts[0] == "" || parts[1] == "" {
		return nil, errMalformedHeader(`the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`)
	}
	cr := credential{access: parts[0], date: parts[1], region: parts[2], service: parts[3], terminal: parts[4],
		scope: strings.Join(parts[1:], "/")}
	if _, ok := parseAmzDate(cr.date + "T000000Z"); !ok {
		return nil, errMalformedHeader(`incorrect date format "%s". This date in the credential must be in the format "yyyyMMdd".`, cr.date)
	}
	switch {
	case cr.service != service:
		return nil, errMalformedHeader(`incorrect service "%s". This endpoint belongs to "%s".`, cr.service, service)
	case cr.terminal != "aws4_request":
		return nil, errMalformedHeader(`incorrect terminal "%s". This endpoint uses "aws4_request".`, cr.terminal)
	case cr.region != "" && cr.region != "us-east-1" && cr.region != opts.region():
		return nil, errMalformedHeader("the region '%s' is wrong; expecting '%s'", cr.region, opts.region())
	}
	t, amzDate, err := signedTime(r, cr, opts)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if declared, ok := headerValue(r.Header, "X-Amz-Content-Sha256"); ok && declared != payload {
		return nil, s3err.XAmzContentSHA256Mismatch
	}
	return headerSignedBy(r, cr, secrets, signed, payload, sig, t, amzDate)
}
