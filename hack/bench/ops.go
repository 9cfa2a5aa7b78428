package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// opStats accumulates what one worker observed for one operation.
type opStats struct {
	lat      *histogram
	ttfb     *histogram // GET only
	errors   int64
	bytes    int64
	listed   int64 // LIST only: objects returned
	firstErr string
}

func newOpStats(op Op) *opStats {
	s := &opStats{lat: newHistogram()}
	if op == OpGet {
		s.ttfb = newHistogram()
	}
	return s
}

func (s *opStats) fail(err error) {
	if s.errors == 0 {
		s.firstErr = errorCode(err)
	}
	s.errors++
}

func (s *opStats) merge(o *opStats) {
	s.lat.merge(o.lat)
	if s.ttfb != nil && o.ttfb != nil {
		s.ttfb.merge(o.ttfb)
	}
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
	s.errors += o.errors
	s.bytes += o.bytes
	s.listed += o.listed
}

// worker is one simulated client. It owns its buffers, its random source
// and its statistics, so the request loop allocates no payloads and shares
// nothing but the atomic request counter.
type worker struct {
	id      int
	client  *s3.Client
	bucket  string
	prefix  string
	size    int64
	payload []byte        // shared, read-only
	body    *bytes.Reader // reset onto payload for every PUT
	readBuf []byte
	rng     *rand.Rand
	stats   map[Op]*opStats
	seq     int64    // objects this worker has written
	pool    []string // keys this worker may delete (DELETE, MIXED)
}

func newWorker(id int, client *s3.Client, bucket, prefix string, size int64, payload []byte) *worker {
	return &worker{
		id:      id,
		client:  client,
		bucket:  bucket,
		prefix:  prefix,
		size:    size,
		payload: payload[:size],
		body:    bytes.NewReader(nil),
		readBuf: make([]byte, 256<<10),
		rng:     rand.New(rand.NewPCG(uint64(id)+1, uint64(time.Now().UnixNano()))),
		stats:   map[Op]*opStats{},
	}
}

func (w *worker) statsFor(op Op) *opStats {
	s, ok := w.stats[op]
	if !ok {
		s = newOpStats(op)
		w.stats[op] = s
	}
	return s
}

func (w *worker) put(ctx context.Context, key string) error {
	w.body.Reset(w.payload)
	_, err := w.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(w.bucket),
		Key:           aws.String(key),
		Body:          w.body,
		ContentLength: aws.Int64(w.size),
	})
	return err
}

// multipart writes key as a multipart upload of the payload in parts of
// MultipartPartSize, multipartPartsInFlight at once; a failed upload is
// aborted.
func (w *worker) multipart(ctx context.Context, key string) (err error) {
	// With the SDK's checksums on, the upload declares CRC32 as its
	// algorithm, as the SDK's transfer manager does: the parts' checksums
	// are then the upload's, which CompleteMultipartUpload repeats (a
	// server may refuse part checksums an upload did not declare: Garage).
	var algo types.ChecksumAlgorithm
	if w.client.Options().RequestChecksumCalculation == aws.RequestChecksumCalculationWhenSupported {
		algo = types.ChecksumAlgorithmCrc32
	}
	up, err := w.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(w.bucket), Key: aws.String(key), ChecksumAlgorithm: algo})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = w.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: up.UploadId})
		}
	}()
	n := int((w.size + MultipartPartSize - 1) / MultipartPartSize)
	parts := make([]types.CompletedPart, n)
	errs := make([]error, n)
	sem := make(chan struct{}, multipartPartsInFlight)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			off := int64(i) * MultipartPartSize
			body := w.payload[off:min(off+MultipartPartSize, w.size)]
			out, err := w.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
				ChecksumAlgorithm: algo,
			})
			if err != nil {
				errs[i] = err
				return
			}
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag}
			if algo != "" {
				parts[i].ChecksumCRC32 = out.ChecksumCRC32
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err = w.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(w.bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}

// get reads the whole object into the worker's buffer and reports when the
// first body byte arrived.
func (w *worker) get(ctx context.Context, key string, start time.Time) (ttfb time.Duration, err error) {
	out, err := w.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(w.bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	var n int64
	for {
		m, rerr := out.Body.Read(w.readBuf)
		if m > 0 && n == 0 {
			ttfb = time.Since(start)
		}
		n += int64(m)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	if n != w.size {
		return 0, fmt.Errorf("GET %s returned %d bytes, want %d", key, n, w.size)
	}
	return ttfb, nil
}

func (w *worker) head(ctx context.Context, key string) error {
	out, err := w.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(w.bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		return err
	}
	if got := aws.ToInt64(out.ContentLength); got != w.size {
		return fmt.Errorf("HEAD %s says %d bytes, want %d", key, got, w.size)
	}
	return nil
}

func (w *worker) delete(ctx context.Context, key string) error {
	_, err := w.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(w.bucket),
		Key:    aws.String(key),
	})
	return err
}

// list pages through everything under the worker's prefix followed by sub,
// 1000 entries a page, rolled up at delimiter when one is given, and
// returns how many entries (objects and common prefixes) it saw.
func (w *worker) list(ctx context.Context, sub, delimiter string) (int64, error) {
	in := &s3.ListObjectsV2Input{
		Bucket:  aws.String(w.bucket),
		Prefix:  aws.String(w.prefix + "/" + sub),
		MaxKeys: aws.Int32(1000),
	}
	if delimiter != "" {
		in.Delimiter = aws.String(delimiter)
	}
	var n int64
	for {
		out, err := w.client.ListObjectsV2(ctx, in)
		if err != nil {
			return n, err
		}
		n += int64(len(out.Contents) + len(out.CommonPrefixes))
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return n, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}
