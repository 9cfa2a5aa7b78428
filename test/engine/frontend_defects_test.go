package engine

// Answers the versitygw front end got wrong, each run against the server
// and the gateway (what concerns encryption and checksums lives with its
// subject, in sse_test.go and checksums_test.go).

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// onServerAndGateway runs test against a 4-drive server and a gateway on
// a fresh root, each in a subtest of its kind.
func onServerAndGateway(t *testing.T, test func(t *testing.T, s *server)) {
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			var s *server
			if kind == "server" {
				s = startServer(t, serverOpts{drives: 4})
			} else {
				s = startGateway(t, t.TempDir())
			}
			test(t, s)
		})
	}
}

// doSigned sends req signed with root's keys (unsigned payload) and
// returns the answer with its body read.
func doSigned(t *testing.T, req *http.Request) signedAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return signedAnswer{StatusCode: resp.StatusCode, Header: resp.Header, body: body}
}

// signedAnswer is a response read whole.
type signedAnswer struct {
	StatusCode int
	Header     http.Header
	body       []byte
}

// TestObjectAttributesAsJavaScriptAsksThem: GetObjectAttributes answers
// Last-Modified as an HTTP date (RFC 1123, as every other answer), and
// takes x-amz-object-attributes as the AWS SDK for JavaScript v3 sends
// it, one header with a space after each comma. The versitygw front end
// answered an ANSI C date ("Sat Nov 28 11:07:58 2026") and refused the
// spaced list with InvalidArgument.
func TestObjectAttributesAsJavaScriptAsksThem(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "attrs")
		data := randomBytes(1000)
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("attrs"), Key: aws.String("obj"), Body: bytes.NewReader(data),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
			t.Fatal(err)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("attrs"), Key: aws.String("obj")})
		if err != nil {
			t.Fatal(err)
		}
		attributes := func(list string) signedAnswer {
			req, _ := http.NewRequest(http.MethodGet, s.url()+"/attrs/obj?attributes", nil)
			req.Header.Set("X-Amz-Object-Attributes", list)
			return doSigned(t, req)
		}

		resp := attributes("ETag,ObjectSize")
		lm := resp.Header.Get("Last-Modified")
		if at, err := time.Parse(http.TimeFormat, lm); resp.StatusCode != http.StatusOK || err != nil || !at.Equal(aws.ToTime(head.LastModified)) {
			t.Errorf("GetObjectAttributes: %d, Last-Modified %q, want the HTTP date %s (%v)\n%s",
				resp.StatusCode, lm, aws.ToTime(head.LastModified).Format(http.TimeFormat), err, resp.body)
		}

		const spaced = "ETag, Checksum, ObjectSize"
		resp = attributes(spaced)
		body := resp.body
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GetObjectAttributes with %q: %d %s", spaced, resp.StatusCode, body)
		}
		var doc struct {
			ETag       string
			ObjectSize int64
			Checksum   struct{ ChecksumCRC32 string }
		}
		if err := xml.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		wantSum := base64.StdEncoding.EncodeToString(crc32be(crc32.ChecksumIEEE(data)))
		if doc.ETag != strings.Trim(aws.ToString(head.ETag), `"`) || doc.ObjectSize != int64(len(data)) || doc.Checksum.ChecksumCRC32 != wantSum {
			t.Errorf("attributes %+v, want ETag %s, ObjectSize %d, CRC32 %s:\n%s", doc, aws.ToString(head.ETag), len(data), wantSum, body)
		}
	})
}

// TestCORSAnswers: GetBucketCors answers its document in S3's namespace,
// and the preflight a rule for any origin ("*") allows sends no
// Access-Control-Allow-Credentials (a browser refuses credentials with a
// wildcard origin, and S3 sends none). The versitygw front end answered
// the document without a namespace and sent "Access-Control-Allow-Credentials:
// false".
func TestCORSAnswers(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "web")
		put(t, c, "web", "page", []byte("<p>hello</p>"))
		if _, err := c.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String("web"), CORSConfiguration: &types.CORSConfiguration{
			CORSRules: []types.CORSRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "PUT"}, AllowedHeaders: []string{"*"}, MaxAgeSeconds: aws.Int32(60)}},
		}}); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, s.url()+"/web?cors", nil)
		resp := doSigned(t, req)
		body := resp.body
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)) {
			t.Errorf("GetBucketCors: %d, want the document in S3's namespace:\n%s", resp.StatusCode, body)
		}

		pre, _ := http.NewRequest(http.MethodOptions, s.url()+"/web/page", nil)
		pre.Header.Set("Origin", "https://app.example")
		pre.Header.Set("Access-Control-Request-Method", "PUT")
		pre.Header.Set("Access-Control-Request-Headers", "content-type")
		presp, err := http.DefaultClient.Do(pre)
		if err != nil {
			t.Fatal(err)
		}
		pbody, _ := io.ReadAll(presp.Body)
		presp.Body.Close()
		if presp.StatusCode != http.StatusOK || presp.Header.Get("Access-Control-Allow-Origin") == "" {
			t.Fatalf("preflight: %d, Access-Control-Allow-Origin %q\n%s", presp.StatusCode, presp.Header.Get("Access-Control-Allow-Origin"), pbody)
		}
		if v, ok := presp.Header["Access-Control-Allow-Credentials"]; ok {
			t.Errorf("preflight allowed by a rule for origin \"*\" sends Access-Control-Allow-Credentials %q, want none", v)
		}
	})
}

