package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// attack is one hostile request: it returns the HTTP status the server
// answered (0: it closed the connection) and the S3 error code.
type attack struct {
	name string
	// want is the S3 error code, or "closed" when the server may also just
	// close the connection.
	want   []string
	status int
	send   func(t *testing.T, s *server) (int, string)
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// rawSend sends req and returns its status and S3 error code.
func rawSend(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "closed"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var e struct{ Code string }
	_ = xml.Unmarshal(body, &e)
	return resp.StatusCode, e.Code
}

// signed returns req signed with SigV4 by the given key, region and time,
// with an unsigned payload.
func signed(t *testing.T, req *http.Request, access, secret, region string, at time.Time) *http.Request {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: access, SecretAccessKey: secret},
		req, "UNSIGNED-PAYLOAD", "s3", region, at); err != nil {
		t.Fatal(err)
	}
	return req
}

// abuses are the attacks run against every target.
func abuses() []attack {
	put := func(s *server, key string, body []byte) *http.Request {
		req, _ := http.NewRequest(http.MethodPut, s.url()+"/abuse/"+key, bytes.NewReader(body))
		return req
	}
	return []attack{
		{"unsigned PUT", []string{"AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			return rawSend(t, put(s, "unsigned", []byte("x")))
		}},
		{"signed with a wrong secret", []string{"SignatureDoesNotMatch"}, 403, func(t *testing.T, s *server) (int, string) {
			return rawSend(t, signed(t, put(s, "wrong-secret", []byte("x")), rootUser, "not-the-secret", "us-east-1", time.Now()))
		}},
		{"signed for another region", []string{"AuthorizationHeaderMalformed", "SignatureDoesNotMatch", "AccessDenied"}, 0, func(t *testing.T, s *server) (int, string) {
			return rawSend(t, signed(t, put(s, "wrong-region", []byte("x")), rootUser, rootPassword, "eu-west-9", time.Now()))
		}},
		{"signed an hour ago", []string{"RequestTimeTooSkewed", "AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			return rawSend(t, signed(t, put(s, "old", []byte("x")), rootUser, rootPassword, "us-east-1", time.Now().Add(-time.Hour)))
		}},
		{"an expired presigned URL", []string{"AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			u := presign(t, s, "expired", time.Second)
			time.Sleep(2 * time.Second)
			req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("x"))
			return rawSend(t, req)
		}},
		{"a presigned URL that expired before it was signed", []string{"AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			u := strings.Replace(presign(t, s, "negative", time.Minute), "X-Amz-Expires=60", "X-Amz-Expires=-1000", 1)
			req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("x"))
			return rawSend(t, req)
		}},
		{"a presigned URL sent to another key", []string{"SignatureDoesNotMatch", "AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			u := strings.Replace(presign(t, s, "granted", time.Minute), "/granted?", "/stolen?", 1)
			req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("x"))
			return rawSend(t, req)
		}},
		{"a presigned URL with its expiry raised", []string{"SignatureDoesNotMatch", "AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			u := strings.Replace(presign(t, s, "raised", time.Minute), "X-Amz-Expires=60", "X-Amz-Expires=604800", 1)
			req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("x"))
			return rawSend(t, req)
		}},
		{"a 64 KiB header", []string{"RequestHeaderSectionTooLarge", "closed", ""}, 0, func(t *testing.T, s *server) (int, string) {
			req := put(s, "big-header", []byte("x"))
			req.Header.Set("X-Amz-Meta-Big", strings.Repeat("a", 64<<10))
			return rawSend(t, signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
		}},
		{"metadata over 2 KiB", []string{"MetadataTooLarge"}, 400, func(t *testing.T, s *server) (int, string) {
			req := put(s, "big-meta", []byte("x"))
			for i := range 3 {
				req.Header.Set(fmt.Sprintf("X-Amz-Meta-M%d", i), strings.Repeat("m", 1000))
			}
			return rawSend(t, signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
		}},
		{"an XML bomb as DeleteObjects", []string{"MalformedXML", "InvalidRequest"}, 400, func(t *testing.T, s *server) (int, string) {
			bomb := `<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">` +
				`<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>` +
				`<Delete><Object><Key>&d;</Key></Object></Delete>`
			req, _ := http.NewRequest(http.MethodPost, s.url()+"/abuse?delete", strings.NewReader(bomb))
			req.Header.Set("Content-MD5", md5b64([]byte(bomb)))
			return rawSend(t, signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
		}},
		{"a DeleteObjects body over 4 MiB", []string{"MaxMessageLengthExceeded"}, 400, func(t *testing.T, s *server) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, s.url()+"/abuse?delete", bytes.NewReader(bytes.Repeat([]byte(" "), 5<<20)))
			return rawSend(t, req) // refused before authentication
		}},
		{"part number 10,001", []string{"InvalidArgument", "InvalidPart"}, 400, func(t *testing.T, s *server) (int, string) {
			c := s.aws()
			mu, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String("abuse"), Key: aws.String("parts")})
			if err != nil {
				t.Fatal(err)
			}
			defer c.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: aws.String("abuse"), Key: aws.String("parts"), UploadId: mu.UploadId}) //nolint:errcheck
			req, _ := http.NewRequest(http.MethodPut, s.url()+"/abuse/parts?partNumber=10001&uploadId="+aws.ToString(mu.UploadId), strings.NewReader("x"))
			return rawSend(t, signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
		}},
		// Refused before its file part is read: the form is checked first
		// (TestUnauthenticatedForms measures how little is read).
		{"a 2 GiB form upload, unauthenticated", []string{"closed", "refused"}, 0, func(t *testing.T, s *server) (int, string) {
			status := sendForm(t, s.addr, "abuse", 2<<30, nil)
			if status == 0 {
				return 0, "closed"
			}
			return status, map[bool]string{true: "refused"}[status >= 400]
		}},
		{"a 6 GiB PUT, over S3's 5 GiB for one request", []string{"EntityTooLarge"}, 400, func(t *testing.T, s *server) (int, string) {
			req, _ := http.NewRequest(http.MethodPut, s.url()+"/abuse/huge", io.LimitReader(zeros{}, 6<<30))
			req.ContentLength = 6 << 30
			req.Header.Set("Expect", "100-continue")
			return rawSend(t, signed(t, req, rootUser, rootPassword, "us-east-1", time.Now()))
		}},
		{"aws-chunked with a forged chunk signature", []string{"SignatureDoesNotMatch", "AccessDenied"}, 403, func(t *testing.T, s *server) (int, string) {
			body := "5;chunk-signature=" + strings.Repeat("0", 64) + "\r\nhello\r\n0;chunk-signature=" + strings.Repeat("0", 64) + "\r\n\r\n"
			req := put(s, "forged-chunks", []byte(body))
			req.Header.Set("Content-Encoding", "aws-chunked")
			req.Header.Set("X-Amz-Decoded-Content-Length", "5")
			req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootUser, SecretAccessKey: rootPassword},
				req, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
			return rawSend(t, req)
		}},
		{"aws-chunked lying about its decoded length", []string{"IncompleteBody", "InvalidRequest", "BadRequest"}, 400, func(t *testing.T, s *server) (int, string) {
			req := put(s, "short-chunks", []byte("5\r\nhello\r\n0\r\n\r\n"))
			req.Header.Set("Content-Encoding", "aws-chunked")
			req.Header.Set("X-Amz-Decoded-Content-Length", "50")
			req.Header.Set("X-Amz-Content-Sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: rootUser, SecretAccessKey: rootPassword},
				req, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "s3", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
			return rawSend(t, req)
		}},
	}
}

