package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestMultipartChecksums: an upload created with a checksum algorithm
// ends as an object with S3's checksum of its kind, derived here from the
// data independently: COMPOSITE SHA-256 (the digest of the parts' digests,
// "-3") with the SDK's part checksums, and FULL_OBJECT CRC32 (the CRC of
// the whole) from parts copied, whose checksums the server computes. A
// completion naming another whole checksum is refused with BadDigest and
// leaves the upload as it was; a part of another algorithm is refused.
func TestMultipartChecksums(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "sums")
	parts := [][]byte{randomBytes(5 << 20), randomBytes(5 << 20), randomBytes(1234)}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

	t.Run("composite SHA-256", func(t *testing.T) {
		key := aws.String("composite")
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("sums"), Key: key,
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		if up.ChecksumAlgorithm != types.ChecksumAlgorithmSha256 || up.ChecksumType != types.ChecksumTypeComposite {
			t.Fatalf("created: algorithm %q, type %q", up.ChecksumAlgorithm, up.ChecksumType)
		}
		// A part checksummed with another algorithm is refused.
		if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("sums"), Key: key, UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(parts[0]), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); errCode(err) != "InvalidRequest" {
			t.Fatalf("a CRC32 part of a SHA-256 upload: %v, want InvalidRequest", err)
		}
		var completed []types.CompletedPart
		digests := sha256.New()
		partSums := make([]string, len(parts))
		for i, p := range parts {
			sum := sha256.Sum256(p)
			digests.Write(sum[:])
			partSums[i] = b64(sum[:])
			out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("sums"), Key: key, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
			if err != nil {
				t.Fatalf("part %d: %v", i+1, err)
			}
			if aws.ToString(out.ChecksumSHA256) != partSums[i] {
				t.Fatalf("part %d answered SHA-256 %q, want %q", i+1, aws.ToString(out.ChecksumSHA256), partSums[i])
			}
			completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag, ChecksumSHA256: out.ChecksumSHA256})
		}
		want := fmt.Sprintf("%s-%d", b64(digests.Sum(nil)), len(parts))
		lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("sums"), Key: key, UploadId: up.UploadId})
		if err != nil || len(lp.Parts) != 3 || aws.ToString(lp.Parts[2].ChecksumSHA256) != partSums[2] {
			t.Fatalf("list parts: %+v %v", lp, err)
		}

		// Another whole checksum: BadDigest, and the upload is still there.
		if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("sums"), Key: key,
			UploadId: up.UploadId, ChecksumSHA256: aws.String(partSums[0] + "-3"),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}}); errCode(err) != "BadDigest" {
			t.Fatalf("complete with another checksum: %v, want BadDigest", err)
		}
		if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: key}); errCode(err) != "NotFound" {
			t.Fatalf("HEAD after the refused completion: %v, want 404", err)
		}
		done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("sums"), Key: key,
			UploadId: up.UploadId, ChecksumSHA256: aws.String(want), MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(done.ChecksumSHA256) != want || done.ChecksumType != types.ChecksumTypeComposite {
			t.Fatalf("completed with SHA-256 %q (%q), want %q (COMPOSITE)", aws.ToString(done.ChecksumSHA256), done.ChecksumType, want)
		}
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || aws.ToString(head.ChecksumSHA256) != want || head.ChecksumType != types.ChecksumTypeComposite {
			t.Fatalf("HEAD: %+v %v", head, err)
		}
		// Each part answers its own checksum, which the SDK verifies.
		for i := range parts {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sums"), Key: key, PartNumber: aws.Int32(int32(i + 1)),
				ChecksumMode: types.ChecksumModeEnabled})
			if err != nil {
				t.Fatalf("GET part %d: %v", i+1, err)
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(body, parts[i]) || aws.ToString(out.ChecksumSHA256) != partSums[i] {
				t.Fatalf("GET part %d: %d bytes, SHA-256 %q, err %v; want %q", i+1, len(body), aws.ToString(out.ChecksumSHA256), err, partSums[i])
			}
		}
		attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String("sums"), Key: key,
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts}})
		if err != nil || attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumSHA256) != want || attrs.ObjectParts == nil ||
			len(attrs.ObjectParts.Parts) != 3 || aws.ToString(attrs.ObjectParts.Parts[1].ChecksumSHA256) != partSums[1] {
			t.Fatalf("attributes: %+v %v", attrs, err)
		}
	})

	t.Run("full-object CRC32 of copied parts", func(t *testing.T) {
		whole := bytes.Join(parts, nil)
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("source"), Body: bytes.NewReader(whole)}); err != nil {
			t.Fatal(err)
		}
		key := aws.String("full")
		up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("sums"), Key: key,
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32, ChecksumType: types.ChecksumTypeFullObject})
		if err != nil {
			t.Fatal(err)
		}
		var completed []types.CompletedPart
		off := 0
		for i, p := range parts {
			out, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("sums"), Key: key, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), CopySource: aws.String("sums/source"),
				CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+len(p)-1))})
			if err != nil {
				t.Fatalf("copy part %d: %v", i+1, err)
			}
			off += len(p)
			sum := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(p))
			if aws.ToString(out.CopyPartResult.ChecksumCRC32) != b64(sum) {
				t.Fatalf("copied part %d: CRC32 %q, want %q", i+1, aws.ToString(out.CopyPartResult.ChecksumCRC32), b64(sum))
			}
			completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.CopyPartResult.ETag})
		}
		want := b64(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(whole)))
		done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("sums"), Key: key,
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(done.ChecksumCRC32) != want || done.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("completed with CRC32 %q (%q), want %q (FULL_OBJECT)", aws.ToString(done.ChecksumCRC32), done.ChecksumType, want)
		}
		// The SDK verifies a whole object's full-object checksum as it reads.
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sums"), Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(body, whole) || aws.ToString(out.ChecksumCRC32) != want {
			t.Fatalf("GET: %d bytes, CRC32 %q, err %v; want %q", len(body), aws.ToString(out.ChecksumCRC32), err, want)
		}
	})
}

