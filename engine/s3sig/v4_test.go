package s3sig

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const testHost = "http://s3.example.test:9000"

// TestV4HeaderAgainstSDK signs requests with aws-sdk-go-v2's signer and
// verifies them; then changes one thing and expects S3's answer.
func TestV4HeaderAgainstSDK(t *testing.T) {
	type tc struct {
		name   string
		url    string
		build  func(r *http.Request)                  // before signing
		access string                                 // default testAccess
		secret string                                 // default testSecret
		region string                                 // default us-east-1
		at     time.Time                              // default testNow
		after  func(t *testing.T, r *http.Request)    // after signing
		check  func(t *testing.T, a *Auth, err error) // beyond the code
		code   string
		status int
	}
	cases := []tc{
		{name: "plain GET", url: "/bucket/key"},
		{name: "service root", url: "/"},
		{name: "awkward key", url: "/bucket/a%20b%2Bc%21%2A%27%28%29~%C3%BC/d%2Fe/./x//y"},
		{name: "awkward query", url: "/bucket?prefix=a%20b%2Bc&list-type=2&delimiter=%2F&acl&empty=&z=1&a=2&a=1&sp=a+b"},
		{name: "headers with spaces and repeats", url: "/bucket/k", build: func(r *http.Request) {
			r.Header.Set("X-Amz-Meta-Spaced", "  a   b    c  ")
			r.Header.Add("X-Amz-Meta-Twice", "one")
			r.Header.Add("X-Amz-Meta-Twice", "two")
			r.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}},
		{name: "hex payload", url: "/bucket/k", build: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		}, check: func(t *testing.T, a *Auth, _ error) {
			if a.Payload != emptySHA256 {
				t.Fatalf("payload %q", a.Payload)
			}
		}},
		{name: "wrong secret", url: "/bucket/k", secret: "nope", code: "SignatureDoesNotMatch", status: 403},
		{name: "unknown key", url: "/bucket/k", access: "AKIDNOBODY", code: "InvalidAccessKeyId", status: 403},
		{name: "another region", url: "/bucket/k", region: "eu-west-9", code: "AuthorizationHeaderMalformed", status: 400,
			check: func(t *testing.T, _ *Auth, err error) {
				if !strings.Contains(err.Error(), "eu-west-9") {
					t.Fatalf("message: %v", err)
				}
			}},
		{name: "an hour ago", url: "/bucket/k", at: testNow.Add(-time.Hour), code: "RequestTimeTooSkewed", status: 403},
		{name: "an hour ahead", url: "/bucket/k", at: testNow.Add(time.Hour), code: "RequestTimeTooSkewed", status: 403},
		{name: "fourteen minutes ago", url: "/bucket/k", at: testNow.Add(-14 * time.Minute)},
		{name: "path changed", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.URL.Path = "/bucket/other" },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "query added", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.URL.RawQuery = "acl" },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "method changed", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.Method = http.MethodDelete },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "signed header changed", url: "/bucket/k", build: func(r *http.Request) { r.Header.Set("X-Amz-Meta-A", "1") },
			after: func(_ *testing.T, r *http.Request) { r.Header.Set("X-Amz-Meta-A", "2") }, code: "SignatureDoesNotMatch", status: 403},
		{name: "x-amz header added", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") },
			code: "AccessDenied", status: 403},
		{name: "host changed", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.Host = "evil.test" },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "no x-amz-content-sha256", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) {
			r.Header.Del("X-Amz-Content-Sha256")
		}, code: "InvalidRequest", status: 400},
		{name: "bad x-amz-content-sha256", url: "/bucket/k", build: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "abc") },
			code: "InvalidArgument", status: 400},
		{name: "no date", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.Header.Del("X-Amz-Date") },
			code: "AccessDenied", status: 403},
		{name: "garbage date", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.Header.Set("X-Amz-Date", "yesterday") },
			code: "AccessDenied", status: 403},
		{name: "also presigned", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) { r.URL.RawQuery = "X-Amz-Signature=00" },
			code: "InvalidArgument", status: 400},
		{name: "signature altered", url: "/bucket/k", after: func(_ *testing.T, r *http.Request) {
			h := r.Header.Get("Authorization")
			last := "0"
			if strings.HasSuffix(h, "0") {
				last = "1"
			}
			r.Header.Set("Authorization", h[:len(h)-1]+last)
		}, code: "SignatureDoesNotMatch", status: 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, testHost+c.url, "")
			if c.build != nil {
				c.build(req)
			}
			payload := req.Header.Get("X-Amz-Content-Sha256")
			if payload == "" {
				payload = UnsignedPayload
			}
			access, secret, region, at := testAccess, testSecret, "us-east-1", testNow
			if c.access != "" {
				access = c.access
			}
			if c.secret != "" {
				secret = c.secret
			}
			if c.region != "" {
				region = c.region
			}
			if !c.at.IsZero() {
				at = c.at
			}
			sdkSign(t, req, access, secret, region, payload, at)
			if c.after != nil {
				c.after(t, req)
			}
			a, err := Verify(req, testSecrets(), testOpts())
			wantCode(t, c.name, err, c.code, c.status)
			if c.code == "" && (a.Scheme != V4Header || a.AccessKey != testAccess || !a.Time.Equal(at.Truncate(time.Second))) {
				t.Fatalf("auth %+v", a)
			}
			if c.check != nil {
				c.check(t, a, err)
			}
		})
	}
}

