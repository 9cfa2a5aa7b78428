package s3api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3http"
	"github.com/strata-storage/strata/engine/s3sig"
)

// request is one S3 request as the handlers see it: the HTTP request, what
// routing, authentication and authorisation found, and the answer being
// written. It is passed to every handler explicitly; its ctx ends when the
// client goes away or the answer is done.
type request struct {
	s   *Server
	hr  *s3http.Request
	w   *answer
	ctx context.Context
	now time.Time

	op          *operation
	bucket, key string
	query       url.Values
	header      http.Header

	// Who sent it: the access key ("" anonymous), whether it has root's
	// rights, and how it proved it.
	access string
	root   bool
	auth   *s3sig.Auth
	// who is the request's IAM principal: its account, the user whose
	// identity policies apply, and whether those are its only grants (a
	// directory user's; access is then its account root's: iam.go).
	who principal
	// form is a POST form upload's fields and file.
	form *s3sig.Form

	// bk is the bucket's record, read once (bucketInfo).
	bk    *objlayer.BucketInfo
	bkErr error

	// doc is the document body once read (document); taggingDoc the tags
	// a PutObjectTagging sets, read before authorising it (its policy may
	// name s3:RequestObjectTag conditions).
	doc        []byte
	docRead    bool
	taggingDoc map[string]string

	// bodyRead: the handler read the body to its end (or it had none);
	// bodyStarted: it began to (a 100 Continue went out, if asked for).
	bodyRead, bodyStarted bool
	// drainable: the request was authenticated, so what is left of its
	// body may be read after an early answer rather than the connection
	// closed.
	drainable bool
	// replica: the request is a replication remote's copy of a change
	// (replicaRequest), not replicated again.
	replica bool
}

func (s *Server) newRequest(w http.ResponseWriter, hr *s3http.Request) *request {
	r := &request{s: s, hr: hr, ctx: hr.Context(), now: s.cfg.Now(), header: hr.Header}
	r.w = &answer{ResponseWriter: w, r: r}
	return r
}

// serve runs the request: route, authenticate, authorise, handle.
func (r *request) serve() {
	if err := r.parsePath(); err != nil {
		r.fail(err)
		return
	}
	q, err := url.ParseQuery(r.hr.URL.RawQuery)
	if err != nil {
		r.fail(s3err.InvalidArgument.With("The query string could not be parsed."))
		return
	}
	r.query = q
	if svc := r.s.queryService(r); svc != "" {
		r.serveQuery(svc)
		return
	}
	op, err := route(r)
	if err != nil {
		r.fail(err)
		return
	}
	r.op = op
	if op.preflight {
		r.fail(r.servePreflight())
		return
	}
	if err := r.authenticate(); err != nil {
		r.fail(err)
		return
	}
	if err := r.guard(); err != nil {
		r.fail(err)
		return
	}
	if r.header.Get("Origin") != "" && r.bucket != "" {
		r.applyCORS()
	}
	if err := r.authorize(); err != nil {
		r.fail(err)
		return
	}
	r.fail(op.handle(r))
}

// parsePath splits the path (path style: /bucket/key) into its bucket and
// key, decoded.
func (r *request) parsePath() error {
	p := r.hr.URL.Path
	if !strings.HasPrefix(p, "/") {
		return s3err.InvalidURI
	}
	p = p[1:]
	bucket, key, _ := strings.Cut(p, "/")
	if !utf8.ValidString(key) {
		return s3err.InvalidURI
	}
	r.bucket, r.key = bucket, key
	return nil
}

// has reports whether the query names a parameter, with a value or not.
func (r *request) has(name string) bool {
	_, ok := r.query[name]
	return ok
}

// q is a query parameter's value.
func (r *request) q(name string) string { return r.query.Get(name) }

// h is a request header's value.
func (r *request) h(name string) string {
	if v := r.header[name]; len(v) > 0 {
		return v[0]
	}
	if canonicalHeader(name) {
		return "" // the map's keys are canonical: the miss is final
	}
	return r.header.Get(name)
}

