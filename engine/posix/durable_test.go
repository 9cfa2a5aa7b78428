package posix

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// The durable mode runs every write path with its syncs.
func TestFsyncMode(t *testing.T) {
	forModes(t, func(t *testing.T, mode MetadataMode) {
		l := open(t, t.TempDir(), mode, func(o *Options) { o.Fsync = true })
		mkBucket(t, l, "bkt", "Enabled")
		v1 := putV(t, l, "bkt", "a/b/c", []byte("one"))
		putV(t, l, "bkt", "a/b/c", []byte("two"))
		put(t, l, "bkt", "dir/", nil, objlayer.PutOptions{})
		if _, err := l.DeleteObject(ctx, "bkt", "a/b/c", nil, objlayer.DeleteVersioned); err != nil {
			t.Fatal(err)
		}
		if _, err := l.DeleteObject(ctx, "bkt", "a/b/c", &v1.VersionID, 0); err != nil {
			t.Fatal(err)
		}
		u, parts, data := startUpload(t, l, "bkt", "mp", nil, 10)
		if _, err := l.CompleteMultipartUpload(ctx, "bkt", "mp", u.ID, parts, objlayer.PutOptions{VersionID: newID()}); err != nil {
			t.Fatal(err)
		}
		if got, _ := mustRead(t, l, "bkt", "mp", nil); !bytes.Equal(got, data) {
			t.Fatal("multipart object")
		}
		if got := versionsOf(t, l, "bkt", "a/b/c"); got != "DM* two" {
			t.Fatalf("versions: %s", got)
		}
	})
}

func TestLargeDirectories(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	l := open(t, t.TempDir(), MetadataXattr, func(o *Options) {
		o.LargeDirThreshold, o.largeDirRecount = 3, 20*time.Millisecond
		o.OnLargeDir = func(dir string, n int, large bool) { mu.Lock(); seen[dir] = large; mu.Unlock() }
	})
	mkBucket(t, l, "bkt", "")
	for _, k := range []string{"big/1", "big/2", "big/3", "big/4", "small/1"} {
		put(t, l, "bkt", k, nil, objlayer.PutOptions{})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := l.LargeDirs()
		if len(got) == 1 && got[0].Dir == "bkt/big" && got[0].Entries >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("large directories: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !seen["bkt/big"] || len(seen) != 1 || l.LargeDirThreshold() != 3 {
		t.Fatalf("observer saw %v", seen)
	}
}

// Writes never make a removed bucket again.
func TestMkdirBelow(t *testing.T) {
	base := t.TempDir()
	bucket := filepath.Join(base, "bkt")
	if err := mkdirBelow(bucket, filepath.Join(bucket, "a", "b")); !errors.Is(err, objlayer.ErrBucketNotFound) {
		t.Fatalf("below a missing bucket: %v", err)
	}
	if _, err := os.Stat(bucket); !os.IsNotExist(err) {
		t.Fatal("the bucket was made")
	}
	writeFile(t, filepath.Join(bucket, "file"), nil)
	if err := mkdirBelow(bucket, filepath.Join(bucket, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := mkdirBelow(bucket, filepath.Join(bucket, "file", "x")); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("below a file: %v", err)
	}
	if err := mkdirBelow(bucket, filepath.Join(bucket, "file")); !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("a file: %v", err)
	}
}
