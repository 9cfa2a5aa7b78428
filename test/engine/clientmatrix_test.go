package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestClientMatrix drives a TLS `strata server` (4 drives) and a TLS
// `strata gateway` with the S3 clients people use, each with its default
// settings (signed requests, default checksums, Expect: 100-continue where
// the client sends it, keep-alive), the certificate verified through a CA
// bundle, and retries off so that no failed request is hidden:
//
//   - the aws CLI: mb, cp of 100 MiB up and down, sync of a tree up and
//     down, ls --recursive, presign (its default SigV2 query string, and
//     SigV4 through signature_version = s3v4) + plain GET, rm --recursive,
//     rb;
//   - boto3 (testdata/clients/boto3_matrix.py): 4 threads x 300 PUT+GET on
//     keep-alive connections, upload_file/download_file of 20 MiB, a
//     paginated listing, copy_object, head_object, a form upload (POST
//     object) with generate_presigned_post's fields, delete_objects;
//   - s3cmd: mb, put (small and 20 MiB multipart), get, ls, sync, del, rb;
//   - aws-sdk-go-v2: thousands of mixed requests from 4 goroutines and a
//     multipart upload;
//   - minio-go: small and unknown-size (multipart) PutObject, ranged GET,
//     list, stat, RemoveObjects, RemoveBucket;
//   - the AWS SDK for JavaScript v3 (testdata/clients/aws_sdk_js_matrix.js):
//     PutObject, a 20 MiB lib-storage Upload, GetObject, HeadObject,
//     CopyObject, GetObjectAttributes, a multipart upload with ListParts, a
//     paginated listing, DeleteObjects, DeleteBucket.
//
// Every scenario checks what it reads back against what it wrote, that no
// request failed, and that the process answered no request with an error
// status other than 404 (its strata_s3_requests_total, read after every
// command of the command-line clients, so an error a client hid is
// reported with the command that caused it).
//
// The Python clients come from `make pyclients`: STRATA_PYCLIENTS is the
// bin directory of that venv. Without it the test is skipped, except under
// CI (STRATA_CI), where it fails. The JavaScript SDK comes from `make
// jsclients` (STRATA_JSCLIENTS, run by the node in PATH); without it its
// subtests are skipped, except under CI.
func TestClientMatrix(t *testing.T) {
	venv := pyClients(t)
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			tg := startTLSTarget(t, kind)
			t.Run("awscli", func(t *testing.T) { matrixAWSCLI(t, tg, venv) })
			t.Run("boto3", func(t *testing.T) { matrixBoto3(t, tg, venv) })
			t.Run("s3cmd", func(t *testing.T) { matrixS3cmd(t, tg, venv) })
			t.Run("aws-sdk-go-v2", func(t *testing.T) { matrixSDK(t, tg) })
			t.Run("minio-go", func(t *testing.T) { matrixMinio(t, tg) })
			t.Run("aws-sdk-js-v3", func(t *testing.T) { matrixJS(t, tg) })
		})
	}
}

// pyClients returns the bin directory of the Python clients' venv.
func pyClients(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STRATA_PYCLIENTS")
	problem := ""
	if dir == "" {
		problem = "STRATA_PYCLIENTS is not set"
	} else {
		for _, exe := range []string{"python", "aws", "s3cmd"} {
			if fi, err := os.Stat(filepath.Join(dir, exe)); err != nil || fi.Mode()&0o111 == 0 {
				problem = fmt.Sprintf("STRATA_PYCLIENTS=%s has no executable %s", dir, exe)
				break
			}
		}
	}
	if problem != "" {
		skipOutsideCI(t, problem+": run `make pyclients` and set STRATA_PYCLIENTS=$PWD/bin/venv-clients/bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// tlsTarget is a strata process serving HTTPS with a certificate for
// 127.0.0.1 that caFile (a PEM bundle) and pool trust.
type tlsTarget struct {
	kind   string
	s      *server
	caFile string
	pool   *x509.CertPool
}

func (tg *tlsTarget) endpoint() string { return "https://" + tg.s.addr }

func (tg *tlsTarget) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tg.pool}}}
}

