package posix

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheckKey: a key the layer accepts maps onto exactly one path below
// its bucket, never outside it and never onto the staging directory.
func FuzzCheckKey(f *testing.F) {
	for _, k := range []string{"a/b/c", "dir/", "../x", "a/./b", "a//b", "/abs", stagingDir + "/x", "a/" + stagingDir, "a\x00b", "..", "é/ü"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if checkKey(key) != nil || key == "" {
			return
		}
		const bucket = "/vol/bucket"
		p := filepath.Join(bucket, key)
		if !strings.HasPrefix(p, bucket+"/") {
			t.Fatalf("key %q maps to %q, outside the bucket", key, p)
		}
		if rel := strings.TrimPrefix(p, bucket+"/"); rel != strings.TrimSuffix(key, "/") {
			t.Fatalf("key %q maps to %q: not one-to-one", key, rel)
		}
		if strings.HasPrefix(p, bucket+"/"+stagingDir) && (len(p) == len(bucket)+1+len(stagingDir) || p[len(bucket)+1+len(stagingDir)] == '/') {
			t.Fatalf("key %q maps into the staging directory", key)
		}
	})
}
