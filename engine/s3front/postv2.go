package s3front

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3err"
)

// Browser form uploads (POST object) signed with Signature Version 2:
// boto3's generate_presigned_post makes them at its default settings. The
// front end verifies only V4 forms, so a V2 form is verified here (the
// HMAC-SHA1 of its policy under the user's secret) and handed on as a V4
// form of the same user: its AWSAccessKeyId and signature fields replaced
// by x-amz-algorithm, x-amz-credential, x-amz-date and x-amz-signature,
// and its policy by the same policy with conditions for those three fields
// added, signed with V4. The front end then checks the policy (expiry,
// conditions, every field covered) and the user's access as for any form.
//
// A form's file is the field named "file"; the front end takes any part
// with a filename for it, and clients that send every field as a file part
// (Python's requests with files=) then get "Bucket POST must contain a
// field named 'key'". Such forms have the filenames of their other fields
// dropped here, as S3 ignores them.
//
// The form is rewritten in memory, so only forms up to maxPostV2 bytes are
// looked at; a larger V2 form gets the front end's answer (a missing
// x-amz-algorithm field). Other V4 forms pass unchanged.

// maxPostV2 is the largest form upload examined for a V2 signature.
const maxPostV2 = 32 << 20

// formUpload reports whether the request is a POST object form: a POST of
// multipart/form-data to a bucket, with a known length.
func formUpload(c fiber.Ctx) (boundary string, ok bool) {
	if c.Method() != fiber.MethodPost || len(c.Request().URI().QueryString()) > 0 {
		return "", false
	}
	mt, params, err := mime.ParseMediaType(string(c.Request().Header.ContentType()))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", false
	}
	if n := c.Request().Header.ContentLength(); n < 0 || n > maxPostV2 {
		return "", false
	}
	return params["boundary"], true
}

// readBody reads a request's body, of a known length, into memory of its
// own (fasthttp's Request.Body over a streamed body reuses the buffer it
// is reading from).
func readBody(c fiber.Ctx) ([]byte, error) {
	stream := c.Request().BodyStream()
	if stream == nil {
		return bytes.Clone(c.Request().Body()), nil
	}
	body := make([]byte, c.Request().Header.ContentLength())
	_, err := io.ReadFull(stream, body)
	return body, err
}

// formPart is one part of a form, as sent.
type formPart struct {
	header textproto.MIMEHeader
	name   string // the field's name, lower case
	body   []byte
}

// readForm splits a form into its parts (the file's content included: it
// is in memory already); false when the body is not a readable form.
func readForm(body []byte, boundary string) ([]formPart, bool) {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var parts []formPart
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return parts, true
		}
		if err != nil {
			return nil, false
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, false
		}
		parts = append(parts, formPart{header: p.Header, name: strings.ToLower(p.FormName()), body: data})
	}
}

func postError(code, msg string, status int) *s3err.APIError { return authError(code, msg, status) }

// postForm translates a V2-signed form upload into a V4-signed one and
// drops the filenames of fields other than the file; other requests pass
// untouched.
func postForm(c fiber.Ctx, lookup SecretLookup, region string) *s3err.APIError {
	boundary, ok := formUpload(c)
	if !ok {
		return nil
	}
	body, err := readBody(c)
	if err != nil {
		return postError("IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.", http.StatusBadRequest)
	}
	// The body is read now: the request carries it from memory.
	c.Request().SetBody(body)
	parts, ok := readForm(body, boundary)
	if !ok {
		return nil // not a form we can read: the front end answers it
	}
	substituted := substituteFilename(parts)
	fields := map[string]string{}
	for _, p := range parts {
		if p.name != "file" {
			if _, seen := fields[p.name]; !seen {
				fields[p.name] = string(p.body)
			}
		}
	}
	_, isV2 := fields["awsaccesskeyid"]
	if isV2 && fields["x-amz-algorithm"] == "" && fields["x-amz-signature"] == "" {
		policy, added, aerr := signedAgain(fields, lookup, region)
		if aerr != nil {
			return aerr
		}
		return rewriteForm(c, parts, boundary, policy, added)
	}
	if substituted || slices.ContainsFunc(parts, fieldAsFile) || !fileLast(parts) {
		return rewriteForm(c, parts, boundary, "", nil)
	}
	return nil
}

// substituteFilename puts the uploaded file's name where the form's key
// says ${filename}, as S3 does before it checks the policy's conditions;
// it reports whether it changed the form.
func substituteFilename(parts []formPart) bool {
	file := slices.IndexFunc(parts, func(p formPart) bool { return p.name == "file" })
	key := slices.IndexFunc(parts, func(p formPart) bool { return p.name == "key" })
	if file < 0 || key < 0 || !bytes.Contains(parts[key].body, []byte("${filename}")) {
		return false
	}
	_, params, err := mime.ParseMediaType(parts[file].header.Get("Content-Disposition"))
	name := params["filename"]
	if err != nil || name == "" {
		return false
	}
	// Browsers send a base name; some send a path (C:\dir\f.txt).
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	parts[key].body = bytes.ReplaceAll(parts[key].body, []byte("${filename}"), []byte(name))
	return true
}

