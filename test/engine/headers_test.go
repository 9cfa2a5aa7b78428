package engine

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestResponsesCarryOneRequestID: every answer carries its request ID and
// host ID once (the front end's router added a second copy of each, in
// another case, to every answer with headers of its own: GET, HEAD,
// listings).
func TestResponsesCarryOneRequestID(t *testing.T) {
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
