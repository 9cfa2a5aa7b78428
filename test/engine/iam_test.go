package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// awsIAM runs the aws CLI of the Python clients' venv against a node, as
// the given credentials, and returns its exit status and output (it does
// not fail the test: refusals are checked by the caller).
type awsIAM struct {
	t    *testing.T
	venv string
	home string
	// token is an STS session's (AWS_SESSION_TOKEN), "" for none.
	token string
}

// session is the CLI signing with an STS session's token too.
func (a *awsIAM) session(token string) *awsIAM {
	s := *a
	s.token = token
	return &s
}

func newAWSIAM(t *testing.T) *awsIAM {
	venv := pyClients(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "config"), []byte("[default]\nregion = us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &awsIAM{t: t, venv: venv, home: home}
}

func (a *awsIAM) run(node *server, access, secret string, args ...string) (string, error) {
	a.t.Helper()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(a.venv, "aws"), append(args, "--endpoint-url", node.url(), "--output", "json")...)
	cmd.Env = []string{"HOME=" + a.home, "PATH=" + a.venv + ":/usr/bin:/bin", "AWS_ACCESS_KEY_ID=" + access,
		"AWS_SECRET_ACCESS_KEY=" + secret, "AWS_EC2_METADATA_DISABLED=true", "AWS_RETRY_MODE=standard", "AWS_MAX_ATTEMPTS=1"}
	if a.token != "" {
		cmd.Env = append(cmd.Env, "AWS_SESSION_TOKEN="+a.token)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), err
}

// must runs a command that must succeed and decodes its JSON output (if
// into is not nil).
func (a *awsIAM) must(node *server, access, secret string, into any, args ...string) {
	a.t.Helper()
	out, err := a.run(node, access, secret, args...)
	if err != nil {
		a.t.Fatalf("aws %s: %v", strings.Join(args, " "), err)
	}
	if into != nil {
		if err := json.Unmarshal([]byte(out), into); err != nil {
			a.t.Fatalf("aws %s: output %q: %v", strings.Join(args, " "), out, err)
		}
	}
}

// refused runs a command that must fail with the IAM or S3 error code.
func (a *awsIAM) refused(node *server, access, secret, code string, args ...string) {
	a.t.Helper()
	_, err := a.run(node, access, secret, args...)
	if err == nil || !strings.Contains(err.Error(), "("+code+")") {
		a.t.Errorf("aws %s: %v, want an error (%s)", strings.Join(args, " "), err, code)
	}
}

// iamCluster starts a four-node cluster with a master keys file (the IAM
// directory seals its secrets with it), each node with env besides.
func iamCluster(t *testing.T, env ...string) (n1, n2, n3, n4 *server) {
	c := newCluster(t)
	keys := keysFile(t, "tenant-1")
	c.env = map[int][]string{}
	nodes := []int{1, 2, 3, 4}
	for _, n := range nodes {
		c.env[n] = append([]string{"STRATA_KMS_KEYS_FILE=" + keys}, env...)
	}
	c.writeTopology(c.poolSpec("pool-0", nodes, 2))
	c.start(nodes)
	return c.nodes[1], c.nodes[2], c.nodes[3], c.nodes[4]
}

