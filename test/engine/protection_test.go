package engine

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDataProtectionClients: issue 17's features from the clients users
// run, at their defaults, over HTTPS against `strata server`:
//
//   - boto3 (testdata/clients/boto3_protection.py): SSE-C (refused
//     without the key, ranged reads with it), SSE-S3, SSE-KMS, bucket
//     default encryption; object lock (default GOVERNANCE retention and
//     its bypass, COMPLIANCE, legal hold); CORS preflight; presigned PUT
//     and GET and their expiry;
//   - the aws CLI: `s3 cp --sse AES256` and `--sse aws:kms`, a bucket with
//     object lock, a legal hold refusing `s3api delete-object` until it is
//     lifted, `put-bucket-cors` read back.
//
// The Go SDK's coverage of the same features is in TestServerSideEncryption,
// TestObjectLock, TestLifecycle, TestACLs and TestBucketPolicyConditions.
func TestDataProtectionClients(t *testing.T) {
	t.Parallel()
	venv := pyClients(t)
	tg := startTLSTargetWith(t, "server", []string{"STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1", "tenant-2")})
	env := tg.clientEnv(t, venv)
	work := t.TempDir()

	t.Run("boto3", func(t *testing.T) {
		runChecks(t, env, work, venv, "boto3_protection.py", "--endpoint", tg.endpoint(), "--bucket", "protect", "--kms-key", "tenant-2")
	})

	t.Run("awscli", func(t *testing.T) {
		awsCLI := func(args ...string) clientRun {
			t.Helper()
			return runClient(t, env, work, filepath.Join(venv, "aws"), append(args, "--endpoint-url", tg.endpoint())...)
		}
		// awsCLIFails runs a command that must fail, and returns its stderr.
		awsCLIFails := func(args ...string) string {
			t.Helper()
			r, err := runClientErr(env, work, filepath.Join(venv, "aws"), append(args, "--endpoint-url", tg.endpoint())...)
			if err == nil {
				t.Fatalf("aws %s: succeeded, want a refusal\n%s", strings.Join(args, " "), r.stdout)
			}
			return r.stderr
		}
		head := func(bucket, key string) map[string]any {
			t.Helper()
			var out map[string]any
			if err := json.Unmarshal([]byte(awsCLI("s3api", "head-object", "--bucket", bucket, "--key", key).stdout), &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		if err := os.WriteFile(filepath.Join(work, "doc.txt"), []byte("protected"), 0o600); err != nil {
			t.Fatal(err)
		}
		awsCLI("s3", "mb", "s3://cli-protect")
		awsCLI("s3", "cp", "doc.txt", "s3://cli-protect/s3", "--sse", "AES256")
		awsCLI("s3", "cp", "doc.txt", "s3://cli-protect/kms", "--sse", "aws:kms", "--sse-kms-key-id", "tenant-1")
		if h := head("cli-protect", "s3"); h["ServerSideEncryption"] != "AES256" {
			t.Errorf("cp --sse AES256: head says %v", h["ServerSideEncryption"])
		}
		if h := head("cli-protect", "kms"); h["ServerSideEncryption"] != "aws:kms" || !strings.Contains(h["SSEKMSKeyId"].(string), "tenant-1") {
			t.Errorf("cp --sse aws:kms: head says %v %v", h["ServerSideEncryption"], h["SSEKMSKeyId"])
		}

		awsCLI("s3api", "create-bucket", "--bucket", "cli-lock", "--object-lock-enabled-for-bucket")
		var put struct{ VersionId string }
		if err := json.Unmarshal([]byte(awsCLI("s3api", "put-object", "--bucket", "cli-lock", "--key", "held", "--body", "doc.txt",
			"--object-lock-legal-hold-status", "ON").stdout), &put); err != nil || put.VersionId == "" {
			t.Fatalf("put-object with a legal hold: %v %+v", err, put)
		}
		if e := awsCLIFails("s3api", "delete-object", "--bucket", "cli-lock", "--key", "held", "--version-id", put.VersionId); !strings.Contains(e, "AccessDenied") {
			t.Errorf("delete-object under a legal hold: %s", e)
		}
		awsCLI("s3api", "put-object-legal-hold", "--bucket", "cli-lock", "--key", "held", "--version-id", put.VersionId, "--legal-hold", "Status=OFF")
		awsCLI("s3api", "delete-object", "--bucket", "cli-lock", "--key", "held", "--version-id", put.VersionId)

		cors := `{"CORSRules":[{"AllowedOrigins":["https://app.example"],"AllowedMethods":["GET"],"MaxAgeSeconds":60}]}`
		awsCLI("s3api", "put-bucket-cors", "--bucket", "cli-protect", "--cors-configuration", cors)
		if got := awsCLI("s3api", "get-bucket-cors", "--bucket", "cli-protect").stdout; !strings.Contains(got, "https://app.example") {
			t.Errorf("get-bucket-cors: %s", got)
		}
	})
}

// runClientErr runs a client command that may fail, and returns what it
// printed and how it ended.
func runClientErr(env []string, dir, name string, args ...string) (clientRun, error) {
	cctx, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Env, cmd.Dir = env, dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	return clientRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}, err
}
