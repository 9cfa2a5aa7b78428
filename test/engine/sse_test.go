package engine

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// keysFile writes an SSE keys file with the named keys (the first is the
// default) and returns its path.
func keysFile(t *testing.T, ids ...string) string {
	t.Helper()
	f := map[string]any{"default": ids[0], "keys": map[string]string{}}
	for _, id := range ids {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		f["keys"].(map[string]string)[id] = base64.StdEncoding.EncodeToString(k)
	}
	b, _ := json.Marshal(f)
	p := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsClient is an aws-sdk-go-v2 client of a TLS server (certificate not
// verified: the test's own).
func tlsClient(s *server) *s3.Client {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return s3.New(s3.Options{
		BaseEndpoint: aws.String("https://" + s.addr), Region: "us-east-1", UsePathStyle: true, HTTPClient: hc,
		Credentials: credentials.NewStaticCredentialsProvider(rootUser, rootPassword, ""), RetryMaxAttempts: 1,
	})
}

type customerKey struct{ alg, key, md5 *string }

func newCustomerKey() customerKey {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	sum := md5.Sum(k)
	return customerKey{aws.String("AES256"), aws.String(base64.StdEncoding.EncodeToString(k)), aws.String(base64.StdEncoding.EncodeToString(sum[:]))}
}

// TestServerSideEncryption: SSE-C, SSE-S3 and SSE-KMS objects read back
// whole, by range and by part, copy between modes, and leave nothing
// readable on the drives; a wrong or missing key is refused.
func TestServerSideEncryption(t *testing.T) {
	t.Parallel()
	s := startTLSServer(t, "STRATA_KMS_KEYS_FILE="+keysFile(t, "tenant-1", "tenant-2"))
	c := tlsClient(s)
	mustCreateBucket(t, c, "vault")
	ck := newCustomerKey()
	marker := []byte("STRATA-SSE-MARKER-")
	modes := map[string]func(*s3.PutObjectInput){
		"SSE-C": func(in *s3.PutObjectInput) {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = ck.alg, ck.key, ck.md5
		},
		"SSE-S3": func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 },
		"SSE-KMS": func(in *s3.PutObjectInput) {
			in.ServerSideEncryption, in.SSEKMSKeyId = types.ServerSideEncryptionAwsKms, aws.String("tenant-2")
		},
	}
	getKey := func(mode string, in *s3.GetObjectInput) {
		if mode == "SSE-C" {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = ck.alg, ck.key, ck.md5
		}
	}
	for mode, set := range modes {
		for _, size := range []int{0, 1, 64<<10 + 3, 3<<20 + 11} {
			data := bytes.Repeat(marker, size/len(marker)+1)[:size]
			key := fmt.Sprintf("%s/%d", mode, size)
			in := &s3.PutObjectInput{Bucket: aws.String("vault"), Key: &key, Body: bytes.NewReader(data)}
			set(in)
			out, err := c.PutObject(ctx, in)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if sum := md5.Sum(data); mode == "SSE-S3" && strings.Trim(aws.ToString(out.ETag), `"`) != hex.EncodeToString(sum[:]) {
				t.Errorf("%s: SSE-S3 ETag %s is not the plaintext's MD5", key, aws.ToString(out.ETag))
			}
			for _, rg := range []string{"", "bytes=1-", fmt.Sprintf("bytes=%d-%d", size/3, size/2)} {
				if size < 3 && rg != "" {
					continue
				}
				gin := &s3.GetObjectInput{Bucket: aws.String("vault"), Key: &key}
				if rg != "" {
					gin.Range = &rg
				}
				getKey(mode, gin)
				g, err := c.GetObject(ctx, gin)
				if err != nil {
					t.Fatalf("%s %s: %v", key, rg, err)
				}
				got, err := io.ReadAll(g.Body)
				g.Body.Close()
				want := data
				if rg == "bytes=1-" {
					want = data[1:]
				} else if rg != "" {
					want = data[size/3 : size/2+1]
				}
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s %s: %d bytes (%v), want %d", key, rg, len(got), err, len(want))
				}
			}
		}
	}
	// A customer-key object needs its key, the right one.
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vault"), Key: aws.String("SSE-C/1")}); errCode(err) != "InvalidRequest" {
		t.Fatalf("GET without the customer key: %v", err)
	}
	other := newCustomerKey()
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vault"), Key: aws.String("SSE-C/1"),
		SSECustomerAlgorithm: other.alg, SSECustomerKey: other.key, SSECustomerKeyMD5: other.md5}); errCode(err) != "InvalidArgument" {
		t.Fatalf("GET with another customer key: %v", err)
	}
	// Listings show plaintext sizes.
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("vault"), Prefix: aws.String("SSE-KMS/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l.Contents {
		if want := strings.TrimPrefix(aws.ToString(o.Key), "SSE-KMS/"); fmt.Sprint(aws.ToInt64(o.Size)) != want {
			t.Errorf("listed size of %s: %d", aws.ToString(o.Key), aws.ToInt64(o.Size))
		}
	}
	// Copy a customer-key object to a KMS one.
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("vault"), Key: aws.String("copied"), CopySource: aws.String("vault/SSE-C/3145739"),
		CopySourceSSECustomerAlgorithm: ck.alg, CopySourceSSECustomerKey: ck.key, CopySourceSSECustomerKeyMD5: ck.md5,
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("tenant-1")}); err != nil {
		t.Fatal(err)
	}
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("vault"), Key: aws.String("copied")}); err != nil ||
		h.ServerSideEncryption != types.ServerSideEncryptionAwsKms || aws.ToString(h.SSEKMSKeyId) != "tenant-1" || aws.ToInt64(h.ContentLength) != 3<<20+11 {
		t.Fatalf("copy: %+v %v", h, err)
	}
	// Multipart with a customer key: parts, a part read, a range across parts.
	mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("vault"), Key: aws.String("mp"),
		SSECustomerAlgorithm: ck.alg, SSECustomerKey: ck.key, SSECustomerKeyMD5: ck.md5})
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	var parts []types.CompletedPart
	for n := int32(1); n <= 3; n++ {
		d := randomBytes(5<<20 + int(n))
		if n == 3 {
			d = randomBytes(777)
		}
		all = append(all, d...)
		p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("vault"), Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: &n,
			Body: bytes.NewReader(d), SSECustomerAlgorithm: ck.alg, SSECustomerKey: ck.key, SSECustomerKeyMD5: ck.md5})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(n)})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("vault"), Key: aws.String("mp"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, SSECustomerAlgorithm: ck.alg, SSECustomerKey: ck.key, SSECustomerKeyMD5: ck.md5}); err != nil {
		t.Fatal(err)
	}
	rg := fmt.Sprintf("bytes=%d-%d", 5<<20-10, 10<<20+10)
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vault"), Key: aws.String("mp"), Range: &rg,
		SSECustomerAlgorithm: ck.alg, SSECustomerKey: ck.key, SSECustomerKeyMD5: ck.md5})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, all[5<<20-10:10<<20+11]) {
		t.Fatalf("range across parts: %d bytes", len(got))
	}
	// Nothing of the plaintext is on the drives.
	for _, d := range s.drives {
		err := filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return skipVanished(err)
			}
			if fi.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, marker) {
				t.Errorf("plaintext found in %s", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestGatewayRefusesEncryption: the gateway stores files as they are, so
// it refuses every request for server-side encryption.
func TestGatewayRefusesEncryption(t *testing.T) {
	t.Parallel()
	g := startGateway(t, t.TempDir())
	c := g.aws()
	mustCreateBucket(t, c, "files")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("files"), Key: aws.String("x"), Body: strings.NewReader("x"),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); errCode(err) != "NotImplemented" {
		t.Fatalf("SSE-S3 on the gateway: %v", err)
	}
	notStored(t, c, "files", "x")
}

// skipVanished lets a walk of a live server's drives pass over files
// removed while it runs (temporary files).
func skipVanished(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// TestCopyToEncryptedDestinations: CopyObject of a small plaintext object
// to an SSE-C and to an SSE-S3 destination, 50 times each with the SDK's
// retries off, succeeds every time and reads back the same bytes. The
// versitygw front end raced on the object's size while it sealed a copy
// and answered most of these 500 (its log: "range 0+128 outside an
// object of 100 bytes", the source read with the sealed copy's size).
func TestCopyToEncryptedDestinations(t *testing.T) {
	t.Parallel()
	s := startTLSServer(t, "STRATA_KMS_KEYS_FILE="+keysFile(t, "tenant-1"))
	c := tlsClient(s)
	mustCreateBucket(t, c, "vault")
	data := randomBytes(100)
	put(t, c, "vault", "plain", data)
	ck := newCustomerKey()
	for _, mode := range []string{"SSE-C", "SSE-S3"} {
		var failed []string
		for i := range 50 {
			key := fmt.Sprintf("%s/%d", mode, i)
			in := &s3.CopyObjectInput{Bucket: aws.String("vault"), Key: &key, CopySource: aws.String("vault/plain")}
			gin := &s3.GetObjectInput{Bucket: aws.String("vault"), Key: &key}
			if mode == "SSE-C" {
				in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = ck.alg, ck.key, ck.md5
				gin.SSECustomerAlgorithm, gin.SSECustomerKey, gin.SSECustomerKeyMD5 = ck.alg, ck.key, ck.md5
			} else {
				in.ServerSideEncryption = types.ServerSideEncryptionAes256
			}
			if _, err := c.CopyObject(ctx, in); err != nil {
				failed = append(failed, fmt.Sprintf("copy %d: %v", i+1, err))
				continue
			}
			g, err := c.GetObject(ctx, gin)
			if err != nil {
				failed = append(failed, fmt.Sprintf("GET of copy %d: %v", i+1, err))
				continue
			}
			got, err := io.ReadAll(g.Body)
			g.Body.Close()
			if err != nil || !bytes.Equal(got, data) {
				failed = append(failed, fmt.Sprintf("copy %d read back %d bytes (%v), not the 100 copied", i+1, len(got), err))
			}
		}
		if len(failed) > 0 {
			t.Errorf("%d of 50 copies to %s failed; the first: %s", len(failed), mode, failed[0])
		}
	}
}

// TestCopyInPlaceFromCustomerKeyToPlaintext: copying an SSE-C object onto
// itself with its key as the copy source's and no encryption asked for the
// destination decrypts it (a change of encryption, which S3 allows in
// place); it then reads back without a key. The versitygw front end
// refused it as a copy "without changing ... encryption attributes".
func TestCopyInPlaceFromCustomerKeyToPlaintext(t *testing.T) {
	t.Parallel()
	s := startTLSServer(t)
	c := tlsClient(s)
	mustCreateBucket(t, c, "vault")
	ck := newCustomerKey()
	data := randomBytes(64<<10 + 5)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("obj"), Body: bytes.NewReader(data),
		SSECustomerAlgorithm: ck.alg, SSECustomerKey: ck.key, SSECustomerKeyMD5: ck.md5}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("vault"), Key: aws.String("obj"), CopySource: aws.String("vault/obj"),
		CopySourceSSECustomerAlgorithm: ck.alg, CopySourceSSECustomerKey: ck.key, CopySourceSSECustomerKeyMD5: ck.md5}); err != nil {
		t.Fatalf("in-place copy from SSE-C to plaintext: %v", err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("vault"), Key: aws.String("obj")})
	if err != nil || h.SSECustomerAlgorithm != nil || h.ServerSideEncryption != "" || aws.ToInt64(h.ContentLength) != int64(len(data)) {
		t.Fatalf("HEAD without a key after the copy: %+v %v", h, err)
	}
	if got := get(t, c, "vault", "obj"); !bytes.Equal(got, data) {
		t.Fatalf("read back without a key: %d bytes, not the %d written", len(got), len(data))
	}
}
