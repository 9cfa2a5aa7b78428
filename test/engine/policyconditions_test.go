package engine

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestBucketPolicyConditions: the condition keys users write bucket
// policies with are evaluated against the request, over HTTPS:
// aws:SecureTransport, aws:SourceIp (the client is 127.0.0.1) and
// s3:prefix, for a tenant user whose own grant does not cover the bucket
// and for anonymous requests.
func TestBucketPolicyConditions(t *testing.T) {
	t.Parallel()
	users := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(users, []byte(`{"users":[{"accessKey":"reader","secretKey":"reader-secret","policy":"readonly","buckets":["elsewhere"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startTLSTargetWith(t, "server", []string{"STRATA_IAM_FILE=" + users, "STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1")})
	client := func(creds aws.CredentialsProvider) *s3.Client {
		hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = &tls.Config{RootCAs: tg.pool, MinVersion: tls.VersionTLS12}
		})
		return s3.New(s3.Options{BaseEndpoint: aws.String(tg.endpoint()), UsePathStyle: true, Region: "us-east-1",
			Credentials: creds, RetryMaxAttempts: 1, HTTPClient: hc})
	}
	root := tg.sdkClient(nil)
	reader := client(credentials.NewStaticCredentialsProvider("reader", "reader-secret", ""))
	anon := client(aws.AnonymousCredentials{})
	mustCreateBucket(t, root, "cond")
	put(t, root, "cond", "docs/a.txt", []byte("a"))
	put(t, root, "cond", "tmp/b.txt", []byte("b"))
	policy := func(statements ...string) {
		t.Helper()
		if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("cond"),
			Policy: aws.String(`{"Version":"2012-10-17","Statement":[` + strings.Join(statements, ",") + `]}`)}); err != nil {
			t.Fatalf("PutBucketPolicy: %v", err)
		}
	}
	readerGet := func() error {
		_, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("docs/a.txt")})
		return err
	}
	getFor := func(principal, condition string) string {
		return `{"Effect":"Allow","Principal":` + principal + `,"Action":"s3:GetObject","Resource":"arn:aws:s3:::cond/*","Condition":` + condition + `}`
	}
	if err := readerGet(); errCode(err) != "AccessDenied" {
		t.Fatalf("the reader's own grant does not cover cond: %v", err)
	}
	for _, c := range []struct {
		what, condition string
		allowed         bool
	}{
		{"aws:SecureTransport true over HTTPS", `{"Bool":{"aws:SecureTransport":"true"}}`, true},
		{"aws:SecureTransport false over HTTPS", `{"Bool":{"aws:SecureTransport":"false"}}`, false},
		{"aws:SourceIp matching the client", `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`, true},
		{"aws:SourceIp not matching", `{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}`, false},
		{"aws:SourceIp excluded", `{"NotIpAddress":{"aws:SourceIp":"127.0.0.1/32"}}`, false},
	} {
		policy(getFor(`{"AWS":["reader"]}`, c.condition))
		err := readerGet()
		if c.allowed && err != nil || !c.allowed && errCode(err) != "AccessDenied" {
			t.Errorf("%s: reader GET %v, want allowed=%v", c.what, err, c.allowed)
		}
	}

	// s3:prefix limits what a listing may ask for.
	policy(`{"Effect":"Allow","Principal":{"AWS":["reader"]},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::cond","Condition":{"StringLike":{"s3:prefix":"docs/*"}}}`)
	list := func(prefix string) error {
		_, err := reader.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("cond"), Prefix: aws.String(prefix)})
		return err
	}
	if err := list("docs/"); err != nil {
		t.Errorf("listing docs/ allowed by s3:prefix: %v", err)
	}
	for _, p := range []string{"tmp/", ""} {
		if err := list(p); errCode(err) != "AccessDenied" {
			t.Errorf("listing %q outside s3:prefix docs/*: %v, want AccessDenied", p, err)
		}
	}

	// Anonymous reads allowed from the loopback network only.
	policy(getFor(`"*"`, `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`))
	if _, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("docs/a.txt")}); err != nil {
		t.Errorf("anonymous GET from 127.0.0.1 allowed by aws:SourceIp: %v", err)
	}
	policy(getFor(`"*"`, `{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"}}`))
	if _, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("docs/a.txt")}); errStatus(err) != 403 {
		t.Errorf("anonymous GET from outside the policy's network: %v, want 403", err)
	}

	// The keys S3 users write that the front end's own parser refused:
	// existing object tags, and a Deny of unencrypted uploads that binds
	// the bucket's owner (root) too, as S3's bucket owner is bound.
	if _, err := root.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("cond"), Key: aws.String("docs/a.txt"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("security"), Value: aws.String("public")}}}}); err != nil {
		t.Fatal(err)
	}
	policy(getFor(`{"AWS":"*"}`, `{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}`),
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::cond/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}`)
	if err := readerGet(); err != nil {
		t.Errorf("reader GET of an object tagged public: %v", err)
	}
	if _, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cond"), Key: aws.String("tmp/b.txt")}); errCode(err) != "AccessDenied" {
		t.Errorf("reader GET of an untagged object: %v, want AccessDenied", err)
	}
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String("plain"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
		t.Errorf("root PUT without encryption under a Deny: %v, want AccessDenied", err)
	}
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String("sealed"), Body: strings.NewReader("x"),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Errorf("root PUT with SSE-S3 under the Deny: %v", err)
	}
	// A malformed encryption header under a policy that denies it is
	// refused by the policy (403), as S3 refuses it; without a policy it is
	// refused as malformed (400): uploads, multipart uploads and their
	// parts, and nothing is stored either way.
	policy(`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::cond/*","Condition":{"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}}}`)
	mustCreateBucket(t, root, "nopolicy")
	aes192 := func(bucket string) error {
		_, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("aes192"), Body: strings.NewReader("x"),
			ServerSideEncryption: "AES192"})
		return err
	}
	if err := aes192("cond"); errCode(err) != "AccessDenied" {
		t.Errorf("PUT asking for AES192 under a Deny of anything but AES256: %v, want AccessDenied", err)
	}
	if err := aes192("nopolicy"); errCode(err) != "InvalidArgument" {
		t.Errorf("PUT asking for AES192: %v, want InvalidArgument", err)
	}
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	wrongMD5 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("nopolicy"), Key: aws.String("aes192"), Body: strings.NewReader("x"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String(wrongMD5)}); errCode(err) != "InvalidArgument" {
		t.Errorf("SSE-C PUT with the wrong key MD5: %v, want InvalidArgument", err)
	}
	if _, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("nopolicy"), Key: aws.String("aes192"),
		ServerSideEncryption: "AES192"}); errCode(err) != "InvalidArgument" {
		t.Errorf("CreateMultipartUpload asking for AES192: %v, want InvalidArgument", err)
	}
	up, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("nopolicy"), Key: aws.String("aes192")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("nopolicy"), Key: aws.String("aes192"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("x"), SSECustomerAlgorithm: aws.String("AES192"), SSECustomerKey: aws.String(key),
		SSECustomerKeyMD5: aws.String(wrongMD5)}); errCode(err) != "InvalidArgument" {
		t.Errorf("UploadPart with a malformed customer key: %v, want InvalidArgument", err)
	}
	parts, err := root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("nopolicy"), Key: aws.String("aes192"), UploadId: up.UploadId})
	if err != nil || len(parts.Parts) != 0 {
		t.Errorf("parts after a refused UploadPart: %v (%v), want none", parts, err)
	}
	for _, b := range []string{"cond", "nopolicy"} {
		if _, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("aes192")}); errCode(err) != "NotFound" {
			t.Errorf("HEAD %s/aes192 after refused uploads: %v, want NotFound", b, err)
		}
	}

	// The owner can always read and replace its policy.
	if _, err := root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("cond")}); err != nil {
		t.Errorf("root GET ?policy: %v", err)
	}

	// The aws CLI and boto3 at their defaults: "*" as an action, a policy
	// read back as written, and its status.
	venv := pyClients(t)
	env, work := tg.clientEnv(t, venv), t.TempDir()
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"*","Resource":["arn:aws:s3:::cond","arn:aws:s3:::cond/docs/*"]}]}`
	runClient(t, env, work, filepath.Join(venv, "aws"), "s3api", "put-bucket-policy", "--bucket", "cond", "--policy", doc, "--endpoint-url", tg.endpoint())
	got := runClient(t, env, work, filepath.Join(venv, "aws"), "s3api", "get-bucket-policy-status", "--bucket", "cond", "--endpoint-url", tg.endpoint())
	if !strings.Contains(got.stdout, `"IsPublic": true`) {
		t.Errorf("get-bucket-policy-status of a public policy: %s", got.stdout)
	}
	runChecks(t, env, work, venv, "boto3_policy.py", "--endpoint", tg.endpoint(), "--bucket", "cond")
}
