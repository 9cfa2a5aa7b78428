package s3api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// aws-chunked only framed the upload: the object keeps the other
// encodings the client sent, and none at all when aws-chunked was the
// only one (S3 drops it too).
func TestStoredEncodingDropsAwsChunked(t *testing.T) {
	for in, want := range map[string]string{
		"gzip":                     "gzip",
		"deflate, gzip":            "deflate, gzip",
		"deflate,gzip":             "deflate,gzip",
		"gzip, aws-chunked":        "gzip",
		"aws-chunked, gzip":        "gzip",
		"aws-chunked,gzip":         "gzip",
		"AWS-Chunked, br":          "br",
		"aws-chunked":              "",
		"aws-chunked, aws-chunked": "",
	} {
		if got := storedEncoding(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	meta, err := metaFrom(http.Header{"Content-Encoding": {"aws-chunked"}, "Content-Type": {"text/plain"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := meta[objlayer.MetaContentEncoding]; ok {
		t.Errorf("an aws-chunked upload stored Content-Encoding %q", v)
	}
	if meta[objlayer.MetaContentType] != "text/plain" {
		t.Errorf("Content-Type not kept: %v", meta)
	}
}

// A version keeps the stored headers, user metadata under lower-case
// names, and its tags; user metadata is UTF-8 and at most 2 KiB.
func TestMetaFromHeaders(t *testing.T) {
	h := http.Header{
		"Cache-Control":   {"no-cache"},
		"X-Amz-Meta-Name": {"value"},
		"X-Amz-Meta-Two":  {"a", "b"},
		"Authorization":   {"not kept"},
	}
	meta, err := metaFrom(h, "k=v")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		objlayer.MetaCacheControl:        "no-cache",
		objlayer.MetaUserPrefix + "name": "value",
		objlayer.MetaUserPrefix + "two":  "a,b",
		objlayer.MetaTagging:             "k=v",
	}
	if len(meta) != len(want) {
		t.Errorf("got %v, want %v", meta, want)
	}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("%s: %q, want %q", k, meta[k], v)
		}
	}
	if _, err := metaFrom(http.Header{"X-Amz-Meta-Bad": {"\xff"}}, ""); codeOf(err) != "InvalidArgument" {
		t.Errorf("metadata that is not UTF-8: %v", err)
	}
	if _, err := metaFrom(http.Header{"X-Amz-Meta-Big": {strings.Repeat("v", maxUserMeta)}}, ""); codeOf(err) != "MetadataTooLarge" {
		t.Errorf("metadata over 2 KiB: %v", err)
	}
}
