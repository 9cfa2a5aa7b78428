package s3http

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestBodyAllowance(t *testing.T) {
	tests := []struct {
		name   string
		grace  time.Duration
		rate   int64
		read   int64
		waited time.Duration
		want   time.Duration
	}{
		{"first byte", 10 * time.Second, 1024, 0, 0, 10*time.Second + time.Second/1024},
		{"grace spent, on pace", time.Second, 1024, 1023, 2 * time.Second, 0},
		{"ahead of pace", time.Second, 1024, 10*1024 - 1, 5 * time.Second, 6 * time.Second},
		{"behind pace", time.Second, 1024, 1, 2 * time.Second, time.Second + 2*time.Second/1024 - 2*time.Second},
		{"handler pauses are not waiting", 0, 1, 9, 0, 10 * time.Second},
		{"huge body does not overflow", 0, 1, 1 << 62, 0, (1 << 32) * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bodyAllowance(tt.grace, tt.rate, tt.read, tt.waited); got != tt.want {
				t.Errorf("allowance = %v, want %v", got, tt.want)
			}
		})
	}
}

// A body arriving at 1 byte/s is cut off with ErrBodyTooSlow and the
// connection closed; an ordinary 1 MiB upload goes through.
func TestSlowBody(t *testing.T) {
	handlerErr := make(chan error, 10)
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			n, err := io.Copy(io.Discard, r.Body)
			handlerErr <- err
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d", n)
		}),
		Limits: Limits{MinBodyRate: 1024, BodyGrace: time.Second},
	})

	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 100 {
			if _, err := conn.Write([]byte{'x'}); err != nil {
				return
			}
			time.Sleep(time.Second)
		}
	}()
	select {
	case err := <-handlerErr:
		if !errors.Is(err, ErrBodyTooSlow) {
			t.Fatalf("handler's read error = %v, want ErrBodyTooSlow", err)
		}
		t.Logf("slow body cut off after %v", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("slow body not cut off within 10 s")
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer to the slow body: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Errorf("answer: %s (close %v), want 400 and the connection closed", resp.Status, resp.Close)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("connection still open after the slow body")
	}
	if got := ts.Stats().SlowBodies; got != 1 {
		t.Errorf("SlowBodies = %d, want 1", got)
	}

	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	req, _ := http.NewRequest(http.MethodPut, "http://"+ts.addr+"/b/big", bytes.NewReader(body))
	resp, err = (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != fmt.Sprint(len(body)) {
		t.Errorf("1 MiB upload: %s %q", resp.Status, got)
	}
	if err := <-handlerErr; err != nil {
		t.Errorf("1 MiB upload: handler read %v", err)
	}
}

// net/http answers Expect: 100-continue when the handler first reads the
// body; the body guard must not get in the way.
func TestExpectContinue(t *testing.T) {
	ts := startServer(t, Config{Handler: okHandler})
	client := &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{ExpectContinueTimeout: 15 * time.Second},
	}
	body := bytes.Repeat([]byte("x"), 64<<10)
	req, _ := http.NewRequest(http.MethodPut, "http://"+ts.addr+"/b/k", bytes.NewReader(body))
	req.Header.Set("Expect", "100-continue")
	got100 := false
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got100Continue: func() { got100 = true },
	}))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != fmt.Sprint(len(body)) {
		t.Errorf("answer: %s %q", resp.Status, got)
	}
	if !got100 {
		t.Error("no 100 Continue received")
	}
}