// TestV4HeaderMalformed: Authorization headers S3 cannot read.
func TestV4HeaderMalformed(t *testing.T) {
	cred := testAccess + "/20261128/us-east-1/s3/aws4_request"
	sig := strings.Repeat("0", 64)
	cases := []struct {
		authz, code string
		status      int
	}{
		{"AWS4-HMAC-SHA256 ", "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=" + cred, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=host", "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=host, Signature=" + sig + ", Extra=1", "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=AKID/20261128/us-east-1/s3, SignedHeaders=host, Signature=" + sig, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=AKID/2026-11-28/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=" + sig, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=AKID/20261128/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=" + sig, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=AKID/20261128/us-east-1/s3/aws5_request, SignedHeaders=host, Signature=" + sig, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=" + testAccess + "/20261127/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + sig, "AuthorizationHeaderMalformed", 400},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=" + sig, "SignatureDoesNotMatch", 403},
		{"AWS4-HMAC-SHA256 Credential=" + cred + ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=xyz", "SignatureDoesNotMatch", 403},
		{"AWS4-ECDSA-P256-SHA256 Credential=" + cred, "InvalidRequest", 400},
		{"Bearer abc", "InvalidArgument", 400},
	}
	for _, c := range cases {
		req := newRequest(t, http.MethodGet, testHost+"/b/k", "")
		req.Header.Set("X-Amz-Date", "20261128T123000Z")
		req.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		req.Header.Set("Authorization", c.authz)
		_, err := Verify(req, testSecrets(), testOpts())
		wantCode(t, c.authz, err, c.code, c.status)
	}
}

// TestV4QueryAgainstSDK presigns with the SDK and verifies; then changes
// one thing.
func TestV4QueryAgainstSDK(t *testing.T) {
	cases := []struct {
		name    string
		url     string
		expires int
		at      time.Time
		region  string
		access  string
		build   func(r *http.Request)
		after   func(r *http.Request)
		code    string
		status  int
	}{
		{name: "GET", url: "/bucket/key", expires: 900},
		{name: "PUT with a signed header", url: "/bucket/a%20b", expires: 60, build: func(r *http.Request) {
			r.Method = http.MethodPut
			r.Header.Set("X-Amz-Acl", "private") // signed: the SDK does not hoist it
		}},
		{name: "hoisted parameter", url: "/bucket/k", expires: 60, build: func(r *http.Request) {
			r.Header.Set("X-Amz-Expected-Bucket-Owner", "123") // hoisted into the query
		}},
		{name: "a week", url: "/bucket/k", expires: 604800},
		{name: "expired", url: "/bucket/k", expires: 60, at: testNow.Add(-61 * time.Second), code: "AccessDenied", status: 403},
		{name: "zero expiry", url: "/bucket/k", expires: 0, code: "AccessDenied", status: 403},
		{name: "negative expiry", url: "/bucket/k", expires: 60, after: func(r *http.Request) { setQuery(r, "X-Amz-Expires", "-1000") },
			code: "AccessDenied", status: 403},
		{name: "expiry over a week", url: "/bucket/k", expires: 609901, code: "AccessDenied", status: 403},
		{name: "expiry not a number", url: "/bucket/k", expires: 60, after: func(r *http.Request) { setQuery(r, "X-Amz-Expires", "soon") },
			code: "AuthorizationQueryParametersError", status: 400},
		{name: "expiry raised", url: "/bucket/k", expires: 60, after: func(r *http.Request) { setQuery(r, "X-Amz-Expires", "604800") },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "sent to another key", url: "/bucket/granted", expires: 60, after: func(r *http.Request) { r.URL.Path = "/bucket/stolen" },
			code: "SignatureDoesNotMatch", status: 403},
		{name: "another region", url: "/bucket/k", expires: 60, region: "eu-west-9", code: "AuthorizationQueryParametersError", status: 400},
		{name: "unknown key", url: "/bucket/k", expires: 60, access: "AKIDNOBODY", code: "InvalidAccessKeyId", status: 403},
		{name: "from the future", url: "/bucket/k", expires: 60, at: testNow.Add(time.Hour), code: "AccessDenied", status: 403},
		{name: "missing signed headers", url: "/bucket/k", expires: 60, after: func(r *http.Request) { delQuery(r, "X-Amz-SignedHeaders") },
			code: "AuthorizationQueryParametersError", status: 400},
		{name: "another algorithm", url: "/bucket/k", expires: 60, after: func(r *http.Request) { setQuery(r, "X-Amz-Algorithm", "AWS4-HMAC-SHA1") },
			code: "AuthorizationQueryParametersError", status: 400},
		{name: "bad date", url: "/bucket/k", expires: 60, after: func(r *http.Request) { setQuery(r, "X-Amz-Date", "20261128") },
			code: "AuthorizationQueryParametersError", status: 400},
		{name: "unsigned x-amz header", url: "/bucket/k", expires: 60, after: func(r *http.Request) { r.Header.Set("X-Amz-Meta-A", "1") },
			code: "AccessDenied", status: 403},
		{name: "with an Authorization header", url: "/bucket/k", expires: 60, after: func(r *http.Request) { r.Header.Set("Authorization", "AWS a:b") },
			code: "InvalidArgument", status: 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, testHost+c.url, "")
			if c.build != nil {
				c.build(req)
			}
			at, region, access := testNow, "us-east-1", testAccess
			if !c.at.IsZero() {
				at = c.at
			}
			if c.region != "" {
				region = c.region
			}
			if c.access != "" {
				access = c.access
			}
			req = sdkPresign(t, req, access, testSecret, region, at, c.expires)
			if c.after != nil {
				c.after(req)
			}
			a, err := Verify(req, testSecrets(), testOpts())
			wantCode(t, c.name, err, c.code, c.status)
			if c.code == "" && (a.Scheme != V4Query || a.AccessKey != testAccess || a.Payload != UnsignedPayload ||
				!a.Expires.Equal(at.Truncate(time.Second).Add(time.Duration(c.expires)*time.Second))) {
				t.Fatalf("auth %+v", a)
			}
		})
	}
}

