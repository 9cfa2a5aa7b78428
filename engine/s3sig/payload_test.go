package s3sig

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestChecksumVectors pins each algorithm's digest and byte order
// against published values.
func TestChecksumVectors(t *testing.T) {
	cases := []struct {
		alg      algorithm
		in, want string // want in hex, big-endian
	}{
		{algCRC32, "hello world", "0d4a1185"},
		{algCRC32C, "hello world", "c99465aa"},
		{algCRC32, "123456789", "cbf43926"},
		{algCRC32C, "123456789", "e3069283"},
		{algCRC64NVME, "123456789", "ae8b14860a799888"},
		{algSHA1, "hello world", "2aae6c35c94fcfb415dbe95f408b9ce91ee846ed"},
		{algSHA256, "hello world", "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"},
		{algSHA512, "", "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"},
		{algMD5, "hello world", "5eb63bbbe01eeed093cb22bb8f5acdc3"},
		{algXXHash64, "", "ef46db3751d8e999"},
		{algXXHash3, "", "2d06800538d394c2"},
		{algXXHash128, "", "99aa06d3014798d86001c324468d497f"},
	}
	for _, c := range cases {
		h := c.alg.newHash()
		h.Write([]byte(c.in))
		if got := hex.EncodeToString(h.Sum(nil)); got != c.want {
			t.Errorf("%s(%q) = %s, want %s", c.alg, c.in, got, c.want)
		}
		if h.Size() != c.alg.size() {
			t.Errorf("%s size %d, want %d", c.alg, h.Size(), c.alg.size())
		}
		if a, ok := parseAlgorithm(strings.ToLower(c.alg.String())); !ok || a != c.alg {
			t.Errorf("parse %s", c.alg)
		}
	}
}

// plainPut is an anonymous PUT of body with headers, ready for Body.
func plainPut(t *testing.T, body string, headers map[string]string) (*http.Request, *Auth) {
	t.Helper()
	req := newRequest(t, http.MethodPut, testHost+"/b/k", body)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	a, err := Verify(req, testSecrets(), testOpts())
	if err != nil {
		t.Fatal(err)
	}
	return req, a
}