// canonicalHeader reports whether name is already in the form net/http
// keys its header map with (textproto.CanonicalMIMEHeaderKey's: the first
// letter and each after a hyphen upper case, the others lower), so looking
// it up again through Header.Get would find nothing more. Header.Get
// canonicalizes its argument each time: looking up absent headers that way
// (the SSE ones, on every request) was 9% of a HEAD's CPU.
func canonicalHeader(name string) bool {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// hp is a header's value, nil when absent.
func (r *request) hp(name string) *string {
	if v, ok := r.header[http.CanonicalHeaderKey(name)]; ok && len(v) > 0 {
		return &v[0]
	}
	return nil
}

// secure reports whether the request came over TLS.
func (r *request) secure() bool { return r.hr.Secure }

// resource is the request's path as error documents name it.
func (r *request) resource() string { return r.hr.URL.Path }

// bucketInfo reads the request's bucket once.
func (r *request) bucketInfo() (objlayer.BucketInfo, error) {
	if r.bk == nil && r.bkErr == nil {
		bk, err := r.s.layer.StatBucket(r.ctx, r.bucket)
		switch {
		case err != nil:
			r.bkErr = err
		case r.h("X-Amz-Expected-Bucket-Owner") != "" && !r.s.owns(r.h("X-Amz-Expected-Bucket-Owner"), bk):
			// The caller named the account it expects to own the bucket,
			// and another does.
			r.bkErr = s3err.AccessDenied
		default:
			r.bk = &bk
		}
	}
	if r.bkErr != nil {
		return objlayer.BucketInfo{}, r.bkErr
	}
	return *r.bk, nil
}

// forgetBucket drops the cached record after the handler changed it.
func (r *request) forgetBucket() { r.bk, r.bkErr = nil, nil }

// document reads a request body that is a document (XML, JSON), bounded
// by MaxDocument and checked against the request's Content-MD5,
// x-amz-content-sha256 and checksum.
func (r *request) document() ([]byte, error) {
	if r.docRead {
		return r.doc, nil
	}
	if r.hr.ContentLength > r.s.cfg.MaxDocument {
		return nil, errTooBig(r.s.cfg.MaxDocument)
	}
	p, err := r.payload()
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(p, r.s.cfg.MaxDocument+1))
	if err != nil {
		return nil, r.readError(err)
	}
	if int64(len(body)) > r.s.cfg.MaxDocument {
		return nil, errTooBig(r.s.cfg.MaxDocument)
	}
	r.bodyRead, r.docRead, r.doc = true, true, body
	return body, nil
}

func errTooBig(max int64) error {
	return s3err.MaxMessageLengthExceeded.Withf("Your request was too big: request documents are limited to %d MiB.", max>>20)
}

// payload is the request's body as the object bytes it carries, verified
// as it is read (s3sig.Payload).
func (r *request) payload() (*s3sig.Payload, error) {
	if r.auth == nil {
		return nil, s3err.AccessDenied
	}
	if r.op != nil && r.op.name == "CompleteMultipartUpload" {
		// A completion's x-amz-checksum-* headers are the object's
		// checksum (completedChecksum), not its document's.
		hr := *r.hr.Request
		hr.Header = r.hr.Header.Clone()
		for k := range hr.Header {
			if _, ok := cutPrefixFold(k, "X-Amz-Checksum-"); ok {
				delete(hr.Header, k)
			}
		}
		return r.auth.Body(&hr)
	}
	return r.auth.Body(r.hr.Request)
}

// readError is the answer to a failed read of the body: the verifier's
// own answer, a client that went away, or one too slow.
func (r *request) readError(err error) error {
	if _, ok := s3err.As(err); ok {
		return err
	}
	switch {
	case errors.Is(err, s3http.ErrBodyTooSlow):
		return s3err.RequestTimeout.Because(err)
	case errors.Is(err, objlayer.ErrIncompleteBody), errors.Is(err, io.ErrUnexpectedEOF):
		return s3err.IncompleteBody.Because(err)
	}
	return s3err.IncompleteBody.Because(err)
}

