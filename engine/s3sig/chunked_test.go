package s3sig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example of AWS's "Signature calculations for the Authorization
// header: transferring payload in multiple chunks": 66560 bytes of 'a' in
// chunks of 64 KiB and 1 KiB, with the signatures the document gives.
func awsChunkedExample(t testing.TB, finalSig string) *http.Request {
	t.Helper()
	chunk := func(size int, sig string) string {
		return strconv.FormatInt(int64(size), 16) + ";chunk-signature=" + sig + "\r\n" + strings.Repeat("a", size) + "\r\n"
	}
	body := chunk(65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648") +
		chunk(1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497") +
		"0;chunk-signature=" + finalSig + "\r\n\r\n"
	req := newRequest(t, http.MethodPut, "http://s3.amazonaws.com/examplebucket/chunkObject.txt", body)
	if req.ContentLength != 66824 {
		t.Fatalf("content length %d", req.ContentLength)
	}
	req.Header.Set("X-Amz-Date", "20130524T000000Z")
	req.Header.Set("X-Amz-Storage-Class", "REDUCED_REDUNDANCY")
	req.Header.Set("X-Amz-Content-Sha256", StreamingSigned)
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", "66560")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"+
		"SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,"+
		"Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9")
	return req
}

func TestChunkedAWSExample(t *testing.T) {
	opts := Options{Now: func() time.Time { return time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC) }}
	for _, c := range []struct {
		name, final, code string
		status            int
	}{
		{"as documented", "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9", "", 0},
		{"final chunk forged", strings.Repeat("0", 64), "SignatureDoesNotMatch", 403},
	} {
		req := awsChunkedExample(t, c.final)
		a, err := Verify(req, docSecrets(), opts)
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Body(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(p)
		wantCode(t, c.name, err, c.code, c.status)
		if err == nil && (p.Size() != 66560 || !bytes.Equal(got, bytes.Repeat([]byte("a"), 66560))) {
			t.Fatalf("%s: %d bytes, size %d", c.name, len(got), p.Size())
		}
	}
}

// streamSigner writes aws-chunked bodies signed per the AWS
// specification, independently of the decoder.
type streamSigner struct {
	key         []byte
	date, scope string
	prev        string
}

func newStreamSigner(a *Auth) *streamSigner {
	return &streamSigner{key: a.key[:], date: a.amzDate, scope: a.Scope, prev: hex.EncodeToString(a.signature[:])}
}

func (s *streamSigner) mac(sts string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(sts))
	s.prev = hex.EncodeToString(m.Sum(nil))
	return s.prev
}

func (s *streamSigner) chunk(data string) string {
	sum := sha256.Sum256([]byte(data))
	sig := s.mac("AWS4-HMAC-SHA256-PAYLOAD\n" + s.date + "\n" + s.scope + "\n" + s.prev + "\n" + emptySHA256 + "\n" + hex.EncodeToString(sum[:]))
	return fmt.Sprintf("%x;chunk-signature=%s\r\n%s\r\n", len(data), sig, data)
}

func (s *streamSigner) final() string {
	sum := sha256.Sum256(nil)
	return "0;chunk-signature=" + s.mac("AWS4-HMAC-SHA256-PAYLOAD\n"+s.date+"\n"+s.scope+"\n"+s.prev+"\n"+emptySHA256+"\n"+hex.EncodeToString(sum[:])) + "\r\n"
}

func (s *streamSigner) trailer(lines string) string {
	sum := sha256.Sum256([]byte(lines))
	sig := s.mac("AWS4-HMAC-SHA256-TRAILER\n" + s.date + "\n" + s.scope + "\n" + s.prev + "\n" + hex.EncodeToString(sum[:]))
	return strings.ReplaceAll(lines, "\n", "\r\n") + "x-amz-trailer-signature:" + sig + "\r\n\r\n"
}

// signedStream makes a V4-signed PUT declaring payload, verifies it and
// returns the request (body set by the caller) and its Auth.
func signedStream(t testing.TB, payload string, decoded int, trailer string) (*http.Request, *Auth) {
	t.Helper()
	req := newRequest(t, http.MethodPut, testHost+"/bucket/streamed", "")
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(decoded))
	if trailer != "" {
		req.Header.Set("X-Amz-Trailer", trailer)
	}
	sdkSign(t, req, testAccess, testSecret, "us-east-1", payload, testNow)
	a, err := Verify(req, testSecrets(), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	return req, a
}

