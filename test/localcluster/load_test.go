package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// load is S3 clients writing and reading objects until stopped: PUT 4 KiB,
// GET with a body check, HEAD, a LIST every tenth round and a multipart
// upload every 25th, with the SDK's standard retries. It counts requests
// that failed (after retries) and attempts that failed (transport errors
// and 5xx, before retries: what a client with retries off would have
// seen), and keeps every request's latency for percentiles per window.
type load struct {
	stopCh                  chan struct{}
	wg                      sync.WaitGroup
	total, failed, attempts atomic.Int64
	mu                      sync.Mutex
	errs                    []string
	samples                 []sample
	written                 map[string]object // acknowledged writes
}

// object is what an acknowledged write stored: its size and first byte.
type object struct {
	size int64
	fill byte
}

func (l *load) wrote(key string, o object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.written[key] = o
}

// objects are the acknowledged writes, by key.
func (l *load) objects() map[string]object {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]object, len(l.written))
	for k, o := range l.written {
		out[k] = o
	}
	return out
}

// sample is one request: when it ended and how long it took.
type sample struct {
	end time.Time
	d   time.Duration
}

func (l *load) record(start time.Time, err error) {
	l.total.Add(1)
	now := time.Now()
	l.mu.Lock()
	l.samples = append(l.samples, sample{end: now, d: now.Sub(start)})
	l.mu.Unlock()
	if err != nil {
		l.failed.Add(1)
		l.note(err.Error())
	}
}

func (l *load) note(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, msg)
	}
}

func (l *load) figures() string {
	return fmt.Sprintf("so far %d requests, %d failed, %d attempts failed", l.total.Load(), l.failed.Load(), l.attempts.Load())
}

// p99 is the 99th percentile latency of the requests that ended in
// [from, to), and how many there were.
func (l *load) p99(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	var ds []time.Duration
	for _, s := range l.samples {
		if !s.end.Before(from) && s.end.Before(to) {
			ds = append(ds, s.d)
		}
	}
	l.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)*99/100], len(ds)
}

func (l *load) stop() (total, failed, attempts int64, errs []string) {
	close(l.stopCh)
	l.wg.Wait()
	return l.total.Load(), l.failed.Load(), l.attempts.Load(), l.errs
}

// countingTransport counts attempts that failed (transport errors and 5xx)
// before the SDK retries them.
type countingTransport struct {
	next http.RoundTripper
	l    *load
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	switch {
	case err != nil:
		c.l.attempts.Add(1)
		c.l.note("attempt: " + err.Error())
	case resp.StatusCode >= 500:
		c.l.attempts.Add(1)
		c.l.note(fmt.Sprintf("attempt: %s %s: %d", r.Method, r.URL.Path, resp.StatusCode))
	}
	return resp, err
}

// startLoad runs three clients against in.S3URL in bucket, verifying the
// server's certificate with verify, and calls refresh every two seconds
// (nil: never). Each request opens its own connection.
func startLoad(ctx context.Context, t *testing.T, in info, bucket string, verify func(tls.ConnectionState) error, refresh func() error) *load {
	l := &load{stopCh: make(chan struct{}), written: map[string]object{}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, VerifyConnection: verify, MinVersion: tls.VersionTLS12} //nolint:gosec // verified by verify
	cl := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(in.S3URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(in.AccessKey, in.SecretKey, ""),
		HTTPClient:  &http.Client{Transport: countingTransport{next: tr, l: l}, Timeout: time.Minute},
	})
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if refresh != nil {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stopCh:
					return
				case <-time.After(2 * time.Second):
					if err := refresh(); err != nil {
						l.note("refreshing the trust bundle: " + err.Error())
					}
				}
			}
		}()
	}
	for w := range 3 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			body := bytes.Repeat([]byte{byte('a' + w)}, 4096)
			for i := 0; ; i++ {
				select {
				case <-l.stopCh:
					return
				default:
				}
				key := fmt.Sprintf("w%d/%06d", w, i)
				l.round(ctx, cl, bucket, key, body, i%10 == 0)
				if i%25 == 12 {
					l.multipart(ctx, cl, bucket, key+".mp")
				}
			}
		}()
	}
	return l
}

// timed runs one request and records it.
func (l *load) timed(op func() error) error {
	start := time.Now()
	err := op()
	l.record(start, err)
	return err
}

func (l *load) round(ctx context.Context, cl *s3.Client, bucket, key string, body []byte, list bool) {
	b, k := aws.String(bucket), aws.String(key)
	if l.timed(func() error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: bytes.NewReader(body)})
		return err
	}) != nil {
		return
	}
	l.wrote(key, object{size: int64(len(body)), fill: body[0]})
	_ = l.timed(func() error {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: k})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		if err != nil || !bytes.Equal(got, body) {
			return fmt.Errorf("GET %s: %d bytes, read error %w", key, len(got), err)
		}
		return nil
	})
	_ = l.timed(func() error {
		_, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		return err
	})
	if list {
		_ = l.timed(func() error {
			_, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(10)})
			return err
		})
	}
}

// multipart uploads a 5 MiB part and a small last part, completes, and
// reads the object's size back.
func (l *load) multipart(ctx context.Context, cl *s3.Client, bucket, key string) {
	b, k := aws.String(bucket), aws.String(key)
	var id *string
	if l.timed(func() error {
		out, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: k})
		if err == nil {
			id = out.UploadId
		}
		return err
	}) != nil {
		return
	}
	parts := [][]byte{bytes.Repeat([]byte("m"), 5<<20), []byte("tail")}
	var done []s3types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		if l.timed(func() error {
			out, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: k, UploadId: id, PartNumber: aws.Int32(n), Body: bytes.NewReader(p)})
			if err == nil {
				done = append(done, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
			}
			return err
		}) != nil {
			return
		}
	}
	if l.timed(func() error {
		_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: done}})
		return err
	}) != nil {
		return
	}
	l.wrote(key, object{size: 5<<20 + 4, fill: 'm'})
	_ = l.timed(func() error {
		out, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		if err == nil && aws.ToInt64(out.ContentLength) != 5<<20+4 {
			err = fmt.Errorf("multipart object %s: %d bytes", key, aws.ToInt64(out.ContentLength))
		}
		return err
	})
}
