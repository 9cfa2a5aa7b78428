package s3sig

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/strata-storage/strata/engine/s3err"
)

// seen is what the test server observed of the last request.
type seen struct {
	mu       sync.Mutex
	auth     *Auth
	body     string
	alg, sum string
}

// sdkServer is an S3 endpoint that authenticates every request with
// Verify, reads bodies through Body and answers S3 errors: the SDK's own
// requests, over TLS (aws-chunked with trailing checksums) or not
// (checksum headers, hex payload hashes), are the test vectors.
func sdkServer(t *testing.T, useTLS bool) (*s3.Client, *httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := Verify(r, testSecrets(), Options{})
		var body []byte
		var alg, sum string
		if err == nil && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
			var p *Payload
			if p, err = a.Body(r); err == nil {
				body, err = io.ReadAll(p)
				alg, sum = p.Checksum()
			}
		}
		if err != nil {
			e, ok := s3err.As(err)
			if !ok {
				e = s3err.InternalError.Because(err)
			}
			w.WriteHeader(e.Status)
			_, _ = w.Write(s3err.Render(e, r.URL.Path, "req", "host")) // the SDK reports a short answer itself
			return
		}
		s.mu.Lock()
		s.auth, s.body, s.alg, s.sum = a, string(body), alg, sum
		s.mu.Unlock()
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>0</KeyCount></ListBucketResult>`))
		}
	})
	var ts *httptest.Server
	if useTLS {
		ts = httptest.NewTLSServer(h)
	} else {
		ts = httptest.NewServer(h)
	}
	t.Cleanup(ts.Close)
	return sdkClient(ts, testAccess, testSecret), ts, s
}

func sdkClient(ts *httptest.Server, access, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(ts.URL),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, nil
		}),
		HTTPClient:       ts.Client(),
		RetryMaxAttempts: 1,
	})
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return "?" + err.Error()
	}
	return ""
}

func TestSDKRequests(t *testing.T) {
	algs := []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmSha512}
	body := strings.Repeat("strata ", 3000) // several aws-chunked chunks
	for _, useTLS := range []bool{true, false} {
		name := map[bool]string{true: "tls", false: "http"}[useTLS]
		t.Run(name, func(t *testing.T) {
			c, ts, s := sdkServer(t, useTLS)
			ctx := t.Context()
			for _, alg := range algs {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"),
					Body: strings.NewReader(body), ChecksumAlgorithm: alg})
				if err != nil {
					t.Fatalf("%s: %v", alg, err)
				}
				a, _ := parseAlgorithm(string(alg))
				if s.body != body || s.alg != string(alg) || s.sum != checksumOf(a, body) {
					t.Fatalf("%s: %d bytes, checksum %s %s", alg, len(s.body), s.alg, s.sum)
				}
				if useTLS != (s.auth.Payload == StreamingUnsignedTrailer) {
					t.Fatalf("%s: payload %s", alg, s.auth.Payload)
				}
			}
			// A key that needs escaping, an empty body, a listing with an
			// awkward query.
			key := "dir/a b+c!*'()~ü%.txt"
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String(key), Body: strings.NewReader("")}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b"), Prefix: aws.String("a b/c+d=&?"),
				Delimiter: aws.String("/"), StartAfter: aws.String("ü")}); err != nil {
				t.Fatal(err)
			}
			// Wrong values are refused with S3's codes.
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader(body),
				ChecksumCRC32: aws.String("AAAAAA==")})
			if code := apiCode(err); code != "BadDigest" {
				t.Fatalf("wrong CRC32: %v", err)
			}
			_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader(body),
				ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")})
			if code := apiCode(err); code != "BadDigest" {
				t.Fatalf("wrong Content-MD5: %v", err)
			}
			_, err = sdkClient(ts, testAccess, "wrong").PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("x")})
			if code := apiCode(err); code != "SignatureDoesNotMatch" {
				t.Fatalf("wrong secret: %v", err)
			}
			_, err = sdkClient(ts, "AKIDNOBODY", "x").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
			if code := apiCode(err); code != "InvalidAccessKeyId" {
				t.Fatalf("unknown key: %v", err)
			}
			// Presigned URLs.
			pc := s3.NewPresignClient(c)
			put, err := pc.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPut, put.URL, strings.NewReader("presigned"))
			for k, vs := range put.SignedHeader {
				if !strings.EqualFold(k, "host") {
					req.Header[k] = vs
				}
			}
			resp, err := ts.Client().Do(req)
			if err != nil || resp.StatusCode != http.StatusOK || s.auth.Scheme != V4Query || s.body != "presigned" {
				t.Fatalf("presigned PUT: %v %v %+v", resp, err, s.auth)
			}
			resp.Body.Close()
		})
	}
}