// checksumOf is the base64 checksum of s, computed by the algorithm's
// own hash.
func checksumOf(a algorithm, s string) string {
	h := a.newHash()
	h.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func TestChunkedSigned(t *testing.T) {
	big := strings.Repeat("x", 9000)
	cases := []struct {
		name     string
		payload  string
		trailer  string
		decoded  int
		body     func(s *streamSigner) string
		data     string
		checksum string // base64 CRC32 expected from Checksum()
		code     string
		status   int
	}{
		{name: "signed", payload: StreamingSigned, decoded: 9005, data: big + "hello",
			body: func(s *streamSigner) string { return s.chunk(big) + s.chunk("hello") + s.final() + "\r\n" }},
		{name: "empty", payload: StreamingSigned, decoded: 0,
			body: func(s *streamSigner) string { return s.final() + "\r\n" }},
		{name: "signed trailer", payload: StreamingSignedTrailer, trailer: "x-amz-checksum-crc32", decoded: 5, data: "hello",
			checksum: checksumOf(algCRC32, "hello"),
			body: func(s *streamSigner) string {
				return s.chunk("hello") + s.final() + s.trailer("x-amz-checksum-crc32:"+checksumOf(algCRC32, "hello")+"\n")
			}},
		// minio-go (TrailingHeaders) writes the trailer lines as they are
		// signed, LF-terminated, then CRLF before the signature.
		{name: "signed trailer as minio-go writes it", payload: StreamingSignedTrailer, trailer: "x-amz-checksum-crc32", decoded: 5, data: "hello",
			checksum: checksumOf(algCRC32, "hello"),
			body: func(s *streamSigner) string {
				lines := "x-amz-checksum-crc32:" + checksumOf(algCRC32, "hello") + "\n"
				chunks := s.chunk("hello") + s.final()
				_, signature, _ := strings.Cut(s.trailer(lines), "x-amz-trailer-signature")
				return chunks + lines + "\r\n" + "x-amz-trailer-signature" + signature
			}},
		{name: "signed trailer, checksum wrong", payload: StreamingSignedTrailer, trailer: "x-amz-checksum-crc32", decoded: 5,
			code: "BadDigest", status: 400,
			body: func(s *streamSigner) string {
				return s.chunk("hello") + s.final() + s.trailer("x-amz-checksum-crc32:AAAAAA==\n")
			}},
		{name: "signed trailer forged", payload: StreamingSignedTrailer, trailer: "x-amz-checksum-crc32", decoded: 5,
			code: "SignatureDoesNotMatch", status: 403,
			body: func(s *streamSigner) string {
				good := s.trailer("x-amz-checksum-crc32:" + checksumOf(algCRC32, "hello") + "\n")
				return s.chunk("hello") + s.final() + strings.Replace(good, checksumOf(algCRC32, "hello"), "AAAAAA==", 1)
			}},
		{name: "signed trailer without its signature", payload: StreamingSignedTrailer, trailer: "x-amz-checksum-crc32", decoded: 5,
			code: "MalformedTrailerError", status: 400,
			body: func(s *streamSigner) string {
				return s.chunk("hello") + s.final() + "x-amz-checksum-crc32:" + checksumOf(algCRC32, "hello") + "\r\n\r\n"
			}},
		{name: "forged chunk", payload: StreamingSigned, decoded: 5, code: "SignatureDoesNotMatch", status: 403,
			body: func(*streamSigner) string {
				z := strings.Repeat("0", 64)
				return "5;chunk-signature=" + z + "\r\nhello\r\n0;chunk-signature=" + z + "\r\n\r\n"
			}},
		{name: "chunks reordered", payload: StreamingSigned, decoded: 18000, code: "SignatureDoesNotMatch", status: 403,
			body: func(s *streamSigner) string {
				a, b := s.chunk(strings.Repeat("a", 9000)), s.chunk(strings.Repeat("b", 9000))
				return b + a + s.final() + "\r\n"
			}},
		{name: "chunk unsigned", payload: StreamingSigned, decoded: 5, code: "InvalidRequest", status: 400,
			body: func(*streamSigner) string { return "5\r\nhello\r\n0\r\n\r\n" }},
		{name: "small chunk not last", payload: StreamingSigned, decoded: 10, code: "InvalidChunkSizeError", status: 400,
			body: func(s *streamSigner) string { return s.chunk("hello") + s.chunk("world") + s.final() + "\r\n" }},
		{name: "fewer bytes than declared", payload: StreamingSigned, decoded: 50, code: "IncompleteBody", status: 400,
			body: func(s *streamSigner) string { return s.chunk("hello") + s.final() + "\r\n" }},
		{name: "more bytes than declared", payload: StreamingSigned, decoded: 3, code: "InvalidRequest", status: 400,
			body: func(s *streamSigner) string { return s.chunk("hello") + s.final() + "\r\n" }},
		{name: "cut short", payload: StreamingSigned, decoded: 5, code: "IncompleteBody", status: 400,
			body: func(s *streamSigner) string { return s.chunk("hello")[:86] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, a := signedStream(t, c.payload, c.decoded, c.trailer)
			body := c.body(newStreamSigner(a))
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			p, err := a.Body(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(p)
			wantCode(t, c.name, err, c.code, c.status)
			if err != nil {
				return
			}
			if string(got) != c.data || p.Size() != int64(c.decoded) {
				t.Fatalf("got %d bytes, size %d", len(got), p.Size())
			}
			if alg, v := p.Checksum(); c.checksum != "" && (alg != "CRC32" || v != c.checksum) {
				t.Fatalf("checksum %s %s", alg, v)
			}
		})
	}
}

func TestChunkedUnsignedTrailer(t *testing.T) {
	sum := checksumOf(algCRC32, "hello world")
	cases := []struct {
		name, trailer, body, code string
		decoded, status           int
	}{
		{"trailer", "x-amz-checksum-crc32", "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n\r\n", "", 11, 0},
		{"no final CRLF", "x-amz-checksum-crc32", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n", "", 11, 0},
		{"chunk extension ignored", "", "b;ext=1\r\nhello world\r\n0\r\n\r\n", "", 11, 0},
		{"wrong checksum", "x-amz-checksum-crc32", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", "BadDigest", 11, 400},
		{"malformed checksum", "x-amz-checksum-crc32", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:xyz\r\n\r\n", "InvalidRequest", 11, 400},
		{"missing trailer", "x-amz-checksum-crc32", "b\r\nhello world\r\n0\r\n\r\n", "MalformedTrailerError", 11, 400},
		{"undeclared trailer", "", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n\r\n", "MalformedTrailerError", 11, 400},
		{"lying length", "", "5\r\nhello\r\n0\r\n\r\n", "IncompleteBody", 50, 400},
		{"data past its chunk", "", "5\r\nhello world\r\n0\r\n\r\n", "InvalidRequest", 11, 400},
		{"size not hex", "", "zz\r\nhello\r\n0\r\n\r\n", "InvalidRequest", 5, 400},
		{"huge size", "", "fffffffffffffffff\r\n", "InvalidRequest", 5, 400},
		{"header line too long", "", "5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n", "InvalidRequest", 5, 400},
		{"LF only", "", "5\nhello\r\n0\r\n\r\n", "InvalidRequest", 5, 400},
		{"truncated header", "", "5", "IncompleteBody", 5, 400},
		{"line ends after the end", "", "b\r\nhello world\r\n0\r\n\r\n\r\n", "", 11, 0},
		{"data after the end", "", "b\r\nhello world\r\n0\r\n\r\nPUT /b/k HTTP/1.1\r\n", "InvalidRequest", 11, 400},
		{"too many line ends after the end", "", "b\r\nhello world\r\n0\r\n\r\n" + strings.Repeat("\r\n", 3), "InvalidRequest", 11, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, http.MethodPut, testHost+"/b/k", c.body)
			req.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
			req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(c.decoded))
			if c.trailer != "" {
				req.Header.Set("X-Amz-Trailer", c.trailer)
			}
			a, err := Verify(req, testSecrets(), testOpts())
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Body(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(p)
			wantCode(t, c.name, err, c.code, c.status)
			if err == nil && string(got) != "hello world" {
				t.Fatalf("got %q", got)
			}
			if alg, v := p.Checksum(); err == nil && c.trailer != "" && (alg != "CRC32" || v != sum) {
				t.Fatalf("checksum %q %q", alg, v)
			}
		})
	}
}

// eofSpy is a body that notes whether its reader got to its end.
type eofSpy struct {
	r      io.Reader
	sawEOF bool
}

func (e *eofSpy) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.sawEOF = true
	}
	return n, err
}

// TestChunkedReadsBodyToItsEnd: the decoded data's io.EOF comes only once
// the body under the framing has ended. net/http keeps the connection of a
// request sent with Expect: 100-continue only when its body was read to
// the end, and over HTTP chunked encoding that end (the zero-size chunk
// after ours) is still to be read when the trailer's last line is.
func TestChunkedReadsBodyToItsEnd(t *testing.T) {
	sum := checksumOf(algCRC32, "hello world")
	body := "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n\r\n"
	req := newRequest(t, http.MethodPut, testHost+"/b/k", "")
	req.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
	req.Header.Set("X-Amz-Decoded-Content-Length", "11")
	req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	a, err := Verify(req, testSecrets(), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	spy := &eofSpy{r: strings.NewReader(body)}
	req.Body, req.ContentLength = io.NopCloser(spy), -1
	p, err := a.Body(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(p); err != nil || string(got) != "hello world" {
		t.Fatalf("got %q, %v", got, err)
	}
	if !spy.sawEOF {
		t.Fatal("the decoded body ended before the request body did")
	}
}

func TestContentEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"gzip":                     "gzip",
		"aws-chunked":              "",
		"aws-chunked, gzip":        "gzip",
		"gzip,aws-chunked":         "gzip",
		"aws-chunked, aws-chunked": "",
		"deflate, gzip":            "deflate, gzip",
	} {
		if got := ContentEncoding(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
