package s3sig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// A POST form's policy, base64 of
//
//	{"expiration": "2030-01-01T00:00:00Z",
//	 "conditions": [{"bucket": "b"}, ["starts-with", "$key", "uploads/"],
//	                ["eq", "$acl", "private"], ["content-length-range", 0, 1048576]]}
//
// signed by the form (V4: x-amz-signature, hex HMAC-SHA256 under the
// signing key of x-amz-credential's scope; V2: signature, base64
// HMAC-SHA1 under the secret). Every field of the form must satisfy the
// conditions naming it, and be named by one, but for the exempt ones.

// PostPolicy is what a verified form's policy leaves for the caller to
// check as it streams the file: its size range.
type PostPolicy struct {
	// Expiration is when the policy stops being valid.
	Expiration time.Time
	// MinLength and MaxLength are content-length-range's bounds; MaxLength
	// is -1 without one.
	MinLength, MaxLength int64
}

// LengthOK is nil when a file of n bytes is within the policy's
// content-length-range, else EntityTooSmall or EntityTooLarge. A nil
// policy (an anonymous form without one) allows any size.
func (p *PostPolicy) LengthOK(n int64) error {
	switch {
	case p == nil:
		return nil
	case p.MaxLength >= 0 && n > p.MaxLength:
		return s3err.EntityTooLarge.With("Your proposed upload exceeds the maximum allowed size")
	case n < p.MinLength:
		return s3err.EntityTooSmall.With("Your proposed upload is smaller than the minimum allowed size")
	}
	return nil
}

// Limit wraps a file reader so that it fails (EntityTooLarge) as soon as
// more than the policy's maximum has been read, and fails its end
// (EntityTooSmall) in place of io.EOF when less than the minimum was: the
// caller never stores a file the policy does not allow.
func (p *PostPolicy) Limit(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return &Payload{src: r, size: -1, max: p.MaxLength, min: p.MinLength}
}

// MaxFormFile is the largest file a form uploads, S3's limit of an object
// written in one request, whatever its policy says.
const MaxFormFile = 5 << 30

// Payload is the form's file with its integrity checked: the policy's
// size range (policy may be nil) within MaxFormFile and the Content-MD5 and x-amz-checksum-*
// fields, as Auth.Body checks a request's headers.
func (f *Form) Payload(policy *PostPolicy) (*Payload, error) {
	md5Want, err := contentMD5(f.Fields["content-md5"], f.Fields.Has("content-md5"))
	if err != nil {
		return nil, err
	}
	var parser checksumParser
	for _, name := range f.names {
		parser.add(name, f.Fields[name])
	}
	spec, err := parser.finish(false)
	if err != nil {
		return nil, err
	}
	p := &Payload{src: f.File, size: -1, max: MaxFormFile, md5Want: md5Want, sum: spec}
	if policy != nil {
		p.min = policy.MinLength
		if policy.MaxLength >= 0 {
			p.max = min(policy.MaxLength, MaxFormFile)
		}
	}
	return p, nil
}

// exemptField reports the fields a policy need not name: the signature
// and the policy itself, the V2 access key, the file, x-ignore-* (S3's
// rule), and x-amz-checksum-*, which only ask for the file to be checked
// (the s3-tests suite uploads one no condition names).
func exemptField(name string) bool {
	switch name {
	case "x-amz-signature", "signature", "awsaccesskeyid", "file", "policy":
		return true
	}
	return strings.HasPrefix(name, "x-ignore-") || strings.HasPrefix(name, "x-amz-checksum-")
}

// VerifyPost authenticates a form upload to bucket (the bucket of the
// request's URL) and checks its policy, and that it names a key, which
// every form needs. A form without any signature field is Anonymous (the
// caller decides whether the bucket allows that) and its policy, if any,
// is still enforced; a signed one needs its policy. The Auth's Scheme is
// PostV4, PostV2 or Anonymous; the PostPolicy is nil without a policy.
func VerifyPost(form *Form, bucket string, secrets Secrets, opts Options) (*Auth, *PostPolicy, error) {
	fields := form.Fields
	if fields.Get("key") == "" {
		return nil, nil, errPostField("key")
	}
	var a *Auth
	var err error
	switch {
	case fields.Has("x-amz-signature") || fields.Has("x-amz-credential") || fields.Has("x-amz-algorithm"):
		a, err = verifyPostV4(fields, secrets, opts)
	case fields.Has("signature") || fields.Has("awsaccesskeyid"):
		a, err = verifyPostV2(fields, secrets)
	default:
		a = &Auth{Scheme: Anonymous}
		if !fields.Has("policy") {
			return a, nil, nil
		}
	}
	if err != nil {
		return nil, nil, err
	}
	policy, err := checkPolicy(form, fields["policy"], bucket, opts.now())
	if err != nil {
		return nil, nil, err
	}
	a.Expires = policy.Expiration
	return a, policy, nil
}

