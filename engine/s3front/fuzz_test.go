package s3front

import (
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
)

// FuzzContinuationToken: any token a client sends decodes to a marker or
// is refused as InvalidArgument; a token the server issued decodes to its
// marker.
func FuzzContinuationToken(f *testing.F) {
	f.Add("a/b/c", encodeToken("photos/2024/"))
	f.Add("", "not base64!")
	f.Add("\x00\xff", "====")
	f.Fuzz(func(t *testing.T, marker, token string) {
		if m, err := decodeToken(encodeToken(marker)); err != nil || m != marker {
			t.Fatalf("marker %q came back as %q, %v", marker, m, err)
		}
		if _, err := decodeToken(token); err != nil && code(err) != "InvalidArgument" {
			t.Fatalf("token %q: %v", token, err)
		}
	})
}

// FuzzObjectKeys: a key the front end accepts is stored and found again
// under exactly that name (listed first under itself as a prefix); a key
// it refuses gets an S3 error code.
func FuzzObjectKeys(f *testing.F) {
	for _, k := range []string{"a", "photos/2024/01.jpg", "dir/", "é€😀", "a\x00b", "\xff\xfe", strings.Repeat("k", 1025), "../../etc/passwd", " "} {
		f.Add(k)
	}
	d, err := drive.OpenLocal(f.TempDir(), drive.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = d.Close() })
	f.Fuzz(func(t *testing.T, key string) {
		if err := checkKey(key); err != nil {
			if c := code(err); c != "InvalidRequest" && c != "KeyTooLongError" && c != "InvalidArgument" {
				t.Fatalf("key %q refused with %v", key, err)
			}
			return
		}
		if _, err := d.PutVersion(t.Context(), "bk", key, &drive.Record{ModTime: 1, ETag: "e"}, drive.NotStaged); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		if _, err := d.GetVersion(t.Context(), "bk", key, nil); err != nil {
			t.Fatalf("key %q stored, then: %v", key, err)
		}
		var first string
		_ = d.WalkObjects(t.Context(), "bk", key, "", true, func(name string, _ []*drive.Record) bool {
			first = name
			return false
		})
		if first != key {
			t.Fatalf("key %q listed as %q", key, first)
		}
	})
}