// startTLSTarget starts `strata server` on 4 fresh drives or `strata
// gateway` on a fresh root, both with --certs-dir, and waits until
// /strata/health/ready answers 200 over verified TLS.
func startTLSTarget(t *testing.T, kind string) *tlsTarget {
	t.Helper()
	return startTLSTargetWith(t, kind, nil)
}

// startTLSTargetWith is startTLSTarget with env added to the process's
// environment and extra flags.
func startTLSTargetWith(t *testing.T, kind string, env []string, extra ...string) *tlsTarget {
	t.Helper()
	certs := t.TempDir()
	cert := writeCert(t, certs, 1)
	pem, err := os.ReadFile(filepath.Join(certs, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	tg := &tlsTarget{kind: kind, caFile: filepath.Join(t.TempDir(), "ca.pem"), pool: x509.NewCertPool()}
	if err := os.WriteFile(tg.caFile, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	tg.pool.AddCert(cert)
	s := &server{t: t, addr: freeAddr(t), env: env}
	switch kind {
	case "server":
		root := t.TempDir()
		for i := 1; i <= 4; i++ {
			s.drives = append(s.drives, filepath.Join(root, fmt.Sprintf("d%d", i)))
		}
		s.args = append(append([]string{"server", "--address", s.addr, "--certs-dir", certs,
			"--drive-monitor-interval", "500ms", "--shutdown-delay", "0s"}, extra...), s.drives...)
	case "gateway":
		s.args = append([]string{"gateway", "--address", s.addr, "--root", t.TempDir(), "--certs-dir", certs, "--shutdown-delay", "0s"}, extra...)
	default:
		t.Fatalf("unknown target %q", kind)
	}
	tg.s = s
	s.startProcess()
	running.Store(t, s)
	t.Cleanup(func() {
		s.kill()
		if strings.Contains(s.logs(), "WARNING: DATA RACE") {
			t.Error("data race in strata " + kind + " (see its log)")
		}
		if t.Failed() {
			l := s.logs()
			t.Logf("strata %s %s log (last 8 KiB):\n%s", kind, s.addr, l[max(0, len(l)-8<<10):])
		}
	})
	hc := tg.httpClient()
	hc.Timeout = 5 * time.Second
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("strata %s exited during start-up:\n%s", kind, s.logs())
		default:
		}
		resp, err := hc.Get(tg.endpoint() + "/strata/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return tg
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata %s: %s/strata/health/ready not 200 after 30s (last error: %v):\n%s", kind, tg.endpoint(), err, s.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requestMetric is a line of strata_s3_requests_total.
var requestMetric = regexp.MustCompile(`^strata_s3_requests_total\{api="([^"]*)",status="(\d+)"\} (\S+)$`)

// metricsPage returns the process's /strata/metrics page.
func (tg *tlsTarget) metricsPage(t *testing.T) string {
	t.Helper()
	resp, err := tg.httpClient().Get(tg.endpoint() + "/strata/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return string(b)
}

// served returns the process's count of S3 requests by "API status".
func (tg *tlsTarget) served(t *testing.T) map[string]float64 {
	t.Helper()
	counts := map[string]float64{}
	for line := range strings.Lines(tg.metricsPage(t)) {
		if m := requestMetric.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			counts[m[1]+" "+m[2]] = v
		}
	}
	return counts
}

// acceptedMetric is the S3 port's count of connections accepted.
var acceptedMetric = regexp.MustCompile(`(?m)^strata_s3_connection_events_total\{event="accepted"\} (\S+)$`)

// accepted returns how many connections the S3 port has accepted (the
// metrics request itself among them).
func (tg *tlsTarget) accepted(t *testing.T) float64 {
	t.Helper()
	m := acceptedMetric.FindStringSubmatch(tg.metricsPage(t))
	if m == nil {
		t.Fatal(`metrics: no strata_s3_connection_events_total{event="accepted"}`)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return v
}

// meter watches the process's request counts through a scenario.
type meter struct {
	tg    *tlsTarget
	last  map[string]float64
	total float64
}

func (tg *tlsTarget) meter(t *testing.T) *meter {
	t.Helper()
	return &meter{tg: tg, last: tg.served(t)}
}

// check compares the request counts with those of the previous check: a
// request answered with an error status (404 aside, which a client may
// expect) since then fails the test, even when the client hid it; what
// names the requests' origin in the message.
func (m *meter) check(t *testing.T, what string) {
	t.Helper()
	now := m.tg.served(t)
	var errs, notFound []string
	keys := make([]string, 0, len(now))
	for k := range now {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d := now[k] - m.last[k]
		if d <= 0 {
			continue
		}
		m.total += d
		api, status, _ := strings.Cut(k, " ")
		code, _ := strconv.Atoi(status)
		switch {
		case code == http.StatusNotFound:
			notFound = append(notFound, fmt.Sprintf("%s %d: %.0f", api, code, d))
		case code >= 400:
			errs = append(errs, fmt.Sprintf("%s %d: %.0f", api, code, d))
		}
	}
	m.last = now
	if len(notFound) > 0 {
		t.Logf("%s: strata %s answered 404 (not counted as a failure): %s", what, m.tg.kind, strings.Join(notFound, ", "))
	}
	if len(errs) > 0 {
		t.Errorf("%s: strata %s answered requests with errors (api status: count): %s", what, m.tg.kind, strings.Join(errs, ", "))
	}
}

// done checks the counts a last time and logs the scenario's total.
func (m *meter) done(t *testing.T, what string) {
	t.Helper()
	m.check(t, what)
	t.Logf("strata %s answered %.0f S3 requests in this scenario", m.tg.kind, m.total)
}

// sdkClient is an aws-sdk-go-v2 client with default options but the
// endpoint, path-style addressing, static credentials, the region, retries
// off and the SDK's own HTTP client trusting the CA. dials, when not nil,
// counts the connections it opens.
func (tg *tlsTarget) sdkClient(dials *atomic.Int64) *s3.Client {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.RootCAs = tg.pool
		if dials != nil {
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, addr)
			}
		}
	})
	return s3.New(s3.Options{
		BaseEndpoint:     aws.String(tg.endpoint()),
		UsePathStyle:     true,
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider(rootUser, rootPassword, ""),
		RetryMaxAttempts: 1,
		HTTPClient:       hc,
	})
}

// bucketGone checks, with the Go SDK, that a client's rb took effect.
func (tg *tlsTarget) bucketGone(t *testing.T, bucket string) {
	t.Helper()
	_, err := tg.sdkClient(nil).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
	if err == nil {
		t.Errorf("bucket %s still exists after it was removed", bucket)
	} else if code := errCode(err); code != "NotFound" && code != "NoSuchBucket" {
		t.Errorf("HEAD of removed bucket %s: %v", bucket, err)
	}
}

// clientEnv is the whole environment of a Python client: nothing of the
// machine's own (profiles, config files, proxies) leaks in.
func (tg *tlsTarget) clientEnv(t *testing.T, venv string) []string {
	t.Helper()
	home := t.TempDir()
	cfg := filepath.Join(home, ".aws", "config")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	site, err := filepath.Abs("testdata/clients/pysite")
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"PATH=" + venv + ":/usr/local/bin:/usr/bin:/bin",
		"PYTHONPATH=" + site, // sitecustomize.py: a CPython bug's workaround
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
		"PYTHONUTF8=1",
		"PYTHONDONTWRITEBYTECODE=1",
		"AWS_CONFIG_FILE=" + cfg,
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, ".aws", "credentials"),
		"AWS_ACCESS_KEY_ID=" + rootUser,
		"AWS_SECRET_ACCESS_KEY=" + rootPassword,
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_MAX_ATTEMPTS=1",
		"AWS_CA_BUNDLE=" + tg.caFile,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// clientTimeout bounds one client command, so that a hang is reported as
// the command that hung rather than as the test binary's timeout.
const clientTimeout = 4 * time.Minute

type clientRun struct {
	stdout, stderr string
	took           time.Duration
}

// runClient runs a client command in dir and fails the test when it exits
// non-zero, with what it printed.
func runClient(t *testing.T, env []string, dir string, name string, args ...string) clientRun {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := clientRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	line := filepath.Base(name) + " " + strings.Join(args, " ")
	if cctx.Err() != nil {
		t.Fatalf("%s: still running after %s, killed\nstdout:\n%s\nstderr:\n%s", line, clientTimeout, tail(r.stdout), tail(r.stderr))
	}
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, tail(r.stdout), tail(r.stderr))
	}
	t.Logf("%s: ok in %s", line, r.took.Round(time.Millisecond))
	return r
}

