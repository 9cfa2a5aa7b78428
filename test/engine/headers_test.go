package engine

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestResponsesCarryOneRequestID: every answer carries its request ID and
// host ID once (the front end's router added a second copy of each, in
// another case, to every answer with headers of its own: GET, HEAD,
// listings).
func TestResponsesCarryOneRequestID(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "ids")
	check := func(op string, md middleware.Metadata) {
		t.Helper()
		raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
		if !ok {
			t.Fatalf("%s: no raw response", op)
		}
		for _, h := range []string{"X-Amz-Request-Id", "X-Amz-Id-2"} {
			if vs := raw.Header.Values(h); len(vs) != 1 || strings.Contains(vs[0], ",") {
				t.Errorf("%s: %s %q, want one value", op, h, vs)
			}
		}
	}
	check("PUT", put(t, c, "ids", "k", []byte("body")).ResultMetadata)
	get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ids"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	_ = get.Body.Close()
	check("GET", get.ResultMetadata)
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ids"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	check("HEAD", head.ResultMetadata)
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("ids")})
	if err != nil {
		t.Fatal(err)
	}
	check("LIST", list.ResultMetadata)
	del, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ids"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	check("DELETE", del.ResultMetadata)
}

// TestListingsShowChecksums: listings show an object's checksum algorithm
// and type, as S3 does, for objects stored with a checksum, and leave the
// elements out for objects without (the front end rendered an empty
// <ChecksumType> for every object).
func TestListingsShowChecksums(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "sums")
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("with-crc32"),
		Body: strings.NewReader("body"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil || out.ChecksumCRC32 == nil {
		t.Fatalf("PUT with a CRC32: %v %v", out, err)
	}
	plain := s3.New(s3.Options{BaseEndpoint: aws.String(s.url()), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(rootUser, rootPassword, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired, RetryMaxAttempts: 1})
	put(t, plain, "sums", "without", []byte("body"))

	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("sums")})
	if err != nil || len(l.Contents) != 2 {
		t.Fatalf("list: %v %v", l, err)
	}
	got := map[string]string{}
	for _, o := range l.Contents {
		got[aws.ToString(o.Key)] = fmt.Sprint(o.ChecksumAlgorithm, " ", o.ChecksumType)
	}
	if got["with-crc32"] != "[CRC32] FULL_OBJECT" || got["without"] != "[] " {
		t.Fatalf("listed checksums: %v", got)
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("sums")})
	if err != nil || len(vs.Versions) != 2 || fmt.Sprint(vs.Versions[0].ChecksumAlgorithm) != "[CRC32]" {
		t.Fatalf("versions: %v %v", vs, err)
	}
	for _, q := range []string{"list-type=2", "", "versions=", "uploads="} {
		body := signedGet(t, s, "/sums?"+q)
		if !strings.Contains(body, "<Name>sums</Name>") && !strings.Contains(body, "<Bucket>sums</Bucket>") {
			t.Fatalf("?%s: %s", q, body)
		}
		if strings.Contains(body, "<ChecksumType></ChecksumType>") {
			t.Errorf("?%s lists an empty ChecksumType: %s", q, body)
		}
	}
}

// signedGet GETs a path with a SigV4-signed request and returns the body
// of a 200 answer.
func signedGet(t *testing.T, s *server, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	creds := aws.Credentials{AccessKeyID: rootUser, SecretAccessKey: rootPassword}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, emptySHA256, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return string(b)
}
