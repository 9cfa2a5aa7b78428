package s3api

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
)

// answer is the response writer of a request: it remembers the status
// and counts the bytes sent.
type answer struct {
	http.ResponseWriter
	r           *request
	status      int
	written     int64
	wroteHeader bool
}

func (a *answer) WriteHeader(code int) {
	if a.wroteHeader {
		return
	}
	a.wroteHeader, a.status = true, code
	a.ResponseWriter.WriteHeader(code)
}

func (a *answer) Write(p []byte) (int, error) {
	if !a.wroteHeader {
		a.WriteHeader(http.StatusOK)
	}
	n, err := a.ResponseWriter.Write(p)
	a.written += int64(n)
	return n, err
}

// ReadFrom passes a file on to a writer that can send it without copying
// it through memory (the HTTP server's, over plain TCP: sendfile).
func (a *answer) ReadFrom(src io.Reader) (int64, error) {
	if !a.wroteHeader {
		a.WriteHeader(http.StatusOK)
	}
	var n int64
	var err error
	if rf, ok := a.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{a.ResponseWriter}, src)
	}
	a.written += n
	return n, err
}

// writerOnly hides a writer's ReadFrom (io.Copy would call it again).
type writerOnly struct{ io.Writer }

// Unwrap gives http.ResponseController the underlying writer.
func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// xmlHeader starts every document.
const xmlHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"

// xmlNS is S3's namespace.
const xmlNS = "http://s3.amazonaws.com/doc/2006-03-01/"

// writeXML answers status with a document.
func (r *request) writeXML(status int, v any) error {
	body, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	return r.writeDoc(status, "application/xml", append([]byte(xmlHeader), body...))
}

// writeDoc answers status with a body of a content type.
func (r *request) writeDoc(status int, contentType string, body []byte) error {
	h := r.w.Header()
	h["Content-Type"] = []string{contentType}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	r.closeIfBodyLeft()
	r.w.WriteHeader(status)
	if r.hr.Method != http.MethodHead {
		_, _ = r.w.Write(body)
	}
	return nil
}

// empty answers status without a body.
func (r *request) empty(status int) error {
	r.closeIfBodyLeft()
	if status != http.StatusNoContent && status != http.StatusNotModified {
		r.w.Header()["Content-Length"] = []string{"0"}
	}
	r.w.WriteHeader(status)
	return nil
}

// setHeader sets a response header (canonical names only).
func (r *request) setHeader(name, value string) {
	if value != "" {
		r.w.Header()[name] = []string{value}
	}
}

// httpTime formats a time as HTTP headers carry it (RFC 1123, GMT).
func httpTime(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// isoTime formats a time as S3's documents carry it.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// errStopped is the cause of a request whose context ended (its client
// went away) before the answer was ready: whatever failed, failed because
// the work was stopped, so it is neither logged as a fault nor worth
// detail.
var errStopped = errors.New("s3: request stopped")

// fail answers err (nothing when err is nil or the answer was sent
// already): S3 answers as they are, object-layer errors through their one
// mapping, anything else as InternalError, logged.
func (r *request) fail(err error) {
	if err == nil {
		return
	}
	e := r.toS3(err)
	if r.w.wroteHeader {
		if e != nil && e.Status >= 500 {
			r.s.cfg.Log.Warn("request failed after its answer began", "op", r.opName(), "bucket", r.bucket, "key", r.key, "err", err)
		}
		return
	}
	if e.Status == http.StatusNotModified {
		r.closeIfBodyLeft()
		r.w.WriteHeader(http.StatusNotModified)
		return
	}
	resource := r.resource()
	body := s3err.Render(e, resource, r.hr.ID, r.w.Header().Get("X-Amz-Id-2"))
	h := r.w.Header()
	h["Content-Type"] = []string{"application/xml"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	r.closeIfBodyLeft()
	r.w.WriteHeader(e.Status)
	if r.hr.Method != http.MethodHead {
		_, _ = r.w.Write(body)
	}
}

func (r *request) opName() string {
	if r.op == nil {
		return "Unknown"
	}
	return r.op.name
}

// toS3 maps an error to its S3 answer.
func (r *request) toS3(err error) *s3err.Error {
	if e, ok := s3err.As(err); ok {
		if e.Status >= 500 && e.Code == s3err.InternalError.Code {
			r.s.cfg.Log.Error("internal error", "op", r.opName(), "bucket", r.bucket, "key", r.key, "err", err)
		}
		return e
	}
	if r.ctx.Err() != nil {
		return s3err.RequestTimeout.With("The request ended before its answer was ready.").Because(err)
	}
	if e := s3err.FromObject(err, r.bucket, r.key); e != nil {
		if e.Code == s3err.SlowDown.Code {
			r.s.cfg.Log.Warn("quorum lost", "bucket", r.bucket, "err", err)
		}
		return e
	}
	r.s.cfg.Log.Error("internal error", "op", r.opName(), "bucket", r.bucket, "key", r.key, "err", err)
	return s3err.InternalError.Because(err)
}

// versionIDOut is the x-amz-version-id of a version: absent for the null
// version of a bucket that never had versioning.
func versionIDOut(id [16]byte, versioning string) string {
	if id == objlayer.NullVersion && versioning == "" {
		return ""
	}
	return objlayer.FormatVersionID(id)
}

// writtenVersionID is the x-amz-version-id a write answers: the new
// version's ID, and none for a null version (unversioned and suspended
// buckets), as S3 answers.
func writtenVersionID(id [16]byte) string {
	if id == objlayer.NullVersion {
		return ""
	}
	return objlayer.FormatVersionID(id)
}

// quote is an ETag as headers and documents carry it.
func quote(etag string) string { return `"` + etag + `"` }