// TestIAMUsersAcrossNodes: the IAM API of a four-node cluster, driven by
// the aws CLI. A user and its key made through one node sign S3 requests
// on every other at once; what the key may do is what the user's inline
// policies allow and nothing they deny; IAM's refusals carry IAM's codes;
// a node restarted reads the directory back from the drives; a deleted
// key stops working everywhere.
func TestIAMUsersAcrossNodes(t *testing.T) {
	t.Parallel()
	cli := newAWSIAM(t)
	n1, n2, n3, n4 := iamCluster(t)

	var created struct {
		User struct{ UserName, UserId, Arn, Path string }
	}
	cli.must(n1, rootUser, rootPassword, &created, "iam", "create-user", "--user-name", "app", "--path", "/apps/")
	if u := created.User; u.UserName != "app" || !strings.HasPrefix(u.UserId, "AIDA") || u.Arn != "arn:aws:iam:::user/apps/app" || u.Path != "/apps/" {
		t.Errorf("create-user answered %+v", u)
	}
	cli.refused(n2, rootUser, rootPassword, "EntityAlreadyExists", "iam", "create-user", "--user-name", "APP")
	cli.refused(n2, rootUser, rootPassword, "NoSuchEntity", "iam", "get-user", "--user-name", "nobody")
	var key struct {
		AccessKey struct{ AccessKeyId, SecretAccessKey, Status, UserName string }
	}
	cli.must(n2, rootUser, rootPassword, &key, "iam", "create-access-key", "--user-name", "app")
	ak, sk := key.AccessKey.AccessKeyId, key.AccessKey.SecretAccessKey
	if !strings.HasPrefix(ak, "AKIA") || len(sk) != 40 || key.AccessKey.Status != "Active" || key.AccessKey.UserName != "app" {
		t.Fatalf("create-access-key answered %+v", key.AccessKey)
	}
	var listed struct{ Users []struct{ UserName string } }
	cli.must(n4, rootUser, rootPassword, &listed, "iam", "list-users", "--path-prefix", "/apps/")
	if len(listed.Users) != 1 || listed.Users[0].UserName != "app" {
		t.Errorf("list-users --path-prefix /apps/: %+v", listed.Users)
	}

	root := n1.aws()
	mustCreateBucket(t, root, "shared")
	// A user with no policy may do nothing, on any node.
	app3 := n3.s3Client(ak, sk)
	if _, err := app3.ListBuckets(ctx, &s3.ListBucketsInput{}); errCode(err) != "AccessDenied" {
		t.Errorf("ListBuckets by a user without a policy: %v, want AccessDenied", err)
	}
	cli.refused(n3, ak, sk, "AccessDenied", "iam", "list-users")

	policy := `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:CreateBucket","s3:ListAllMyBuckets"],"Resource":"*"},
		{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::app-*","arn:aws:s3:::app-*/*"]},
		{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::shared/*"},
		{"Sid":"keep","Effect":"Deny","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::app-data/keep/*"}]}`
	cli.must(n4, rootUser, rootPassword, nil, "iam", "put-user-policy", "--user-name", "app", "--policy-name", "apps", "--policy-document", policy)
	cli.refused(n4, rootUser, rootPassword, "MalformedPolicyDocument", "iam", "put-user-policy", "--user-name", "app",
		"--policy-name", "bad", "--policy-document", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*"}]}`)
	// Another node has it within a second or so (its next refresh).
	var got struct{ PolicyDocument map[string]any }
	waitFor(t, "the policy read through node 2", 10*time.Second, func() bool {
		out, err := cli.run(n2, rootUser, rootPassword, "iam", "get-user-policy", "--user-name", "app", "--policy-name", "apps")
		return err == nil && json.Unmarshal([]byte(out), &got) == nil
	})
	if got.PolicyDocument["Version"] != "2012-10-17" {
		t.Errorf("get-user-policy answered %+v", got)
	}

	// Policies reach every node within a second or so (each reads the
	// directory's generation every second).
	app1 := n1.s3Client(ak, sk)
	waitFor(t, "the policy on node 1", 10*time.Second, func() bool {
		_, err := app1.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("app-data")})
		return err == nil
	})
	put(t, app3, "app-data", "keep/a", []byte("kept"))
	put(t, app3, "app-data", "tmp/b", []byte("gone"))
	if _, err := app3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("app-data"), Key: aws.String("tmp/b")}); err != nil {
		t.Errorf("DeleteObject the policy allows: %v", err)
	}
	if _, err := app3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("app-data"), Key: aws.String("keep/a")}); errCode(err) != "AccessDenied" {
		t.Errorf("DeleteObject the policy denies: %v, want AccessDenied", err)
	}
	put(t, root, "shared", "readme", []byte("hello"))
	if b := get(t, app1, "shared", "readme"); string(b) != "hello" {
		t.Errorf("GetObject the policy allows: %q", b)
	}
	if _, err := app1.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
		t.Errorf("PutObject in a bucket the policy names only for reads: %v, want AccessDenied", err)
	}
	// What the user creates is the account's: root sees and reads it.
	if b := get(t, root, "app-data", "keep/a"); string(b) != "kept" {
		t.Errorf("root reading the user's object: %q", b)
	}
	lb, err := app3.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range lb.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	if strings.Join(names, ",") != "app-data,shared" {
		t.Errorf("ListBuckets by the user: %v (the directory's own bucket must not show)", names)
	}

	// A node restarted loads the directory from the drives.
	n2.kill()
	n2.start()
	if b := get(t, n2.s3Client(ak, sk), "app-data", "keep/a"); string(b) != "kept" {
		t.Errorf("through the restarted node: %q", b)
	}
	cli.refused(n1, rootUser, rootPassword, "DeleteConflict", "iam", "delete-user", "--user-name", "app")

	// A key deleted stops signing on every node.
	cli.must(n3, rootUser, rootPassword, nil, "iam", "delete-access-key", "--user-name", "app", "--access-key-id", ak)
	for _, n := range []*server{n1, n2, n3, n4} {
		cl := n.s3Client(ak, sk)
		waitFor(t, "the deleted key refused on "+n.addr, 10*time.Second, func() bool {
			_, err := cl.ListBuckets(ctx, &s3.ListBucketsInput{})
			return errCode(err) == "InvalidAccessKeyId"
		})
	}
	cli.must(n4, rootUser, rootPassword, nil, "iam", "delete-user-policy", "--user-name", "app", "--policy-name", "apps")
	cli.must(n4, rootUser, rootPassword, nil, "iam", "delete-user", "--user-name", "app")
	cli.refused(n1, "AKIAUNKNOWNUNKNOWN00", "not-a-secret-at-all-0000000000000000000", "InvalidClientTokenId", "iam", "list-users")
}