func setQuery(r *http.Request, k, v string) {
	q := r.URL.Query()
	q.Set(k, v)
	r.URL.RawQuery = q.Encode()
}

func delQuery(r *http.Request, k string) {
	q := r.URL.Query()
	q.Del(k)
	r.URL.RawQuery = q.Encode()
}

// TestAnonymous: no credentials is anonymous, whatever else is sent,
// but for a payload only a signature could seed.
func TestAnonymous(t *testing.T) {
	req := newRequest(t, http.MethodPut, testHost+"/b/k?acl", "x")
	a, err := Verify(req, testSecrets(), testOpts())
	if err != nil || a.Scheme != Anonymous || a.AccessKey != "" {
		t.Fatalf("%+v %v", a, err)
	}
	req.Header.Set("Authorization", "")
	if a, err := Verify(req, testSecrets(), testOpts()); err != nil || a.Scheme != Anonymous {
		t.Fatalf("empty Authorization: %+v %v", a, err)
	}
	req.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
	if _, err := Verify(req, testSecrets(), testOpts()); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Content-Sha256", StreamingSigned)
	_, err = Verify(req, testSecrets(), testOpts())
	wantCode(t, "anonymous signed stream", err, "InvalidRequest", 400)
}

// TestCanonicalURI pins the path's canonical form.
func TestCanonicalURI(t *testing.T) {
	for in, want := range map[string]string{
		"":                "/",
		"/":               "/",
		"/b/k":            "/b/k",
		"/b/a b":          "/b/a%20b",
		"/b/a+b":          "/b/a%2Bb",
		"/b/a%2fb":        "/b/a%2Fb",
		"/b/a%41":         "/b/aA",
		"/b/%zz":          "/b/%25zz",
		"/b/caf\xc3\xa9":  "/b/caf%C3%A9",
		"/b/!*'()":        "/b/%21%2A%27%28%29",
		"/b//x/./y/../z~": "/b//x/./y/../z~",
	} {
		if got := string(appendCanonicalURI(nil, in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"b=2&a=1":       "a=1&b=2",
		"a=2&a=1":       "a=1&a=2",
		"acl":           "acl=",
		"x=a+b&y=a%20b": "x=a%20b&y=a%20b",
		"k=%2F~%7e":     "k=%2F~~",
		"&&z=":          "z=",
		"%7B=1&a=1":     "%7B=1&a=1",
	} {
		if got := string(appendCanonicalQuery(nil, in, false)); got != want {
			t.Errorf("query %q: %q, want %q", in, got, want)
		}
	}
}

// A path with an escaped '/' verifies whether the client signed it as sent
// or with the slash decoded (signers that decode, then encode each
// segment); any other change to the path still fails.
func TestEscapedSlashSignedEitherWay(t *testing.T) {
	for _, c := range []struct {
		what, signedPath string
		code             string
	}{
		{"signed as sent", "/bucket/a%2Fb", ""},
		{"signed with the slash decoded", "/bucket/a/b", ""},
		{"signed for another key", "/bucket/a/c", "SignatureDoesNotMatch"},
	} {
		req := newRequest(t, http.MethodGet, testHost+c.signedPath, "")
		sdkSign(t, req, testAccess, testSecret, "us-east-1", UnsignedPayload, testNow)
		req.RequestURI = "/bucket/a%2Fb" // what the server received
		_, err := Verify(req, testSecrets(), testOpts())
		if code, _ := codeOf(err); code != c.code {
			t.Errorf("%s: %q, want %q", c.what, code, c.code)
		}
	}
}