// A client that goes away ends its request's context, whether the
// handler read a body first or there was none.
func TestDisconnectCancels(t *testing.T) {
	tests := []struct {
		name, request string
	}{
		{"after reading the body", "PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"},
		{"without a body", "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"chunked body", "PUT /b/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := make(chan error, 1)
			cancelled := make(chan time.Time, 1)
			ts := startServer(t, Config{
				Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
					_, err := io.ReadAll(r.Body)
					if err == nil {
						// A read past the end must not arm a deadline under
						// net/http's watch for the disconnect.
						if _, err = r.Body.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
							err = nil
						}
					}
					read <- err
					select {
					case <-r.Context().Done():
						cancelled <- time.Now()
					case <-time.After(10 * time.Second):
					}
				}),
				Limits: Limits{BodyGrace: 200 * time.Millisecond},
			})
			conn, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(conn, tt.request); err != nil {
				t.Fatal(err)
			}
			if err := <-read; err != nil {
				t.Fatalf("handler read the body: %v", err)
			}
			// Longer than BodyGrace: a stray read deadline would have fired.
			time.Sleep(500 * time.Millisecond)
			select {
			case <-cancelled:
				t.Fatal("context ended before the client went away")
			default:
			}
			closed := time.Now()
			conn.Close()
			select {
			case at := <-cancelled:
				if d := at.Sub(closed); d > 2*time.Second {
					t.Errorf("cancelled %v after the client left", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("request context not cancelled after the client left")
			}
		})
	}
}

// A response the client does not read fails its write after WriteStall.
func TestWriteStall(t *testing.T) {
	result := make(chan error, 1)
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range 1024 {
				if _, err := w.Write(chunk); err != nil {
					result <- err
					return
				}
			}
			result <- nil
		}),
		Limits: Limits{WriteStall: time.Second},
	})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("handler's write error = %v, want a deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("write to a client that does not read never failed")
	}
	if got := ts.Stats().WriteStalls; got != 1 {
		t.Errorf("WriteStalls = %d, want 1", got)
	}
}

// A slow reader that keeps reading is not a stall.
func TestSlowReaderIsNotStall(t *testing.T) {
	const size = 8 << 20
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			// One big write; a failed one shows as a short read below.
			_, _ = w.Write(bytes.Repeat([]byte("x"), size))
		}),
		Limits: Limits{WriteStall: time.Second},
	})
	resp, err := http.Get("http://" + ts.addr + "/b/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n int64
	buf := make([]byte, 256<<10)
	for {
		m, err := resp.Body.Read(buf)
		n += int64(m)
		if err != nil {
			if err != io.EOF {
				t.Fatalf("after %d bytes: %v", n, err)
			}
			break
		}
		// 4 MiB/s: two seconds in all, twice WriteStall.
		time.Sleep(time.Duration(m) * time.Second / (4 << 20))
	}
	if n != size {
		t.Errorf("read %d bytes, want %d", n, size)
	}
	if got := ts.Stats().WriteStalls; got != 0 {
		t.Errorf("WriteStalls = %d, want 0", got)
	}
}

// A file handed to the response (io.Copy of an *os.File, or of a part of
// one) arrives whole, plain and over TLS, and a client that stops reading
// it trips the write-stall guard as with Write.
func TestFileResponses(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	path := filepath.Join(t.TempDir(), "obj")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const from, length = 1000, 2<<20 + 7
	result := make(chan error, 4)
	handler := HandlerFunc(func(w http.ResponseWriter, r *Request) {
		f, err := os.Open(path)
		if err != nil {
			result <- err
			return
		}
		defer f.Close()
		w.Header().Set("Content-Length", strconv.Itoa(length))
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			result <- err
			return
		}
		_, err = io.Copy(w, io.LimitReader(f, length))
		result <- err
	})
	cert, pool := selfSigned(t)
	for _, useTLS := range []bool{false, true} {
		cfg := Config{Handler: handler, Limits: Limits{WriteStall: time.Second}}
		client, scheme := http.DefaultClient, "http"
		if useTLS {
			cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			client, scheme = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, "https"
		}
		ts := startServer(t, cfg)
		resp, err := client.Get(scheme + "://" + ts.addr + "/b/k")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, data[from:from+length]) {
			t.Fatalf("tls=%v: read %d bytes (%v), want bytes %d-%d of the file", useTLS, len(got), err, from, from+length)
		}
		if err := <-result; err != nil {
			t.Fatalf("tls=%v: handler: %v", useTLS, err)
		}
		if useTLS {
			continue
		}
		// A client that sends its request and reads nothing.
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-result:
			// The kernel's buffers may take the whole (small) file: a
			// stall needs a response larger than they hold.
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("handler's error to a client that does not read: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a file sent to a client that does not read held its handler")
		}
	}
}
