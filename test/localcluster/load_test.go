package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
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
	return l.p99Where(func(end time.Time) bool { return !end.Before(from) && end.Before(to) })
}

// p99Where is the 99th percentile latency of the requests whose end keep
// accepts, and how many there were.
func (l *load) p99Where(keep func(end time.Time) bool) (time.Duration, int) {
	l.mu.Lock()
	var ds []time.Duration
	for _, s := range l.samples {
		if keep(s.end) {
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
	at := func(op string, err error) error { return failedAt(op, bucket, key, err) }
	if l.timed(func() error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: bytes.NewReader(body)})
		return at("PUT", err)
	}) != nil {
		return
	}
	l.wrote(key, object{size: int64(len(body)), fill: body[0]})
	l.read(func() error {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: k})
		if err != nil {
			return at("GET", err)
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		if err != nil || !bytes.Equal(got, body) {
			return at("GET", fmt.Errorf("%d bytes, read error %w", len(got), err))
		}
		return nil
	})
	_ = l.timed(func() error {
		_, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		return at("HEAD", err)
	})
	if list {
		l.read(func() error {
			_, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(10)})
			return failedAt("LIST", bucket, "", err)
		})
	}
}

// read runs a read; one whose answer was cut off after its status line
// (its connection broke mid-body: the answering pod or its node was killed
// while answering, which the SDK does not retry once a body has begun) is
// counted as a failed attempt and run again once, as an application
// retries such a read.
func (l *load) read(op func() error) {
	_ = l.timed(func() error {
		err := op()
		if err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected EOF")) {
			l.attempts.Add(1)
			l.note("attempt cut off mid-body: " + err.Error())
			err = op()
		}
		return err
	})
}

// failedAt names a failed request's key and when it failed (UTC), to find
// it in the servers' logs; the SDK's error carries the answering server's
// HostID. nil stays nil.
func failedAt(op, bucket, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s/%s at %s: %w", op, bucket, key, time.Now().UTC().Format("15:04:05.000"), err)
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
		return failedAt("CreateMultipartUpload", bucket, key, err)
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
			return failedAt("UploadPart", bucket, key, err)
		}) != nil {
			return
		}
	}
	if l.timed(func() error {
		_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: k, UploadId: id,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: done}})
		return failedAt("CompleteMultipartUpload", bucket, key, err)
	}) != nil {
		return
	}
	l.wrote(key, object{size: 5<<20 + 4, fill: 'm'})
	_ = l.timed(func() error {
		out, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: k})
		if err == nil && aws.ToInt64(out.ContentLength) != 5<<20+4 {
			err = fmt.Errorf("multipart object %s: %d bytes", key, aws.ToInt64(out.ContentLength))
		}
		return failedAt("HEAD", bucket, key, err)
	})
}

// mixedLoad is the clients of the day-2 and soak tests, over HTTPS with the
// tenant's CA: three aws-sdk-go-v2 clients through the servers' Service
// (bucket), three through the gateways' (bucket-nas), and the boto3 client
// at its defaults through the servers' (bucket-boto3).
type mixedLoad struct {
	servers, gateways *load
	boto              *boto3Load
	in, gwIn          info
	bucket            string
}

func startMixedLoad(ctx context.Context, t *testing.T, in, gwIn info, py, bucket string) *mixedLoad {
	trust := staticTrust(t, in.CAFile)
	return &mixedLoad{
		servers:  startLoad(ctx, t, in, bucket, trust, nil),
		gateways: startLoad(ctx, t, gwIn, bucket+"-nas", trust, nil),
		boto:     startBoto3(t, py, in, bucket+"-boto3"),
		in:       in, gwIn: gwIn, bucket: bucket,
	}
}

// loadFigures are what one client (or group of clients) counted.
type loadFigures struct {
	Requests int64 `json:"requests"`
	// Failed: requests that failed with the client's standard retries.
	Failed int64 `json:"failed"`
	// AttemptsFailed: attempts that failed before those retries (the SDK
	// clients: transport errors and 5xx; boto3: the attempts it retried).
	AttemptsFailed int64    `json:"attemptsFailed"`
	Errors         []string `json:"errors,omitempty"`
}

func (f loadFigures) String() string {
	return fmt.Sprintf("%d requests, %d failed with the client's standard retries, %d attempts failed before them", f.Requests, f.Failed, f.AttemptsFailed)
}

// mixedFigures are a mixed load's figures once stopped.
type mixedFigures struct {
	Servers  loadFigures `json:"servers"`
	Gateways loadFigures `json:"gateways"`
	Boto3    loadFigures `json:"boto3"`
	// boto3 is what the boto3 client printed (for its objects).
	boto3 boto3Figures
}

