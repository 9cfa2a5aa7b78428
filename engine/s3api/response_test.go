package s3api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
)

// codeOf is the S3 error code of err ("" for none; the text of an error
// that is not an S3 answer, so a test shows it).
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := s3err.As(err); ok {
		return e.Code
	}
	return "not an S3 answer: " + err.Error()
}

// How a handler's error is answered: S3 answers as they are, the object
// layer's errors through s3err's one mapping, anything else as
// InternalError; and when the request's client went away, whatever failed
// failed because the work was stopped, which is no fault of the server.
func TestErrorsAnsweredAsS3(t *testing.T) {
	s := New(nil, Config{})
	gone, leave := context.WithCancelCause(context.Background())
	leave(errors.New("client went away"))
	for _, c := range []struct {
		what   string
		ctx    context.Context
		err    error
		code   string
		status int
	}{
		{"an S3 answer", context.Background(), s3err.AccessDenied, "AccessDenied", http.StatusForbidden},
		{"a wrapped S3 answer", context.Background(), fmt.Errorf("checking the lock: %w", s3err.ObjectLocked), "AccessDenied", http.StatusForbidden},
		{"an object-layer error", context.Background(), fmt.Errorf("pool-0: %w", objlayer.ErrObjectNotFound), "NoSuchKey", http.StatusNotFound},
		{"lost quorum", context.Background(), fmt.Errorf("set 3: %w", objlayer.ErrReadQuorum), "SlowDown", http.StatusServiceUnavailable},
		{"anything else", context.Background(), errors.New("disk on fire"), "InternalError", http.StatusInternalServerError},
		{"lost quorum, client gone", gone, fmt.Errorf("set 3: %w", objlayer.ErrReadQuorum), "RequestTimeout", http.StatusBadRequest},
		{"anything else, client gone", gone, context.Canceled, "RequestTimeout", http.StatusBadRequest},
		// An answer decided before the client left stays that answer.
		{"an S3 answer, client gone", gone, s3err.NoSuchBucket, "NoSuchBucket", http.StatusNotFound},
	} {
		r := &request{s: s, ctx: c.ctx, bucket: "bkt", key: "k"}
		got := r.toS3(c.err)
		if got.Code != c.code || got.Status != c.status {
			t.Errorf("%s: answered %s %d, want %s %d", c.what, got.Code, got.Status, c.code, c.status)
		}
	}
}
