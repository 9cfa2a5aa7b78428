package s3rules

import (
	"encoding/xml"
	"strings"
	"testing"
)

// GetObjectTagging and GetBucketTagging answer tags sorted by key, as S3
// does, in S3's namespace, an empty value and no tags at all included.
func TestRenderTaggingSortsByKey(t *testing.T) {
	out, err := xml.Marshal(RenderTagging(map[string]string{"b": "1", "a": "", "C": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	want := `<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>` +
		`<Tag><Key>C</Key><Value>3</Value></Tag><Tag><Key>a</Key><Value></Value></Tag><Tag><Key>b</Key><Value>1</Value></Tag>` +
		`</TagSet></Tagging>`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if out, _ := xml.Marshal(RenderTagging(nil)); !strings.Contains(string(out), "<TagSet></TagSet>") {
		t.Errorf("no tags: %s, want an empty TagSet", out)
	}
}

// Tags stored as a query read back as set, whatever their characters.
func TestTagQueryRoundTrip(t *testing.T) {
	tags := map[string]string{"project": "a b+c", "path": "x/y=z", "empty": "", "é": "ü"}
	got := DecodeTagQuery(EncodeTagQuery(tags))
	if len(got) != len(tags) {
		t.Fatalf("got %v, want %v", got, tags)
	}
	for k, v := range tags {
		if got[k] != v {
			t.Errorf("%q: %q, want %q", k, got[k], v)
		}
	}
	if parsed, err := ParseTagQuery(EncodeTagQuery(tags)); err != nil || len(parsed) != len(tags) {
		t.Errorf("a stored query parsed as x-amz-tagging: %v %v", parsed, err)
	}
}
