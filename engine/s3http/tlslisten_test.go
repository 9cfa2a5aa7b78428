package s3http

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Handshakes that stall are cut off by TLSHandshakeTimeout (not by the far
// longer header timeout), and they do not hold up other clients.
func TestTLSHandshakeTimeout(t *testing.T) {
	cert, pool := selfSigned(t)
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			fmt.Fprintf(w, "secure=%v tls=%v", r.Secure, r.TLS != nil)
		}),
		TLS: &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &cert, nil
		}},
		Limits: Limits{TLSHandshakeTimeout: time.Second, HeaderTimeout: time.Minute},
	})

	silent := make([]net.Conn, 50)
	for i := range silent {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	partial, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	// A handshake record header announcing 512 bytes, and 5 of them.
	if _, err := partial.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	resp, err := client.Get("https://" + ts.addr + "/b/k")
	if err != nil {
		t.Fatalf("TLS request while handshakes stall: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "secure=true tls=true" {
		t.Errorf("handler saw %q", body)
	}

	for i, c := range append(silent, partial) {
		if err := c.SetReadDeadline(start.Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("stalled handshake %d: %v, want the server to close it", i, err)
		}
	}
	took := time.Since(start)
	t.Logf("stalled handshakes closed within %v", took)
	if took > 5*time.Second {
		t.Errorf("stalled handshakes closed after %v, want about TLSHandshakeTimeout (1 s)", took)
	}
	if got := ts.Stats().HandshakeTimeouts; got != 51 {
		t.Errorf("HandshakeTimeouts = %d, want 51", got)
	}
}

// A plain HTTP request to the TLS port gets a readable refusal.
func TestPlainHTTPToTLSPort(t *testing.T) {
	cert, _ := selfSigned(t)
	ts := startServer(t, Config{
		Handler: okHandler,
		TLS:     &tls.Config{Certificates: []tls.Certificate{cert}},
	})
	resp, err := http.Get("http://" + ts.addr + "/b/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %s, want 400", resp.Status)
	}
}

// ALPN never settles on h2 (net/http would drop the connection).
func TestTLSOffersHTTP1Only(t *testing.T) {
	cert, pool := selfSigned(t)
	ts := startServer(t, Config{
		Handler: okHandler,
		TLS:     &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
	})
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
		},
	}
	resp, err := client.Get("https://" + ts.addr + "/b/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK {
		t.Errorf("got %s %s, want HTTP/1.1 200", resp.Proto, resp.Status)
	}
}

// Over TLS the keep-alive header deadline also runs from the first record
// of the next request, though one record carries four bytes and more.
func TestTLSKeepAliveTrickle(t *testing.T) {
	cert, pool := selfSigned(t)
	ts := startServer(t, Config{
		Handler: okHandler,
		TLS:     &tls.Config{Certificates: []tls.Certificate{cert}},
		Limits:  Limits{HeaderTimeout: time.Second, IdleTimeout: 30 * time.Second},
	})
	conn, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %s, %v", resp.Status, err)
	}
	eventually(t, 5*time.Second, "connection idle", func() bool { return ts.Stats().Idle == 1 })

	tr := &trickler{conn: conn, closed: make(chan struct{})}
	go tr.watch()
	start := time.Now()
	go tr.trickle(900 * time.Millisecond) // one record per byte
	select {
	case <-tr.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("TLS keep-alive trickler never closed")
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("TLS keep-alive trickler closed after %v, want about HeaderTimeout (1 s)", took)
	}
}

// A client that goes away over TLS ends its request's context as over
// plain HTTP (TestDisconnectCancels): the engine stops the request's work
// rather than finishing it for no one.
func TestDisconnectCancelsOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	entered := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			entered <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- struct{}{}
			case <-time.After(10 * time.Second):
			}
		}),
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
	})
	conn, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the handler")
	}
	select {
	case <-cancelled:
		t.Fatal("context ended before the client went away")
	case <-time.After(300 * time.Millisecond):
	}
	conn.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("request context not cancelled after the client left")
	}
}