// presign returns a presigned PUT URL for key in the abuse bucket.
func presign(t *testing.T, s *server, key string, expires time.Duration) string {
	t.Helper()
	p, err := s3.NewPresignClient(s.aws()).PresignPutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("abuse"), Key: aws.String(key)},
		s3.WithPresignExpires(expires))
	if err != nil {
		t.Fatal(err)
	}
	return p.URL
}

// canary reads one object in a loop while the attacks run, recording each
// read's latency and every failure.
type canary struct {
	stop     chan struct{}
	done     sync.WaitGroup
	mu       sync.Mutex
	lat      []time.Duration
	failures atomic.Int64
}

func startCanary(t *testing.T, s *server) *canary {
	c := &canary{stop: make(chan struct{})}
	client := s.aws()
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			start := time.Now()
			out, err := client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("abuse"), Key: aws.String("canary")})
			if err == nil {
				_, err = io.Copy(io.Discard, out.Body)
				out.Body.Close()
			}
			if err != nil {
				c.failures.Add(1)
			}
			c.mu.Lock()
			c.lat = append(c.lat, time.Since(start))
			c.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return c
}

func (c *canary) finish() (p99 time.Duration, n int) {
	close(c.stop)
	c.done.Wait()
	sort.Slice(c.lat, func(i, j int) bool { return c.lat[i] < c.lat[j] })
	if len(c.lat) == 0 {
		return 0, 0
	}
	return c.lat[len(c.lat)*99/100], len(c.lat)
}