func TestPayloadDeclarations(t *testing.T) {
	const body = "hello world"
	md5sum := md5.Sum([]byte(body))
	sha := sha256.Sum256([]byte(body))
	b64 := base64.StdEncoding.EncodeToString
	type tc struct {
		name      string
		headers   map[string]string
		bodyErr   string // Body's refusal
		readErr   string // the last Read's
		alg, want string // Checksum() after EOF
	}
	cases := []tc{
		{name: "nothing declared"},
		{name: "Content-MD5", headers: map[string]string{"Content-Md5": b64(md5sum[:])}},
		{name: "Content-MD5 wrong", headers: map[string]string{"Content-Md5": "rL0Y20xC+Fzt72VPzMSk2A=="}, readErr: "BadDigest"},
		{name: "Content-MD5 short", headers: map[string]string{"Content-Md5": "YWJyYWNhZGFicmE="}, bodyErr: "InvalidDigest"},
		{name: "Content-MD5 empty", headers: map[string]string{"Content-Md5": ""}, bodyErr: "InvalidDigest"},
		{name: "Content-MD5 garbage", headers: map[string]string{"Content-Md5": "AWS HAHAHA"}, bodyErr: "InvalidDigest"},
		{name: "x-amz-content-sha256", headers: map[string]string{"X-Amz-Content-Sha256": hex.EncodeToString(sha[:])}},
		{name: "x-amz-content-sha256 wrong", headers: map[string]string{"X-Amz-Content-Sha256": emptySHA256}, readErr: "XAmzContentSHA256Mismatch"},
		{name: "checksum header", headers: map[string]string{"X-Amz-Checksum-Crc32c": checksumOf(algCRC32C, body)}, alg: "CRC32C", want: checksumOf(algCRC32C, body)},
		{name: "checksum wrong", headers: map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA=="}, readErr: "BadDigest"},
		{name: "checksum malformed", headers: map[string]string{"X-Amz-Checksum-Sha256": "sailorjerry"}, bodyErr: "InvalidRequest"},
		{name: "checksum of the wrong size", headers: map[string]string{"X-Amz-Checksum-Crc32": b64(sha[:])}, bodyErr: "InvalidRequest"},
		{name: "unknown checksum", headers: map[string]string{"X-Amz-Checksum-Crc16": "AAA="}, bodyErr: "InvalidRequest"},
		{name: "two checksums", headers: map[string]string{"X-Amz-Checksum-Crc32": checksumOf(algCRC32, body), "X-Amz-Checksum-Sha1": checksumOf(algSHA1, body)}, bodyErr: "InvalidRequest"},
		{name: "algorithm only: computed", headers: map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "xxhash128"}, alg: "XXHASH128", want: checksumOf(algXXHash128, body)},
		{name: "x-amz-checksum-algorithm only", headers: map[string]string{"X-Amz-Checksum-Algorithm": "SHA512"}, alg: "SHA512", want: checksumOf(algSHA512, body)},
		{name: "algorithm and its value", headers: map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "CRC32", "X-Amz-Checksum-Crc32": checksumOf(algCRC32, body)}, alg: "CRC32", want: checksumOf(algCRC32, body)},
		{name: "algorithm and another value", headers: map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "CRC32C", "X-Amz-Checksum-Crc32": checksumOf(algCRC32, body)}, bodyErr: "InvalidRequest"},
		{name: "unknown algorithm", headers: map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "CRC16"}, bodyErr: "InvalidRequest"},
		{name: "trailer without a trailer payload", headers: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32"}, bodyErr: "InvalidRequest"},
		{name: "checksum mode ignored", headers: map[string]string{"X-Amz-Checksum-Mode": "ENABLED"}},
		{name: "MD5 and sha256 and checksum MD5", headers: map[string]string{"Content-Md5": b64(md5sum[:]), "X-Amz-Content-Sha256": hex.EncodeToString(sha[:]),
			"X-Amz-Checksum-Md5": b64(md5sum[:])}, alg: "MD5", want: b64(md5sum[:])},
	}
	for _, a := range []algorithm{algCRC32, algCRC32C, algCRC64NVME, algSHA1, algSHA256, algSHA512, algMD5, algXXHash64, algXXHash3, algXXHash128} {
		cases = append(cases, tc{name: "each: " + a.String(), headers: map[string]string{http.CanonicalHeaderKey(a.header()): checksumOf(a, body)},
			alg: a.String(), want: checksumOf(a, body)},
			tc{name: "each wrong: " + a.String(), headers: map[string]string{http.CanonicalHeaderKey(a.header()): checksumOf(a, "other")}, readErr: "BadDigest"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, a := plainPut(t, body, c.headers)
			p, err := a.Body(req)
			if code, _ := codeOf(err); code != c.bodyErr {
				t.Fatalf("Body: %v, want %q", err, c.bodyErr)
			}
			if err != nil {
				return
			}
			got, err := readAll(p)
			if code, _ := codeOf(err); code != c.readErr {
				t.Fatalf("Read: %v, want %q", err, c.readErr)
			}
			if err != nil {
				return
			}
			if string(got) != body || p.Size() != int64(len(body)) {
				t.Fatalf("got %q size %d", got, p.Size())
			}
			if alg, v := p.Checksum(); alg != c.alg || v != c.want {
				t.Fatalf("checksum %q %q, want %q %q", alg, v, c.alg, c.want)
			}
			if _, ok := c.headers["Content-Md5"]; ok && string(p.MD5()) != string(md5sum[:]) {
				t.Fatalf("MD5 %x", p.MD5())
			}
		})
	}
	t.Run("mismatch message names the algorithm", func(t *testing.T) {
		req, a := plainPut(t, body, map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA=="})
		p, _ := a.Body(req)
		_, err := readAll(p)
		if err == nil || !strings.Contains(err.Error(), "The CRC32 you specified did not match the calculated checksum.") {
			t.Fatal(err)
		}
	})
	t.Run("WantMD5", func(t *testing.T) {
		req, a := plainPut(t, body, nil)
		p, _ := a.Body(req)
		p.WantMD5()
		if _, err := readAll(p); err != nil || string(p.MD5()) != string(md5sum[:]) {
			t.Fatalf("%x %v", p.MD5(), err)
		}
	})
	t.Run("error instead of EOF, sticky", func(t *testing.T) {
		req, a := plainPut(t, body, map[string]string{"Content-Md5": "rL0Y20xC+Fzt72VPzMSk2A=="})
		p, _ := a.Body(req)
		buf := make([]byte, 64)
		var last error
		for range 5 {
			_, err := p.Read(buf)
			if errors.Is(err, io.EOF) {
				t.Fatal("io.EOF from a body that does not match its Content-MD5")
			}
			if err != nil {
				last = err
			}
		}
		wantCode(t, "sticky", last, "BadDigest", 400)
	})
	t.Run("body cut short", func(t *testing.T) {
		req, a := plainPut(t, body, nil)
		req.Body = io.NopCloser(io.MultiReader(strings.NewReader("hel"), errReader{io.ErrUnexpectedEOF}))
		p, _ := a.Body(req)
		_, err := readAll(p)
		wantCode(t, "short", err, "IncompleteBody", 400)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestPayloadAllocations: a small unsigned PUT without checksums costs
// the Payload and nothing else: no hasher.
func TestPayloadAllocations(t *testing.T) {
	data := strings.Repeat("x", 4096)
	buf := make([]byte, 8192)
	req, a := plainPut(t, data, map[string]string{"X-Amz-Content-Sha256": UnsignedPayload})
	src := strings.NewReader(data)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(data)
		req.Body = io.NopCloser(src)
		p, err := a.Body(req)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := p.Read(buf); err != nil {
				break
			}
		}
	})
	// The test's NopCloser and the Payload itself.
	if allocs > 2 {
		t.Fatalf("%v allocations per 4 KiB unsigned PUT", allocs)
	}
}
