package s3front

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/internal/testcerts"
)

// gatedDrive is a local drive whose version reads, once the gate is armed,
// wait for the caller's context to end and report why it ended: a drive
// that hangs, seen from the request that asked it.
type gatedDrive struct {
	erasure.Drive
	armed *atomic.Bool
	ended chan error
}

func (d gatedDrive) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		select {
		case d.ended <- context.Cause(ctx):
		default:
		}
		return context.Cause(ctx)
	case <-time.After(20 * time.Second):
		return errors.New("gated drive: the request's context never ended")
	}
}

func (d gatedDrive) GetVersion(ctx context.Context, bucket, object string, v *[16]byte) (*drive.Record, error) {
	if d.armed.Load() {
		return nil, d.wait(ctx)
	}
	return d.Drive.GetVersion(ctx, bucket, object, v)
}

func (d gatedDrive) StatVersion(ctx context.Context, bucket, object string, v *[16]byte) (*drive.Record, error) {
	if d.armed.Load() {
		return nil, d.wait(ctx)
	}
	return d.Drive.StatVersion(ctx, bucket, object, v)
}

func (d gatedDrive) Versions(ctx context.Context, bucket, object string) ([]*drive.Record, error) {
	if d.armed.Load() {
		return nil, d.wait(ctx)
	}
	return d.Drive.Versions(ctx, bucket, object)
}

// frontEnd serves a 2+2 set of gated drives on loopback, over TLS when
// tlsOn, and returns a client and the gate.
func frontEnd(t *testing.T, tlsOn bool, configure ...func(*ServeConfig)) (*s3.Client, *atomic.Bool, chan error) {
	t.Helper()
	armed, ended := &atomic.Bool{}, make(chan error, 16)
	var ds []erasure.Drive
	for i := range 4 {
		d, err := drive.OpenLocal(filepath.Join(t.TempDir(), fmt.Sprintf("d%d", i)), drive.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		ds = append(ds, gatedDrive{d, armed, ended})
	}
	set, err := erasure.NewSet(ds, 2)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := erasure.NewPool(uuid.New(), []*erasure.Set{set})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := ServeConfig{Address: addr, RootAccess: "root", RootSecret: "rootsecret"}
	scheme := "http"
	if tlsOn {
		cfg.CertsDir, scheme = t.TempDir(), "https"
		testcerts.Write(t, cfg.CertsDir)
	}
	for _, f := range configure {
		f(&cfg)
	}
	listening := make(chan struct{})
	cfg.OnListen = func() { close(listening) }
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Log = log
	go func() {
		served <- Serve(ctx, New(erasure.Layer{Pools: erasure.NewPools(erasure.NewPoolEntry("pool-0", pool, erasure.StateActive))}, Options{RootAccess: "root", Log: log}), cfg)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-listening:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the front end did not listen")
	}
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(scheme + "://" + addr), Region: "us-east-1", UsePathStyle: true,
		Credentials:      credentials.NewStaticCredentialsProvider("root", "rootsecret", ""),
		RetryMaxAttempts: 1,
		HTTPClient: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test certificate
		}},
	})
	return client, armed, ended
}

// TestClientGoneStopsItsWork: a client that gives up on a request (closes
// its connection) while the engine waits on a drive ends the request's
// context, with that reason, over HTTP and HTTPS; the server then serves
// the next requests as before.
func TestClientGoneStopsItsWork(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tlsOn], func(t *testing.T) {
			c, armed, ended := frontEnd(t, tlsOn)
			ctx := t.Context()
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bucket")}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k"), Body: strings.NewReader("data")}); err != nil {
				t.Fatal(err)
			}

			armed.Store(true)
			gaveUp, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			_, err := c.HeadObject(gaveUp, &s3.HeadObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")})
			cancel()
			if err == nil {
				t.Fatal("HEAD answered while every drive hung")
			}
			select {
			case cause := <-ended:
				if !errors.Is(cause, errClientGone) {
					t.Fatalf("the drive's wait ended with %v, want %v", cause, errClientGone)
				}
				t.Logf("work stopped %v after the request began (client gave up at 300ms)", time.Since(start).Round(time.Millisecond))
			case <-time.After(5 * time.Second):
				t.Fatal("the engine kept waiting on the drives 5 s after the client went away")
			}

			armed.Store(false)
			for len(ended) > 0 {
				t.Logf("another drive's wait ended: %v", <-ended)
			}
			out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")})
			if err != nil || aws.ToInt64(out.ContentLength) != 4 {
				t.Fatalf("HEAD after: %v %v", out, err)
			}
		})
	}
}

// TestRequestContextEndsWithTheAnswer: a request's context ends once its
// answer is sent, and a GET's only when its body is closed.
func TestRequestContextEndsWithTheAnswer(t *testing.T) {
	r := newRequest(nil, nil)
	release := hold(r)
	if r.Err() != nil {
		t.Fatal("a held request ended before its body closed")
	}
	release()
	if !errors.Is(context.Cause(r), errRequestOver) {
		t.Fatalf("cause %v, want %v", context.Cause(r), errRequestOver)
	}
	if ctx := context.Background(); operation(ctx) != ctx {
		t.Fatal("a context from outside the front end was replaced")
	}
	hold(context.Background())() // no request: a no-op
}

// TestRequestsInFlightPerClient: a client address with its quota of
// requests in flight is answered SlowDown until one ends; the slots come
// back when requests end.
func TestRequestsInFlightPerClient(t *testing.T) {
	c, armed, ended := frontEnd(t, false, func(cfg *ServeConfig) { cfg.MaxRequestsPerClient = 2 })
	ctx := t.Context()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bucket")}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	hung, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 { // two requests that hang on the drives
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.HeadObject(hung, &s3.HeadObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")})
		}()
	}
	time.Sleep(300 * time.Millisecond)
	_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bucket")})
	if errStatus := httpStatus(err); errStatus != http.StatusServiceUnavailable {
		t.Fatalf("a third request in flight: %v, want 503 SlowDown", err)
	}
	cancel()
	wg.Wait()
	armed.Store(false)
	for len(ended) > 0 {
		t.Logf("drained: %v", <-ended)
	}
	waitUntil := time.Now().Add(5 * time.Second)
	for {
		_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bucket")})
		if err == nil {
			break
		}
		if time.Now().After(waitUntil) {
			t.Fatalf("the client's slots did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpStatus is the HTTP status of an SDK error (0 when none).
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
