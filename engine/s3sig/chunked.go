package s3sig

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// aws-chunked bodies (x-amz-content-sha256: STREAMING-...):
//
//	<hex size>[;chunk-signature=<64 hex>]\r\n <data> \r\n   ... repeated
//	0[;chunk-signature=<64 hex>]\r\n
//	[<trailer name>:<value>\r\n ... [x-amz-trailer-signature:<64 hex>\r\n]]
//	\r\n
//
// A signed chunk's signature is the HMAC, under the request's signing key,
// of
//
//	AWS4-HMAC-SHA256-PAYLOAD \n <x-amz-date> \n <scope> \n <previous
//	signature> \n <SHA-256 of ""> \n <SHA-256 of the chunk's data>
//
// chained from the request's own signature (the seed); a signed trailer's
// of AWS4-HMAC-SHA256-TRAILER \n <date> \n <scope> \n <final chunk's
// signature> \n <SHA-256 of the trailer lines, each "name:value\n">.
//
// The decoder holds no more than its 4 KiB line buffer: a chunk's data is
// handed on as it arrives and its signature checked as it ends, so a
// forged chunk fails the Read that ends it, before any io.EOF.

const (
	// maxChunkLine bounds a chunk header or trailer line (a signed header
	// is about 90 bytes): a client cannot make us buffer more.
	maxChunkLine = 4 << 10
	// minSignedChunk is S3's smallest signed chunk but the last: it also
	// bounds the HMACs a client can make us compute per byte.
	minSignedChunk = 8 << 10
	// maxTrailers bounds the trailer lines.
	maxTrailers = 4
	// emptySHA256 is the hex SHA-256 of nothing.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// ContentEncoding is the Content-Encoding to store for an object sent
// with the given header: aws-chunked is the transfer's framing, not the
// object's encoding, and is left out ("" when nothing is left).
func ContentEncoding(header string) string {
	if !strings.Contains(strings.ToLower(header), "aws-chunked") {
		return strings.TrimSpace(header)
	}
	var kept []string
	for _, e := range strings.Split(header, ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			kept = append(kept, e)
		}
	}
	return strings.Join(kept, ", ")
}

// chunkReader decodes an aws-chunked body into its data.
type chunkReader struct {
	br       *bufio.Reader
	signed   bool // chunk signatures
	trailers bool // a trailer section may follow the last chunk
	// sumAlg is the checksum the trailer must carry (algNone: none).
	sumAlg algorithm

	declared int64 // x-amz-decoded-content-length
	total    int64 // data bytes announced by chunk headers so far
	left     int64 // data bytes left in the current chunk
	small    bool  // the previous signed chunk was under minSignedChunk
	done     bool
	err      error

	// trailerValue is the decoded checksum the trailer carried.
	trailerValue []byte

	// Signed chunks: the request's key, date and scope, the previous
	// signature in the chain, the current chunk's claimed signature and
	// the running hash of its data.
	auth  *Auth
	m     *macer
	prev  [32]byte
	claim [64]byte
	data  hash.Hash
}

func newChunkReader(body io.Reader, a *Auth, signed, trailers bool, sumAlg algorithm, declared int64) *chunkReader {
	c := &chunkReader{
		br:       bufio.NewReaderSize(body, maxChunkLine),
		signed:   signed,
		trailers: trailers,
		sumAlg:   sumAlg,
		declared: declared,
		auth:     a,
	}
	if signed {
		c.m = newMacer()
		c.prev = a.signature
		c.data = sha256.New()
	}
	return c
}

// Read gives the decoded data; io.EOF only once the whole framing, the
// trailer and every signature have been read and checked.
func (c *chunkReader) Read(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.br.Read(b)
	c.left -= int64(n)
	if c.signed {
		c.data.Write(b[:n])
	}
	switch {
	case err != nil:
		err = shortOr(err)
	case c.left == 0:
		err = c.endChunk()
	}
	c.err = err
	return n, err
}

// shortOr maps the end of the stream within the framing to
// IncompleteBody, and passes other read errors on.
func shortOr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errShortBody(err)
	}
	return err
}

// nextChunk reads a chunk header; after the last chunk it reads the
// trailer and returns io.EOF.
func (c *chunkReader) nextChunk() error {
	line, err := c.readLine(false)
	if err != nil {
		return err
	}
	sizeText, ext, hasExt := line, []byte(nil), false
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		sizeText, ext, hasExt = line[:i], line[i+1:], true
	}
	size, ok := parseChunkSize(sizeText)
	if !ok {
		return errChunked("a chunk size is not hex")
	}
	if c.signed {
		sig, found := bytes.CutPrefix(ext, []byte("chunk-signature="))
		if !hasExt || !found || len(sig) != len(c.claim) {
			return errChunked("a chunk has no chunk-signature")
		}
		copy(c.claim[:], sig)
		if c.small && size > 0 {
			return s3err.InvalidChunkSize
		}
		c.small = size < minSignedChunk
		c.data.Reset()
	}
	if size > c.declared-c.total {
		return errChunked("the chunks carry more data than x-amz-decoded-content-length declares")
	}
	c.total += size
	if size > 0 {
		c.left = size
		return nil
	}
	if c.signed {
		if err := c.checkChunk(); err != nil {
			return err
		}
	}
	if err := c.readTrailers(); err != nil {
		return err
	}
	if err := c.readToEnd(); err != nil {
		return err
	}
	c.done = true
	if c.total < c.declared {
		return errShortBody(nil)
	}
	return io.EOF
}