// TestCreateBucketInOwnRegion: CreateBucket with the LocationConstraint
// of the region the process reports (x-amz-bucket-region of HeadBucket)
// is accepted, even when that region is us-east-1, which S3 itself would
// want left out: the AWS SDKs send the client's region. The versitygw
// front end refused it with InvalidLocationConstraint.
func TestCreateBucketInOwnRegion(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "first")
		h, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("first")})
		if err != nil {
			t.Fatal(err)
		}
		region := aws.ToString(h.BucketRegion)
		if region == "" {
			region = "us-east-1"
		}
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("second"),
			CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}}); err != nil {
			t.Fatalf("CreateBucket with LocationConstraint %s (the region the process reports): %v", region, err)
		}
		if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("second")}); err != nil {
			t.Fatalf("HEAD of the bucket created: %v", err)
		}
	})
}

// streamingSignedTrailer is the x-amz-content-sha256 of an aws-chunked
// body with chunk signatures and a signed trailer.
const streamingSignedTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"

// signedTrailerRequest is a PUT of data to url as an aws-chunked body in
// chunks of chunk bytes, each signed (chained from the request's
// signature), then a CRC32C trailer with its own signature, as SigV4
// defines them for STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER.
func signedTrailerRequest(t *testing.T, url string, data []byte, chunk int) *http.Request {
	t.Helper()
	now := time.Now().UTC()
	amzDate, day := now.Format("20060102T150405Z"), now.Format("20060102")
	scope := day + "/us-east-1/s3/aws4_request"
	crc := base64.StdEncoding.EncodeToString(crc32be(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
	trailer := "x-amz-checksum-crc32c:" + crc + "\n"
	var sizes []int
	for off := 0; off < len(data); off += chunk {
		sizes = append(sizes, min(chunk, len(data)-off))
	}
	sizes = append(sizes, 0)
	// Every length is known before the signatures: Content-Length is signed.
	length := 0
	for _, n := range sizes {
		length += len(strconv.FormatInt(int64(n), 16)) + len(";chunk-signature=") + 64 + 2 + n
		if n > 0 {
			length += 2
		}
	}
	length += len(trailer) + 1 + len("x-amz-trailer-signature:") + 64 + 2 + 2

	req, _ := http.NewRequest(http.MethodPut, url, nil)
	req.ContentLength = int64(length)
	req.Header.Set("X-Amz-Content-Sha256", streamingSignedTrailer)
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
	req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
	req.Header.Set("X-Amz-Sdk-Checksum-Algorithm", "CRC32C")
	creds := aws.Credentials{AccessKeyID: rootUser, SecretAccessKey: rootPassword}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, streamingSignedTrailer, "s3", "us-east-1", now); err != nil {
		t.Fatal(err)
	}
	_, prev, ok := strings.Cut(req.Header.Get("Authorization"), "Signature=")
	if !ok {
		t.Fatalf("no signature in %q", req.Header.Get("Authorization"))
	}
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	key := mac(mac(mac(mac([]byte("AWS4"+rootPassword), day), "us-east-1"), "s3"), "aws4_request")
	hexSHA := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	var body bytes.Buffer
	off := 0
	for _, n := range sizes {
		part := data[off : off+n]
		off += n
		prev = hex.EncodeToString(mac(key, "AWS4-HMAC-SHA256-PAYLOAD\n"+amzDate+"\n"+scope+"\n"+prev+"\n"+hexSHA(nil)+"\n"+hexSHA(part)))
		fmt.Fprintf(&body, "%x;chunk-signature=%s\r\n", n, prev)
		if n > 0 {
			body.Write(part)
			body.WriteString("\r\n")
		}
	}
	sig := hex.EncodeToString(mac(key, "AWS4-HMAC-SHA256-TRAILER\n"+amzDate+"\n"+scope+"\n"+prev+"\n"+hexSHA([]byte(trailer))))
	fmt.Fprintf(&body, "%s\r\nx-amz-trailer-signature:%s\r\n\r\n", strings.TrimSuffix(trailer, "\n"), sig)
	if body.Len() != length {
		t.Fatalf("aws-chunked body of %d bytes, %d announced", body.Len(), length)
	}
	req.Body = io.NopCloser(&body)
	return req
}

// TestUploadPartWithSignedTrailer: UploadPart over plain HTTP with an
// aws-chunked body whose chunks are signed and whose CRC32C comes in a
// signed trailer (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER) is stored,
// answers the part's CRC32C and completes into the bytes sent. (The
// versitygw front end accepts this form too, on server and gateway: a
// guard for the new front end's decoder, not a reproduction.)
func TestUploadPartWithSignedTrailer(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "chunks")
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("chunks"), Key: aws.String("obj"),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		if err != nil {
			t.Fatal(err)
		}
		data := randomBytes(200<<10 + 17)
		url := fmt.Sprintf("%s/chunks/obj?partNumber=1&uploadId=%s", s.url(), aws.ToString(up.UploadId))
		resp, err := http.DefaultClient.Do(signedTrailerRequest(t, url, data, 64<<10))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := base64.StdEncoding.EncodeToString(crc32be(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("UploadPart with a signed trailer: %d %s", resp.StatusCode, answer)
		}
		if got := resp.Header.Get("X-Amz-Checksum-Crc32c"); got != want {
			t.Errorf("UploadPart answered CRC32C %q, want %q", got, want)
		}
		if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("chunks"), Key: aws.String("obj"),
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: aws.String(resp.Header.Get("ETag")), ChecksumCRC32C: aws.String(want)}}}}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "chunks", "obj"); !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, not the %d sent", len(got), len(data))
		}
	})
}

