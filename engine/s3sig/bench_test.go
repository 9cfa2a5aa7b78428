package s3sig

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkVerifyV4Header is the check every request pays: a GET signed
// by the SDK with its usual headers.
func BenchmarkVerifyV4Header(b *testing.B) {
	req := newRequest(b, http.MethodGet, testHost+"/bucket/photos/2026/11/holiday%20snap.jpg?versionId=3HL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY", "")
	req.Header.Set("User-Agent", "aws-sdk-go-v2/1.45.1 os/linux lang/go#1.26 md/GOOS#linux md/GOARCH#amd64 api/s3#1.109.1")
	req.Header.Set("Amz-Sdk-Invocation-Id", "0f6c6d68-3a57-4d8b-9d1b-1b7c0b5ad8d5")
	req.Header.Set("Amz-Sdk-Request", "attempt=1; max=3")
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("Range", "bytes=0-1023")
	sdkSign(b, req, testAccess, testSecret, "us-east-1", UnsignedPayload, testNow)
	req.RequestURI = req.URL.RequestURI() // as a server sees it
	secrets, opts := testSecrets(), testOpts()
	if _, err := Verify(req, secrets, opts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Verify(req, secrets, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBodySigned1MiB decodes a 1 MiB body in 64 KiB signed chunks.
func BenchmarkBodySigned1MiB(b *testing.B) {
	req, a := signedStream(b, StreamingSigned, 1<<20, "")
	s := newStreamSigner(a)
	var body strings.Builder
	chunk := strings.Repeat("x", 64<<10)
	for range 16 {
		body.WriteString(s.chunk(chunk))
	}
	body.WriteString(s.final() + "\r\n")
	data := body.String()
	buf := make([]byte, 32<<10)
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		req.Body = io.NopCloser(strings.NewReader(data))
		p, err := a.Body(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{p}, buf); err != nil {
			b.Fatal(err)
		}
	}
}
