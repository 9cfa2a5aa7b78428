// Package engine holds the integration tests of the strata binary: real
// `strata server` and `strata gateway` processes on 127.0.0.1, driven by
// real S3 clients (aws-sdk-go-v2 and minio-go), with drives wiped,
// corrupted and killed under them, and gateways sharing one directory.
package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/strata-storage/strata/engine/adminapi"
)

const (
	rootUser     = "strata-root"
	rootPassword = "strata-root-secret"
)

// strataBin is the binary under test: $STRATA_BIN, or built once here.
var strataBin string

// Most tests call t.Parallel first: they run two at a time (GOMAXPROCS)
// after the serial ones, as they mostly wait on processes starting,
// stopping and settling. A test stays serial, and so runs alone, when it
// asserts latency, throughput or memory (the floods, the slow drive, the
// memory-limited server, the abuse suite), changes something machine-wide
// (a sysctl, a cgroup, network namespaces, epmd), runs a JVM with a start
// deadline (Kafka, Keycloak), or is the heaviest load (the client matrix,
// the crash test). Every process a test starts listens on an address of
// its own (freeAddr).
func TestMain(m *testing.M) {
	code, err := runTests(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runTests(m *testing.M) (int, error) {
	strataBin = os.Getenv("STRATA_BIN")
	if strataBin == "" {
		dir, err := os.MkdirTemp("", "strata-bin")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		strataBin = filepath.Join(dir, "strata")
		build := exec.Command("go", "build", "-o", strataBin, "github.com/strata-storage/strata/cmd/strata")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return 0, fmt.Errorf("building strata: %w", err)
		}
	}
	return m.Run(), nil
}

// server is one strata process (`strata server` or `strata gateway`).
type server struct {
	t testing.TB
	// netns, when set, is the network namespace the process runs in.
	netns  string
	addr   string
	drives []string
	args   []string
	env    []string
	bin    string // the strata binary; strataBin when empty
	// cgroupProcs, when set, is a cgroup's cgroup.procs file: the process
	// starts in that cgroup (a shell writes its pid there, then execs).
	cgroupProcs string
	cmd         *exec.Cmd
	log         *bytes.Buffer
	logMu       *sync.Mutex
	done        chan struct{}
}

type serverOpts struct {
	drives int
	// cgroupProcs: see server.cgroupProcs.
	cgroupProcs string
	// at, when set, puts drive i (from 1) at at[i] instead of in a fresh
	// directory.
	at    map[int]string
	extra []string // extra flags
	env   []string
}

// freeAddr returns a 127.0.0.1 address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer starts a server on fresh drive directories and waits until
// it is ready.
func startServer(t testing.TB, o serverOpts) *server {
	t.Helper()
	root := t.TempDir()
	s := &server{t: t, addr: freeAddr(t), env: o.env, cgroupProcs: o.cgroupProcs}
	for i := 1; i <= o.drives; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%d", i))
		if at, ok := o.at[i]; ok {
			d = at
		}
		s.drives = append(s.drives, d)
	}
	s.args = append([]string{"server", "--address", s.addr, "--drive-monitor-interval", "500ms", "--shutdown-delay", "0s", "--admin-over-http"}, o.extra...)
	s.args = append(s.args, s.drives...)
	s.start()
	running.Store(t, s)
	t.Cleanup(func() {
		s.kill()
		if strings.Contains(s.logs(), "WARNING: DATA RACE") {
			t.Error("data race in the server (see its log)")
		}
		if t.Failed() {
			l := s.logs()
			t.Logf("server log (last 8 KiB):\n%s", l[max(0, len(l)-8<<10):])
		}
	})
	return s
}

// startGateway starts a `strata gateway` serving root with extra flags and
// waits until it is ready. Several gateways may serve one root.
func startGateway(t testing.TB, root string, extra ...string) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t)}
	s.args = append([]string{"gateway", "--address", s.addr, "--root", root, "--shutdown-delay", "0s", "--admin-over-http"}, extra...)
	s.start()
	running.Store(t, s)
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			l := s.logs()
			t.Logf("gateway %s log (last 8 KiB):\n%s", s.addr, l[max(0, len(l)-8<<10):])
		}
	})
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.startProcess()
	s.waitFor("/strata/health/ready")
}

// start0 starts the process and waits only until it answers HTTP (it may
// not be ready: drives missing).
func (s *server) start0() {
	s.t.Helper()
	s.startProcess()
	s.waitFor("/strata/health/live")
}

func (s *server) waitReady() { s.t.Helper(); s.waitFor("/strata/health/ready") }