// TestUploadPartCopyFromOlderVersion: UploadPartCopy from a version that
// is no longer the latest, with a range inside that version but beyond the
// end of the (shorter) latest one, copies the named version's bytes. The
// versitygw gateway checked the range against the latest version
// (416 InvalidRange).
func TestUploadPartCopyFromOlderVersion(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "versions")
		if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("versions"),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
		old := randomBytes(1 << 20)
		v1 := put(t, c, "versions", "src", old).VersionId
		put(t, c, "versions", "src", randomBytes(100))
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("versions"), Key: aws.String("dst")})
		if err != nil {
			t.Fatal(err)
		}
		const first, last = 1000, 500999
		out, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("versions"), Key: aws.String("dst"), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), CopySource: aws.String("versions/src?versionId=" + aws.ToString(v1)),
			CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", first, last))})
		if err != nil {
			t.Fatalf("UploadPartCopy of bytes %d-%d of the older version (1 MiB; the latest has 100 bytes): %v", first, last, err)
		}
		if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("versions"), Key: aws.String("dst"),
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: out.CopyPartResult.ETag}}}}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, c, "versions", "dst"); !bytes.Equal(got, old[first:last+1]) {
			t.Fatalf("the part copied: %d bytes, not bytes %d-%d of the older version", len(got), first, last)
		}
	})
}

// TestMinioGoTrailingChecksums: minio-go with TrailingHeaders on (as its
// functional tests run it) sends each part of a multipart upload over plain
// HTTP as STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER with a CRC32C
// trailer, writing the trailer line LF-terminated and then CRLF before the
// trailer's signature; single-part uploads likewise. Both are stored and
// read back whole. The versitygw front end answered BadDigest to both, on
// server and gateway.
func TestMinioGoTrailingChecksums(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		mustCreateBucket(t, s.aws(), "trailers")
		mc, err := minio.New(s.addr, &minio.Options{Creds: miniocreds.NewStaticV4(rootUser, rootPassword, ""), Region: "us-east-1",
			TrailingHeaders: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{100 << 10, 12<<20 + 3} {
			data := randomBytes(size)
			key := fmt.Sprintf("obj-%d", size)
			if _, err := mc.PutObject(ctx, "trailers", key, bytes.NewReader(data), int64(size),
				minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C, PartSize: 5 << 20}); err != nil {
				t.Fatalf("PutObject of %d bytes with a CRC32C trailer: %v", size, err)
			}
			if got := get(t, s.aws(), "trailers", key); !bytes.Equal(got, data) {
				t.Fatalf("%s read back %d bytes, not the %d sent", key, len(got), size)
			}
		}
	})
}
