package s3sig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// field is one part of a test form; filename "" sends it as a plain
// field unless the form is sent requests-style (every part a file).
type field struct{ name, value, filename string }

// buildForm writes a multipart form. asFiles sends every part with a
// filename, as Python's requests does with files= (the s3-tests way).
func buildForm(t testing.TB, fields []field, asFiles bool) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		h := textproto.MIMEHeader{}
		disp := `form-data; name="` + f.name + `"`
		name := f.filename
		if name == "" && asFiles {
			name = f.name
		}
		if name != "" {
			disp += `; filename="` + name + `"`
		}
		h.Set("Content-Disposition", disp)
		if f.name == "file" {
			h.Set("Content-Type", "text/plain")
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(pw, f.value); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return b.String(), w.Boundary()
}

// policyOf encodes a policy document.
func policyOf(doc map[string]any) string {
	b, _ := json.Marshal(doc)
	return base64.StdEncoding.EncodeToString(b)
}

// signV2 signs a policy as the s3-tests do.
func signV2(policy string) string { return v2Sign(testSecret, policy) }

// signV4 signs a policy with Signature V4's key, written out here apart
// from the package's own.
func signV4(policy, date, region string) string {
	mac := func(k []byte, s string) []byte { m := hmac.New(sha256.New, k); m.Write([]byte(s)); return m.Sum(nil) }
	k := mac([]byte("AWS4"+testSecret), date)
	k = mac(mac(mac(k, region), "s3"), "aws4_request")
	return hex.EncodeToString(mac(k, policy))
}

// stdConditions are the s3-tests' usual conditions for bucket "b".
func stdConditions(extra ...any) []any {
	return append([]any{map[string]string{"bucket": "b"}, []any{"starts-with", "$key", "foo"},
		map[string]string{"acl": "private"}, []any{"starts-with", "$Content-Type", "text/plain"},
		[]any{"content-length-range", 0, 1024}}, extra...)
}

func future() string { return testNow.Add(100 * time.Minute).Format("2006-01-02T15:04:05Z") }

// v2Form is the s3-tests' authenticated V2 form with the given policy and
// extra fields before the file.
func v2Form(policy string, extra ...field) []field {
	f := []field{{name: "key", value: "foo.txt"}, {name: "AWSAccessKeyId", value: testAccess}, {name: "acl", value: "private"},
		{name: "signature", value: signV2(policy)}, {name: "policy", value: policy}, {name: "Content-Type", value: "text/plain"}}
	return append(append(f, extra...), field{name: "file", value: "bar"})
}

