package s3api_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3api"
	"github.com/strata-storage/strata/engine/s3http"
)

// BenchmarkHeadObject is the server's side of a HEAD of a 4 KiB object,
// as `bin/bench` sends it (signed, payload unsigned), on a set of four
// local drives (EC 2+2, the engine suite's layout), without the network:
// each iteration parses the request from its bytes (as net/http's server
// does), then the front end authorises it, reads the record from a read
// quorum of drives and writes the answer's headers. The part of a HEAD's
// server CPU that is Strata's own (issue 36: Garage answers one with 35
// µs in all); cpu-ns/op is the process's CPU time per HEAD, and
// `-cpuprofile` shows where it goes.
func BenchmarkHeadObject(b *testing.B) {
	var drives []erasure.Drive
	for i := range 4 {
		d, err := drive.OpenLocal(filepath.Join(b.TempDir(), fmt.Sprintf("d%d", i)), drive.Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		drives = append(drives, d)
	}
	set, err := erasure.NewSet(drives, 2)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := erasure.NewPool(uuid.New(), []*erasure.Set{set})
	if err != nil {
		b.Fatal(err)
	}
	layer := erasure.Layer{Pools: erasure.NewPools(erasure.NewPoolEntry("pool-0", pool, erasure.StateActive))}
	ctx := context.Background()
	if err := layer.MakeBucket(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 4096)
	if _, err := layer.PutObject(ctx, "bench", "prefix/p00/00000000", bytes.NewReader(body), int64(len(body)), objlayer.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	srv := s3api.New(layer, s3api.Config{RootAccess: "benchadmin", RootSecret: "benchadmin-secret"})

	req, err := http.NewRequest(http.MethodHead, "http://127.0.0.1:19601/bench/prefix/p00/00000000", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("User-Agent", "strata-bench")
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(ctx,
		aws.Credentials{AccessKeyID: "benchadmin", SecretAccessKey: "benchadmin-secret"}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		b.Fatal(err)
	}
	raw, err := httputil.DumpRequest(req, false)
	if err != nil {
		b.Fatal(err)
	}
	in := bytes.NewReader(raw)
	br := bufio.NewReader(in)
	w := &discardWriter{h: http.Header{}}
	serve := func() {
		in.Reset(raw)
		br.Reset(in)
		hr, err := http.ReadRequest(br)
		if err != nil {
			b.Fatal(err)
		}
		clear(w.h)
		w.status = 0
		srv.ServeS3(w, &s3http.Request{Request: hr, ID: "0123456789ABCDEF", Received: time.Now()})
		if w.status != http.StatusOK || w.h.Get("Content-Length") != "4096" {
			b.Fatalf("HEAD answered %d, headers %v", w.status, w.h)
		}
	}
	serve()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		serve()
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process used so far (user and system, every
// thread: a HEAD's drive reads run on goroutines of their own).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardWriter is a ResponseWriter that keeps the status and headers.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
