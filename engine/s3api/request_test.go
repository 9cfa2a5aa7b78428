package s3api

import (
	"net/http"
	"testing"
)

// TestCanonicalHeader: whatever canonicalHeader accepts, net/http's
// canonical form leaves as it is (so a miss in the header map is final),
// and it accepts every canonical form of these names.
func TestCanonicalHeader(t *testing.T) {
	names := []string{
		"X-Amz-Server-Side-Encryption", "x-amz-server-side-encryption", "X-AMZ-DATE", "Content-MD5",
		"Content-Md5", "If-Match", "if-match", "ETag", "Etag", "X-Amz-Meta-Foo_Bar", "x_amz", "X Amz",
		"A", "a", "-", "--x", "X--Y", "X-1a", "X-1A", "", "Accept-Encoding", "s3:x-amz-acl", "X-Amz-Copy-Source-Server-Side-Encryption-Customer-Key-Md5",
	}
	for _, n := range names {
		canon := http.CanonicalHeaderKey(n)
		if canonicalHeader(n) && canon != n {
			t.Errorf("canonicalHeader(%q) = true, but net/http keys it %q", n, canon)
		}
	}
	for _, n := range []string{"X-Amz-Server-Side-Encryption", "Content-Md5", "Etag", "If-Match", "X-1a", "A", ""} {
		if !canonicalHeader(n) {
			t.Errorf("canonicalHeader(%q) = false; it is net/http's canonical form", n)
		}
	}
}
