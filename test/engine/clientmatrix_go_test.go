package engine

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// failures collects the errors of concurrent workers.
type failures struct {
	mu   sync.Mutex
	list []string
	n    int
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.list) < 40 {
		f.list = append(f.list, fmt.Sprintf(format, args...))
	}
}

func (f *failures) report(t *testing.T, client string, requests int64) {
	t.Helper()
	if f.n > 0 {
		t.Errorf("%s: %d failures in %d requests:\n  %s", client, f.n, requests, strings.Join(f.list, "\n  "))
	}
}

func matrixSDK(t *testing.T, tg *tlsTarget) {
	var dials atomic.Int64
	c := tg.sdkClient(&dials)
	const bucket = "sdkv2"
	m := tg.meter(t)
	mustCreateBucket(t, c, bucket)

	type written struct {
		key  string
		size int
		sum  [32]byte
	}
	const workers, iterations = 4, 250
	var requests atomic.Int64
	var fails failures
	var wg sync.WaitGroup
	keys := make([][]written, workers)
	for w := range workers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), 0x5eed))
			var mine []written
			for i := range iterations {
				size := 4 << 10
				switch {
				case i%20 == 19:
					size = 3 << 20 // above 2 MB: sent with Expect: 100-continue
				case i%4 == 3:
					size = 300 << 10
				}
				data := randomBytes(size)
				key := fmt.Sprintf("load/w%d/k%04d", w, i)
				requests.Add(1)
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: &key, Body: bytes.NewReader(data)}); err != nil {
					fails.add("PUT %s (%d bytes): %v", key, size, err)
				} else {
					mine = append(mine, written{key, size, sha256.Sum256(data)})
				}
				if len(mine) == 0 {
					continue
				}
				o := mine[rng.IntN(len(mine))]
				requests.Add(1)
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: &o.key})
				if err != nil {
					fails.add("GET %s: %v", o.key, err)
				} else {
					body, err := io.ReadAll(out.Body)
					out.Body.Close()
					if err != nil {
						fails.add("GET %s: reading the body: %v", o.key, err)
					} else if sha256.Sum256(body) != o.sum {
						fails.add("GET %s: %d bytes, differ from the %d written", o.key, len(body), o.size)
					}
				}
				o = mine[rng.IntN(len(mine))]
				requests.Add(1)
				head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: &o.key})
				if err != nil {
					fails.add("HEAD %s: %v", o.key, err)
				} else if aws.ToInt64(head.ContentLength) != int64(o.size) {
					fails.add("HEAD %s: Content-Length %d, want %d", o.key, aws.ToInt64(head.ContentLength), o.size)
				}
				if i%10 == 9 {
					prefix := fmt.Sprintf("load/w%d/", w)
					requests.Add(1)
					l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: &prefix})
					if err != nil {
						fails.add("LIST %s: %v", prefix, err)
					} else if len(l.Contents) != len(mine) || aws.ToBool(l.IsTruncated) {
						fails.add("LIST %s: %d keys (truncated %v), want %d", prefix, len(l.Contents), aws.ToBool(l.IsTruncated), len(mine))
					}
				}
			}
			keys[w] = mine
		})
	}
	wg.Wait()

	// A multipart upload as the SDK's transfer manager makes it (CRC32
	// checksums on every part), by hand: the transfer manager module is only
	// an indirect dependency in go.mod.
	const mpKey = "multipart/17MiB.bin"
	mp := randomBytes(17 << 20)
	requests.Add(1)
	cmu, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(mpKey),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
	if err != nil {
		fails.add("CreateMultipartUpload: %v", err)
	} else {
		var parts []s3types.CompletedPart
		for n, off := int32(1), 0; off < len(mp); n, off = n+1, off+5<<20 {
			part := mp[off:min(off+5<<20, len(mp))]
			requests.Add(1)
			up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(mpKey), UploadId: cmu.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(part), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32})
			if err != nil {
				fails.add("UploadPart %d: %v", n, err)
				continue
			}
			parts = append(parts, s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32})
		}
		requests.Add(1)
		if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(mpKey),
			UploadId: cmu.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			fails.add("CompleteMultipartUpload: %v", err)
		} else {
			requests.Add(2)
			if out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(mpKey)}); err != nil {
				fails.add("GET %s: %v", mpKey, err)
			} else {
				body, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil || !bytes.Equal(body, mp) {
					fails.add("GET %s: %d bytes (err %v), differ from the %d uploaded", mpKey, len(body), err, len(mp))
				}
			}
			if head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(mpKey)}); err != nil {
				fails.add("HEAD %s: %v", mpKey, err)
			} else if aws.ToInt64(head.ContentLength) != int64(len(mp)) || !strings.HasSuffix(strings.Trim(aws.ToString(head.ETag), `"`), "-4") {
				fails.add("HEAD %s: Content-Length %d, ETag %s; want %d and a 4-part ETag", mpKey, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), len(mp))
			}
		}
	}

	// Empty the bucket and remove it.
	var all []s3types.ObjectIdentifier
	for _, ws := range keys {
		for _, o := range ws {
			all = append(all, s3types.ObjectIdentifier{Key: aws.String(o.key)})
		}
	}
	all = append(all, s3types.ObjectIdentifier{Key: aws.String(mpKey)})
	for start := 0; start < len(all); start += 1000 {
		batch := all[start:min(start+1000, len(all))]
		requests.Add(1)
		out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: batch}})
		if err != nil {
			fails.add("DeleteObjects: %v", err)
		} else if len(out.Errors) > 0 || len(out.Deleted) != len(batch) {
			fails.add("DeleteObjects: %d deleted of %d, %d errors", len(out.Deleted), len(batch), len(out.Errors))
		}
	}
	requests.Add(1)
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		fails.add("DeleteBucket: %v", err)
	}
	t.Logf("aws-sdk-go-v2: %d requests on %d connections", requests.Load(), dials.Load())
	fails.report(t, "aws-sdk-go-v2", requests.Load())
	m.done(t, "aws-sdk-go-v2")
	tg.bucketGone(t, bucket)
}

