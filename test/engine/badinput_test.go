package engine

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// notStored fails the test when key exists.
func notStored(t *testing.T, c *s3.Client, bucket, key string) {
	t.Helper()
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); err == nil {
		t.Fatalf("%s/%s was stored by a refused request", bucket, key)
	}
}

func TestBadInputGetsTheS3ErrorAndStoresNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")

	t.Run("invalid bucket names", func(t *testing.T) {
		for _, name := range []string{"ab", "Upper-Case", "under_score", "-leading", "trailing-", "192.168.1.1", "double..dot", "xn--punycode", "dot.-hyphen", strings.Repeat("a", 64)} {
			_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
			if errCode(err) != "InvalidBucketName" {
				t.Errorf("bucket %q: %v, want InvalidBucketName", name, err)
			}
		}
	})
	t.Run("key over 1024 bytes", func(t *testing.T) {
		key := strings.Repeat("k", 1025)
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: &key, Body: strings.NewReader("x")})
		if errCode(err) != "KeyTooLongError" {
			t.Fatalf("long key: %v", err)
		}
		ok := strings.Repeat("k", 1024)
		put(t, c, "bkt", ok, []byte("x"))
	})
	t.Run("bad signature and unknown key", func(t *testing.T) {
		_, err := s.s3Client(rootUser, "wrong-secret-123").PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("sig"), Body: strings.NewReader("x")})
		if errCode(err) != "SignatureDoesNotMatch" {
			t.Fatalf("wrong secret: %v", err)
		}
		_, err = s.s3Client("nobody-here", "whatever-secret").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("sig")})
		if errCode(err) != "InvalidAccessKeyId" {
			t.Fatalf("unknown key: %v", err)
		}
		notStored(t, c, "bkt", "sig")
	})
	t.Run("wrong Content-MD5", func(t *testing.T) {
		for _, size := range []int{10, 300 << 10} {
			key := fmt.Sprintf("md5-%d", size)
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: &key, Body: bytes.NewReader(randomBytes(size)),
				ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")})
			if errCode(err) != "BadDigest" {
				t.Fatalf("size %d: %v, want BadDigest", size, err)
			}
			notStored(t, c, "bkt", key)
		}
		// The right one is accepted and is the ETag, whether the body is
		// kept in its records or streamed in blocks (the server hashes it
		// once, checking the header: the ETag is that hash).
		for _, size := range []int{10, 300 << 10, 1 << 20, 2<<20 + 5} {
			body := randomBytes(size)
			sum := md5.Sum(body)
			key := fmt.Sprintf("md5-ok-%d", size)
			want := `"` + hex.EncodeToString(sum[:]) + `"`
			out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: &key, Body: bytes.NewReader(body),
				ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:]))})
			if err != nil || aws.ToString(out.ETag) != want {
				t.Fatalf("size %d with its Content-MD5: ETag %s, %v; want %s", size, aws.ToString(out.ETag), err, want)
			}
			h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: &key})
			if err != nil || aws.ToString(h.ETag) != want {
				t.Fatalf("size %d with its Content-MD5, stored ETag %s, %v; want %s", size, aws.ToString(h.ETag), err, want)
			}
		}
	})
	t.Run("wrong checksum", func(t *testing.T) {
		for _, size := range []int{10, 300 << 10} {
			key := fmt.Sprintf("crc-%d", size)
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: &key, Body: bytes.NewReader(randomBytes(size)),
				ChecksumCRC32: aws.String("AAAAAA==")})
			if code := errCode(err); code != "BadDigest" && code != "XAmzContentChecksumMismatch" {
				t.Fatalf("size %d: %v, want a checksum mismatch", size, err)
			}
			notStored(t, c, "bkt", key)
		}
		// The right checksum is accepted and answered back.
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("crc-ok"), Body: strings.NewReader("hello"),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil || out.ChecksumCRC32 == nil {
			t.Fatalf("put with a CRC32 checksum: %+v %v", out, err)
		}
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("crc-ok"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || h.ChecksumCRC32 == nil || *h.ChecksumCRC32 != *out.ChecksumCRC32 {
			t.Fatalf("stored checksum: %+v %v", h.ChecksumCRC32, err)
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		for _, size := range []int{1000, 400 << 10} {
			key := fmt.Sprintf("short-%d", size)
			// The body ends early: IncompleteBody (400), or no answer
			// at all when the client hangs up first. What matters is
			// that nothing is stored.
			status := s.truncatedPut(t, "bkt", key, size, size/2)
			if status != 0 && status != http.StatusBadRequest {
				t.Fatalf("truncated body of %d bytes answered %d", size, status)
			}
			notStored(t, c, "bkt", key)
		}
	})
	t.Run("part numbers out of range", func(t *testing.T) {
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int32{0, 10001} {
			_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: up.UploadId,
				PartNumber: aws.Int32(n), Body: strings.NewReader("x")})
			if errCode(err) != "InvalidArgument" {
				t.Errorf("part %d: %v", n, err)
			}
		}
		// Completing with more parts than S3 allows.
		parts := make([]types.CompletedPart, 10001)
		for i := range parts {
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(`"00"`)}
		}
		_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if err == nil {
			t.Fatal("completing 10001 parts succeeded")
		}
		notStored(t, c, "bkt", "mp")
	})
}

