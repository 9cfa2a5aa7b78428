package s3rules_test

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// These targets are an external test package: FuzzObjectKeys opens a
// drive, which the rules themselves never reach.

func code(err error) string {
	if e, ok := s3err.As(err); ok {
		return e.Code
	}
	if err != nil {
		return "not an S3 answer: " + err.Error()
	}
	return ""
}

// FuzzContinuationToken: any token a client sends decodes to a marker or
// is refused as InvalidArgument; a token the server issued decodes to its
// marker, and is safe in a query string as it is.
func FuzzContinuationToken(f *testing.F) {
	f.Add("a/b/c", s3rules.EncodeToken("photos/2024/"))
	f.Add("", "not base64!")
	f.Add("\x00\xff", "====")
	f.Add("é€😀", "cGhvdG9zLw==") // padded standard base64: not a token we issue
	f.Fuzz(func(t *testing.T, marker, token string) {
		issued := s3rules.EncodeToken(marker)
		if m, err := s3rules.DecodeToken(issued); err != nil || m != marker {
			t.Fatalf("marker %q came back as %q, %v", marker, m, err)
		}
		if url.QueryEscape(issued) != issued {
			t.Fatalf("token %q for %q needs escaping in a query", issued, marker)
		}
		if _, err := s3rules.DecodeToken(token); err != nil && code(err) != "InvalidArgument" {
			t.Fatalf("token %q: %v", token, err)
		}
	})
}

// FuzzObjectKeys: the key rule and the store agree. A key CheckKey accepts
// is stored by a drive and found again under exactly that name (listed
// first under itself as a prefix), and a listing with encoding-type=url
// names it so a client decodes it back; a key it refuses gets one of S3's
// error codes for keys.
func FuzzObjectKeys(f *testing.F) {
	for _, k := range []string{"a", "photos/2024/01.jpg", "dir/", "é€😀", "a\x00b", "\xff\xfe", strings.Repeat("k", 1025),
		strings.Repeat("k", 1024), "../../etc/passwd", " ", "a+b c%2F&?#", "tab\there", "\u2028\uFFFE"} {
		f.Add(k)
	}
	d, err := drive.OpenLocal(f.TempDir(), drive.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = d.Close() })
	enc := s3rules.KeyEncoder{URL: true}
	f.Fuzz(func(t *testing.T, key string) {
		if err := s3rules.CheckKey(key); err != nil {
			if c := code(err); c != "InvalidRequest" && c != "KeyTooLongError" && c != "InvalidArgument" {
				t.Fatalf("key %q refused with %v", key, err)
			}
			return
		}
		if key == "" || len(key) > s3rules.MaxKeyLength || strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key) {
			t.Fatalf("key %q accepted", key)
		}
		if encoded := enc.Enc(key); strings.ContainsAny(encoded, " +&<>\"'") {
			t.Fatalf("key %q listed as %q", key, encoded)
		} else if back, err := url.QueryUnescape(encoded); err != nil || back != key {
			t.Fatalf("key %q listed as %q, which decodes to %q (%v)", key, encoded, back, err)
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
