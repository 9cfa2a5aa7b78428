package s3front

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/s3api/utils"
)

// A request body sent with Transfer-Encoding: chunked ends with a zero-size
// chunk ("0\r\n\r\n"). boto3, the aws CLI and s3cmd send every PUT and
// UploadPart over HTTPS this way (an aws-chunked payload with a trailing
// checksum inside HTTP chunks). versitygw's aws-chunked reader stops at the
// end of its own framing and never asks the HTTP layer for the zero-size
// chunk, and fasthttp drains only Content-Length bodies, so those five
// bytes stayed in the connection and became the start of the next request
// on it: either the server answered them with 400 "error when parsing the
// HTTP request" and closed the connection, or, when the client had already
// sent its next request, that request got the 400.
//
// chunkedBody finishes such a body after the handler: the front end reads
// the body through our counting reader (the body-reader context key, which
// versitygw's readers wrap), so after the handler we know whether the HTTP
// stream reached its end. If it did not, we read what is left, bounded in
// bytes and time; a body still not finished (a rejected large upload) closes
// the connection instead, so nothing of it is parsed as a request.
const (
	chunkedDrainBytes = 256 << 10
	chunkedDrainIdle  = time.Second
	chunkedDrainTotal = 5 * time.Second
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

// chunkedBody is the middleware described above.
func chunkedBody() fiber.Handler {
	return func(c fiber.Ctx) error {
		stream := c.Request().BodyStream()
		if stream == nil || c.Request().Header.ContentLength() != -1 {
			return c.Next()
		}
		body := &eofReader{r: stream}
		utils.ContextKeyBodyReader.Set(c, body)
		err := c.Next()
		if body.eof {
			return err
		}
		if r, ok := utils.ContextKeyBodyReader.Get(c).(io.Reader); ok && r == stream {
			// A handler replaced the reader with the bare stream (anonymous
			// unsigned uploads): we cannot tell where it stopped.
			c.Response().Header.SetConnectionClose()
			return err
		}
		if !finishBody(c, body) {
			c.Response().Header.SetConnectionClose()
		}
		return err
	}
}

// finishBody reads the rest of body within the drain bounds and reports
// whether it reached the end.
func finishBody(c fiber.Ctx, body *eofReader) bool {
	var conn net.Conn
	if rc := c.RequestCtx(); rc != nil {
		conn = rc.Conn()
	}
	deadline := time.Now().Add(chunkedDrainTotal)
	buf := make([]byte, 32<<10)
	for read := 0; read <= chunkedDrainBytes; {
		if conn != nil {
			next := time.Now().Add(chunkedDrainIdle)
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
