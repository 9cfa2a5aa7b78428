package engine

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// driveDirs names n drive directories (from 1) under a fresh directory,
// for tests that serve the same drives with more than one server.
func driveDirs(t *testing.T, n int) (map[int]string, []string) {
	root := t.TempDir()
	at := map[int]string{}
	var dirs []string
	for i := 1; i <= n; i++ {
		at[i] = filepath.Join(root, fmt.Sprintf("d%d", i))
		dirs = append(dirs, at[i])
	}
	return at, dirs
}

// startBuild starts another build of strata (bin) as a server on dirs,
// with no flag a build of any age lacks.
func startBuild(t *testing.T, bin string, dirs []string) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t), bin: bin}
	s.args = append([]string{"server", "--address", s.addr, "--shutdown-delay", "0s"}, dirs...)
	s.start()
	t.Cleanup(s.kill)
	return s
}

// TestRollbackToThePreviousRelease: what this build writes with its
// defaults (shards as files of their own above the inline size, multipart
// objects, versions, a delete marker) the previous release
// (STRATA_PREVIOUS_BIN, the one a rollback returns to) reads back byte for
// byte from the same drives, overwrites and deletes; and this build, rolled
// forward again, reads what both wrote.
func TestRollbackToThePreviousRelease(t *testing.T) {
	t.Parallel()
	prev := os.Getenv("STRATA_PREVIOUS_BIN")
	if prev == "" {
		skipOutsideCI(t, "STRATA_PREVIOUS_BIN not set (make engine-integration builds it from PREVIOUS_REV)")
	}
	at, dirs := driveDirs(t, 4)
	const bucket = "rollback"
	want := map[string][]byte{} // key -> the newest version's bytes
	check := func(c *s3.Client) {
		t.Helper()
		for k, b := range want {
			if got := getBody(t, c, bucket, k); !bytes.Equal(got, b) {
				t.Fatalf("GET %s: %d bytes, not the %d written", k, len(got), len(b))
			}
		}
	}

	cur := startServer(t, serverOpts{drives: 4, at: at})
	c := cur.aws()
	mustCreateBucket(t, c, bucket)
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	for k, n := range map[string]int{"small": 4 << 10, "mid": 300 << 10, "big": 1<<20 + 17, "large": 16<<20 + 5} {
		want[k] = randomBytes(n)
		put(t, c, bucket, k, want[k])
	}
	// Three versions of one key; the first is read by its ID later.
	var first []byte
	var firstID *string
	for i := range 3 {
		b := randomBytes(200<<10 + i)
		out := put(t, c, bucket, "doc", b)
		if i == 0 {
			first, firstID = b, out.VersionId
		}
		want["doc"] = b
	}
	parts := [][]byte{randomBytes(5 << 20), randomBytes(700 << 10)}
	if err := uploadParts(c, bucket, "multipart", parts); err != nil {
		t.Fatal(err)
	}
	want["multipart"] = bytes.Join(parts, nil)
	put(t, c, bucket, "gone", randomBytes(150<<10))
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	if files, _ := shardEntries(t, at[1]); files == 0 {
		t.Fatal("this build wrote no shard as a file of its own: the test would not show the previous release reads them")
	}
	cur.kill()

	old := startBuild(t, prev, dirs)
	c = old.aws()
	check(c)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("doc"), VersionId: firstID})
	if err != nil {
		t.Fatalf("the previous release reading an older version: %v", err)
	}
	b, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(b, first) {
		t.Fatalf("the previous release reads %d bytes of the first version (%v), not its %d", len(b), err, len(first))
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("gone")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a key this build deleted, from the previous release: %v", err)
	}
	want["big"] = randomBytes(1<<20 + 3)
	put(t, c, bucket, "big", want["big"])
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("mid")}); err != nil {
		t.Fatal(err)
	}
	delete(want, "mid")
	old.kill()

	cur = startServer(t, serverOpts{drives: 4, at: at})
	check(cur.aws())
	if _, err := cur.aws().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("mid")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a key the previous release deleted: %v", err)
	}
}