// slowConnections opens n connections that send half a request header,
// a byte at a time, until stop.
func slowConnections(t *testing.T, addr string, n int, stop <-chan struct{}) int {
	t.Helper()
	opened := 0
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		opened++
		conns = append(conns, c)
		_, _ = io.WriteString(c, "GET /abuse/canary HTTP/1.1\r\nHost: x\r\n")
	}
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				for _, c := range conns {
					c.Close()
				}
				return
			case <-tick.C:
				for _, c := range conns {
					_, _ = c.Write([]byte("X"))
				}
			}
		}
	}()
	return opened
}

// peakRSS is the process's peak resident memory (VmHWM), in MiB.
func peakRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return kb >> 10
		}
	}
	return -1
}

// TestAbuseSuite runs hostile requests against a live server and gateway
// while a client keeps reading: each is refused with its S3 error code
// (or the connection closed), nothing is stored, nothing panics, nothing
// is written to the temporary directory, and the reader is served
// throughout. It logs the figures: attacks, refusals, the reader's p99,
// peak RSS.
func TestAbuseSuite(t *testing.T) {
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			tmp := t.TempDir()
			var s *server
			if kind == "server" {
				s = startServer(t, serverOpts{drives: 4, env: []string{"TMPDIR=" + tmp}})
			} else {
				s = &server{t: t, addr: freeAddr(t), env: []string{"TMPDIR=" + tmp}}
				s.args = []string{"gateway", "--address", s.addr, "--root", t.TempDir(), "--shutdown-delay", "0s", "--admin-over-http"}
				s.start()
				t.Cleanup(s.kill)
			}
			mustCreateBucket(t, s.aws(), "abuse")
			put(t, s.aws(), "abuse", "canary", randomBytes(4096))
			before := time.Now()
			probe := startCanary(t, s)
			time.Sleep(300 * time.Millisecond)
			stopSlow := make(chan struct{})
			slow := slowConnections(t, s.addr, 2000, stopSlow)

			refused := 0
			for _, a := range abuses() {
				status, code := a.send(t, s)
				t.Logf("%s: %d %s", a.name, status, code)
				ok := false
				for _, w := range a.want {
					ok = ok || code == w || (w == "closed" && status == 0)
				}
				if !ok || (a.status != 0 && status != a.status) {
					t.Errorf("%s: answered %d %q, want %v (%d)", a.name, status, code, a.want, a.status)
					continue
				}
				refused++
			}
			close(stopSlow)
			p99, reads := probe.finish()

			list, err := s.aws().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("abuse")})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Contents) != 1 {
				var keys []string
				for _, o := range list.Contents {
					keys = append(keys, aws.ToString(o.Key))
				}
				t.Errorf("attacks stored objects: %v", keys)
			}
			if logs := s.logs(); strings.Contains(logs, "PANIC") || strings.Contains(logs, "panic:") {
				t.Errorf("a panic in the %s's log", kind)
			}
			if n := filesUnder(t, tmp); n != 0 {
				t.Errorf("%d files written to the temporary directory", n)
			}
			if f := probe.failures.Load(); f > 0 || reads < 10 {
				t.Errorf("the reader failed %d of %d reads during the attacks", f, reads)
			}
			if p99 > 2*time.Second {
				t.Errorf("the reader's p99 during the attacks: %v", p99)
			}
			t.Logf("%s: %d attacks, %d refused as expected, %d slow connections held; reader: %d reads, p99 %v, 0 failed; peak RSS %d MiB; %d files in TMPDIR; %v",
				kind, len(abuses()), refused, slow, reads, p99.Round(time.Millisecond), peakRSS(s.cmd.Process.Pid), filesUnder(t, tmp), time.Since(before).Round(time.Second))
		})
	}
}

// md5b64 is a body's Content-MD5.
func md5b64(b []byte) string {
	sum := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}
