package engine

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// selftestRun is one `strata selftest` process and what it printed.
type selftestRun struct {
	code           int
	stdout, stderr string
}

// runSelftest runs `strata selftest args...` with env (the credentials) as
// the tenant chart's helm test pod does.
func runSelftest(t *testing.T, env []string, args ...string) selftestRun {
	t.Helper()
	cmd := exec.Command(strataBin, append([]string{"selftest"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := selftestRun{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	t.Logf("strata selftest %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

var rootEnv = []string{"STRATA_ROOT_USER=" + rootUser, "STRATA_ROOT_PASSWORD=" + rootPassword}

// expectNoSelftestBuckets fails when a temporary bucket of the self-test
// is left on the server.
func expectNoSelftestBuckets(t *testing.T, c *s3.Client) {
	t.Helper()
	out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range out.Buckets {
		if strings.HasPrefix(aws.ToString(b.Name), "strata-selftest") {
			t.Errorf("bucket %s left behind", aws.ToString(b.Name))
		}
	}
}

// TestSelftest: `strata selftest` (the tenant chart's helm test) writes,
// reads back and deletes objects against a real server and gateway, over
// HTTP and verified TLS, leaves nothing behind, and fails with a message
// naming the step when the keys are refused, the endpoint is not there, or
// what it reads back is not what it wrote.
func TestSelftest(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})

	t.Run("temporary bucket over HTTP", func(t *testing.T) {
		r := runSelftest(t, rootEnv, "--endpoint", s.url())
		if r.code != 0 || !strings.Contains(r.stdout, "ok: 2 objects written, read back intact and deleted") {
			t.Fatalf("exit %d, want 0 and the ok line", r.code)
		}
		if !strings.Contains(r.stdout, "created bucket strata-selftest-") || !strings.Contains(r.stdout, "removed bucket strata-selftest-") {
			t.Error("the temporary bucket's creation and removal are not reported")
		}
		expectNoSelftestBuckets(t, s.aws())
	})

	t.Run("a versioned bucket of the user's, keys from files", func(t *testing.T) {
		c := s.aws()
		mustCreateBucket(t, c, "photos")
		if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("photos"),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
		put(t, c, "photos", "keep", []byte("the user's object"))
		dir := t.TempDir()
		for name, v := range map[string]string{"accessKey": rootUser, "secretKey": rootPassword} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r := runSelftest(t, []string{"STRATA_ROOT_USER_FILE=" + filepath.Join(dir, "accessKey"), "STRATA_ROOT_PASSWORD_FILE=" + filepath.Join(dir, "secretKey")},
			"--endpoint", s.url(), "--bucket", "photos")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		versions, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("photos")})
		if err != nil {
			t.Fatal(err)
		}
		if len(versions.DeleteMarkers) != 0 {
			t.Errorf("%d delete markers left in the versioned bucket", len(versions.DeleteMarkers))
		}
		if len(versions.Versions) != 1 || aws.ToString(versions.Versions[0].Key) != "keep" {
			t.Errorf("versions left: %d, want only the user's object", len(versions.Versions))
		}
	})

	t.Run("a bucket that does not exist", func(t *testing.T) {
		r := runSelftest(t, rootEnv, "--endpoint", s.url(), "--bucket", "no-such-bucket")
		if r.code != 1 || !strings.Contains(r.stderr, "FAILED: bucket no-such-bucket does not exist: give an existing bucket") {
			t.Fatalf("exit %d, want 1 naming the bucket", r.code)
		}
	})

	t.Run("refused keys end the wait at once", func(t *testing.T) {
		r := runSelftest(t, []string{"STRATA_ROOT_USER=" + rootUser, "STRATA_ROOT_PASSWORD=not-the-password"},
			"--endpoint", s.url(), "--wait", "10m")
		if r.code != 1 || !strings.Contains(r.stderr, "refuses the root credentials (SignatureDoesNotMatch)") {
			t.Fatalf("exit %d, want 1 saying the credentials are refused", r.code)
		}
	})

	t.Run("what is read back differs from what was written", func(t *testing.T) {
		target, err := url.Parse(s.url())
		if err != nil {
			t.Fatal(err)
		}
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ModifyResponse = corruptSelftestReads
		front := httptest.NewServer(proxy)
		t.Cleanup(front.Close)
		r := runSelftest(t, rootEnv, "--endpoint", front.URL)
		if r.code != 1 || !strings.Contains(r.stderr, "read back differs from what was written: first difference at byte") {
			t.Fatalf("exit %d, want 1 saying the object differs", r.code)
		}
		if !strings.Contains(r.stdout, "removed bucket strata-selftest-") {
			t.Error("the failed run did not remove its bucket")
		}
		expectNoSelftestBuckets(t, s.aws())
	})

	t.Run("nothing answers within --wait", func(t *testing.T) {
		r := runSelftest(t, rootEnv, "--endpoint", "http://"+freeAddr(t), "--wait", "3s")
		if r.code != 1 || !strings.Contains(r.stdout, "waiting up to 3s") || !strings.Contains(r.stderr, "does not answer") {
			t.Fatalf("exit %d, want 1 after waiting", r.code)
		}
	})
}

// corruptSelftestReads flips a byte of every object the self-test reads
// and drops the checksums that would let the S3 client notice first: what
// is left to catch the change is the self-test's own comparison.
func corruptSelftestReads(resp *http.Response) error {
	if resp.Request.Method != http.MethodGet || !strings.Contains(resp.Request.URL.Path, "/strata-selftest/") || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(body) > 0 {
		body[len(body)/2] ^= 0xff
	}
	for h := range resp.Header {
		if strings.HasPrefix(strings.ToLower(h), "x-amz-checksum-") {
			resp.Header.Del(h)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// TestSelftestGatewayAndTLS: the same check against a gateway, and against
// a server serving TLS, verified with --ca-file (and refused without it).
func TestSelftestGatewayAndTLS(t *testing.T) {
	t.Parallel()
	t.Run("gateway", func(t *testing.T) {
		g := startGateway(t, t.TempDir())
		if r := runSelftest(t, rootEnv, "--endpoint", g.url()); r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		expectNoSelftestBuckets(t, g.aws())
	})
	t.Run("TLS", func(t *testing.T) {
		tg := startTLSTarget(t, "server")
		if r := runSelftest(t, rootEnv, "--endpoint", tg.endpoint(), "--ca-file", tg.caFile); r.code != 0 {
			t.Fatalf("with --ca-file: exit %d, want 0", r.code)
		}
		r := runSelftest(t, rootEnv, "--endpoint", tg.endpoint())
		if r.code != 1 || !strings.Contains(r.stderr, "is not trusted (give the CA that signed it with --ca-file)") {
			t.Fatalf("without --ca-file: exit %d, want 1 naming the certificate", r.code)
		}
	})
}