func (s *server) startProcess() {
	s.t.Helper()
	bin := s.bin
	if bin == "" {
		bin = strataBin
	}
	switch {
	case s.netns != "":
		// ip netns exec execs the binary: the process is strata itself.
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", s.netns, bin}, s.args...)...)
	case s.cgroupProcs != "":
		s.cmd = exec.Command("sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, s.cgroupProcs, bin}, s.args...)...)
	default:
		s.cmd = exec.Command(bin, s.args...)
	}
	s.cmd.Env = append(os.Environ(), "STRATA_ROOT_USER="+rootUser, "STRATA_ROOT_PASSWORD="+rootPassword)
	s.cmd.Env = append(s.cmd.Env, s.env...)
	// A test binary killed by its timeout runs no cleanups: the kernel then
	// stops its servers.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.log, s.logMu = &bytes.Buffer{}, &sync.Mutex{}
	w := &lockedWriter{w: s.log, mu: s.logMu}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logs returns what the server printed.
func (s *server) logs() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

func (s *server) waitFor(path string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.t.Fatalf("strata %s exited during start-up:\n%s", s.args[0], s.logs())
		default:
		}
		resp, err := http.Get("http://" + s.addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("strata %s: %s not 200 after 30s:\n%s", s.args[0], path, s.logs())
}

// kill stops the process with SIGKILL (as a crash would).
func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// stop stops the process gracefully.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("strata %s did not stop on SIGTERM:\n%s", s.args[0], s.logs())
	}
}

// restart starts the process again on the same drives and address.
func (s *server) restart() { s.start() }

func (s *server) url() string { return "http://" + s.addr }

// s3Client returns an aws-sdk-go-v2 client for the server.
func (s *server) s3Client(access, secret string) *s3.Client {
	return s.sessionClient(access, secret, "")
}

// sessionClient is s3Client with an STS session's token.
func (s *server) sessionClient(access, secret, token string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.url()),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, token),
		UsePathStyle: true,
		// Retries would hide the errors the tests look for.
		RetryMaxAttempts: 1,
	})
}

func (s *server) aws() *s3.Client { return s.s3Client(rootUser, rootPassword) }

// minio returns a minio-go client for the server.
func (s *server) minio() *minio.Client {
	s.t.Helper()
	c, err := minio.New(s.addr, &minio.Options{Creds: miniocreds.NewStaticV4(rootUser, rootPassword, ""), Secure: false, Region: "us-east-1"})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// adminGet fetches an admin API path with the root credentials.
func (s *server) adminGet(path string) (int, []byte) {
	s.t.Helper()
	return s.admin(http.MethodGet, path)
}

// admin calls an admin API path with the root credentials.
func (s *server) admin(method, path string) (int, []byte) {
	s.t.Helper()
	send := func(basic bool) *http.Response {
		req, _ := http.NewRequest(method, s.url()+"/strata/admin/v1/"+path, nil)
		if basic {
			req.SetBasicAuth(rootUser, rootPassword)
		} else if err := adminapi.Sign(req, rootUser, rootPassword, time.Now()); err != nil {
			s.t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.t.Fatal(err)
		}
		return resp
	}
	resp := send(false)
	if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		resp.Body.Close()
		resp = send(true) // the previous build
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

var ctx = context.Background()

// errCode is the S3 error code of err ("" when none).
func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// errStatus is the HTTP status of an S3 error answer (0 when none).
func errStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func mustCreateBucket(t testing.TB, c *s3.Client, name string) {
	t.Helper()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// uploadParts writes key as a multipart upload of parts, in order, and
// completes it.
func uploadParts(c *s3.Client, bucket, key string, parts [][]byte, with ...func(*s3.CreateMultipartUploadInput)) error {
	in := &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	for _, f := range with {
		f(in)
	}
	up, err := c.CreateMultipartUpload(ctx, in)
	if err != nil {
		return err
	}
	var done []types.CompletedPart
	for i, p := range parts {
		n := aws.Int32(int32(i + 1))
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: n, Body: bytes.NewReader(p)})
		if err != nil {
			return err
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: n})
	}
	_, err = c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	return err
}

func put(t testing.TB, c *s3.Client, bucket, key string, data []byte) *s3.PutObjectOutput {
	t.Helper()
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return out
}

func get(t testing.TB, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("get %s/%s body: %v\n%s", bucket, key, err, serverLogs(t))
	}
	return b
}

// waitFor polls cond until it holds or the deadline passes (an eventual
// outcome, not a timing assertion).
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// running maps tests to their servers, so helpers can print server logs.
var running sync.Map

func serverLogs(t testing.TB) string {
	if s, ok := running.Load(t); ok {
		return s.(*server).logs()
	}
	return ""
}

// skipOutsideCI skips a test whose prerequisite is missing on a
// developer's machine (why says which); under .ci/run (STRATA_CI set),
// which installs every prerequisite, the test must run, so it fails.
func skipOutsideCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("STRATA_CI") != "" {
		t.Fatal(why + " (STRATA_CI is set: CI must run this test)")
	}
	t.Skip(why)
}
