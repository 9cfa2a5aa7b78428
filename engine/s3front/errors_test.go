package s3front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3err"
)

// TestS3Meanings: every object-layer error the engine returns, wrapped as
// the layers below wrap it, reaches the client as the S3 error AWS answers.
func TestS3Meanings(t *testing.T) {
	b := &Backend{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	gone, leave := context.WithCancelCause(t.Context())
	leave(errClientGone)
	for _, c := range []struct {
		err    error
		code   string
		status int
	}{
		{objlayer.ErrBucketNotFound, "NoSuchBucket", http.StatusNotFound},
		{objlayer.ErrBucketNotEmpty, "BucketNotEmpty", http.StatusConflict},
		{objlayer.ErrBucketExists, "BucketAlreadyOwnedByYou", http.StatusConflict},
		{objlayer.ErrObjectNotFound, "NoSuchKey", http.StatusNotFound},
		{objlayer.ErrIncompleteBody, "IncompleteBody", http.StatusBadRequest},
		{objlayer.ErrBodyTooLong, "BadRequest", http.StatusBadRequest},
		{objlayer.ErrInvalidVersionID, "InvalidArgument", http.StatusBadRequest},
		{objlayer.ErrUploadNotFound, "NoSuchUpload", http.StatusNotFound},
		{objlayer.ErrInvalidPart, "InvalidPart", http.StatusBadRequest},
		{objlayer.ErrInvalidPartOrder, "InvalidPartOrder", http.StatusBadRequest},
		{objlayer.ErrPartTooSmall, "EntityTooSmall", http.StatusBadRequest},
		{objlayer.ErrNoSpace, "InsufficientStorage", http.StatusInsufficientStorage},
		{objlayer.ErrReadQuorum, "SlowDown", http.StatusServiceUnavailable},
		{objlayer.ErrWriteQuorum, "SlowDown", http.StatusServiceUnavailable},
		{errors.New("disk on fire"), "InternalError", http.StatusInternalServerError},
		// Lost quorum because the request's client went away and its
		// drive calls were stopped: not a fault.
		{stopped(gone, objlayer.ErrReadQuorum), "RequestTimeout", http.StatusBadRequest},
		{stopped(t.Context(), objlayer.ErrReadQuorum), "SlowDown", http.StatusServiceUnavailable},
		{s3err.GetAPIError(s3err.ErrAccessDenied), "AccessDenied", http.StatusForbidden},
		{fmt.Errorf("checking the lock: %w", s3err.GetAPIError(s3err.ErrObjectLocked)), "AccessDenied", http.StatusForbidden},
	} {
		wrapped := fmt.Errorf("pool-0 set 3 (drive 10.0.0.7:/data0): %w", c.err)
		got := b.toS3(wrapped, "bkt")
		var s3e s3err.S3Error
		if !errors.As(got, &s3e) {
			t.Errorf("%v: answered %T, not an S3 error", c.err, got)
			continue
		}
		base := s3e.BaseError()
		if base.Code != c.code || base.HTTPStatusCode != c.status {
			t.Errorf("%v: answered %s %d, want %s %d", c.err, base.Code, base.HTTPStatusCode, c.code, c.status)
		}
		if strings.Contains(base.Description, "pool-0") || strings.Contains(base.Description, "/data") {
			t.Errorf("%v: the answer names internal endpoints: %s", c.err, base.Description)
		}
	}
	if b.toS3(nil, "bkt") != nil {
		t.Error("no error became an error")
	}
}