// verifyPostV4 checks a form's V4 signature of its policy.
func verifyPostV4(fields FormFields, secrets Secrets, opts Options) (*Auth, error) {
	for _, name := range []string{"x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature", "policy"} {
		if fields[name] == "" {
			return nil, errPostField(name)
		}
	}
	if alg := fields["x-amz-algorithm"]; alg != v4Algorithm {
		return nil, s3err.InvalidArgumentNamed(`X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"`, "x-amz-algorithm", alg)
	}
	credStr := fields["x-amz-credential"]
	credErr := func(format string, args ...any) *s3err.Error {
		return s3err.InvalidArgumentNamed(fmt.Sprintf(format, args...), "x-amz-credential", credStr)
	}
	cr, ok := parseCredential(credStr)
	if !ok {
		return nil, credErr(`the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".`)
	}
	if err := checkScope(cr, opts.region(), credErr); err != nil {
		return nil, err
	}
	t, ok := parseAmzDate(fields["x-amz-date"])
	if !ok {
		return nil, s3err.InvalidArgumentNamed(`X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'"`, "x-amz-date", fields["x-amz-date"])
	}
	secret, ok := secrets.Secret(cr.access)
	if !ok {
		return nil, errUnknownKey(cr.access)
	}
	m := newMacer()
	m.deriveKey(secret, cr.date, cr.region, cr.service)
	m.macString(m.key[:], fields["policy"])
	if sig := fields["x-amz-signature"]; !sameHex(sig, m.out[:]) {
		return nil, errMismatch(cr.access, fields["policy"], sig, "")
	}
	return &Auth{AccessKey: cr.access, Scheme: PostV4, Time: t, Scope: cr.scope, amzDate: fields["x-amz-date"], key: m.key, signature: m.out}, nil
}

// verifyPostV2 checks a form's V2 signature of its policy.
func verifyPostV2(fields FormFields, secrets Secrets) (*Auth, error) {
	for _, name := range [][2]string{{"awsaccesskeyid", "AWSAccessKeyId"}, {"signature", "signature"}, {"policy", "policy"}} {
		if fields[name[0]] == "" {
			return nil, errPostField(name[1])
		}
	}
	access := fields["awsaccesskeyid"]
	secret, ok := secrets.Secret(access)
	if !ok {
		return nil, errUnknownKey(access)
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(fields["policy"]))
	want, err := base64.StdEncoding.DecodeString(fields["signature"])
	if err != nil || !hmac.Equal(mac.Sum(nil), want) {
		return nil, errMismatch(access, fields["policy"], fields["signature"], "")
	}
	return &Auth{AccessKey: access, Scheme: PostV2}, nil
}

// checkPolicy decodes a form's policy and checks it against the form and
// the clock.
func checkPolicy(form *Form, encoded, bucket string, now time.Time) (*PostPolicy, error) {
	doc, err := parsePolicy(encoded)
	if err != nil {
		return nil, err
	}
	if !now.Before(doc.expiration) {
		return nil, errPolicyDenied("Policy expired.")
	}
	value := func(name string) (string, bool) {
		if name == "bucket" {
			return bucket, true // the URL's bucket, whatever a field says
		}
		v, ok := form.Fields[name]
		return v, ok
	}
	for _, c := range doc.conditions {
		if c.op == "content-length-range" {
			continue
		}
		v, _ := value(c.field)
		if !c.holds(v) {
			return nil, errPolicyDenied("Policy Condition failed: %s", c)
		}
	}
	covered := func(name string) bool {
		for _, c := range doc.conditions {
			if c.field == name {
				return true
			}
		}
		return false
	}
	var extra []string
	if !covered("bucket") {
		extra = append(extra, "bucket") // the URL's: a field of every form
	}
	for _, name := range form.names {
		if name != "bucket" && !exemptField(name) && !covered(name) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		return nil, errPolicyDenied("Extra input fields: %s", strings.Join(extra, ", "))
	}
	return &PostPolicy{Expiration: doc.expiration, MinLength: doc.minLength, MaxLength: doc.maxLength}, nil
}

