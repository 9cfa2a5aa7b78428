package s3api

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// GetObject and HeadObject: one path resolves the version, its conditions,
// the span asked for and the headers, then GET streams the bytes.

// parseVersionID parses an S3 version ID: "" is the latest, "null" the
// null version, otherwise one of ours.
func parseVersionID(s string) (*[16]byte, error) {
	if s == "" {
		return nil, nil
	}
	id, err := objlayer.ParseVersionID(s)
	if err != nil {
		return nil, s3err.InvalidArgumentNamed("Invalid version id specified", "versionId", s)
	}
	return &id, nil
}

func isNotFound(err error) bool { return errors.Is(err, objlayer.ErrObjectNotFound) }

// deleteMarkerError is a read that resolved to a delete marker: NoSuchKey
// for the latest version, MethodNotAllowed for a marker named by its
// version ID. GET and HEAD answer the marker's headers with it.
type deleteMarkerError struct {
	info  objlayer.ObjectInfo
	named bool
}

func (e *deleteMarkerError) Error() string { return "the version is a delete marker" }

func (e *deleteMarkerError) Unwrap() error {
	if e.named {
		return s3err.MethodNotAllowed
	}
	return s3err.Key(s3err.NoSuchKey, e.info.Name)
}

// markerHeaders sets the headers S3 answers a read of a delete marker with.
func (r *request) markerHeaders(err error) {
	var dm *deleteMarkerError
	if !errors.As(err, &dm) {
		return
	}
	r.setHeader("X-Amz-Delete-Marker", "true")
	r.setHeader("Last-Modified", httpTime(dm.info.ModTime))
	if dm.named || dm.info.VersionID != objlayer.NullVersion {
		r.setHeader("X-Amz-Version-Id", objlayer.FormatVersionID(dm.info.VersionID))
	}
}

// openVersion resolves the version a request names (versionID "" for the
// latest), with its data when withData; the caller closes the handle.
func (r *request) openVersion(bucket, key, versionID string, withData bool) (objlayer.Handle, error) {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil, err
	}
	open := r.s.layer.OpenObjectMeta
	if withData {
		open = r.s.layer.OpenObject
	}
	h, err := open(r.ctx, bucket, key, vid)
	if isNotFound(err) && vid != nil {
		return nil, s3err.NoSuchVersion.Field("Key", key).Field("VersionId", versionID)
	}
	if err != nil {
		return nil, err
	}
	if info := h.Info(); info.DeleteMarker {
		h.Close()
		return nil, &deleteMarkerError{info: info, named: vid != nil}
	}
	return h, nil
}

// partNumberBeyond is S3's answer to a partNumber past an object's last
// part: 400 InvalidPart (not a range error).
func partNumberBeyond(parts, asked int) error {
	return s3err.InvalidPart.Withf("The requested partnumber %d is not satisfiable: the object has %d parts.", asked, parts)
}

// readSpan is the bytes a GET or HEAD serves, and what its answer says of
// them.
type readSpan struct {
	s3rules.Span
	contentRange string
	partsCount   int // 0: not answered
	part         int // the partNumber asked for, 0 none
}

// requestedSpan resolves Range or partNumber against a version.
func (r *request) requestedSpan(info objlayer.ObjectInfo) (readSpan, error) {
	size := info.Size
	if r.has("partNumber") {
		n, err := strconv.Atoi(r.q("partNumber"))
		if err != nil || n < 1 || n > objlayer.MaxParts {
			return readSpan{}, s3err.InvalidArgumentNamed("Part number must be an integer between 1 and 10000, inclusive", "partNumber", r.q("partNumber"))
		}
		if r.h("Range") != "" {
			return readSpan{}, s3err.InvalidRequest.With("Cannot specify both Range header and partNumber query parameter")
		}
		if len(info.Parts) == 0 {
			if n > 1 {
				return readSpan{}, partNumberBeyond(1, n)
			}
			sp := readSpan{Span: s3rules.Span{Length: size}, part: n}
			if size > 0 {
				sp.Partial = true
				sp.contentRange = sp.ContentRange(size)
			}
			return sp, nil
		}
		if n > len(info.Parts) {
			return readSpan{}, partNumberBeyond(len(info.Parts), n)
		}
		var off int64
		for _, p := range info.Parts[:n-1] {
			off += p.Size
		}
		sp := readSpan{Span: s3rules.Span{Offset: off, Length: info.Parts[n-1].Size, Partial: true}, partsCount: len(info.Parts), part: n}
		sp.contentRange = sp.ContentRange(size)
		return sp, nil
	}
	span, err := s3rules.ParseRange(r.h("Range"), size)
	if err != nil {
		return readSpan{}, err
	}
	sp := readSpan{Span: span}
	if span.Partial {
		sp.contentRange = span.ContentRange(size)
	}
	if len(info.Parts) > 0 {
		sp.partsCount = len(info.Parts)
	}
	return sp, nil
}

