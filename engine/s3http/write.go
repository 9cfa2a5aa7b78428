package s3http

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// stallChunk is the most written under one deadline: a large Write is cut
// into pieces so that a slow client still making progress renews the
// deadline, while one making none trips it. At the default WriteStall it
// asks for about 2 KiB/s.
const stallChunk = 128 << 10

// stallRefreshDivisor spares a deadline update per write: a deadline set
// less than WriteStall/16 ago still leaves 15/16 of the allowance.
const stallRefreshDivisor = 16

// stallWriter is the ResponseWriter handlers get. It keeps the
// connection's write deadline about WriteStall ahead of the last progress,
// so a client that stops reading its response releases the handler within
// WriteStall instead of holding it forever. net/http's WriteTimeout would
// bound the whole response instead, failing large downloads to slow but
// honest clients.
//
// The deadline is set on the connection directly (trackedConn), not
// through http.ResponseController: that way it can outlive the request and
// need no update on most requests.
//
// It does not offer io.ReaderFrom (net/http's sendfile path would write
// without renewing the deadline): io.Copy into it goes through Write.
type stallWriter struct {
	rw http.ResponseWriter
	// conn holds the deadline; nil (a connection not from our listener)
	// leaves writes unguarded.
	conn        *trackedConn
	clock       *coarseClock
	stall       time.Duration
	wroteHeader bool
	stalled     bool
	counters    *counters
}

func (w *stallWriter) init(rw http.ResponseWriter, conn *trackedConn, clock *coarseClock, stall time.Duration, c *counters) {
	w.rw = rw
	w.clock = clock
	w.stall = stall
	w.counters = c
	if stall > 0 {
		w.conn = conn
		w.renew()
	}
}

// renew moves the write deadline WriteStall ahead, unless it was moved
// very recently.
func (w *stallWriter) renew() {
	if w.conn != nil {
		w.conn.holdWriteDeadline(w.clock.unixNano(), w.stall)
	}
}

func (w *stallWriter) note(err error) {
	if err != nil && !w.stalled && errors.Is(err, os.ErrDeadlineExceeded) {
		w.stalled = true
		w.counters.writeStalls.Add(1)
	}
}

// Header returns the response header map.
func (w *stallWriter) Header() http.Header { return w.rw.Header() }

// WriteHeader sets the status. Only an informational (1xx) status is
// written at once, under a renewed deadline; a final one is written with
// the first body bytes or after the handler returns (see finish).
func (w *stallWriter) WriteHeader(code int) {
	if code >= 200 {
		w.wroteHeader = true
	} else {
		w.renew()
	}
	w.rw.WriteHeader(code)
}

// Write writes body bytes, renewing the deadline at least every stallChunk.
func (w *stallWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return writeChunked(w, p, w.rw.Write)
}

// WriteString is Write without converting s to bytes.
func (w *stallWriter) WriteString(s string) (int, error) {
	w.wroteHeader = true
	if sw, ok := w.rw.(io.StringWriter); ok {
		return writeChunked(w, s, sw.WriteString)
	}
	return writeChunked(w, []byte(s), w.rw.Write)
}

func writeChunked[S ~string | ~[]byte](w *stallWriter, p S, write func(S) (int, error)) (int, error) {
	if w.conn == nil {
		return write(p)
	}
	written := 0
	for {
		chunk := p
		if len(chunk) > stallChunk {
			chunk = chunk[:stallChunk]
		}
		w.renew()
		n, err := write(chunk)
		written += n
		if err != nil {
			w.note(err)
			return written, err
		}
		p = p[len(chunk):]
		if len(p) == 0 {
			return written, nil
		}
	}
}

// ReadFrom sends a body read from src. A file (or a part of one, an
// *io.LimitedReader over an *os.File) goes to net/http's ReadFrom in
// pieces of stallChunk, each under a renewed deadline, so that over plain
// TCP the kernel sends it from the page cache (sendfile) without losing
// the stall guard; anything else is copied through Write.
func (w *stallWriter) ReadFrom(src io.Reader) (int64, error) {
	w.wroteHeader = true
	rf, ok := w.rw.(io.ReaderFrom)
	file, limit := fileOf(src)
	if !ok || file == nil {
		return io.Copy(writerOnly{w}, src)
	}
	var total int64
	var err error
	for limit != 0 {
		piece := int64(stallChunk)
		if limit > 0 {
			piece = min(piece, limit)
		}
		w.renew()
		var n int64
		n, err = rf.ReadFrom(&io.LimitedReader{R: file, N: piece})
		total += n
		if limit > 0 {
			limit -= n
		}
		if err != nil {
			w.note(err)
			break
		}
		if n < piece {
			break // the file ended
		}
	}
	if lr, ok := src.(*io.LimitedReader); ok {
		lr.N -= total
	}
	return total, err
}

// fileOf finds the file a body is read from: src itself, or the file of an
// *io.LimitedReader and its limit (-1: to the file's end).
func fileOf(src io.Reader) (*os.File, int64) {
	switch r := src.(type) {
	case *os.File:
		return r, -1
	case *io.LimitedReader:
		if f, ok := r.R.(*os.File); ok {
			return f, r.N
		}
	}
	return nil, 0
}

// writerOnly hides a writer's ReadFrom (io.Copy would call it again).
type writerOnly struct{ io.Writer }

// Flush sends what is buffered to the client. http.Flusher has no way to
// report failure (FlushError has counted it if it was a stall).
func (w *stallWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting failure (http.ResponseController prefers
// it).
func (w *stallWriter) FlushError() error {
	w.wroteHeader = true
	w.renew()
	switch f := w.rw.(type) {
	case interface{ FlushError() error }:
		err := f.FlushError()
		w.note(err)
		return err
	case http.Flusher:
		f.Flush()
	}
	return nil
}

// Unwrap lets http.ResponseController reach net/http's writer (to hijack,
// or to set deadlines of its own).
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.rw }

// finish runs after the handler: net/http flushes what is buffered once
// the handler returns, and that flush needs a live deadline too.
func (w *stallWriter) finish() {
	w.renew()
}
