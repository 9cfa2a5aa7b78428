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

// TestShardFilesFlag: `strata server` writes each shard as a file of its
// own (data/<xx>/<id>.<part>, no directory per version); the same drives
// served with --shard-files=false read those objects and write directories
// again, and with the default once more read both.
func TestShardFilesFlag(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	at := map[int]string{}
	for i := 1; i <= 4; i++ {
		at[i] = filepath.Join(root, fmt.Sprintf("d%d", i))
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

	s := startServer(t, serverOpts{drives: 4, at: at})
	c := s.aws()
	mustCreateBucket(t, c, "shardfiles")
	for k, b := range bodies {
		put(t, c, "shardfiles", k, b)
	}
	check(c)
	if files, dirs := shardEntries(t, at[1]); files != 2 || dirs != 0 {
		t.Fatalf("by default drive 1 holds %d shard files and %d version directories, want 2 and 0", files, dirs)
	}
	s.kill()

	s = startServer(t, serverOpts{drives: 4, at: at, extra: []string{"--shard-files=false"}})
	c = s.aws()
	check(c)
	bodies["later"] = randomBytes(700 << 10)
	put(t, c, "shardfiles", "later", bodies["later"])
	check(c)
	if files, dirs := shardEntries(t, at[1]); files != 2 || dirs != 1 {
		t.Fatalf("with --shard-files=false drive 1 holds %d shard files and %d version directories, want 2 and 1", files, dirs)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("shardfiles"), Key: aws.String("mid")}); err != nil {
		t.Fatal(err)
	}
	delete(bodies, "mid")
	s.kill()

	s = startServer(t, serverOpts{drives: 4, at: at})
	check(s.aws())
	if _, err := s.aws().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("shardfiles"), Key: aws.String("mid")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET of a deleted object: %v", err)
	}
}

// shardEntries counts what data/<xx>/ holds on the drive at dir: shard
// files of their own and version directories.
func shardEntries(t *testing.T, dir string) (files, dirs int) {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(dir, ".strata", "data", "*", "*"))
	for _, e := range all {
		fi, err := os.Stat(e)
		switch {
		case err != nil:
			t.Fatal(err)
		case fi.IsDir():
			dirs++
		case shardFileName.MatchString(fi.Name()):
			files++
		default:
			t.Fatalf("unexpected %s in the data area", e)
		}
	}
	return files, dirs
}

var shardFileName = regexp.MustCompile(`^[0-9a-f]{32}\.[0-9]+$`)