// readConditions are the request's If-* headers (dates it cannot parse
// are ignored, as S3 ignores them).
func (r *request) readConditions(prefix string) s3rules.ReadConditions {
	var c s3rules.ReadConditions
	c.IfMatch = r.hp(prefix + "If-Match")
	c.IfNoneMatch = r.hp(prefix + "If-None-Match")
	if v := r.h(prefix + "If-Modified-Since"); v != "" {
		if t, ok := s3rules.ParseHTTPDate(v); ok {
			c.IfModifiedSince = &t
		}
	}
	if v := r.h(prefix + "If-Unmodified-Since"); v != "" {
		if t, ok := s3rules.ParseHTTPDate(v); ok {
			c.IfUnmodifiedSince = &t
		}
	}
	return c
}

// responseOverrides are the response-* parameters of a GET or HEAD and
// the headers they replace.
var responseOverrides = [][2]string{
	{"response-cache-control", "Cache-Control"}, {"response-content-disposition", "Content-Disposition"},
	{"response-content-encoding", "Content-Encoding"}, {"response-content-language", "Content-Language"},
	{"response-content-type", "Content-Type"}, {"response-expires", "Expires"},
}

// objectRead is a resolved GET or HEAD.
type objectRead struct {
	h    objlayer.Handle
	info objlayer.ObjectInfo // as clients see it (plaintext sizes)
	span readSpan
	dek  []byte // the data key of an encrypted version
}

// readObject resolves what a GET or HEAD answers and sets its headers.
func (r *request) readObject(withData bool) (*objectRead, error) {
	if r.access == "" {
		for _, o := range responseOverrides {
			if r.has(o[0]) {
				return nil, s3err.InvalidRequest.With("Request specific response headers cannot be used for anonymous GET requests.")
			}
		}
	}
	if m := strings.ToUpper(r.h("X-Amz-Checksum-Mode")); m != "" && m != "ENABLED" {
		return nil, s3err.InvalidArgumentNamed("Invalid value for x-amz-checksum-mode.", "x-amz-checksum-mode", m)
	}
	if err := r.checkSSE(true); err != nil {
		return nil, err
	}
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), withData)
	if err != nil {
		r.markerHeaders(err)
		return nil, err
	}
	rd := &objectRead{h: h, info: plainInfo(h.Info())}
	fail := func(err error) (*objectRead, error) {
		h.Close()
		return nil, err
	}
	info := rd.info
	if err := s3rules.EvaluateRead(r.readConditions(""), info.ETag, info.ModTime); err != nil {
		if e, ok := s3err.As(err); ok && e.Code == s3err.NotModified.Code {
			r.setHeader("ETag", quote(info.ETag))
			r.setHeader("Last-Modified", httpTime(info.ModTime))
		}
		return fail(err)
	}
	if rd.span, err = r.requestedSpan(info); err != nil {
		return fail(err)
	}
	if rd.dek, err = r.dataKey(r.bucket, r.key, h.Info().Meta, false); err != nil {
		return fail(err)
	}
	r.objectHeaders(rd)
	return rd, nil
}

// objectHeaders sets a GET's or HEAD's headers from the version.
func (r *request) objectHeaders(rd *objectRead) {
	info, sp := rd.info, rd.span
	h := r.w.Header()
	for _, k := range storedHeaders {
		if v, ok := info.Meta[k]; ok {
			h[k] = []string{v}
		}
	}
	if _, ok := info.Meta[objlayer.MetaContentType]; !ok {
		h["Content-Type"] = []string{"binary/octet-stream"}
	}
	for _, o := range responseOverrides {
		if v := r.q(o[0]); v != "" {
			h[o[1]] = []string{v}
		}
	}
	setUserMeta(h, info.Meta)
	h["Content-Length"] = []string{strconv.FormatInt(sp.Length, 10)}
	h["Accept-Ranges"] = []string{"bytes"}
	h["Etag"] = []string{quote(info.ETag)}
	h["Last-Modified"] = []string{httpTime(info.ModTime)}
	r.setHeader("Content-Range", sp.contentRange)
	if sp.partsCount > 0 {
		r.setHeader("X-Amz-Mp-Parts-Count", strconv.Itoa(sp.partsCount))
	}
	bk, _ := r.bucketInfo()
	if v := versionIDOut(info.VersionID, bk.Versioning); v != "" {
		r.setHeader("X-Amz-Version-Id", v)
	}
	if n := len(s3rules.DecodeTagQuery(info.Meta[objlayer.MetaTagging])); n > 0 {
		r.setHeader("X-Amz-Tagging-Count", strconv.Itoa(n))
	}
	if ret := s3rules.StoredRetention(info.Meta[objlayer.MetaRetention]); ret != nil {
		r.setHeader("X-Amz-Object-Lock-Mode", ret.Mode)
		if ret.RetainUntilDate != nil {
			r.setHeader("X-Amz-Object-Lock-Retain-Until-Date", ret.RetainUntilDate.UTC().Format(time.RFC3339))
		}
	}
	r.setHeader("X-Amz-Object-Lock-Legal-Hold", info.Meta[objlayer.MetaLegalHold])
	r.setHeader("X-Amz-Storage-Class", "STANDARD")
	r.setHeader("X-Amz-Replication-Status", r.s.replicationStatus(r.ctx, bk, r.key, info))
	r.setSSEHeaders(info.Meta)
	if r.q("versionId") == "" {
		r.setExpiration(bk, info)
	}
	if strings.EqualFold(r.h("X-Amz-Checksum-Mode"), "ENABLED") {
		// Checksums describe the whole object; a part answers its own,
		// which a completed upload with a checksum algorithm keeps.
		sums, ofPart := info.Meta, sp.part > 0 && partChecksums(info.Meta) != nil
		if ofPart {
			sums = partChecksumOf(info.Meta, sp.part)
		}
		if sp.Length == info.Size || ofPart {
			setChecksumHeaders(h, sums)
		}
	}
}

