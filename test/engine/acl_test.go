package engine

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestACLs: S3's ACLs on a TLS `strata server`, from the aws CLI, boto3
// (testdata/clients/boto3_acl.py) and aws-sdk-go-v2, with root named by a
// canonical ID of its own, an "owner" user (an account of its own) and an
// anonymous client:
//
//   - the aws CLI creates a public-read bucket and copies an object up
//     with --acl public-read: anyone reads it and lists the bucket; an
//     object put without an ACL is refused to anonymous readers (403), a
//     missing one is 404 to them (the bucket's ACL lets them list);
//   - put-object-acl --acl private takes the object back;
//   - the owner user owns what it writes into root's public-read-write
//     bucket: get-object-acl names it, root's bucket-owner-full-control
//     grant included when it asks for it;
//   - boto3: canned and header grants, errors, BucketOwnerEnforced.
func TestACLs(t *testing.T) {
	t.Parallel()
	venv := pyClients(t)
	users := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(users, []byte(`{"root":{"id":"tenant-root","displayName":"Tenant root"},"users":[`+
		`{"accessKey":"team-a","secretKey":"team-a-secret","policy":"owner"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startTLSTargetWith(t, "server", []string{"STRATA_IAM_FILE=" + users})
	env := tg.clientEnv(t, venv)
	work := t.TempDir()
	awsCLI := func(args ...string) clientRun {
		t.Helper()
		return runClient(t, env, work, filepath.Join(venv, "aws"), append(args, "--endpoint-url", tg.endpoint())...)
	}
	anonGet := func(bucket, key string) (int, string) {
		t.Helper()
		res, err := tg.httpClient().Get(tg.endpoint() + "/" + bucket + "/" + key)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}

	t.Run("awscli", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(work, "page.html"), []byte("<p>hello</p>"), 0o600); err != nil {
			t.Fatal(err)
		}
		awsCLI("s3api", "create-bucket", "--bucket", "site", "--acl", "public-read")
		awsCLI("s3", "cp", "page.html", "s3://site/index.html", "--acl", "public-read")
		awsCLI("s3", "cp", "page.html", "s3://site/draft.html")
		if code, body := anonGet("site", "index.html"); code != http.StatusOK || body != "<p>hello</p>" {
			t.Fatalf("anonymous GET of a public-read object: %d %q", code, body)
		}
		if code, _ := anonGet("site", "draft.html"); code != http.StatusForbidden {
			t.Fatalf("anonymous GET of an object without an ACL: %d, want 403", code)
		}
		if code, _ := anonGet("site", "missing.html"); code != http.StatusNotFound {
			t.Fatalf("anonymous GET of a missing object in a public-read bucket: %d, want 404", code)
		}
		if code, body := anonGet("site", ""); code != http.StatusOK || !strings.Contains(body, "index.html") {
			t.Fatalf("anonymous listing of a public-read bucket: %d %.200s", code, body)
		}
		var acl struct {
			Owner  struct{ ID, DisplayName string }
			Grants []struct {
				Grantee    struct{ Type, ID, URI string }
				Permission string
			}
		}
		if err := json.Unmarshal([]byte(awsCLI("s3api", "get-object-acl", "--bucket", "site", "--key", "index.html").stdout), &acl); err != nil {
			t.Fatal(err)
		}
		if acl.Owner.ID != "tenant-root" || acl.Owner.DisplayName != "Tenant root" || len(acl.Grants) != 2 ||
			acl.Grants[0].Grantee.URI != "http://acs.amazonaws.com/groups/global/AllUsers" || acl.Grants[0].Permission != "READ" {
			t.Fatalf("get-object-acl: %+v", acl)
		}
		awsCLI("s3api", "put-object-acl", "--bucket", "site", "--key", "index.html", "--acl", "private")
		if code, _ := anonGet("site", "index.html"); code != http.StatusForbidden {
			t.Fatalf("anonymous GET after put-object-acl private: %d, want 403", code)
		}
	})

	t.Run("owner account", func(t *testing.T) {
		root := tg.sdkClient(nil)
		team := tg.userClient("team-a", "team-a-secret")
		if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("inbox"), ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
			t.Fatal(err)
		}
		mustCreateBucket(t, root, "closed")
		if _, err := team.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("closed"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
			t.Fatalf("an owner user writing into root's private bucket: %v", err)
		}
		for key, canned := range map[string]types.ObjectCannedACL{"mine": "", "theirs": types.ObjectCannedACLBucketOwnerFullControl} {
			if _, err := team.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("inbox"), Key: aws.String(key), Body: strings.NewReader(key), ACL: canned}); err != nil {
				t.Fatal(err)
			}
			out, err := team.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String("inbox"), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			rootFull := false
			for _, g := range out.Grants {
				rootFull = rootFull || aws.ToString(g.Grantee.ID) == "tenant-root" && g.Permission == types.PermissionFullControl
			}
			if aws.ToString(out.Owner.ID) != "team-a" || rootFull != (canned != "") {
				t.Fatalf("%s: owner %s, root's full control %v", key, aws.ToString(out.Owner.ID), rootFull)
			}
		}
		// The team's own bucket is wholly its own; root sees it through
		// root's rights, nobody else through an ACL it did not set.
		mustCreateBucket(t, team, "team-bucket")
		put(t, team, "team-bucket", "k", []byte("v"))
		if code, _ := anonGet("team-bucket", "k"); code != http.StatusForbidden {
			t.Fatalf("anonymous GET in the team's private bucket: %d", code)
		}
	})

	t.Run("boto3", func(t *testing.T) {
		runChecks(t, env, work, venv, "boto3_acl.py", "--endpoint", tg.endpoint(), "--bucket", "acl-boto3",
			"--alt-key", "team-a", "--alt-secret", "team-a-secret", "--root-id", "tenant-root")
	})
}

// runChecks runs a Python client script of testdata/clients that prints
// {"checks": N, "failures": [...]}, and reports each failure.
func runChecks(t *testing.T, env []string, work, venv, script string, args ...string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "clients", script))
	if err != nil {
		t.Fatal(err)
	}
	r := runClient(t, env, work, filepath.Join(venv, "python"), append([]string{path}, args...)...)
	var sum struct {
		Checks   int      `json:"checks"`
		Failures []string `json:"failures"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &sum); err != nil {
		t.Fatalf("%s summary: %v\n%s\n%s", script, err, r.stdout, tail(r.stderr))
	}
	for _, f := range sum.Failures {
		t.Errorf("%s: %s", script, f)
	}
	t.Logf("%s: %d checks passed", script, sum.Checks)
}

// userClient is an aws-sdk-go-v2 client of tg signed with a user's keys.
func (tg *tlsTarget) userClient(access, secret string) *s3.Client {
	c := tg.sdkClient(nil)
	return s3.New(c.Options(), func(o *s3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(access, secret, "")
	})
}
