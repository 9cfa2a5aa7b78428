package s3sig

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzChunkedUnsigned feeds arbitrary bodies to the aws-chunked decoder
// (unsigned, with a CRC32 trailer): it must never panic, never give more
// than the declared length, and reach io.EOF only with exactly it.
func FuzzChunkedUnsigned(f *testing.F) {
	sum := checksumOf(algCRC32, "hello world")
	for _, seed := range []string{
		"5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n\r\n",
		"b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:" + sum + "\r\n",
		"b;x=y\r\nhello world\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\n\r\n",
		"fffffffffffffff\r\n",
		"0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed), uint16(11))
	}
	f.Fuzz(func(t *testing.T, body []byte, declared uint16) {
		req := newRequest(t, http.MethodPut, testHost+"/b/k", "")
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req.Header.Set("X-Amz-Content-Sha256", StreamingUnsignedTrailer)
		req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(int(declared)))
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
		a, err := Verify(req, testSecrets(), testOpts())
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Body(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(p)
		if len(got) > int(declared) {
			t.Fatalf("gave %d bytes of %d declared", len(got), declared)
		}
		if err == nil && len(got) != int(declared) {
			t.Fatalf("EOF after %d bytes of %d declared", len(got), declared)
		}
		if err == nil {
			if alg, v := p.Checksum(); alg != "CRC32" || v != checksumOf(algCRC32, string(got)) {
				t.Fatalf("EOF with checksum %s %s", alg, v)
			}
		}
	})
}

// FuzzChunkedSigned: the same for signed chunks; with random bytes for
// signatures, nothing but the empty body can verify.
func FuzzChunkedSigned(f *testing.F) {
	z := strings.Repeat("0", 64)
	for _, seed := range []string{
		"5;chunk-signature=" + z + "\r\nhello\r\n0;chunk-signature=" + z + "\r\n\r\n",
		"0;chunk-signature=" + z + "\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-trailer-signature:" + z + "\r\n\r\n",
		"2000;chunk-signature=" + z + "\r\n",
	} {
		f.Add([]byte(seed))
	}
	req, a := signedStream(f, StreamingSignedTrailer, 5, "x-amz-checksum-crc32")
	f.Fuzz(func(t *testing.T, body []byte) {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		p, err := a.Body(req)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(p); err == nil || len(got) > 5 {
			t.Fatalf("accepted %q (%d bytes): %v", body, len(got), err)
		}
	})
}

// FuzzReadForm feeds arbitrary bodies to the form reader: it must never
// panic, and what it reads before the file stays bounded.
func FuzzReadForm(f *testing.F) {
	const boundary = "xYzZY"
	for _, seed := range []string{
		"--xYzZY\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n--xYzZY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\ndata\r\n--xYzZY--\r\n",
		"--xYzZY\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n",
		"--xYzZY\r\nContent-Disposition: attachment\r\n\r\nx\r\n--xYzZY--",
		"garbage",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		src := &countingReader{r: bytes.NewReader(body)}
		limits := FormLimits{MaxFieldsBytes: 1 << 10, MaxFieldBytes: 512}
		form, err := ReadForm(src, boundary, limits)
		if src.n > 2*(1<<10)+8<<10+4<<10 {
			t.Fatalf("read %d bytes before the file", src.n)
		}
		if err != nil {
			return
		}
		var total int
		for _, v := range form.Fields {
			total += len(v)
		}
		if total > 1<<10 {
			t.Fatalf("kept %d bytes of fields", total)
		}
		_, _, _ = VerifyPost(form, "b", testSecrets(), testOpts())
		if p, err := form.Payload(nil); err == nil {
			_, _ = readAll(p)
		}
	})
}
