package engine

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestVersionsWrittenByThePreviousReleaseAreKept: drives written by the
// last release whose objects keep all their versions in one list
// (STRATA_LAYOUT1_BIN) are served by this build as they are; its first
// writes to an object move the older versions to keys of their own, and
// every version reads back with its bytes, listed newest first, also after
// the newest is deleted. Rolled back to that release, the drives still give
// every object's newest version.
func TestVersionsWrittenByThePreviousReleaseAreKept(t *testing.T) {
	t.Parallel()
	prev := os.Getenv("STRATA_LAYOUT1_BIN")
	if prev == "" {
		skipOutsideCI(t, "STRATA_LAYOUT1_BIN not set (make engine-integration builds it from LAYOUT1_REV)")
	}
	at, dirs := driveDirs(t, 4)
	startPrevious := func() *server { return startBuild(t, prev, dirs) }

	// The previous release writes 40 versions of a key (a null version
	// among them, from before versioning was turned on) and a delete marker
	// on another key.
	old := startPrevious()
	c := old.aws()
	mustCreateBucket(t, c, "hist")
	type version struct {
		id   string
		body []byte
	}
	var doc []version // oldest first
	nullBody := []byte("null version, before versioning")
	put(t, c, "hist", "doc", nullBody)
	doc = append(doc, version{"null", nullBody})
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("hist"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		body := randomBytes(100 + i*997)
		doc = append(doc, version{aws.ToString(put(t, c, "hist", "doc", body).VersionId), body})
	}
	put(t, c, "hist", "gone", []byte("deleted"))
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("hist"), Key: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	old.kill()

	cur := startServer(t, serverOpts{drives: 4, at: at})
	c = cur.aws()
	check := func(c *s3.Client, want []version) {
		t.Helper()
		lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("hist"), Prefix: aws.String("doc")})
		if err != nil {
			t.Fatal(err)
		}
		if len(lv.Versions) != len(want) {
			t.Fatalf("%d versions listed, want %d", len(lv.Versions), len(want))
		}
		for i, v := range lv.Versions {
			w := want[len(want)-1-i]
			if aws.ToString(v.VersionId) != w.id || aws.ToBool(v.IsLatest) != (i == 0) {
				t.Fatalf("version %d listed: %s (latest %v), want %s", i, aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), w.id)
			}
		}
		for _, w := range want {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("hist"), Key: aws.String("doc"), VersionId: aws.String(w.id)})
			if err != nil {
				t.Fatalf("GET version %s: %v", w.id, err)
			}
			body, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || !bytes.Equal(body, w.body) {
				t.Fatalf("GET version %s: %d bytes, %v; want its %d", w.id, len(body), err, len(w.body))
			}
		}
		if got := getBody(t, c, "hist", "doc"); !bytes.Equal(got, want[len(want)-1].body) {
			t.Fatalf("GET doc: %d bytes, not the newest version's", len(got))
		}
	}
	check(c, doc) // read as the previous release left them

	// Writes move the versions out: a new version, then the newest deleted
	// by ID (the one before takes its place), then an old one.
	body := []byte("written by this build")
	doc = append(doc, version{aws.ToString(put(t, c, "hist", "doc", body).VersionId), body})
	check(c, doc)
	for _, i := range []int{len(doc) - 1, 5} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("hist"), Key: aws.String("doc"), VersionId: aws.String(doc[i].id)}); err != nil {
			t.Fatal(err)
		}
		doc = append(doc[:i], doc[i+1:]...)
		check(c, doc)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("hist"), Key: aws.String("gone")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a key deleted by the previous release: %v", err)
	}
	cur.kill()

	// Rolled back: the previous release reads each object's newest version.
	old = startPrevious()
	if got := getBody(t, old.aws(), "hist", "doc"); !bytes.Equal(got, doc[len(doc)-1].body) {
		t.Fatalf("the previous release reads %d bytes of doc, not its newest version", len(got))
	}
}

func getBody(t *testing.T, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GET %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