// condition is one of a policy's conditions.
type condition struct {
	op    string // eq, starts-with, content-length-range
	field string // lower case, without '$'
	name  string // the field as the policy writes it, for messages
	value string
}

// holds reports whether a field's value satisfies the condition.
func (c condition) holds(v string) bool {
	switch c.op {
	case "eq":
		return v == c.value
	case "starts-with":
		if c.field == "content-type" {
			// Each of a list of types must start with the prefix.
			for _, t := range strings.Split(v, ",") {
				if !strings.HasPrefix(strings.TrimSpace(t), c.value) {
					return false
				}
			}
			return true
		}
		return strings.HasPrefix(v, c.value)
	}
	return false
}

// String is the condition as S3's messages quote it.
func (c condition) String() string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return "[" + q(c.op) + ", " + q("$"+c.name) + ", " + q(c.value) + "]"
}

// policyDoc is a decoded policy.
type policyDoc struct {
	expiration           time.Time
	conditions           []condition
	minLength, maxLength int64
}

// parsePolicy decodes a policy: base64 JSON with exactly an expiration
// (RFC 3339) and a list of conditions; anything else is
// InvalidPolicyDocument.
func parsePolicy(encoded string) (*policyDoc, error) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, errPolicyDocument("invalid Base64 encoding.")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, errPolicyDocument("Invalid JSON.")
	}
	for k := range top {
		if k != "expiration" && k != "conditions" {
			return nil, errPolicyDocument("Unexpected: %q", k)
		}
	}
	doc := &policyDoc{maxLength: -1}
	var exp string
	if top["expiration"] == nil {
		return nil, errPolicyDocument("Policy missing expiration.")
	}
	if json.Unmarshal(top["expiration"], &exp) != nil {
		return nil, errPolicyDocument("Invalid 'expiration' value: '%s'", top["expiration"])
	}
	if doc.expiration, err = time.Parse(time.RFC3339, exp); err != nil {
		return nil, errPolicyDocument("Invalid 'expiration' value: '%s'", exp)
	}
	if top["conditions"] == nil {
		return nil, errPolicyDocument("Policy missing conditions.")
	}
	var conds []json.RawMessage
	if json.Unmarshal(top["conditions"], &conds) != nil {
		return nil, errPolicyDocument("Invalid 'conditions' value: must be a List.")
	}
	for _, c := range conds {
		if err := doc.addCondition(c); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// addCondition reads one condition: {"field": "value"} or [op, ...].
func (doc *policyDoc) addCondition(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return errPolicyDocument("Invalid condition test: must be a List or Object.")
		}
		if len(obj) != 1 {
			return errPolicyDocument("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.")
		}
		for k, v := range obj {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return errPolicyDocument("Invalid Simple-Condition: value must be a string.")
			}
			doc.conditions = append(doc.conditions, condition{op: "eq", field: strings.ToLower(k), name: k, value: s})
		}
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return errPolicyDocument("Invalid condition test: must be a List or Object.")
	}
	var op string
	if len(list) == 0 || json.Unmarshal(list[0], &op) != nil {
		return errPolicyDocument("Invalid Condition: missing operation identifier.")
	}
	op = strings.ToLower(op)
	switch op {
	case "eq", "starts-with":
		var field, value string
		if len(list) != 3 {
			return errPolicyDocument("Invalid %s: wrong number of arguments.", op)
		}
		if json.Unmarshal(list[1], &field) != nil || !strings.HasPrefix(field, "$") || json.Unmarshal(list[2], &value) != nil {
			return errPolicyDocument("Invalid %s: arguments must be a \"$field\" and a string.", op)
		}
		doc.conditions = append(doc.conditions, condition{op: op, field: strings.ToLower(field[1:]), name: field[1:], value: value})
	case "content-length-range":
		if len(list) != 3 {
			return errPolicyDocument("Invalid content-length-range: wrong number of arguments.")
		}
		lo, ok1 := policyInt(list[1])
		hi, ok2 := policyInt(list[2])
		if !ok1 || !ok2 || lo < 0 || hi < lo {
			return errPolicyDocument("Invalid content-length-range: the bounds must be integers, 0 <= min <= max.")
		}
		doc.minLength, doc.maxLength = lo, hi
		doc.conditions = append(doc.conditions, condition{op: op})
	default:
		return errPolicyDocument("Invalid Condition: unknown operation '%s'.", op)
	}
	return nil
}

// policyInt reads a content-length-range bound: a JSON integer, or a
// string of one.
func policyInt(raw json.RawMessage) (int64, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}