func TestPostForms(t *testing.T) {
	std := policyOf(map[string]any{"expiration": future(), "conditions": stdConditions()})
	withFields := func(fs []field, edit func([]field) []field) []field { return edit(fs) }
	replace := func(name, value string) func([]field) []field {
		return func(fs []field) []field {
			for i := range fs {
				if fs[i].name == name {
					fs[i].value = value
				}
			}
			return fs
		}
	}
	drop := func(name string) func([]field) []field {
		return func(fs []field) []field {
			var out []field
			for _, f := range fs {
				if f.name != name {
					out = append(out, f)
				}
			}
			return out
		}
	}
	v4Date := testNow.Format("20060102T150405Z")
	v4Cred := testAccess + "/" + testNow.Format("20060102") + "/us-east-1/s3/aws4_request"
	v4Policy := policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
		map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"}, map[string]string{"x-amz-credential": v4Cred},
		map[string]string{"x-amz-date": v4Date})})
	v4Form := func(policy, cred string) []field {
		return []field{{name: "key", value: "foo.txt"}, {name: "acl", value: "private"}, {name: "Content-Type", value: "text/plain"},
			{name: "x-amz-algorithm", value: "AWS4-HMAC-SHA256"}, {name: "x-amz-credential", value: cred},
			{name: "x-amz-date", value: v4Date}, {name: "policy", value: policy},
			{name: "x-amz-signature", value: signV4(policy, testNow.Format("20060102"), "us-east-1")}, {name: "file", value: "bar"}}
	}
	cases := []struct {
		name    string
		fields  []field
		bucket  string // default "b"
		scheme  Scheme
		code    string // VerifyPost's answer
		status  int
		readErr string // reading Form.Payload
	}{
		{name: "authenticated", fields: v2Form(std), scheme: PostV2},
		{name: "no content type", fields: drop("Content-Type")(v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"starts-with", "$key", "foo"}, map[string]string{"acl": "private"},
			[]any{"content-length-range", 0, 1024}}}))), scheme: PostV2},
		{name: "key from filename", fields: withFields(v2Form(std), func(fs []field) []field {
			fs = replace("key", "${filename}")(fs)
			fs[len(fs)-1].filename = `C:\dir\foo.txt`
			return fs
		}), scheme: PostV2},
		{name: "ignored field", fields: v2Form(std, field{name: "x-ignore-foo", value: "bar"}), scheme: PostV2},
		{name: "case-insensitive names", fields: replace("key", "foo.txt")(v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bUcKeT": "b"}, []any{"StArTs-WiTh", "$KeY", "foo"}, map[string]string{"AcL": "private"},
			[]any{"StArTs-WiTh", "$CoNtEnT-TyPe", "text/plain"}, []any{"content-length-range", 0, 1024}}}))), scheme: PostV2},
		{name: "escaped values", fields: replace("key", `\$foo.txt`)(v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"starts-with", "$key", `\$foo`}, map[string]string{"acl": "private"},
			[]any{"starts-with", "$Content-Type", "text/plain"}, []any{"content-length-range", 0, 1024}}}))), scheme: PostV2},
		{name: "redirect covered", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
			[]any{"eq", "$success_action_redirect", "http://x/y"})}), field{name: "success_action_redirect", value: "http://x/y"}), scheme: PostV2},
		{name: "meta covered", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
			[]any{"starts-with", "$x-amz-meta-foo", "bar"})}), field{name: "x-amz-meta-foo", value: "barclamp"}), scheme: PostV2},
		{name: "checksum field needs no condition", fields: v2Form(std, field{name: "x-amz-checksum-crc32", value: checksumOf(algCRC32, "bar")}), scheme: PostV2},
		{name: "bad checksum field", fields: v2Form(std, field{name: "x-amz-checksum-sha256", value: "sailorjerry"}), scheme: PostV2,
			readErr: "InvalidRequest"},
		{name: "wrong checksum field", fields: v2Form(std, field{name: "x-amz-checksum-crc32", value: "AAAAAA=="}), scheme: PostV2,
			readErr: "BadDigest"},
		{name: "file over the range", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"starts-with", "$key", "foo"}, map[string]string{"acl": "private"},
			[]any{"starts-with", "$Content-Type", "text/plain"}, []any{"content-length-range", 0, 0}}})), scheme: PostV2, readErr: "EntityTooLarge"},
		{name: "file under the range", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"starts-with", "$key", "foo"}, map[string]string{"acl": "private"},
			[]any{"starts-with", "$Content-Type", "text/plain"}, []any{"content-length-range", 512, 1000}}})), scheme: PostV2, readErr: "EntityTooSmall"},
		{name: "bad access key", fields: replace("AWSAccessKeyId", "foo")(v2Form(std)), code: "InvalidAccessKeyId", status: 403},
		{name: "bad signature", fields: replace("signature", signV2("other"))(v2Form(std)), code: "SignatureDoesNotMatch", status: 403},
		{name: "no signature", fields: drop("signature")(v2Form(std)), code: "InvalidArgument", status: 400},
		{name: "no key", fields: drop("key")(v2Form(std)), code: "InvalidArgument", status: 400},
		{name: "bad expiration", fields: v2Form(policyOf(map[string]any{"expiration": testNow.Add(time.Hour).Format("2006-01-02 15:04:05.000000+00:00"),
			"conditions": stdConditions()})), code: "InvalidPolicyDocument", status: 400},
		{name: "no bucket condition", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions()[1:]})),
			code: "AccessDenied", status: 403},
		{name: "field not in the policy", fields: v2Form(std, field{name: "x-amz-meta-foo", value: "x"}), code: "AccessDenied", status: 403},
		{name: "condition on a missing field", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
			[]any{"starts-with", "$x-amz-meta-foo", "bar"})})), code: "AccessDenied", status: 403},
		{name: "CONDITIONS", fields: v2Form(policyOf(map[string]any{"expiration": future(), "CONDITIONS": stdConditions()})),
			code: "InvalidPolicyDocument", status: 400},
		{name: "EXPIRATION", fields: v2Form(policyOf(map[string]any{"EXPIRATION": future(), "conditions": stdConditions()})),
			code: "InvalidPolicyDocument", status: 400},
		{name: "expired", fields: v2Form(policyOf(map[string]any{"expiration": testNow.Add(-100 * time.Minute).Format(time.RFC3339),
			"conditions": stdConditions()})), code: "AccessDenied", status: 403},
		{name: "another bucket", fields: v2Form(std, field{name: "bucket", value: "b"}), bucket: "other", code: "AccessDenied", status: 403},
		{name: "eq fails", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
			[]any{"eq", "$x-amz-meta-foo", ""})}), field{name: "x-amz-meta-foo", value: "barclamp"}), code: "AccessDenied", status: 403},
		{name: "no expiration", fields: v2Form(policyOf(map[string]any{"conditions": stdConditions()})), code: "InvalidPolicyDocument", status: 400},
		{name: "no conditions", fields: v2Form(policyOf(map[string]any{"expiration": future()})), code: "InvalidPolicyDocument", status: 400},
		{name: "range without max", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"content-length-range", 0}}})), code: "InvalidPolicyDocument", status: 400},
		{name: "negative range", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{
			map[string]string{"bucket": "b"}, []any{"content-length-range", -1, 0}}})), code: "InvalidPolicyDocument", status: 400},
		{name: "empty condition", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{map[string]string{}}})),
			code: "InvalidPolicyDocument", status: 400},
		{name: "unknown operation", fields: v2Form(policyOf(map[string]any{"expiration": future(), "conditions": []any{[]any{"ends-with", "$key", "x"}}})),
			code: "InvalidPolicyDocument", status: 400},
		{name: "policy not base64", fields: v2Form("%%%"), code: "InvalidPolicyDocument", status: 400},
		{name: "anonymous", fields: []field{{name: "key", value: "foo.txt"}, {name: "acl", value: "public-read"},
			{name: "tagging", value: "<Tagging/>"}, {name: "file", value: "bar"}}, scheme: Anonymous},
		{name: "V4", fields: v4Form(v4Policy, v4Cred), scheme: PostV4},
		{name: "V4 credential not covered", fields: v4Form(policyOf(map[string]any{"expiration": future(), "conditions": stdConditions(
			map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"}, map[string]string{"x-amz-date": v4Date})}), v4Cred),
			code: "AccessDenied", status: 403},
		{name: "V4 another region", fields: v4Form(v4Policy, testAccess+"/"+testNow.Format("20060102")+"/eu-west-9/s3/aws4_request"),
			code: "InvalidArgument", status: 400},
		{name: "V4 forged", fields: replace("x-amz-signature", strings.Repeat("0", 64))(v4Form(v4Policy, v4Cred)),
			code: "SignatureDoesNotMatch", status: 403},
		{name: "V4 without signature", fields: drop("x-amz-signature")(v4Form(v4Policy, v4Cred)), code: "InvalidArgument", status: 400},
	}
	for _, c := range cases {
		for _, asFiles := range []bool{false, true} {
			t.Run(c.name, func(t *testing.T) {
				body, boundary := buildForm(t, c.fields, asFiles)
				form, err := ReadForm(strings.NewReader(body), boundary, FormLimits{})
				if err != nil {
					t.Fatal(err)
				}
				bucket := c.bucket
				if bucket == "" {
					bucket = "b"
				}
				a, policy, err := VerifyPost(form, bucket, testSecrets(), testOpts())
				wantCode(t, c.name, err, c.code, c.status)
				if err != nil {
					return
				}
				if a.Scheme != c.scheme || (c.scheme != Anonymous && a.AccessKey != testAccess) {
					t.Fatalf("auth %+v", a)
				}
				p, err := form.Payload(policy)
				if err == nil {
					var data []byte
					data, err = readAll(p)
					if err == nil && string(data) != "bar" {
						t.Fatalf("file %q", data)
					}
				}
				if code, _ := codeOf(err); code != c.readErr {
					t.Fatalf("file: %v, want %q", err, c.readErr)
				}
				if k := form.Fields.Get("key"); c.name == "key from filename" && k != "foo.txt" {
					t.Fatalf("key %q", k)
				}
			})
		}
	}
}

func TestReadForm(t *testing.T) {
	t.Run("stops at the file", func(t *testing.T) {
		body, b := buildForm(t, []field{{name: "Key", value: "k"}, {name: "key", value: "second"}, {name: "file", value: "data", filename: "d/f.bin"},
			{name: "after", value: "ignored"}}, false)
		f, err := ReadForm(strings.NewReader(body), b, FormLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Fields.Get("KEY") != "k" || f.Fields.Has("after") || f.FileName != "f.bin" || f.FileContentType != "text/plain" {
			t.Fatalf("%+v", f)
		}
		data, err := io.ReadAll(f.File)
		if err != nil || string(data) != "data" {
			t.Fatalf("%q %v", data, err)
		}
	})
	t.Run("file read lazily", func(t *testing.T) {
		body, b := buildForm(t, []field{{name: "key", value: "k"}, {name: "file", value: strings.Repeat("z", 1<<20)}}, false)
		src := &countingReader{r: strings.NewReader(body)}
		if _, err := ReadForm(src, b, FormLimits{}); err != nil {
			t.Fatal(err)
		}
		if src.n > 64<<10 {
			t.Fatalf("read %d bytes before the file", src.n)
		}
	})
	cases := []struct {
		name   string
		body   func() (string, string)
		limits FormLimits
		code   string
	}{
		{"no file", func() (string, string) { return buildForm(t, []field{{name: "key", value: "k"}}, false) }, FormLimits{}, "InvalidArgument"},
		{"field too large", func() (string, string) {
			return buildForm(t, []field{{name: "key", value: strings.Repeat("k", 30<<10)}, {name: "file", value: "x"}}, false)
		}, FormLimits{}, "MaxPostPreDataLengthExceededError"},
		{"fields too large together", func() (string, string) {
			var fs []field
			for i := range 10 {
				fs = append(fs, field{name: "x-amz-meta-" + string(rune('a'+i)), value: strings.Repeat("v", 10<<10)})
			}
			return buildForm(t, append(fs, field{name: "file", value: "x"}), false)
		}, FormLimits{}, "MaxPostPreDataLengthExceededError"},
		{"many tiny fields", func() (string, string) {
			var fs []field
			for range 5000 {
				fs = append(fs, field{name: "x", value: ""})
			}
			return buildForm(t, append(fs, field{name: "file", value: "x"}), false)
		}, FormLimits{}, "MaxPostPreDataLengthExceededError"},
		{"not multipart", func() (string, string) { return "garbage", "xyz" }, FormLimits{}, "MalformedPOSTRequest"},
	}
	for _, c := range cases {
		body, b := c.body()
		_, err := ReadForm(strings.NewReader(body), b, c.limits)
		if code, _ := codeOf(err); code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	t.Run("file cut short", func(t *testing.T) {
		body, b := buildForm(t, []field{{name: "key", value: "k"}, {name: "file", value: strings.Repeat("z", 10000)}}, false)
		f, err := ReadForm(strings.NewReader(body[:len(body)-200]), b, FormLimits{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(f.File)
		wantCode(t, "cut", err, "IncompleteBody", 400)
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestPostPolicyLength(t *testing.T) {
	p := &PostPolicy{MinLength: 2, MaxLength: 5}
	for n, want := range map[int64]string{1: "EntityTooSmall", 2: "", 5: "", 6: "EntityTooLarge"} {
		if code, _ := codeOf(p.LengthOK(n)); code != want {
			t.Errorf("LengthOK(%d): %q, want %q", n, code, want)
		}
	}
	if (*PostPolicy)(nil).LengthOK(1<<40) != nil {
		t.Error("a nil policy limits")
	}
	for in, want := range map[string]string{"a": "EntityTooSmall", "abc": "", "abcdef": "EntityTooLarge"} {
		_, err := io.ReadAll(p.Limit(strings.NewReader(in)))
		if code, _ := codeOf(err); code != want {
			t.Errorf("Limit(%q): %v, want %q", in, err, want)
		}
	}
	// The limit stops reading past the maximum, not after the stream.
	src := &countingReader{r: strings.NewReader(strings.Repeat("x", 1<<20))}
	buf := make([]byte, 4)
	lim := p.Limit(src)
	for {
		if _, err := lim.Read(buf); err != nil {
			break
		}
	}
	if src.n > 8 {
		t.Fatalf("read %d bytes past a 5-byte maximum", src.n)
	}
}