// TestSTSAssumeRoleAcrossNodes: STS on a four-node cluster. A user the
// role's trust policy names assumes it through one node (the aws CLI) and
// its session credentials sign S3 requests on every other (aws-sdk-go-v2
// with the session token): it may do what the role's policies allow, less
// what a session policy leaves out; a user the trust policy does not name
// is refused; a token altered by one character is InvalidToken; once the
// role is deleted its sessions end on every node.
func TestSTSAssumeRoleAcrossNodes(t *testing.T) {
	t.Parallel()
	cli := newAWSIAM(t)
	n1, n2, n3, n4 := iamCluster(t)

	userKey := func(name string) (string, string) {
		cli.must(n1, rootUser, rootPassword, nil, "iam", "create-user", "--user-name", name)
		var key struct {
			AccessKey struct{ AccessKeyId, SecretAccessKey string }
		}
		cli.must(n1, rootUser, rootPassword, &key, "iam", "create-access-key", "--user-name", name)
		return key.AccessKey.AccessKeyId, key.AccessKey.SecretAccessKey
	}
	devAK, devSK := userKey("dev")
	otherAK, otherSK := userKey("other")
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/dev"},"Action":"sts:AssumeRole"}]}`
	var role struct{ Role struct{ Arn, RoleId string } }
	cli.must(n2, rootUser, rootPassword, &role, "iam", "create-role", "--role-name", "app", "--assume-role-policy-document", trust)
	if role.Role.Arn != "arn:aws:iam:::role/app" || !strings.HasPrefix(role.Role.RoleId, "AROA") {
		t.Fatalf("create-role answered %+v", role.Role)
	}
	cli.must(n2, rootUser, rootPassword, nil, "iam", "put-role-policy", "--role-name", "app", "--policy-name", "apps", "--policy-document",
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::app-*","arn:aws:s3:::app-*/*"]}]}`)
	mustCreateBucket(t, n1.aws(), "shared")

	type assumed struct {
		Credentials     struct{ AccessKeyId, SecretAccessKey, SessionToken, Expiration string }
		AssumedRoleUser struct{ AssumedRoleId, Arn string }
	}
	var a assumed
	cli.must(n3, devAK, devSK, &a, "sts", "assume-role", "--role-arn", role.Role.Arn, "--role-session-name", "job", "--duration-seconds", "900")
	cr := a.Credentials
	if !strings.HasPrefix(cr.AccessKeyId, "ASIA") || a.AssumedRoleUser.Arn != "arn:aws:sts:::assumed-role/app/job" ||
		a.AssumedRoleUser.AssumedRoleId != role.Role.RoleId+":job" {
		t.Fatalf("assume-role answered %+v", a)
	}
	if exp, err := time.Parse(time.RFC3339, cr.Expiration); err != nil || time.Until(exp) > 15*time.Minute || time.Until(exp) < 14*time.Minute {
		t.Errorf("the session expires at %s (%v), want in 15 minutes", cr.Expiration, err)
	}
	var who struct{ UserId, Arn string }
	cli.session(cr.SessionToken).must(n4, cr.AccessKeyId, cr.SecretAccessKey, &who, "sts", "get-caller-identity")
	if who.UserId != a.AssumedRoleUser.AssumedRoleId || who.Arn != a.AssumedRoleUser.Arn {
		t.Errorf("get-caller-identity with the session: %+v", who)
	}

	for _, n := range []*server{n1, n2, n4} {
		s := n.sessionClient(cr.AccessKeyId, cr.SecretAccessKey, cr.SessionToken)
		bucket := "app-" + strings.ReplaceAll(strings.Split(n.addr, ":")[1], ".", "")
		if _, err := s.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("CreateBucket with the session on %s: %v", n.addr, err)
		}
		put(t, s, bucket, "k", []byte("v"))
		if b := get(t, s, bucket, "k"); string(b) != "v" {
			t.Errorf("read back %q", b)
		}
		if _, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
			t.Errorf("PutObject outside the role's buckets: %v, want AccessDenied", err)
		}
	}
	bad := cr.SessionToken[:len(cr.SessionToken)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(cr.SessionToken, "A")]
	if _, err := n2.sessionClient(cr.AccessKeyId, cr.SecretAccessKey, bad).ListBuckets(ctx, &s3.ListBucketsInput{}); errCode(err) != "InvalidToken" {
		t.Errorf("an altered token: %v, want InvalidToken", err)
	}
	cli.refused(n1, otherAK, otherSK, "AccessDenied", "sts", "assume-role", "--role-arn", role.Role.Arn, "--role-session-name", "job")
	cli.refused(n1, devAK, devSK, "ValidationError", "sts", "assume-role", "--role-arn", role.Role.Arn, "--role-session-name", "job",
		"--duration-seconds", "7200")

	// A session policy narrows the session to reads.
	var ro assumed
	cli.must(n2, devAK, devSK, &ro, "sts", "assume-role", "--role-arn", role.Role.Arn, "--role-session-name", "reader", "--policy",
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`)
	reader := n3.sessionClient(ro.Credentials.AccessKeyId, ro.Credentials.SecretAccessKey, ro.Credentials.SessionToken)
	bucket := "app-" + strings.ReplaceAll(strings.Split(n1.addr, ":")[1], ".", "")
	if b := get(t, reader, bucket, "k"); string(b) != "v" {
		t.Errorf("a read the session policy allows: %q", b)
	}
	if _, err := reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("y"), Body: strings.NewReader("y")}); errCode(err) != "AccessDenied" {
		t.Errorf("a write the session policy leaves out: %v, want AccessDenied", err)
	}

	// A bucket policy naming the role is narrowed by the session policy
	// too; one naming the session itself is not (AWS's rule).
	put(t, n1.aws(), "shared", "doc", []byte("shared doc"))
	grant := func(principal string) {
		t.Helper()
		if _, err := n1.aws().PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("shared"), Policy: aws.String(fmt.Sprintf(
			`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":%q},"Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::shared/*"}]}`,
			principal))}); err != nil {
			t.Fatalf("PutBucketPolicy naming %s: %v", principal, err)
		}
	}
	writeShared := func() error {
		_, err := reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("w"), Body: strings.NewReader("w")})
		return err
	}
	grant("arn:aws:iam:::role/app")
	if b := get(t, reader, "shared", "doc"); string(b) != "shared doc" {
		t.Errorf("a read the bucket policy and the session policy allow: %q", b)
	}
	if err := writeShared(); errCode(err) != "AccessDenied" {
		t.Errorf("a write the bucket policy grants the role but the session policy leaves out: %v, want AccessDenied", err)
	}
	for _, session := range []string{"arn:aws:sts:::assumed-role/app/reader", "arn:aws:iam:::assumed-role/app/reader"} {
		grant(session)
		if err := writeShared(); err != nil {
			t.Errorf("a write the bucket policy grants the session (%s): %v", session, err)
		}
	}

	// The role deleted, its sessions end everywhere.
	cli.must(n4, rootUser, rootPassword, nil, "iam", "delete-role-policy", "--role-name", "app", "--policy-name", "apps")
	cli.must(n4, rootUser, rootPassword, nil, "iam", "delete-role", "--role-name", "app")
	for _, n := range []*server{n1, n2, n3, n4} {
		s := n.sessionClient(cr.AccessKeyId, cr.SecretAccessKey, cr.SessionToken)
		waitFor(t, "the deleted role's session refused on "+n.addr, 10*time.Second, func() bool {
			_, err := s.ListBuckets(ctx, &s3.ListBucketsInput{})
			return errCode(err) == "InvalidToken"
		})
	}
}
