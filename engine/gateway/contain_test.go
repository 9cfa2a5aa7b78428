package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"a": true, "a/b/c.txt": true, "dir/": true, "a..b": true, "..a/b": true, "a/.hidden": true, "a/b.": true,
		"x/.sgwtmp/y": true, "a b/ü/✓": true, "": true,
		"..": false, "../a": false, "a/..": false, "a/../b": false, ".": false, "./a": false, "a/./b": false,
		"/a": false, "a//b": false, "//": false, "/": false, "a\x00b": false, ".sgwtmp": false, ".sgwtmp/multipart/x": false,
		"a/../": false, "dir//": false,
	} {
		if got := CheckKey(key) == nil; got != ok {
			t.Errorf("CheckKey(%q) ok=%v, want %v", key, got, ok)
		}
	}
}

func TestPrefixCanMatch(t *testing.T) {
	for prefix, ok := range map[string]bool{
		"": true, "a": true, "a/": true, "a/b": true, "..": true, "a/..": true, "a/..x": true, ".": true,
		"../": false, "a/../": false, "/": false, "a//": false, "a//b": false, "x\x00": false, "./": false,
	} {
		if got := prefixCanMatch(prefix); got != ok {
			t.Errorf("prefixCanMatch(%q) = %v, want %v", prefix, got, ok)
		}
	}
}

// TestContain runs the same cases through openat2 and through the
// fallback that resolves links itself.
func TestContain(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "b", "sub", "deep"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "b2"), 0o755))
	must(os.WriteFile(filepath.Join(root, "b", "sub", "f"), nil, 0o644))
	must(os.WriteFile(filepath.Join(base, "outside"), nil, 0o644))
	for name, target := range map[string]string{
		"b/abs":         base,
		"b/rel":         "../..",
		"b/cross":       "../b2",
		"b/in":          "sub",
		"b/sub/up":      "..",
		"b/sub/deep/up": "../../..",
		"b/absin":       filepath.Join(root, "b", "sub"),
		"b/loop":        "loop",
		"b/dangling":    "nowhere",
		"lnk":           filepath.Join(root, "b"),
	} {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	cases := []struct {
		bucket, key string
		ok          bool
	}{
		{"b", "", true},
		{"b", "sub/f", true},
		{"b", "missing/dir/file", true},
		{"b", "in/f", true},
		{"b", "sub/up/sub/f", true},
		{"b", "dangling", true},
		{"b", "dangling/x", true},
		{"nobucket", "x", true},
		{"b", "abs", false},
		{"b", "abs/outside", false},
		{"b", "abs/new/file", false},
		{"b", "rel/outside", false},
		{"b", "cross", false},
		{"b", "cross/x", false},
		{"b", "sub/deep/up/x", false},
		{"b", "absin/f", false}, // absolute targets are refused even when they land inside
		{"b", "loop", false},
		{"lnk", "", false},
		{"lnk", "sub/f", false},
	}
	vol, err := openVolume(root)
	if err != nil {
		t.Fatal(err)
	}
	defer vol.close()
	for _, mode := range []string{"openat2", "walk"} {
		for _, c := range cases {
			var err error
			if mode == "openat2" {
				err = vol.Contain(c.bucket, c.key)
			} else {
				err = vol.containWalk(c.bucket, c.key)
			}
			if (err == nil) != c.ok {
				t.Errorf("%s: Contain(%q, %q) = %v, want ok=%v", mode, c.bucket, c.key, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrOutsideBucket) {
				t.Errorf("%s: Contain(%q, %q) = %v, want ErrOutsideBucket", mode, c.bucket, c.key, err)
			}
		}
	}
	for bucket, want := range map[string]bool{"b": true, "b2": true, "nobucket": false, "": false, "..": false, "b/sub": false} {
		if ok, err := vol.Bucket(bucket); ok != want || err != nil {
			t.Errorf("Bucket(%q) = %v, %v; want %v", bucket, ok, err, want)
		}
	}
	if _, err := vol.Bucket("lnk"); !errors.Is(err, ErrOutsideBucket) {
		t.Errorf("Bucket(lnk) = %v, want ErrOutsideBucket", err)
	}
	if vol.noAt2.Load() {
		t.Log("openat2 unavailable here: both runs used the fallback")
	}
}