func tail(s string) string {
	const n = 6 << 10
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}

// writeRandomFile writes size random bytes to path and returns their
// SHA-256.
func writeRandomFile(t *testing.T, path string, size int) [32]byte {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, int64(size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// treeFile is a file of a test tree: its size and content hash.
type treeFile struct {
	size int
	sum  [32]byte
}

// makeTree writes a tree of 51 files (0 bytes to 9 MiB, a few names with
// spaces, '+' and non-ASCII letters, one file twice under two names) under
// dir and returns them by slash-separated relative path. The content is
// the same in every run: a client that acts on it (s3cmd copies a file it
// has already uploaded instead of uploading it again) sends the same
// requests every time.
func makeTree(t *testing.T, dir string) map[string]treeFile {
	t.Helper()
	dirs := []string{"", "a", "a/b", "a/b/c", "docs", "docs/2024/q1", "media"}
	sizes := []int{0, 1, 17, 512, 4 << 10, 64 << 10, 300 << 10, 1 << 20}
	files := map[string]treeFile{}
	add := func(rel, seed string, size int) {
		files[rel] = treeFile{size: size, sum: writeSeededFile(t, filepath.Join(dir, filepath.FromSlash(rel)), seed, size)}
	}
	for i := range 46 {
		rel := strings.TrimPrefix(fmt.Sprintf("%s/file-%02d.bin", dirs[i%len(dirs)], i), "/")
		add(rel, rel, sizes[i%len(sizes)])
	}
	add("docs/with space.txt", "with space", 1000)
	add("docs/plus+sign.txt", "plus", 2000)
	add("media/ünïcødé-ø.txt", "unicode", 3000)
	// The same bytes as docs/2024/q1/file-05.bin.
	add("media/copy-of-file-05.bin", "docs/2024/q1/file-05.bin", 64<<10)
	// Above the aws CLI's 8 MiB multipart threshold.
	add("media/big/9MiB.bin", "big", 9<<20)
	return files
}

// writeSeededFile writes size pseudo-random bytes drawn from seed to path
// and returns their SHA-256.
func writeSeededFile(t *testing.T, path, seed string, size int) [32]byte {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	_, _ = mrand.NewChaCha8(sha256.Sum256([]byte(seed))).Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// readTree returns the files under dir as makeTree does.
func readTree(t *testing.T, dir string) map[string]treeFile {
	t.Helper()
	files := map[string]treeFile{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = treeFile{size: int(fi.Size()), sum: fileSum(t, path)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameTree reports how got differs from want.
func sameTree(t *testing.T, what string, want, got map[string]treeFile) {
	t.Helper()
	var diffs []string
	for rel, w := range want {
		g, ok := got[rel]
		switch {
		case !ok:
			diffs = append(diffs, "missing "+rel)
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%s: %d bytes, content differs from the %d written", rel, g.size, w.size))
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			diffs = append(diffs, "unexpected "+rel)
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Errorf("%s: %d of %d files differ:\n  %s", what, len(diffs), len(want), strings.Join(diffs, "\n  "))
	}
}

// noErrorsPrinted fails the test when a client printed an error or a retry
// on stderr (exit status 0 notwithstanding).
func noErrorsPrinted(t *testing.T, what string, r clientRun, bad ...string) {
	t.Helper()
	for _, l := range strings.Split(r.stderr, "\n") {
		for _, b := range bad {
			if strings.Contains(strings.ToLower(l), strings.ToLower(b)) {
				t.Errorf("%s printed: %s", what, l)
				break
			}
		}
	}
}

// awsLsLine is a line of `aws s3 ls --recursive`: date, time, size, key.
var awsLsLine = regexp.MustCompile(`^\S+ \S+ +(\d+) (.+)$`)