// stop ends every client and logs what each counted.
func (m *mixedLoad) stop(t *testing.T) mixedFigures {
	var f mixedFigures
	for _, c := range []struct {
		l   *load
		out *loadFigures
	}{{m.servers, &f.Servers}, {m.gateways, &f.Gateways}} {
		total, failed, attempts, errs := c.l.stop()
		*c.out = loadFigures{Requests: total, Failed: failed, AttemptsFailed: attempts, Errors: errs}
	}
	f.boto3 = m.boto.stop(t)
	f.Boto3 = loadFigures{Requests: int64(f.boto3.Requests), Failed: int64(f.boto3.Failed), AttemptsFailed: int64(f.boto3.Retried), Errors: f.boto3.Errors}
	t.Logf("servers' Service (aws-sdk-go-v2): %s", f.Servers)
	t.Logf("gateways' Service (aws-sdk-go-v2): %s", f.Gateways)
	t.Logf("servers' Service (boto3): %s; %d objects", f.Boto3, f.boto3.Objects)
	return f
}

// failed is how many requests failed with retries, all clients together.
func (f mixedFigures) failed() int64 { return f.Servers.Failed + f.Gateways.Failed + f.Boto3.Failed }

// errorf reports the failed requests of every client.
func (f mixedFigures) errorf(t *testing.T, why string) {
	t.Helper()
	t.Errorf("%s: %d through the servers (%v), %d through the gateways (%v), %d from boto3 (%v)", why,
		f.Servers.Failed, f.Servers.Errors, f.Gateways.Failed, f.Gateways.Errors, f.Boto3.Failed, f.Boto3.Errors)
}

// readBack reads every object the clients wrote and were told was stored;
// it returns how many there were and how many were wrong or missing.
func (m *mixedLoad) readBack(ctx context.Context, t *testing.T, f mixedFigures) (objects, bad int) {
	for _, r := range []struct {
		in      info
		bucket  string
		objects map[string]object
	}{
		{m.in, m.bucket, m.servers.objects()},
		{m.gwIn, m.bucket + "-nas", m.gateways.objects()},
		{m.in, m.bucket + "-boto3", f.boto3.objects()},
	} {
		b := readBack(ctx, t, r.in, r.bucket, r.objects)
		objects += len(r.objects)
		bad += b
	}
	return objects, bad
}

// boto3Load is the boto3 client of testdata/boto3_load.py.
type boto3Load struct {
	cmd         *exec.Cmd
	out, stderr bytes.Buffer
	stopFile    string
}

type boto3Figures struct {
	Requests int      `json:"requests"`
	Failed   int      `json:"failed"`
	Retried  int      `json:"retried_attempts"`
	Objects  int      `json:"objects"`
	Errors   []string `json:"errors"`
	// Rounds is how many rounds the client began; PutFailed the rounds
	// whose PUT failed.
	Rounds    int   `json:"rounds"`
	PutFailed []int `json:"put_failed"`
}

// objects are the boto3 client's acknowledged writes: round i writes
// boto3/<i> (six digits), 4096 + i%7 bytes of 'a' + i%26.
func (f boto3Figures) objects() map[string]object {
	failed := map[int]bool{}
	for _, i := range f.PutFailed {
		failed[i] = true
	}
	out := map[string]object{}
	for i := range f.Rounds {
		if !failed[i] {
			out[fmt.Sprintf("boto3/%06d", i)] = object{size: int64(4096 + i%7), fill: byte('a' + i%26)}
		}
	}
	return out
}

func startBoto3(t *testing.T, py string, in info, bucket string) *boto3Load {
	l := &boto3Load{stopFile: filepath.Join(t.TempDir(), "stop")}
	l.cmd = exec.Command(filepath.Join(py, "python3"), filepath.Join(repoRoot(), "test", "localcluster", "testdata", "boto3_load.py"))
	l.cmd.Env = append(os.Environ(), "S3_ENDPOINT="+in.S3URL, "AWS_ACCESS_KEY_ID="+in.AccessKey, "AWS_SECRET_ACCESS_KEY="+in.SecretKey,
		"AWS_CA_BUNDLE="+in.CAFile, "BUCKET="+bucket, "STOP_FILE="+l.stopFile)
	l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return l
}

// stop ends the client and returns its figures.
func (l *boto3Load) stop(t *testing.T) boto3Figures {
	if err := os.WriteFile(l.stopFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Wait(); err != nil {
		t.Fatalf("the boto3 client: %v\n%s", err, l.stderr.String())
	}
	var f boto3Figures
	if err := json.Unmarshal(l.out.Bytes(), &f); err != nil {
		t.Fatalf("the boto3 client's figures %q: %v", l.out.String(), err)
	}
	if f.Requests < 100 {
		t.Errorf("the boto3 client made only %d requests", f.Requests)
	}
	return f
}

// readBack reads objects back from bucket with a client of its own and
// returns how many were wrong or missing.
func readBack(ctx context.Context, t *testing.T, in info, bucket string, objects map[string]object) (bad int) {
	cl := s3Client(t, in)
	for key, want := range objects {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			var got []byte
			got, err = io.ReadAll(out.Body)
			out.Body.Close()
			if err == nil && (int64(len(got)) != want.size || got[0] != want.fill) {
				err = fmt.Errorf("%d bytes starting %q, want %d starting %q", len(got), got[:min(1, len(got))], want.size, want.fill)
			}
		}
		if err != nil {
			bad++
			if bad <= 5 {
				t.Errorf("bucket %s, object %s: %v", bucket, key, err)
			}
		}
	}
	t.Logf("bucket %s: read back %d objects written under load, %d wrong or missing", bucket, len(objects), bad)
	return bad
}
