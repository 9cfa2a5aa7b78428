package s3rules

import (
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// A conditional write (PutObject, CompleteMultipartUpload, CopyObject)
// against the current object, ETag "abc": If-Match needs the object and
// its ETag (quoted or not) or "*"; If-None-Match fails when the object
// exists and matches it ("*" matches any).
func TestWriteConditions(t *testing.T) {
	for _, c := range []struct {
		exists               bool
		ifMatch, ifNoneMatch *string
		want                 string
	}{
		{false, nil, nil, ""},
		{true, nil, nil, ""},
		{false, ptr("*"), nil, "NoSuchKey"},
		{false, ptr("abc"), nil, "NoSuchKey"},
		{true, ptr("*"), nil, ""},
		{true, ptr("abc"), nil, ""},
		{true, ptr(`"abc"`), nil, ""},
		{true, ptr(`"x", "abc"`), nil, ""},
		{true, ptr("other"), nil, "PreconditionFailed"},
		{false, nil, ptr("*"), ""},
		{true, nil, ptr("*"), "PreconditionFailed"},
		{true, nil, ptr(" * "), "PreconditionFailed"},
		{true, nil, ptr("abc"), "PreconditionFailed"},
		{true, nil, ptr("other"), ""},
		{false, nil, ptr("other"), ""},
		{true, ptr("abc"), ptr("*"), "PreconditionFailed"},
		{true, ptr("other"), ptr("*"), "PreconditionFailed"},
	} {
		got := codeOf(EvaluateWrite(c.ifMatch, c.ifNoneMatch, "abc", c.exists))
		if got != c.want {
			t.Errorf("exists=%v If-Match=%s If-None-Match=%s: %q, want %q", c.exists, show(c.ifMatch), show(c.ifNoneMatch), got, c.want)
		}
	}
}

func show(p *string) string {
	if p == nil {
		return "(none)"
	}
	return "`" + *p + "`"
}

// A GET's or HEAD's conditions, with RFC 7232's precedence as S3 applies
// it: If-Match over If-Unmodified-Since, If-None-Match over
// If-Modified-Since; times compared at whole seconds. A copy's source
// conditions fail with 412 where a read would answer 304.
func TestReadConditions(t *testing.T) {
	mod := time.Date(2026, 11, 28, 12, 0, 0, 500_000_000, time.UTC) // stored with sub-second precision
	before, at, after := mod.Add(-time.Hour), mod.Truncate(time.Second), mod.Add(time.Hour)
	for _, c := range []struct {
		what     string
		c        ReadConditions
		read     string
		copySide string
	}{
		{"none", ReadConditions{}, "", ""},
		{"If-Match holds", ReadConditions{IfMatch: ptr(`"abc"`)}, "", ""},
		{"If-Match weak", ReadConditions{IfMatch: ptr(`W/"abc"`)}, "", ""},
		{"If-Match fails", ReadConditions{IfMatch: ptr("other")}, "PreconditionFailed", "PreconditionFailed"},
		{"If-Unmodified-Since holds", ReadConditions{IfUnmodifiedSince: &after}, "", ""},
		{"If-Unmodified-Since, same second", ReadConditions{IfUnmodifiedSince: &at}, "", ""},
		{"If-Unmodified-Since fails", ReadConditions{IfUnmodifiedSince: &before}, "PreconditionFailed", "PreconditionFailed"},
		{"If-Match wins over If-Unmodified-Since", ReadConditions{IfMatch: ptr("abc"), IfUnmodifiedSince: &before}, "", ""},
		{"If-None-Match matches", ReadConditions{IfNoneMatch: ptr("abc")}, "NotModified", "PreconditionFailed"},
		{"If-None-Match *", ReadConditions{IfNoneMatch: ptr("*")}, "NotModified", "PreconditionFailed"},
		{"If-None-Match other", ReadConditions{IfNoneMatch: ptr("other")}, "", ""},
		{"If-Modified-Since, not since", ReadConditions{IfModifiedSince: &at}, "NotModified", "PreconditionFailed"},
		{"If-Modified-Since, since", ReadConditions{IfModifiedSince: &before}, "", ""},
		{"If-None-Match wins over If-Modified-Since", ReadConditions{IfNoneMatch: ptr("other"), IfModifiedSince: &after}, "", ""},
		{"If-Match fails before If-None-Match", ReadConditions{IfMatch: ptr("other"), IfNoneMatch: ptr("abc")}, "PreconditionFailed", "PreconditionFailed"},
	} {
		if got := codeOf(EvaluateRead(c.c, "abc", mod)); got != c.read {
			t.Errorf("%s: read %q, want %q", c.what, got, c.read)
		}
		if got := codeOf(EvaluateCopySource(c.c, "abc", mod)); got != c.copySide {
			t.Errorf("%s: copy source %q, want %q", c.what, got, c.copySide)
		}
	}
}

// A delete's x-amz-if-match-* conditions name the version it deletes:
// its ETag, modification time (to the second) and size.
func TestDeleteConditions(t *testing.T) {
	mod := time.Date(2026, 11, 28, 12, 0, 0, 500_000_000, time.UTC)
	other := mod.Add(time.Second)
	for _, c := range []struct {
		c    DeleteConditions
		want string
	}{
		{DeleteConditions{}, ""},
		{DeleteConditions{IfMatch: ptr(`"abc"`), IfMatchModTime: ptr(mod.Truncate(time.Second)), IfMatchSize: ptr(int64(5))}, ""},
		{DeleteConditions{IfMatch: ptr("other")}, "PreconditionFailed"},
		{DeleteConditions{IfMatchModTime: &other}, "PreconditionFailed"},
		{DeleteConditions{IfMatchSize: ptr(int64(6))}, "PreconditionFailed"},
	} {
		if got := codeOf(EvaluateDelete(c.c, "abc", mod, 5)); got != c.want {
			t.Errorf("%+v: %q, want %q", c.c, got, c.want)
		}
	}
}