// truncatedPut sends a signed PUT declaring size bytes but sends only sent,
// then closes the connection's write side. It returns the HTTP status, or
// 0 when the server closed the connection without one.
func (s *server) truncatedPut(t *testing.T, bucket, key string, size, sent int) int {
	t.Helper()
	req, _ := http.NewRequest("PUT", s.url()+"/"+bucket+"/"+key, nil)
	req.ContentLength = int64(size)
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: rootUser, SecretAccessKey: rootPassword}
	if err := signer.SignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "PUT /%s/%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", bucket, key, s.addr, size)
	for k, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(randomBytes(sent)); err != nil {
		t.Fatal(err)
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRequestDocumentsAreBounded: a request body the front end would read
// whole into memory (DeleteObjects, tags, configurations) is refused past
// 4 MiB, signed or not, with or without a Content-Length; object data is
// not bounded by it; and the bucket name the server's own endpoints use
// cannot be created, on the server and on the gateway.
func TestRequestDocumentsAreBounded(t *testing.T) {
	t.Parallel()
	for _, tg := range []struct {
		name string
		s    *server
	}{
		{"server", startServer(t, serverOpts{drives: 4})},
		{"gateway", startGateway(t, t.TempDir())},
	} {
		t.Run(tg.name, func(t *testing.T) {
			c := tg.s.aws()
			mustCreateBucket(t, c, "docs")
			big := bytes.Repeat([]byte("<Object><Key>k</Key></Object>"), (5<<20)/29)
			for _, chunked := range []bool{false, true} {
				var body io.Reader = bytes.NewReader(big)
				if chunked {
					body = io.MultiReader(bytes.NewReader(big)) // no length: sent chunked
				}
				req, _ := http.NewRequest(http.MethodPost, tg.s.url()+"/docs?delete", body)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("chunked %v: %v", chunked, err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(answer, []byte("MaxMessageLengthExceeded")) {
					t.Fatalf("a 5 MiB DeleteObjects body (chunked %v): %d %s", chunked, resp.StatusCode, answer)
				}
			}
			// Object data is not a document.
			put(t, c, "docs", "big", big)
			if got := get(t, c, "docs", "big"); !bytes.Equal(got, big) {
				t.Fatal("a 5 MiB object")
			}
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("strata")}); errCode(err) != "InvalidBucketName" {
				t.Fatalf("creating the reserved bucket: %v", err)
			}
			resp, err := http.Get(tg.s.url() + "/strata/health/live")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("health after: %v %v", resp, err)
			}
			resp.Body.Close()
		})
	}
}