// endChunk reads the CRLF closing a chunk's data and checks its
// signature.
func (c *chunkReader) endChunk() error {
	var crlf [2]byte
	if _, err := io.ReadFull(c.br, crlf[:]); err != nil {
		return shortOr(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return errChunked("a chunk's data is not followed by CRLF")
	}
	if c.signed {
		return c.checkChunk()
	}
	return nil
}

// checkChunk checks the current chunk's claimed signature and makes it
// the previous one.
func (c *chunkReader) checkChunk() error {
	m := c.m
	c.startStringToSign("AWS4-HMAC-SHA256-PAYLOAD")
	m.msg = append(m.msg, emptySHA256+"\n"...)
	m.msg = appendHex(m.msg, c.data.Sum(m.sum[:0]))
	return c.checkClaim(c.claim[:])
}

// startStringToSign starts a chunk's or trailer's string to sign in m.msg
// (reusing its buffer): the algorithm, date, scope and previous signature,
// each on its line.
func (c *chunkReader) startStringToSign(algorithm string) {
	b := c.m.msg[:0]
	b = append(b, algorithm...)
	b = append(b, '\n')
	b = append(b, c.auth.amzDate...)
	b = append(b, '\n')
	b = append(b, c.auth.Scope...)
	b = append(b, '\n')
	b = appendHex(b, c.prev[:])
	b = append(b, '\n')
	c.m.msg = b
}

// checkClaim compares claim with the MAC of the string to sign in m.msg.
func (c *chunkReader) checkClaim(claim []byte) error {
	c.m.mac(c.auth.key[:], c.m.msg)
	if !sameHex(claim, c.m.out[:]) {
		return errMismatch(c.auth.AccessKey, string(c.m.msg), string(claim), "")
	}
	c.prev = c.m.out
	return nil
}

// readTrailers reads the trailer section after the last chunk, up to the
// empty line that ends the body (or the stream's end, which some clients
// send instead).
func (c *chunkReader) readTrailers() error {
	var text []byte // the trailer lines as signed: "name:value\n"
	var claim []byte
	bareLF := false
	for i := 0; ; i++ {
		line, lf, err := c.readTrailerLine()
		if err == nil && len(line) == 0 && bareLF {
			// minio-go ends its trailer lines with LF (as they are signed)
			// and then CRLF before the signature: an empty line there
			// separates, it does not end the section.
			bareLF = false
			continue
		}
		if errors.Is(err, io.EOF) || err == nil && len(line) == 0 {
			break
		}
		if err != nil {
			return err
		}
		bareLF = lf
		if !c.trailers || i >= maxTrailers {
			return s3err.MalformedTrailer
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return s3err.MalformedTrailer
		}
		name, value = bytes.ToLower(bytes.TrimSpace(name)), bytes.TrimSpace(value)
		switch {
		case c.signed && string(name) == "x-amz-trailer-signature" && claim == nil:
			claim = bytes.Clone(value)
		case c.sumAlg != algNone && string(name) == c.sumAlg.header() && c.trailerValue == nil:
			v, ok := decodeChecksum(c.sumAlg, string(value))
			if !ok {
				return s3err.InvalidRequest.Withf("Value for %s trailing header is invalid.", name)
			}
			c.trailerValue = v
			text = append(append(append(append(text, name...), ':'), value...), '\n')
		default:
			return s3err.MalformedTrailer
		}
	}
	if c.sumAlg != algNone && c.trailerValue == nil {
		return s3err.MalformedTrailer.With("The request's x-amz-trailer was not found in its trailer.")
	}
	if !c.signed || (claim == nil && text == nil) {
		return nil
	}
	if claim == nil {
		return s3err.MalformedTrailer.With("The signed trailer has no x-amz-trailer-signature.")
	}
	c.startStringToSign("AWS4-HMAC-SHA256-TRAILER")
	c.m.msg = c.m.sha256Hex(c.m.msg, text)
	return c.checkClaim(claim)
}

// maxEndSlack bounds the line ends tolerated after the trailer section.
const maxEndSlack = 4

// readToEnd reads the body under the framing to its end, past the
// trailer: net/http keeps a connection for the next request only when a
// body sent with Expect: 100-continue was read to its end (over HTTP
// chunked encoding the end is the zero-size chunk after ours, which
// nothing else reads). Stray line ends there are forgiven; data is not.
func (c *chunkReader) readToEnd() error {
	for i := 0; ; i++ {
		b, err := c.br.ReadByte()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return shortOr(err)
		case (b != '\r' && b != '\n') || i >= maxEndSlack:
			return errChunked("data follows the end of the aws-chunked body")
		}
	}
}

// readLine reads a CRLF-terminated line, without its CRLF, of at most
// maxChunkLine bytes. With eofOK, the stream's clean end is io.EOF (a
// body that omits its final empty line); otherwise it is IncompleteBody.
func (c *chunkReader) readLine(eofOK bool) ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, errChunked("a chunk header or trailer line is longer than 4 KiB")
	case errors.Is(err, io.EOF) && len(line) == 0 && eofOK:
		return nil, io.EOF
	case err != nil:
		return nil, shortOr(err)
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, errChunked("a line does not end with CRLF")
	}
	return line[:len(line)-2], nil
}

// readTrailerLine is readLine for trailer lines, which may also end with a
// bare LF (lf true).
func (c *chunkReader) readTrailerLine() (line []byte, lf bool, err error) {
	line, err = c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, false, errChunked("a trailer line is longer than 4 KiB")
	case errors.Is(err, io.EOF) && len(line) == 0:
		return nil, false, io.EOF
	case err != nil:
		return nil, false, shortOr(err)
	case len(line) >= 2 && line[len(line)-2] == '\r':
		return line[:len(line)-2], false, nil
	}
	return line[:len(line)-1], true, nil
}

// parseChunkSize reads a chunk's hex size (at most 15 digits: no
// overflow).
func parseChunkSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		d := unhex(c)
		if d < 0 {
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}
