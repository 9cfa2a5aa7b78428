package s3http

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// net/http answers 417 Expectation Failed, without calling the handler,
// to any Expect header but 100-continue. S3 ignores the expectations it
// does not know, and clients send some (Expect: 200 reaches S3 from SDKs
// configured so): expectConn renames such a header in the bytes net/http
// reads, and serveHTTP gives it its name back, so the handler (and a
// signature over the header) sees the request as sent.

// renamedExpect is the name an unknown Expect header travels under
// between the connection and serveHTTP.
const renamedExpect = "X-Strata-Expect-Unhandled"

// expectConn is the connection net/http reads requests from. While a
// request header arrives (from the start, and again once a response is
// out and the connection idles), it holds back each header line that may
// be an Expect header until the line ends, and renames it unless it asks
// for 100-continue. Past the header's end it passes bytes through
// untouched: bodies are never scanned.
type expectConn struct {
	net.Conn
	scanning atomic.Bool
	// line is the start of a header line held back; out[pos:] are bytes
	// filtered and not yet returned (out is reset once they all are, so
	// its buffer serves every request of the connection).
	line, out []byte
	pos       int
	// passLine: the current line cannot be an Expect header (or grew too
	// long to hold) and passes through up to its end.
	passLine bool
	// lineLen and first are the current line's length so far and first
	// byte (a blank line ends the header).
	lineLen int
	first   byte
}

func newExpectConn(c net.Conn) *expectConn {
	ec := &expectConn{Conn: c}
	ec.scanning.Store(true)
	return ec
}

// rearm starts scanning the next request's header (the connection idles:
// the previous response is out).
func (c *expectConn) rearm() { c.scanning.Store(true) }

// maxHeldLine bounds a held line: an Expect header is short, and a longer
// line is passed on for net/http to judge.
const maxHeldLine = 256

// take moves filtered bytes to p.
func (c *expectConn) take(p []byte) int {
	n := copy(p, c.out[c.pos:])
	c.pos += n
	if c.pos == len(c.out) {
		c.out, c.pos = c.out[:0], 0
	}
	return n
}

func (c *expectConn) Read(p []byte) (int, error) {
	if c.pos < len(c.out) {
		return c.take(p), nil
	}
	if !c.scanning.Load() {
		return c.Conn.Read(p)
	}
	for {
		n, err := c.Conn.Read(p)
		c.filter(p[:n])
		if err != nil && len(c.line) > 0 {
			c.out = append(c.out, c.line...)
			c.line = c.line[:0]
		}
		if c.pos < len(c.out) || err != nil {
			m := c.take(p)
			if c.pos < len(c.out) {
				err = nil // returned with the last of them
			}
			return m, err
		}
	}
}

// filter appends b, filtered, to c.out.
func (c *expectConn) filter(b []byte) {
	for len(b) > 0 {
		if !c.scanning.Load() {
			c.out = append(c.out, b...)
			return
		}
		end := bytes.IndexByte(b, '\n')
		chunk := b
		if end >= 0 {
			chunk = b[:end+1]
		}
		b = b[len(chunk):]
		if c.lineLen == 0 {
			c.first = chunk[0]
		}
		c.lineLen += len(chunk)
		if c.passLine {
			c.out = append(c.out, chunk...)
		} else {
			c.line = append(c.line, chunk...)
			if !mayBeExpect(c.line) || len(c.line) > maxHeldLine {
				c.out = append(c.out, c.line...)
				c.line, c.passLine = c.line[:0], true
			}
		}
		if end < 0 {
			return
		}
		if !c.passLine {
			c.out = appendExpectLine(c.out, c.line)
			c.line = c.line[:0]
		}
		if c.lineLen == 1 || c.lineLen == 2 && c.first == '\r' {
			c.scanning.Store(false) // the blank line: the header ended
		}
		c.lineLen, c.passLine = 0, false
	}
}

// mayBeExpect reports whether a line's start may still begin an Expect
// header ("expect:", in any case, optionally with spaces before the
// colon, which net/http refuses anyway).
func mayBeExpect(line []byte) bool {
	const name = "expect:"
	for i := 0; i < len(line) && i < len(name); i++ {
		if lower(line[i]) != name[i] {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// appendExpectLine appends a whole held line: renamed when it is an Expect
// header that does not ask for 100-continue.
func appendExpectLine(out, line []byte) []byte {
	const name = "expect:"
	if len(line) < len(name) || !mayBeExpect(line) {
		return append(out, line...)
	}
	value := bytes.TrimSpace(line[len(name):])
	for tok := range bytes.SplitSeq(value, []byte(",")) {
		if bytes.EqualFold(bytes.TrimSpace(tok), []byte("100-continue")) {
			return append(out, line...)
		}
	}
	out = append(out, renamedExpect...)
	return append(out, line[len(name)-1:]...)
}

// CloseWrite half-closes the connection under (net/http looks for it).
func (c *expectConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom lets net/http hand a file to the connection under (a TCP
// connection sends it with sendfile).
func (c *expectConn) ReadFrom(r io.Reader) (int64, error) { return readFrom(c.Conn, r) }

// readFrom is dst's own ReadFrom, or a copy.
func readFrom(dst net.Conn, r io.Reader) (int64, error) {
	if rf, ok := dst.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{dst}, r)
}

// NetConn is the connection under: trackedOf unwraps through it.
func (c *expectConn) NetConn() net.Conn { return c.Conn }

// tlsStateKey is the context key of a TLS connection's state: net/http
// sets Request.TLS only for a *tls.Conn, which an expectConn hides.
type tlsStateKey struct{}

// withTLSState stores the state of the TLS connection under c, if any.
func withTLSState(ctx context.Context, c net.Conn) context.Context {
	if ec, ok := c.(*expectConn); ok {
		if tc, ok := ec.Conn.(*tls.Conn); ok {
			st := tc.ConnectionState()
			return context.WithValue(ctx, tlsStateKey{}, &st)
		}
	}
	return ctx
}

// restoreRequest gives the request what the expectConn took: the TLS
// state and the Expect header's name.
func restoreRequest(hr *http.Request) {
	if hr.TLS == nil {
		if st, ok := hr.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
			hr.TLS = st
		}
	}
	if v, ok := hr.Header[renamedExpect]; ok {
		delete(hr.Header, renamedExpect)
		hr.Header["Expect"] = append(hr.Header["Expect"], v...)
	}
}