// fileLast reports whether the form's file, if any, is its last part.
func fileLast(parts []formPart) bool {
	i := slices.IndexFunc(parts, func(p formPart) bool { return p.name == "file" })
	return i < 0 || i == len(parts)-1
}

// fieldAsFile reports a field other than the file sent with a filename.
func fieldAsFile(p formPart) bool {
	if p.name == "file" {
		return false
	}
	_, params, err := mime.ParseMediaType(p.header.Get("Content-Disposition"))
	_, named := params["filename"]
	return err == nil && named
}

func rewriteForm(c fiber.Ctx, parts []formPart, boundary, policy string, added [][2]string) *s3err.APIError {
	newBody, err := writeForm(parts, boundary, policy, added)
	if err != nil {
		return postError("MalformedPOSTRequest", "The body of your POST request is not well-formed multipart/form-data.", http.StatusBadRequest)
	}
	c.Request().SetBody(newBody)
	c.Request().Header.SetContentLength(len(newBody))
	return nil
}

// signedAgain verifies a V2 form's signature and returns its policy with
// the V4 fields covered and the V4 fields to add (signature included).
func signedAgain(fields map[string]string, lookup SecretLookup, region string) (string, [][2]string, *s3err.APIError) {
	access := fields["awsaccesskeyid"]
	for _, name := range []string{"policy", "signature"} {
		if fields[name] == "" {
			return "", nil, postError("InvalidArgument", "Bucket POST must contain a field named '"+name+"'.  If it is specified, please check the order of the fields.", http.StatusBadRequest)
		}
	}
	secret, known := lookup(access)
	if !known {
		return "", nil, postError("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", http.StatusForbidden)
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(fields["policy"]))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if subtle.ConstantTimeCompare([]byte(want), []byte(fields["signature"])) != 1 {
		return "", nil, postError("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", http.StatusForbidden)
	}

	now := time.Now().UTC()
	amzDate := now.Format("20060102T150405Z")
	credential := access + "/" + now.Format("20060102") + "/" + region + "/s3/aws4_request"
	added := [][2]string{{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"x-amz-credential", credential}, {"x-amz-date", amzDate}}
	policy := policyWith(fields["policy"], added)
	signature := hex.EncodeToString(hmacSHA256(v4SigningKey(secret, now, region), []byte(policy)))
	return policy, append(added, [2]string{"x-amz-signature", signature}), nil
}

// policyWith is a V2 policy (base64 JSON) with equality conditions added,
// base64 again. A policy that cannot take them (not base64 JSON, no
// conditions list) is returned as it is, for the front end to refuse as it
// refuses such a V4 policy.
func policyWith(b64 string, conds [][2]string) string {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return b64
	}
	var doc map[string]json.RawMessage
	var list []json.RawMessage
	if json.Unmarshal(raw, &doc) != nil || doc["conditions"] == nil || json.Unmarshal(doc["conditions"], &list) != nil {
		return b64
	}
	for _, kv := range conds {
		c, _ := json.Marshal(map[string]string{kv[0]: kv[1]}) // strings always marshal
		list = append(list, c)
	}
	doc["conditions"], _ = json.Marshal(list)
	out, err := json.Marshal(doc)
	if err != nil {
		return b64
	}
	return base64.StdEncoding.EncodeToString(out)
}

// writeForm writes the form again with the same boundary: the fields, the
// added fields, then the file (S3 reads no field after it; fasthttp, which
// parses forms ahead of us, hands them on in no particular order), fields
// other than the file without filenames; for a V2 form (policy not "") its
// V2 fields left out and its policy replaced.
func writeForm(parts []formPart, boundary, policy string, added [][2]string) ([]byte, error) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, err
	}
	v2 := policy != ""
	write := func(p formPart) error {
		header, data := p.header, p.body
		if v2 && (p.name == "awsaccesskeyid" || p.name == "signature") {
			return nil
		}
		if v2 && p.name == "policy" {
			data = []byte(policy)
		}
		if fieldAsFile(p) {
			header = maps.Clone(p.header)
			header.Set("Content-Disposition", `form-data; name="`+quoteEscaper.Replace(formName(p))+`"`)
		}
		pw, err := w.CreatePart(header)
		if err == nil {
			_, err = pw.Write(data)
		}
		return err
	}
	for _, p := range parts {
		if p.name != "file" {
			if err := write(p); err != nil {
				return nil, err
			}
		}
	}
	for _, kv := range added {
		if err := w.WriteField(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	for _, p := range parts {
		if p.name == "file" {
			if err := write(p); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// quoteEscaper escapes a Content-Disposition parameter as mime/multipart
// writes them.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// formName is a part's field name as sent.
func formName(p formPart) string {
	_, params, _ := mime.ParseMediaType(p.header.Get("Content-Disposition"))
	return params["name"]
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// v4SigningKey is SigV4's key for S3 in region on t's date.
func v4SigningKey(secret string, t time.Time, region string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(t.Format("20060102")))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte("s3"))
	return hmacSHA256(k, []byte("aws4_request"))
}
