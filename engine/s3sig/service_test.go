package s3sig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/strata-storage/strata/engine/s3err"
)

// iamRequest is an IAM Query API call signed as IAM's clients sign it:
// service iam, the given region (boto3 with region_name=” sends an empty
// one), the body's hash in the signature but no x-amz-content-sha256.
func iamRequest(t *testing.T, body, service, region string, at time.Time, declare string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:9000/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	sum := sha256.Sum256([]byte(body))
	if declare != "" {
		req.Header.Set("X-Amz-Content-Sha256", declare)
	}
	creds := aws.Credentials{AccessKeyID: testAccess, SecretAccessKey: testSecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestVerifyService(t *testing.T) {
	now := time.Now().UTC()
	opts := Options{Region: "eu-west-1", Now: func() time.Time { return now }}
	body := "Action=ListUsers&Version=2010-05-08"
	for _, region := range []string{"", "us-east-1", "eu-west-1"} {
		r := iamRequest(t, body, "iam", region, now, "")
		if Service(r) != "iam" {
			t.Errorf("Service of an IAM request (region %q): %q", region, Service(r))
		}
		a, err := VerifyService(r, []byte(body), "iam", testSecrets(), opts)
		if err != nil || a.AccessKey != testAccess {
			t.Errorf("region %q: %v", region, err)
		}
	}
	sum := sha256.Sum256([]byte(body))
	if _, err := VerifyService(iamRequest(t, body, "iam", "", now, hex.EncodeToString(sum[:])), []byte(body), "iam", testSecrets(), opts); err != nil {
		t.Errorf("with the body's hash declared: %v", err)
	}

	for name, c := range map[string]struct {
		r    *http.Request
		body string
		code string
	}{
		"another body than the one signed":       {iamRequest(t, body, "iam", "", now, ""), "Action=DeleteUser&UserName=x&Version=2010-05-08", s3err.SignatureDoesNotMatch.Code},
		"a declared hash that is not the body's": {iamRequest(t, body, "iam", "", now, strings.Repeat("0", 64)), body, s3err.XAmzContentSHA256Mismatch.Code},
		"another region":                         {iamRequest(t, body, "iam", "ap-south-1", now, ""), body, s3err.AuthorizationHeaderMalformed.Code},
		"another service":                        {iamRequest(t, body, "sts", "", now, ""), body, s3err.AuthorizationHeaderMalformed.Code},
		"too old":                                {iamRequest(t, body, "iam", "", now.Add(-time.Hour), ""), body, s3err.RequestTimeTooSkewed.Code},
	} {
		_, err := VerifyService(c.r, []byte(c.body), "iam", testSecrets(), opts)
		if e, ok := s3err.As(err); !ok || e.Code != c.code {
			t.Errorf("%s: %v, want %s", name, err, c.code)
		}
	}
	// An S3 request is no IAM request, and the S3 verifier still
	// refuses a scope of another service.
	s3req := sdkSign(t, mustRequest(t, http.MethodGet, "http://127.0.0.1:9000/b/k"), testAccess, testSecret, "us-east-1", "", now)
	if Service(s3req) != "s3" {
		t.Errorf("Service of an S3 request: %q", Service(s3req))
	}
	iam := iamRequest(t, body, "iam", "us-east-1", now, "")
	if _, err := Verify(iam, testSecrets(), Options{Now: opts.Now}); err == nil {
		t.Error("the S3 verifier accepted a request signed for iam")
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
