package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
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
//     paginated listing, copy_object, head_object, delete_objects;
//   - s3cmd: mb, put (small and 20 MiB multipart), get, ls, sync, del, rb;
//   - aws-sdk-go-v2: thousands of mixed requests from 4 goroutines and a
//     multipart upload;
//   - minio-go: small and unknown-size (multipart) PutObject, ranged GET,
//     list, stat, RemoveObjects, RemoveBucket.
//
// Every scenario checks what it reads back against what it wrote, that no
// request failed, and that the process answered no request with an error
// status other than 404 (its strata_s3_requests_total, read after every
// command of the command-line clients, so an error a client hid is
// reported with the command that caused it).
//
// The Python clients come from `make pyclients`: STRATA_PYCLIENTS is the
// bin directory of that venv. Without it the test is skipped, except under
// CI (STRATA_CI), where it fails.
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
		msg := problem + ": run `make pyclients` and set STRATA_PYCLIENTS=$PWD/bin/venv-clients/bin"
		if os.Getenv("STRATA_CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
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
	s := &server{t: t, addr: freeAddr(t)}
	switch kind {
	case "server":
		root := t.TempDir()
		for i := 1; i <= 4; i++ {
			s.drives = append(s.drives, filepath.Join(root, fmt.Sprintf("d%d", i)))
		}
		s.args = append([]string{"server", "--address", s.addr, "--certs-dir", certs,
			"--drive-monitor-interval", "500ms", "--shutdown-delay", "0s"}, s.drives...)
	case "gateway":
		s.args = []string{"gateway", "--address", s.addr, "--root", t.TempDir(), "--certs-dir", certs, "--shutdown-delay", "0s"}
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

// served returns the process's count of S3 requests by "API status".
func (tg *tlsTarget) served(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := tg.httpClient().Get(tg.endpoint() + "/strata/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	counts := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := requestMetric.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			counts[m[1]+" "+m[2]] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return counts
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
	return []string{
		"PATH=" + venv + ":/usr/local/bin:/usr/bin:/bin",
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

func matrixAWSCLI(t *testing.T, tg *tlsTarget, venv string) {
	env := tg.clientEnv(t, venv)
	work := t.TempDir()
	m := tg.meter(t)
	awsCLIEnv := func(env []string, args ...string) clientRun {
		t.Helper()
		r := runClient(t, env, work, filepath.Join(venv, "aws"), append(args, "--endpoint-url", tg.endpoint())...)
		// The CLI reports a failed transfer on stderr ("upload failed: ...").
		if s := strings.TrimSpace(r.stderr); s != "" {
			t.Errorf("aws %s printed on stderr:\n%s", strings.Join(args, " "), tail(s))
		}
		m.check(t, "aws "+strings.Join(args, " "))
		return r
	}
	awsCLI := func(args ...string) clientRun { t.Helper(); return awsCLIEnv(env, args...) }
	sdk := tg.sdkClient(nil)
	const bucket = "awscli"
	awsCLI("s3", "mb", "s3://"+bucket)

	// 100 MiB: multipart up (13 parts of 8 MiB), ranged parallel GETs down.
	big := filepath.Join(work, "big.bin")
	bigSum := writeRandomFile(t, big, 100<<20)
	awsCLI("s3", "cp", "--no-progress", big, "s3://"+bucket+"/big/100MiB.bin")
	if h, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("big/100MiB.bin")}); err != nil {
		t.Errorf("HEAD of the object aws s3 cp uploaded: %v", err)
	} else if etag := strings.Trim(aws.ToString(h.ETag), `"`); aws.ToInt64(h.ContentLength) != 100<<20 || !strings.HasSuffix(etag, "-13") {
		t.Errorf("aws s3 cp of 100 MiB: stored %d bytes, ETag %s; want 104857600 bytes in 13 parts", aws.ToInt64(h.ContentLength), etag)
	}
	m.check(t, "HEAD of the 100 MiB object")
	awsCLI("s3", "cp", "--no-progress", "s3://"+bucket+"/big/100MiB.bin", filepath.Join(work, "big.back"))
	if fileSum(t, filepath.Join(work, "big.back")) != bigSum {
		t.Error("aws s3 cp: the 100 MiB object read back differs from the file uploaded")
	}

	tree := filepath.Join(work, "tree")
	files := makeTree(t, tree)
	up := awsCLI("s3", "sync", "--no-progress", tree, "s3://"+bucket+"/tree")
	if n := strings.Count(up.stdout, "upload: "); n != len(files) {
		t.Errorf("aws s3 sync up: %d uploads reported, want %d:\n%s", n, len(files), tail(up.stdout))
	}
	down := filepath.Join(work, "tree.down")
	awsCLI("s3", "sync", "--no-progress", "s3://"+bucket+"/tree", down)
	sameTree(t, "aws s3 sync down", files, readTree(t, down))

	ls := awsCLI("s3", "ls", "--recursive", "s3://"+bucket)
	listed := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(ls.stdout), "\n") {
		f := awsLsLine.FindStringSubmatch(l)
		if f == nil {
			t.Errorf("aws s3 ls: unexpected line %q", l)
			continue
		}
		n, _ := strconv.Atoi(f[1])
		listed[f[2]] = n
	}
	want := map[string]int{"big/100MiB.bin": 100 << 20}
	for rel, f := range files {
		want["tree/"+rel] = f.size
	}
	if len(listed) != len(want) {
		t.Errorf("aws s3 ls --recursive: %d keys, want %d", len(listed), len(want))
	}
	for k, n := range want {
		if got, ok := listed[k]; !ok || got != n {
			t.Errorf("aws s3 ls --recursive: %q listed=%v size %d, want %d", k, ok, got, n)
		}
	}

	// Presigned URLs fetched by a plain HTTPS client: as the CLI makes them
	// by default (Signature Version 2 query parameters, "for backwards
	// compatibility"), then as its help advises for SigV4 (a profile with
	// signature_version = s3v4).
	v4 := slices.Clone(env)
	v4cfg := filepath.Join(work, "aws-config-s3v4")
	if err := os.WriteFile(v4cfg, []byte("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n    signature_version = s3v4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, kv := range v4 {
		if strings.HasPrefix(kv, "AWS_CONFIG_FILE=") {
			v4[i] = "AWS_CONFIG_FILE=" + v4cfg
		}
	}
	for _, signing := range []struct {
		name string
		env  []string
		keys []string
	}{
		{"default signing", env, []string{"a/b/file-02.bin", "docs/plus+sign.txt"}},
		{"signature_version = s3v4", v4, []string{"a/b/file-02.bin", "docs/with space.txt", "docs/plus+sign.txt", "media/ünïcødé-ø.txt"}},
	} {
		for _, rel := range signing.keys {
			r := awsCLIEnv(signing.env, "s3", "presign", "s3://"+bucket+"/tree/"+rel, "--expires-in", "600")
			url := strings.TrimSpace(r.stdout)
			resp, err := tg.httpClient().Get(url)
			if err != nil {
				t.Errorf("GET of the presigned URL (%s) of %s: %v", signing.name, rel, err)
				continue
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || sha256.Sum256(body) != files[rel].sum {
				t.Errorf("GET of the presigned URL (%s) of %s: %d, %d bytes (want %d), err %v\n  URL: %s\n  body: %.300s",
					signing.name, rel, resp.StatusCode, len(body), files[rel].size, err, url, body)
			}
			m.check(t, "GET of the presigned URL ("+signing.name+") of "+rel)
		}
	}

	rm := awsCLI("s3", "rm", "--recursive", "s3://"+bucket)
	if n := strings.Count(rm.stdout, "delete: "); n != len(want) {
		t.Errorf("aws s3 rm --recursive: %d deletes reported, want %d", n, len(want))
	}
	awsCLI("s3", "rb", "s3://"+bucket)
	m.done(t, "aws CLI")
	tg.bucketGone(t, bucket)
}

// boto3Summary is what boto3_matrix.py prints.
type boto3Summary struct {
	Requests int            `json:"requests"`
	Ops      map[string]int `json:"ops"`
	Failures []struct {
		What  string `json:"what"`
		Error string `json:"error"`
	} `json:"failures"`
	HTTPErrors []map[string]any `json:"http_errors"`
}

func matrixBoto3(t *testing.T, tg *tlsTarget, venv string) {
	script, err := filepath.Abs("testdata/clients/boto3_matrix.py")
	if err != nil {
		t.Fatal(err)
	}
	env := tg.clientEnv(t, venv)
	work := t.TempDir()
	m := tg.meter(t)
	const threads, iterations = 4, 300
	r := runClient(t, env, work, filepath.Join(venv, "python"), script, "--endpoint", tg.endpoint(),
		"--bucket", "boto3", "--workdir", work, "--threads", strconv.Itoa(threads), "--iterations", strconv.Itoa(iterations))
	if s := strings.TrimSpace(r.stderr); s != "" {
		t.Logf("boto3 stderr:\n%s", tail(s))
	}
	var sum boto3Summary
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &sum); err != nil {
		t.Fatalf("boto3 summary: %v\n%s", err, tail(r.stdout))
	}
	t.Logf("boto3: %d HTTP requests; operations %v", sum.Requests, sum.Ops)
	if len(sum.Failures) > 0 {
		var b strings.Builder
		for i, f := range sum.Failures {
			if i == 40 {
				fmt.Fprintf(&b, "  ... and %d more\n", len(sum.Failures)-i)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", f.What, f.Error)
		}
		t.Errorf("boto3: %d failures in %d requests:\n%s", len(sum.Failures), sum.Requests, b.String())
	}
	if len(sum.HTTPErrors) > 0 {
		j, _ := json.Marshal(sum.HTTPErrors[:min(len(sum.HTTPErrors), 40)])
		t.Errorf("boto3: %d requests answered with an error or not answered: %s", len(sum.HTTPErrors), j)
	}
	if want := threads * iterations * 2; sum.Ops["PutObject"]+sum.Ops["GetObject"] != want {
		t.Errorf("boto3: %d PUT+GET of the load succeeded, want %d", sum.Ops["PutObject"]+sum.Ops["GetObject"], want)
	}
	m.done(t, "boto3")
	tg.bucketGone(t, "boto3")
}

func matrixS3cmd(t *testing.T, tg *tlsTarget, venv string) {
	env := tg.clientEnv(t, venv)
	work := t.TempDir()
	cfg := filepath.Join(work, "s3cfg")
	// host_bucket without %(bucket)s: path-style. max_retries = 0: no retry.
	conf := fmt.Sprintf(`[default]
access_key = %s
secret_key = %s
host_base = %s
host_bucket = %s
use_https = True
check_ssl_certificate = True
check_ssl_hostname = True
signature_v2 = False
bucket_location = us-east-1
max_retries = 0
`, rootUser, rootPassword, tg.s.addr, tg.s.addr)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m := tg.meter(t)
	s3cmd := func(args ...string) clientRun {
		t.Helper()
		r := runClient(t, env, work, filepath.Join(venv, "s3cmd"), append([]string{"-c", cfg, "--ca-certs=" + tg.caFile}, args...)...)
		if s := strings.TrimSpace(r.stderr); s != "" {
			t.Logf("s3cmd %s stderr:\n%s", args[0], tail(s))
		}
		noErrorsPrinted(t, "s3cmd "+args[0], r, "ERROR", "Retrying", "Waiting")
		m.check(t, "s3cmd "+strings.Join(args, " "))
		return r
	}
	sdk := tg.sdkClient(nil)
	const bucket = "s3://s3cmd"
	s3cmd("mb", bucket)

	small := filepath.Join(work, "small.txt")
	smallSum := writeRandomFile(t, small, 10<<10)
	s3cmd("put", small, bucket+"/small.txt")
	big := filepath.Join(work, "big.bin")
	bigSum := writeRandomFile(t, big, 20<<20)
	s3cmd("put", big, bucket+"/big/20MiB.bin")
	if h, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("s3cmd"), Key: aws.String("big/20MiB.bin")}); err != nil {
		t.Errorf("HEAD of the object s3cmd put: %v", err)
	} else if etag := strings.Trim(aws.ToString(h.ETag), `"`); aws.ToInt64(h.ContentLength) != 20<<20 || !strings.HasSuffix(etag, "-2") {
		t.Errorf("s3cmd put of 20 MiB: stored %d bytes, ETag %s; want 20971520 bytes in 2 parts (15 MiB chunks)", aws.ToInt64(h.ContentLength), etag)
	}
	m.check(t, "HEAD of the 20 MiB object")
	s3cmd("get", bucket+"/small.txt", filepath.Join(work, "small.back"))
	s3cmd("get", bucket+"/big/20MiB.bin", filepath.Join(work, "big.back"))
	if fileSum(t, filepath.Join(work, "small.back")) != smallSum {
		t.Error("s3cmd get: small.txt differs from what was put")
	}
	if fileSum(t, filepath.Join(work, "big.back")) != bigSum {
		t.Error("s3cmd get: the 20 MiB object differs from what was put")
	}
	ls := s3cmd("ls", bucket)
	if !strings.Contains(ls.stdout, bucket+"/small.txt") || !strings.Contains(ls.stdout, bucket+"/big/") {
		t.Errorf("s3cmd ls %s: want small.txt and the big/ prefix:\n%s", bucket, ls.stdout)
	}

	tree := filepath.Join(work, "tree")
	files := makeTree(t, tree)
	s3cmd("sync", tree+"/", bucket+"/tree/")
	down := filepath.Join(work, "tree.down")
	if err := os.Mkdir(down, 0o755); err != nil {
		t.Fatal(err)
	}
	s3cmd("sync", bucket+"/tree/", down+"/")
	sameTree(t, "s3cmd sync down", files, readTree(t, down))
	lsr := s3cmd("ls", "--recursive", bucket)
	want := []string{bucket + "/small.txt", bucket + "/big/20MiB.bin"}
	for rel := range files {
		want = append(want, bucket+"/tree/"+rel)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(lsr.stdout), "\n") {
		if i := strings.Index(l, bucket+"/"); i >= 0 {
			got = append(got, l[i:])
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("s3cmd ls --recursive: listed %d objects, want %d:\n%s", len(got), len(want), tail(lsr.stdout))
	}

	del := s3cmd("del", "--recursive", "--force", bucket)
	if n := strings.Count(del.stdout, "delete: "); n != len(want) {
		t.Errorf("s3cmd del --recursive: %d deletes reported, want %d", n, len(want))
	}
	s3cmd("rb", bucket)
	m.done(t, "s3cmd")
	tg.bucketGone(t, "s3cmd")
}

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
