package s3front

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3api/utils"
)

// finishBody reads what a handler left of a request body, so the
// connection stays in step and the client reads the answer instead of a
// reset:
//
//   - A body sent with Transfer-Encoding: chunked ends with a zero-size
//     chunk ("0\r\n\r\n"). boto3, the aws CLI and s3cmd send every PUT and
//     UploadPart over HTTPS this way (an aws-chunked payload with a trailing
//     checksum inside HTTP chunks). versitygw's aws-chunked reader stops at
//     the end of its own framing and never asks the HTTP layer for the
//     zero-size chunk, and fasthttp drains only Content-Length bodies, so
//     those five bytes stayed in the connection and became the start of the
//     next request on it: either the server answered them with 400 "error
//     when parsing the HTTP request" and closed the connection, or, when the
//     client had already sent its next request, that request got the 400.
//   - A request refused before its body is read (a wrong encryption key for
//     an upload part, a missing bucket): the front end drains 256 KiB and
//     closes the connection after the answer, so a client still sending a
//     5 MiB part sees its write fail instead of the error it was given.
//
// The front end reads the body through our counting reader (the
// body-reader context key, which versitygw's readers wrap), so after the
// handler we know whether the stream reached its end; if not, what is left
// is read, bounded in bytes and time, and a body still not finished closes
// the connection, so nothing of it is parsed as a request.
const (
	drainBytes = 64 << 20
	drainIdle  = time.Second
	drainTotal = 10 * time.Second
)

// eofReader records whether its reader reached EOF.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.eof = true
	}
	return n, err
}

// finishBodies is the middleware described above.
func finishBodies() fiber.Handler {
	return func(c fiber.Ctx) error {
		stream := c.Request().BodyStream()
		length := c.Request().Header.ContentLength()
		if stream == nil || length == 0 || length > drainBytes {
			return c.Next()
		}
		body := &eofReader{r: stream}
		utils.ContextKeyBodyReader.Set(c, body)
		err := c.Next()
		if body.eof || c.Request().BodyStream() != stream {
			// Read to its end, or read whole by the handler (Body(),
			// which also releases the stream).
			return err
		}
		if r, ok := utils.ContextKeyBodyReader.Get(c).(io.Reader); ok && r == stream {
			// A handler replaced the reader with the bare stream (anonymous
			// unsigned uploads): we cannot tell where it stopped. A
			// Content-Length body is still drained by the front end.
			if length < 0 {
				c.Response().Header.SetConnectionClose()
			}
			return err
		}
		if !readOut(c, body) {
			c.Response().Header.SetConnectionClose()
		}
		return err
	}
}

// readOut reads the rest of body within the drain bounds and reports
// whether it reached the end.
func readOut(c fiber.Ctx, body *eofReader) bool {
	var conn net.Conn
	if rc := c.RequestCtx(); rc != nil {
		conn = rc.Conn()
	}
	deadline := time.Now().Add(drainTotal)
	buf := make([]byte, 64<<10)
	for read := 0; read <= drainBytes; {
		if conn != nil {
			next := time.Now().Add(drainIdle)
			if next.After(deadline) {
				next = deadline
			}
			_ = conn.SetReadDeadline(next)
		}
		n, err := body.Read(buf)
		read += n
		if body.eof || err != nil {
			break
		}
	}
	if conn != nil {
		_ = conn.SetReadDeadline(time.Time{})
	}
	return body.eof
}
