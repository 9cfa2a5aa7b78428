package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestPublicAccessBlock: a bucket's public access block is kept, given
// back and removed, and each of its four settings does what it says
// against real anonymous requests: public ACLs and policies refused,
// public ACL grants ignored, a public policy granting anonymous requests
// nothing; the owner keeps access throughout.
func TestPublicAccessBlock(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	anon := s3.New(s3.Options{BaseEndpoint: aws.String(s.url()), Region: "us-east-1", UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	block := func(bucket string, acls, ignore, policy, restrict bool) {
		t.Helper()
		if _, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(bucket),
			PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(acls),
				IgnorePublicAcls: aws.Bool(ignore), BlockPublicPolicy: aws.Bool(policy), RestrictPublicBuckets: aws.Bool(restrict)}}); err != nil {
			t.Fatalf("PutPublicAccessBlock: %v", err)
		}
	}
	publicPolicy := func(bucket string) *string {
		return aws.String(fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`, bucket))
	}

	mustCreateBucket(t, c, "blocked")
	if _, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("blocked")}); errCode(err) != "NoSuchPublicAccessBlockConfiguration" {
		t.Fatalf("GET before any: %v", err)
	}
	block("blocked", true, true, true, false)
	got, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("blocked")})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.PublicAccessBlockConfiguration; !aws.ToBool(g.BlockPublicAcls) || !aws.ToBool(g.IgnorePublicAcls) || !aws.ToBool(g.BlockPublicPolicy) || aws.ToBool(g.RestrictPublicBuckets) {
		t.Fatalf("given back as %+v", g)
	}

	// BlockPublicAcls: 403 for a public ACL on the bucket or an object,
	// nothing stored; a private one is fine.
	for _, acl := range []types.BucketCannedACL{types.BucketCannedACLPublicRead, types.BucketCannedACLPublicReadWrite, types.BucketCannedACLAuthenticatedRead} {
		if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String("blocked"), ACL: acl}); errStatus(err) != 403 {
			t.Errorf("PutBucketAcl %s: %v, want 403", acl, err)
		}
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("blocked"), Key: aws.String("o-" + string(acl)),
			Body: strings.NewReader("x"), ACL: types.ObjectCannedACL(acl)}); errStatus(err) != 403 {
			t.Errorf("PutObject with ACL %s: %v, want 403", acl, err)
		}
		notStored(t, c, "blocked", "o-"+string(acl))
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("blocked"), Key: aws.String("private"), Body: strings.NewReader("x"),
		ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Errorf("PutObject with ACL private: %v", err)
	}
	// BlockPublicPolicy: a policy granting "*" refused, one naming a user
	// accepted.
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("blocked"), Policy: publicPolicy("blocked")}); errCode(err) != "AccessDenied" {
		t.Errorf("public policy under BlockPublicPolicy: %v, want AccessDenied", err)
	}
	if _, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("blocked")}); errCode(err) != "NoSuchBucketPolicy" {
		t.Errorf("a refused policy was stored: %v", err)
	}
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("blocked"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["` + rootUser + `"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::blocked/*"}]}`)}); err != nil {
		t.Errorf("a policy naming a user under BlockPublicPolicy: %v", err)
	}

	// RestrictPublicBuckets: a public policy stops granting anonymous
	// requests, and grants them again once the block is gone.
	mustCreateBucket(t, c, "website")
	put(t, c, "website", "index.html", []byte("hello"))
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("website"), Policy: publicPolicy("website")}); err != nil {
		t.Fatal(err)
	}
	anonGet := func() error {
		_, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("website"), Key: aws.String("index.html")})
		return err
	}
	if err := anonGet(); err != nil {
		t.Fatalf("anonymous GET allowed by the public policy: %v", err)
	}
	block("website", false, false, false, true)
	if err := anonGet(); errStatus(err) != 403 {
		t.Errorf("anonymous GET under RestrictPublicBuckets: %v, want 403", err)
	}
	if got := string(get(t, c, "website", "index.html")); got != "hello" {
		t.Errorf("the owner reads %q", got)
	}
	if _, err := c.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String("website")}); err != nil {
		t.Fatal(err)
	}
	if err := anonGet(); err != nil {
		t.Errorf("anonymous GET once the block is gone: %v", err)
	}
	if _, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("website")}); errCode(err) != "NoSuchPublicAccessBlockConfiguration" {
		t.Errorf("GET after DELETE: %v", err)
	}

	// IgnorePublicAcls: a public-read bucket ACL stops granting anonymous
	// listings, and GetBucketAcl still shows the grant.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("shared"), ObjectOwnership: types.ObjectOwnershipObjectWriter,
		ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	anonList := func() error {
		_, err := anon.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("shared")})
		return err
	}
	if err := anonList(); err != nil {
		t.Fatalf("anonymous listing of a public-read bucket: %v", err)
	}
	// A public-read bucket lists; its objects stay private (S3 reads them
	// only through the object's own ACL or a policy).
	put(t, c, "shared", "private.txt", []byte("not for everyone"))
	if _, err := anon.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("shared"), Key: aws.String("private.txt")}); errStatus(err) != 403 {
		t.Errorf("anonymous GET of an object in a public-read bucket: %v, want 403", err)
	}
	if _, err := anon.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("shared"), Key: aws.String("private.txt")}); errStatus(err) != 403 {
		t.Errorf("anonymous HEAD of an object in a public-read bucket: %v, want 403", err)
	}
	block("shared", false, true, false, false)
	if err := anonList(); errStatus(err) != 403 {
		t.Errorf("anonymous listing under IgnorePublicAcls: %v, want 403", err)
	}
	acl, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String("shared")})
	if err != nil {
		t.Fatal(err)
	}
	public := false
	for _, g := range acl.Grants {
		public = public || g.Grantee != nil && g.Grantee.Type == types.TypeGroup
	}
	if !public {
		t.Errorf("GetBucketAcl under IgnorePublicAcls hides the public grant: %+v", acl.Grants)
	}
}