// contentLength is the request's declared object size: the decoded size
// of an aws-chunked body, the Content-Length otherwise (-1 unknown).
func (r *request) contentLength() int64 {
	if v := r.h("X-Amz-Decoded-Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return r.hr.ContentLength
}

// finish ends the request: the answer is sent (an empty 200 if the
// handler wrote nothing) and observed; what is left of an authenticated
// body is read so the connection stays in step, within bounds.
func (r *request) finish() {
	if !r.w.wroteHeader {
		r.w.WriteHeader(http.StatusOK)
	}
	if r.bodyLeft() && r.drainable {
		rc := http.NewResponseController(r.w.ResponseWriter)
		switch {
		case r.continued():
			_ = rc.SetReadDeadline(time.Now().Add(drainTime))
			_, _ = io.CopyN(io.Discard, r.hr.Body, drainBytes)
		case r.w.written > 0:
			// Answered before the body was asked for: no 100 Continue
			// went out, and none can now that the answer has a body. The
			// answer goes out first, for a client that waits for it; one
			// that sent its body anyway has it read while it keeps coming,
			// so it reads its answer instead of a reset.
			_ = rc.Flush()
			r.drainWhileSent(rc)
		}
	}
	if o := r.s.cfg.Observer; o != nil {
		name := "Unknown"
		if r.op != nil {
			name = r.op.name
		}
		o.Observe(name, r.w.status, time.Since(r.hr.Received), max(r.hr.ContentLength, 0), r.w.written)
	}
}

// Draining bounds: an authenticated client whose upload was refused early
// (a missing bucket, a wrong key) reads its answer instead of a reset.
const (
	drainBytes = 64 << 20
	drainTime  = 10 * time.Second
)

// tracked marks the request's body read once rd (over it) reports an
// error or its end: a write the layer refused before reading the body to
// its end leaves the rest for finish to drain.
func (r *request) tracked(rd io.Reader) io.Reader { return &trackedBody{r: rd, req: r} }

type trackedBody struct {
	r   io.Reader
	req *request
}

func (t *trackedBody) Read(p []byte) (int, error) {
	t.req.bodyStarted = true
	n, err := t.r.Read(p)
	if err != nil {
		t.req.bodyRead = true
	}
	return n, err
}

// drainWhileSent reads the body while its bytes keep arriving (each read
// within drainIdle), up to drainBytes.
func (r *request) drainWhileSent(rc *http.ResponseController) {
	buf := make([]byte, 32<<10)
	for total := 0; total < drainBytes; {
		_ = rc.SetReadDeadline(time.Now().Add(drainIdle))
		n, err := r.hr.Body.Read(buf)
		total += n
		if err != nil {
			return
		}
	}
}

// drainIdle is how long a body being drained after an early answer may
// pause: a client that sends it without waiting for 100 Continue sends it
// at once.
const drainIdle = 500 * time.Millisecond

// bodyLeft reports a body the handler did not read to its end.
func (r *request) bodyLeft() bool {
	return !r.bodyRead && r.hr.Body != nil && r.hr.Body != http.NoBody && r.hr.ContentLength != 0
}

func (r *request) expectsContinue() bool {
	return strings.EqualFold(r.h("Expect"), "100-continue")
}

// continued reports whether the client is sending its body: it did not
// wait for 100 Continue, or was sent one when the handler began to read.
func (r *request) continued() bool { return !r.expectsContinue() || r.bodyStarted }

// closeIfBodyLeft marks the connection to close after the answer when the
// body will not be read: a client still sending it must not have the rest
// taken for its next request, and an unauthenticated sender gets nothing
// read past the answer (net/http would otherwise read up to 256 KiB).
func (r *request) closeIfBodyLeft() {
	if r.bodyLeft() && (!r.drainable || !r.continued() || r.hr.ContentLength > drainBytes) {
		r.w.Header().Set("Connection", "close")
	}
}