func matrixMinio(t *testing.T, tg *tlsTarget) {
	tr, err := minio.DefaultTransport(true)
	if err != nil {
		t.Fatal(err)
	}
	tr.TLSClientConfig.RootCAs = tg.pool
	mc, err := minio.New(tg.s.addr, &minio.Options{Secure: true, Transport: tr, Creds: miniocreds.NewStaticV4(rootUser, rootPassword, "")})
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "miniogo"
	m := tg.meter(t)
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}
	small := randomBytes(64 << 10)
	if _, err := mc.PutObject(ctx, bucket, "small.bin", bytes.NewReader(small), int64(len(small)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("PutObject small: %v", err)
	}
	// Unknown size: minio-go streams it in parts (16 MiB) as a multipart upload.
	big := randomBytes(20 << 20)
	info, err := mc.PutObject(ctx, bucket, "stream/20MiB.bin", io.MultiReader(bytes.NewReader(big)), -1, minio.PutObjectOptions{})
	if err != nil {
		t.Fatalf("PutObject of unknown size: %v", err)
	}
	if info.Size != int64(len(big)) {
		t.Errorf("PutObject of unknown size: %d bytes stored, want %d", info.Size, len(big))
	}
	for _, rg := range [][2]int64{{0, 0}, {1 << 20, 17<<20 - 1}, {20<<20 - 100, 20<<20 - 1}} {
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(rg[0], rg[1]); err != nil {
			t.Fatal(err)
		}
		obj, err := mc.GetObject(ctx, bucket, "stream/20MiB.bin", opts)
		if err != nil {
			t.Fatalf("GetObject range %v: %v", rg, err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || !bytes.Equal(got, big[rg[0]:rg[1]+1]) {
			t.Errorf("GetObject range %d-%d: %d bytes (err %v), differ from what was written", rg[0], rg[1], len(got), err)
		}
	}
	obj, err := mc.GetObject(ctx, bucket, "small.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("GetObject small: %v", err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, small) {
		t.Errorf("GetObject small: %d bytes (err %v), differ from what was written", len(got), err)
	}
	var listed []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects: %v", o.Err)
		}
		listed = append(listed, o.Key)
	}
	if !slices.Equal(listed, []string{"small.bin", "stream/20MiB.bin"}) {
		t.Errorf("ListObjects: %q", listed)
	}
	st, err := mc.StatObject(ctx, bucket, "stream/20MiB.bin", minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("StatObject: %v", err)
	}
	if st.Size != int64(len(big)) {
		t.Errorf("StatObject: size %d, want %d", st.Size, len(big))
	}
	objs := make(chan minio.ObjectInfo, len(listed))
	for _, k := range listed {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	for e := range mc.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		t.Errorf("RemoveObjects %s: %v", e.ObjectName, e.Err)
	}
	if err := mc.RemoveBucket(ctx, bucket); err != nil {
		t.Errorf("RemoveBucket: %v", err)
	}
	m.done(t, "minio-go")
	tg.bucketGone(t, bucket)
}
