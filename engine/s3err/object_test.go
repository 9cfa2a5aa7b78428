package s3err

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Every object-layer error, wrapped as the layers below wrap it, reaches
// the client as the S3 error AWS answers, naming the bucket or key where
// S3's document does, and never the cluster's internal endpoints.
func TestFromObject(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   string
		status int
		fields []string
	}{
		{objlayer.ErrBucketNotFound, "NoSuchBucket", http.StatusNotFound, []string{"BucketName", "bkt"}},
		{objlayer.ErrBucketNotEmpty, "BucketNotEmpty", http.StatusConflict, []string{"BucketName", "bkt"}},
		{objlayer.ErrBucketExists, "BucketAlreadyOwnedByYou", http.StatusConflict, []string{"BucketName", "bkt"}},
		{objlayer.ErrObjectNotFound, "NoSuchKey", http.StatusNotFound, []string{"Key", "dir/k"}},
		{objlayer.ErrIncompleteBody, "IncompleteBody", http.StatusBadRequest, nil},
		{objlayer.ErrBodyTooLong, "BadRequest", http.StatusBadRequest, nil},
		{objlayer.ErrInvalidVersionID, "InvalidArgument", http.StatusBadRequest, nil},
		{objlayer.ErrUploadNotFound, "NoSuchUpload", http.StatusNotFound, nil},
		{objlayer.ErrInvalidPart, "InvalidPart", http.StatusBadRequest, nil},
		{objlayer.ErrInvalidPartOrder, "InvalidPartOrder", http.StatusBadRequest, nil},
		{objlayer.ErrPartTooSmall, "EntityTooSmall", http.StatusBadRequest, nil},
		{objlayer.ErrInvalidKey, "InvalidArgument", http.StatusBadRequest, []string{"Key", "dir/k"}},
		{objlayer.ErrKeyTooLong, "KeyTooLongError", http.StatusBadRequest, nil},
		{objlayer.ErrKeyConflict, "KeyConflict", http.StatusConflict, []string{"Key", "dir/k"}},
		{objlayer.ErrNoSpace, "InsufficientStorage", http.StatusInsufficientStorage, nil},
		// Lost quorum is retryable, so SlowDown: clients back off and retry.
		{objlayer.ErrReadQuorum, "SlowDown", http.StatusServiceUnavailable, nil},
		{objlayer.ErrWriteQuorum, "SlowDown", http.StatusServiceUnavailable, nil},
	} {
		wrapped := fmt.Errorf("pool-0 set 3 (drive 10.0.0.7:/data0): %w", c.err)
		got := FromObject(wrapped, "bkt", "dir/k")
		if got == nil {
			t.Errorf("%v: no S3 answer", c.err)
			continue
		}
		if got.Code != c.code || got.Status != c.status || strings.Join(got.Fields, "=") != strings.Join(c.fields, "=") {
			t.Errorf("%v: answered %s %d %q, want %s %d %q", c.err, got.Code, got.Status, got.Fields, c.code, c.status, c.fields)
		}
		// The cause stays for logs and errors.Is, not for the client.
		if !errors.Is(got, c.err) {
			t.Errorf("%v: the answer lost its cause", c.err)
		}
		doc := string(Render(got, "/bkt/dir/k", "REQ", "HOST"))
		if strings.Contains(doc, "pool-0") || strings.Contains(doc, "10.0.0.7") || strings.Contains(doc, "/data0") {
			t.Errorf("%v: the answer names internal endpoints: %s", c.err, doc)
		}
	}
	for _, err := range []error{nil, errors.New("disk on fire"), fmt.Errorf("checking: %w", AccessDenied)} {
		if got := FromObject(err, "bkt", "k"); got != nil {
			t.Errorf("%v: answered %v; only the object layer's errors are mapped here", err, got)
		}
	}
}

// Answers match by code whatever their message, fields or cause, so
// handlers test for them with errors.Is; ObjectLocked is an AccessDenied.
func TestAnswersMatchByCode(t *testing.T) {
	e := NoSuchKey.With("gone").Field("Key", "k").Because(errors.New("cause"))
	if !errors.Is(fmt.Errorf("wrapped: %w", e), NoSuchKey) || errors.Is(e, NoSuchBucket) {
		t.Error("errors.Is does not match answers by code")
	}
	if got, ok := As(fmt.Errorf("checking the lock: %w", ObjectLocked)); !ok || got.Code != "AccessDenied" || got.Status != http.StatusForbidden {
		t.Errorf("a wrapped ObjectLocked: %v, %v", got, ok)
	}
	if NoSuchKey.Message == "gone" || len(NoSuchKey.Fields) != 0 {
		t.Error("With and Field changed the table's answer")
	}
}

// The error document escapes what a key, message or path may carry, so a
// client's XML decoder reads back exactly what was said.
func TestRenderedDocumentParses(t *testing.T) {
	const key = "a<b>&\"c' d\tü"
	doc := Render(Key(NoSuchKey.With("No <such> key & more"), key), "/b/"+key, "REQ", "HOST")
	var got struct {
		XMLName                      xml.Name `xml:"Error"`
		Code, Message, Key, Resource string
		RequestID                    string `xml:"RequestId"`
		HostID                       string `xml:"HostId"`
	}
	if err := xml.Unmarshal(doc, &got); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if got.Code != "NoSuchKey" || got.Message != "No <such> key & more" || got.Key != key ||
		got.Resource != "/b/"+key || got.RequestID != "REQ" || got.HostID != "HOST" {
		t.Errorf("read back %+v from\n%s", got, doc)
	}
	// Characters XML 1.0 cannot carry (a key may hold them) are replaced,
	// so the document still parses.
	doc = Render(Key(NoSuchKey, "a\x01b\uFFFE"), "/b/a", "REQ", "HOST")
	if err := xml.Unmarshal(doc, &got); err != nil || got.Key != "a\uFFFDb\uFFFD" {
		t.Errorf("key with control characters: %q (%v) from\n%s", got.Key, err, doc)
	}
}
