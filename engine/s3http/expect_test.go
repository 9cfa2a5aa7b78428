package s3http

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// pieces is a reader returning its text a few bytes at a time, so header
// lines arrive cut at every place.
type pieces struct {
	text string
	step int
}

func (p *pieces) Read(b []byte) (int, error) {
	if p.text == "" {
		return 0, io.EOF
	}
	n := min(p.step, len(p.text), len(b))
	copy(b, p.text[:n])
	p.text = p.text[n:]
	return n, nil
}

type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// An expectation other than 100-continue is renamed in the header only:
// 100-continue, other headers that start alike and the body (even a body
// that looks like a header) pass unchanged, however the bytes arrive.
func TestExpectConnRenamesOnlyUnknownExpectations(t *testing.T) {
	const body = "Expect: 200\r\n\r\n"
	for _, c := range []struct{ in, want string }{
		{"PUT /a HTTP/1.1\r\nHost: x\r\nExpect: 200\r\nContent-Length: 15\r\n\r\n" + body,
			"PUT /a HTTP/1.1\r\nHost: x\r\n" + renamedExpect + ": 200\r\nContent-Length: 15\r\n\r\n" + body},
		{"PUT /a HTTP/1.1\r\nexpect:\r\n\r\n", "PUT /a HTTP/1.1\r\n" + renamedExpect + ":\r\n\r\n"},
		{"PUT /a HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n", "PUT /a HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n"},
		{"PUT /a HTTP/1.1\r\nExpected: 1\r\nExpec: 2\r\n\r\n", "PUT /a HTTP/1.1\r\nExpected: 1\r\nExpec: 2\r\n\r\n"},
		{"GET /a HTTP/1.1\nExpect: 200\n\nExpect: 200\n", "GET /a HTTP/1.1\n" + renamedExpect + ": 200\n\nExpect: 200\n"},
		{"GET /a HTTP/1.1\r\nExpect: " + strings.Repeat("x", 300) + "\r\n\r\n", "GET /a HTTP/1.1\r\nExpect: " + strings.Repeat("x", 300) + "\r\n\r\n"},
	} {
		for step := 1; step <= len(c.in); step++ {
			ec := newExpectConn(readerConn{r: &pieces{text: c.in, step: step}})
			got, err := io.ReadAll(ec)
			if err != nil || string(got) != c.want {
				t.Fatalf("%q in steps of %d: %q (%v), want %q", c.in, step, got, err, c.want)
			}
		}
	}
}

// The next request's header on a kept-alive connection is filtered again
// once the connection idles.
func TestExpectConnRearms(t *testing.T) {
	in := "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nExpect: 200\r\n\r\n"
	ec := newExpectConn(readerConn{r: &pieces{text: in, step: 1}})
	first := make([]byte, len("GET /a HTTP/1.1\r\n\r\n"))
	if _, err := io.ReadFull(ec, first); err != nil {
		t.Fatal(err)
	}
	ec.rearm()
	rest, _ := io.ReadAll(ec)
	if want := "GET /b HTTP/1.1\r\n" + renamedExpect + ": 200\r\n\r\n"; string(rest) != want {
		t.Fatalf("second request: %q, want %q", rest, want)
	}
}

// Served end to end, plain and over TLS: a request with Expect: 200 reaches
// the handler (net/http alone would answer 417) with its header as sent,
// 100-continue still works, and a TLS request is known to be one.
func TestUnknownExpectationReachesTheHandler(t *testing.T) {
	cert, pool := selfSigned(t)
	for _, useTLS := range []bool{false, true} {
		type seen struct {
			expect []string
			secure bool
			body   string
		}
		got := make(chan seen, 4)
		cfg := Config{Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			b, _ := io.ReadAll(r.Body)
			got <- seen{r.Header.Values("Expect"), r.Secure, string(b)}
			w.WriteHeader(http.StatusOK)
		})}
		if useTLS {
			cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		}
		ts := startServer(t, cfg)
		dial := func() (net.Conn, error) { return net.DialTimeout("tcp", ts.addr, 5*time.Second) }
		if useTLS {
			dial = func() (net.Conn, error) {
				return tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			}
		}
		conn, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		for _, expect := range []string{"200", "100-continue", "200"} {
			req := "PUT /b/k HTTP/1.1\r\nHost: x\r\nExpect: " + expect + "\r\nContent-Length: 3\r\n\r\n"
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			if expect == "100-continue" {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("tls=%v: want 100 Continue first: %v", useTLS, err)
				}
				resp.Body.Close() // a 1xx answer has none
				if resp.StatusCode != http.StatusContinue {
					t.Fatalf("tls=%v: want 100 Continue first: %s", useTLS, resp.Status)
				}
			}
			if _, err := io.WriteString(conn, "abc"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("tls=%v Expect %s: reading the body: %v", useTLS, expect, err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("tls=%v Expect %s: %s, want 200", useTLS, expect, resp.Status)
			}
			s := <-got
			if len(s.expect) != 1 || s.expect[0] != expect || s.secure != useTLS || s.body != "abc" {
				t.Fatalf("tls=%v Expect %s: the handler saw %+v", useTLS, expect, s)
			}
		}
		conn.Close()
	}
}
