package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestShardFilesFlag: `strata server --shard-files` writes each shard as a
// file of its own (data/<xx>/<id>.<part>, no directory per version); the
// same drives served without the flag (a rollback to writing directories)
// read those objects and write directories again, and with the flag once
// more read both.
func TestShardFilesFlag(t *testing.T) {
	root := t.TempDir()
	at := map[int]string{}
	for i := 1; i <= 4; i++ {
		at[i] = filepath.Join(root, fmt.Sprintf("d%d", i))
	}
	// entries lists what data/<xx>/ holds on drive 1: shard files of their
	// own and version directories.
	entries := func() (files, dirs int) {
		t.Helper()
		all, _ := filepath.Glob(filepath.Join(at[1], ".strata", "data", "*", "*"))
		for _, e := range all {
			fi, err := os.Stat(e)
			switch {
			case err != nil:
				t.Fatal(err)
			case fi.IsDir():
				dirs++
			case regexp.MustCompile(`^[0-9a-f]{32}\.[0-9]+$`).MatchString(fi.Name()):
				files++
			default:
				t.Fatalf("unexpected %s in the data area", e)
			}
		}
		return files, dirs
	}
	bodies := map[string][]byte{"big": randomBytes(1<<20 + 17), "mid": randomBytes(300 << 10)}
	check := func(c *s3.Client) {
		t.Helper()
		for k, want := range bodies {
			if got := getBody(t, c, "shardfiles", k); !bytes.Equal(got, want) {
				t.Fatalf("GET %s: %d bytes, not the %d written", k, len(got), len(want))
			}
		}
	}

	s := startServer(t, serverOpts{drives: 4, at: at, extra: []string{"--shard-files"}})
	c := s.aws()
	mustCreateBucket(t, c, "shardfiles")
	for k, b := range bodies {
		put(t, c, "shardfiles", k, b)
	}
	check(c)
	if files, dirs := entries(); files != 2 || dirs != 0 {
		t.Fatalf("with --shard-files drive 1 holds %d shard files and %d version directories, want 2 and 0", files, dirs)
	}
	s.kill()

	s = startServer(t, serverOpts{drives: 4, at: at})
	c = s.aws()
	check(c)
	bodies["later"] = randomBytes(700 << 10)
	put(t, c, "shardfiles", "later", bodies["later"])
	check(c)
	if files, dirs := entries(); files != 2 || dirs != 1 {
		t.Fatalf("without --shard-files drive 1 holds %d shard files and %d version directories, want 2 and 1", files, dirs)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("shardfiles"), Key: aws.String("mid")}); err != nil {
		t.Fatal(err)
	}
	delete(bodies, "mid")
	s.kill()

	s = startServer(t, serverOpts{drives: 4, at: at, extra: []string{"--shard-files"}})
	check(s.aws())
	if _, err := s.aws().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("shardfiles"), Key: aws.String("mid")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a deleted object: %v", err)
	}
}
