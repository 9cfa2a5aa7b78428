package s3sig

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/strata-storage/strata/engine/s3err"
)

const (
	testAccess = "AKIDSTRATATEST"
	testSecret = "s3cr3t/With+Slash=AndPlus"
)

// testSecrets knows testAccess only.
func testSecrets() Secrets {
	return SecretsFunc(func(k string) (string, bool) {
		if k == testAccess {
			return testSecret, true
		}
		return "", false
	})
}

// testNow is the clock of most tests.
var testNow = time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)

func testOpts() Options { return Options{Now: func() time.Time { return testNow }} }

// sdkSign signs req with aws-sdk-go-v2's signer as the S3 client does
// (no second path escaping), with the payload declared in
// x-amz-content-sha256 (none when payload is "").
func sdkSign(t testing.TB, req *http.Request, access, secret, region, payload string, at time.Time) *http.Request {
	t.Helper()
	hash := payload
	if payload != "" {
		req.Header.Set("X-Amz-Content-Sha256", payload)
	} else {
		hash = UnsignedPayload
	}
	err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, req, hash, "s3", region, at)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// sdkPresign presigns req with the SDK's signer for expires seconds.
func sdkPresign(t testing.TB, req *http.Request, access, secret, region string, at time.Time, expires int) *http.Request {
	t.Helper()
	q := req.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(expires))
	req.URL.RawQuery = q.Encode()
	u, signed, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, req, UnsignedPayload, "s3", region, at)
	if err != nil {
		t.Fatal(err)
	}
	out, err := http.NewRequest(req.Method, u, req.Body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range signed { // hoisted headers went into the query
		if !strings.EqualFold(k, "host") {
			out.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	return out
}

// newRequest builds a request as a client would.
func newRequest(t testing.TB, method, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// codeOf is an error's S3 code and status ("" and 0 for nil, "?" for a
// non-S3 error).
func codeOf(err error) (string, int) {
	if err == nil {
		return "", 0
	}
	var e *s3err.Error
	if errors.As(err, &e) {
		return e.Code, e.Status
	}
	return "?" + err.Error(), 0
}

// wantCode fails unless err is the S3 answer code with status.
func wantCode(t testing.TB, what string, err error, code string, status int) {
	t.Helper()
	got, st := codeOf(err)
	if got != code || (code != "" && st != status) {
		t.Fatalf("%s: got %q (%d) %v, want %q (%d)", what, got, st, err, code, status)
	}
}

// readAll reads a payload to its end and returns what it gave and the
// error that ended it (nil for io.EOF).
func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(r)
	return b, err
}