// crc64NVME is CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5, all
// ones in and out, as hash/crc64 computes), S3's CRC64NVME.
var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// TestCopyObjectChecksums: a copy is one part, so CopyObject of a
// multipart object whose checksum is COMPOSITE (a CRC32 upload) does not
// keep that checksum, which describes parts the copy has not: the copy has
// a FULL_OBJECT checksum of its own bytes, or none, as S3 documents for
// copies. And a copy asked with ChecksumAlgorithm CRC64NVME has the
// CRC-64/NVME of its bytes. The versitygw front end on the server kept
// the source's "-2" checksum on the copy and answered no CRC64NVME.
func TestCopyObjectChecksums(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "sums")
		parts := [][]byte{randomBytes(5 << 20), randomBytes(4321)}
		whole := bytes.Join(parts, nil)
		b64 := base64.StdEncoding.EncodeToString
		completeUpload(t, c, "sums", "multi", types.ChecksumAlgorithmCrc32, parts)
		head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("multi"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || !strings.HasSuffix(aws.ToString(head.ChecksumCRC32), "-2") {
			t.Fatalf("the source's checksum is not COMPOSITE: %+v %v", head, err)
		}

		if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("sums"), Key: aws.String("copy"), CopySource: aws.String("sums/multi")}); err != nil {
			t.Fatal(err)
		}
		head, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("copy"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(head.ChecksumCRC32); got != "" {
			if want := b64(crc32be(crc32.ChecksumIEEE(whole))); got != want || head.ChecksumType != types.ChecksumTypeFullObject {
				t.Errorf("the copy's CRC32 is %q (%q), want the copy's own %q (FULL_OBJECT) or none", got, head.ChecksumType, want)
			}
		}
		if head.PartsCount != nil {
			t.Errorf("the copy answers %d parts, want none", aws.ToInt32(head.PartsCount))
		}

		want := b64(binary.BigEndian.AppendUint64(nil, crc64.Checksum(whole, crc64NVME)))
		out, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("sums"), Key: aws.String("copy64"), CopySource: aws.String("sums/multi"),
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(out.CopyObjectResult.ChecksumCRC64NVME); got != want {
			t.Errorf("CopyObject with CRC64NVME answered %q, want %q", got, want)
		}
		head, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("copy64"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || aws.ToString(head.ChecksumCRC64NVME) != want || head.ChecksumType != types.ChecksumTypeFullObject {
			t.Errorf("HEAD of the CRC64NVME copy: CRC64NVME %q (%q), err %v; want %q (FULL_OBJECT)",
				aws.ToString(head.ChecksumCRC64NVME), head.ChecksumType, err, want)
		}
		// The SDK verifies the checksum it is answered as it reads.
		g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sums"), Key: aws.String("copy64"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(g.Body)
		g.Body.Close()
		if err != nil || !bytes.Equal(body, whole) {
			t.Errorf("GET of the CRC64NVME copy: %d bytes, err %v", len(body), err)
		}
	})
}

// TestPartChecksumOnRead: GET ?partNumber=N with checksum mode ENABLED of
// an object uploaded in parts with CRC32 checksums answers that part's
// CRC32 (which the SDK verifies). The versitygw gateway answered none.
func TestPartChecksumOnRead(t *testing.T) {
	t.Parallel()
	onServerAndGateway(t, func(t *testing.T, s *server) {
		c := s.aws()
		mustCreateBucket(t, c, "sums")
		parts := [][]byte{randomBytes(5<<20 + 7), randomBytes(1234)}
		completeUpload(t, c, "sums", "multi", types.ChecksumAlgorithmCrc32, parts)
		for i, p := range parts {
			want := base64.StdEncoding.EncodeToString(crc32be(crc32.ChecksumIEEE(p)))
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("sums"), Key: aws.String("multi"),
				PartNumber: aws.Int32(int32(i + 1)), ChecksumMode: types.ChecksumModeEnabled})
			if err != nil {
				t.Fatalf("GET part %d: %v", i+1, err)
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(body, p) || aws.ToString(out.ChecksumCRC32) != want {
				t.Errorf("GET part %d: %d bytes (err %v), CRC32 %q; want %d bytes, CRC32 %q", i+1, len(body), err, aws.ToString(out.ChecksumCRC32), len(p), want)
			}
		}
	})
}

// completeUpload uploads parts as a multipart upload created with alg, each
// with its checksum, and completes it.
func completeUpload(t *testing.T, c *s3.Client, bucket, key string, alg types.ChecksumAlgorithm, parts [][]byte) {
	t.Helper()
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key, ChecksumAlgorithm: alg})
	if err != nil {
		t.Fatal(err)
	}
	var completed []types.CompletedPart
	for i, p := range parts {
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: alg})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag,
			ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME,
			ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}}); err != nil {
		t.Fatalf("complete %s/%s: %v", bucket, key, err)
	}
}