// headObject answers an object's headers.
func headObject(r *request) error {
	rd, err := r.readObject(false)
	if err != nil {
		return err
	}
	rd.h.Close()
	status := http.StatusOK
	if rd.span.Partial {
		status = http.StatusPartialContent
	}
	r.w.WriteHeader(status)
	return nil
}

// headBytes is how much of a GET is decoded before its headers go out: an
// object that cannot be read at all then answers an S3 error instead of a
// cut-off 200, and an object this small is served from memory.
const headBytes = 1 << 20

var headBufs = sync.Pool{New: func() any { b := make([]byte, 0, headBytes); return &b }}

// getObject streams an object (or a range, or a part).
func getObject(r *request) error {
	rd, err := r.readObject(true)
	if err != nil {
		return err
	}
	defer rd.h.Close()
	read := func(w io.Writer, offset, length int64) error {
		if rd.dek != nil {
			return decryptRange(r, rd.h, rd.dek, w, offset, length)
		}
		return rd.h.WriteRange(r.ctx, w, offset, length)
	}
	sp := rd.span
	d, ok := rd.h.(objlayer.DirectHandle)
	fromFile := ok && d.Direct() && rd.dek == nil // sent from the page cache, not through buffers
	if !fromFile {
		release, err := r.dataSlot(sp.Length)
		if err != nil {
			return err
		}
		defer release()
	}
	bufp := headBufs.Get().(*[]byte)
	var headBack bool
	putHead := func() {
		if !headBack {
			headBack = true
			*bufp = (*bufp)[:0]
			headBufs.Put(bufp)
		}
	}
	defer putHead()
	n := min(sp.Length, headBytes)
	if fromFile {
		n = 0 // nothing to read ahead: the file may go out as it is
	}
	head := &appendWriter{buf: (*bufp)[:0]}
	if err := read(head, sp.Offset, n); err != nil {
		// Nothing was sent yet: the headers set for the answer go.
		for k := range r.w.Header() {
			if k != "X-Amz-Request-Id" && k != "X-Amz-Id-2" {
				delete(r.w.Header(), k)
			}
		}
		return err
	}
	*bufp = head.buf
	if o := r.s.cfg.Observer; o != nil {
		o.FirstByte(time.Since(r.hr.Received))
	}
	status := http.StatusOK
	if sp.Partial {
		status = http.StatusPartialContent
	}
	r.w.WriteHeader(status)
	_, werr := r.w.Write(head.buf)
	// The rest streams without the head's buffer: a GET of 16 MiB no
	// longer holds 1 MiB for its whole answer.
	putHead()
	if werr != nil || sp.Length == n {
		return nil
	}
	if err := read(r.w, sp.Offset+n, sp.Length-n); err != nil && r.ctx.Err() == nil {
		r.s.cfg.Log.Warn("GET ended early", "bucket", r.bucket, "key", r.key, "err", err)
	}
	return nil
}

// appendWriter collects writes into a buffer.
type appendWriter struct{ buf []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.buf = append(a.buf, p...)
	return len(p), nil
}

// ReadFrom reads straight into the buffer's room (a layer that copies from
// a file then fills it in one read, without a copy buffer between).
func (a *appendWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	var probe [512]byte
	for {
		var n int
		var err error
		if len(a.buf) < cap(a.buf) {
			n, err = r.Read(a.buf[len(a.buf):cap(a.buf)])
			a.buf = a.buf[:len(a.buf)+n]
		} else {
			// Full: the buffer grows only if more than it holds comes
			// (a read of exactly its size ends here at EOF).
			n, err = r.Read(probe[:])
			a.buf = append(a.buf, probe[:n]...)
		}
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
