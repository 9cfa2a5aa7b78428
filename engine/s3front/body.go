package s3front

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// headBytes is how much of a GET is decoded before its headers go out:
// an object that cannot be read at all then answers an S3 error instead of
// a cut-off 200, and an object this small is served from memory.
const headBytes = 1 << 20 // the erasure layer's block

var headBufs = sync.Pool{New: func() any { b := make([]byte, 0, headBytes); return &b }}

// objectBody is a GET's response body. The HTTP server copies it with
// WriteTo, which writes the decoded head and then decodes the rest of the
// range block by block straight into the response: no goroutine, no pipe,
// one copy.
type objectBody struct {
	b       *Backend
	h       objlayer.Handle
	read    rangeWriter
	head    *[]byte
	off     int // read position in head
	rest    int64
	restOff int64
	start   time.Time
	pipe    *io.PipeReader // Read's fallback for the rest
	// end is called on Close (the request's end, for a GET); may be nil.
	end func()
}

// rangeWriter writes a range of an object version's bytes (as clients see
// them) to w.
type rangeWriter func(w io.Writer, offset, length int64) error

// reader is how a version's bytes are read: decoded, and decrypted when
// the version is encrypted (dek is its data key).
func reader(ctx context.Context, h objlayer.Handle, dek []byte) rangeWriter {
	if dek == nil {
		return func(w io.Writer, offset, length int64) error {
			return h.WriteRange(ctx, w, offset, length)
		}
	}
	return func(w io.Writer, offset, length int64) error {
		return decryptRange(ctx, h, dek, w, offset, length)
	}
}

// newObjectBody decodes the head of a range and returns the body.
func (b *Backend) newObjectBody(h objlayer.Handle, read rangeWriter, offset, length int64, start time.Time) (*objectBody, error) {
	bufp := headBufs.Get().(*[]byte)
	n := min(length, headBytes)
	w := &appendWriter{buf: (*bufp)[:0]}
	err := read(w, offset, n)
	*bufp = w.buf
	if err != nil {
		headBufs.Put(bufp)
		return nil, err
	}
	b.firstByte(start)
	return &objectBody{b: b, h: h, read: read, head: bufp, rest: length - n, restOff: offset + n, start: start}, nil
}

// appendWriter collects writes into a buffer.
type appendWriter struct{ buf []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.buf = append(a.buf, p...)
	return len(p), nil
}

// WriteTo implements io.WriterTo.
func (o *objectBody) WriteTo(w io.Writer) (int64, error) {
	head := (*o.head)[o.off:]
	n, err := w.Write(head)
	o.off += n
	if err != nil || o.rest == 0 {
		return int64(n), err
	}
	cw := &countingWriter{w: w}
	err = o.read(cw, o.restOff, o.rest)
	o.rest = 0
	if err != nil && !isClientGone(err) {
		o.b.log.Warn("GET ended early", "bucket", o.h.Info().Bucket, "key", o.h.Info().Name, "err", err)
	}
	return int64(n) + cw.n, err
}

// Read implements io.Reader for callers that do not use WriteTo: the head
// from memory, the rest through a pipe fed by a decoding goroutine.
func (o *objectBody) Read(p []byte) (int, error) {
	if head := (*o.head)[o.off:]; len(head) > 0 {
		n := copy(p, head)
		o.off += n
		return n, nil
	}
	if o.rest == 0 && o.pipe == nil {
		return 0, io.EOF
	}
	if o.pipe == nil {
		pr, pw := io.Pipe()
		o.pipe = pr
		read, off, n := o.read, o.restOff, o.rest
		o.rest = 0
		go func() {
			err := read(pw, off, n)
			pw.CloseWithError(err)
		}()
	}
	return o.pipe.Read(p)
}

// Close implements io.Closer: the head buffer goes back to the pool and the
// request is over.
func (o *objectBody) Close() error {
	if o.end != nil {
		o.end()
		o.end = nil
	}
	if o.pipe != nil {
		_ = o.pipe.CloseWithError(io.ErrClosedPipe)
	}
	if o.head != nil {
		*o.head = (*o.head)[:0]
		headBufs.Put(o.head)
		o.head = nil
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// isClientGone reports errors that mean the client stopped reading.
func isClientGone(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.ErrShortWrite)
}
