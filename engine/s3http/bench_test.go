package s3http

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// setTinyHeaders is the benchmark's handler work: five headers, no body.
func setTinyHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Etag", `"d41d8cd98f00b204e9800998ecf8427e"`)
	h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
	h.Set("Accept-Ranges", "bytes")
	h.Set("X-Amz-Version-Id", "null")
	w.WriteHeader(http.StatusOK)
}

// BenchmarkServeTinyRequest measures one HEAD round trip on a keep-alive
// connection, with a bare net/http server ("bare"), with net/http set up
// as this package sets it up ("tuned"), and with this package ("s3http").
// The client is a hand-written loop that allocates nothing, so allocs/op
// is the server's; cpu-ns/op is the process's CPU time (client and
// server) per request.
func BenchmarkServeTinyRequest(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			setTinyHeaders(w)
		})}
		benchRoundTrips(b, serveBare(b, srv))
	})
	// tuned is bare net/http doing what this package asks of it (header
	// and idle timeouts) and sending the two ID headers: the difference
	// from s3http is the cost of the wrapping alone; from bare, the cost of
	// the timeouts and headers themselves.
	b.Run("tuned", func(b *testing.B) {
		ids := newRequestIDs()
		srv := &http.Server{
			ReadHeaderTimeout: DefaultHeaderTimeout,
			IdleTimeout:       DefaultIdleTimeout,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var id [16]byte
				ids.fill(&id)
				w.Header()[headerRequestID] = []string{string(id[:])}
				w.Header()[headerHostID] = []string{"host-id"}
				setTinyHeaders(w)
			}),
		}
		benchRoundTrips(b, serveBare(b, srv))
	})
	b.Run("s3http", func(b *testing.B) {
		ts := startServer(b, Config{Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			setTinyHeaders(w)
		})})
		benchRoundTrips(b, ts.addr)
	})
}

// serveBare runs srv on a loopback port until the benchmark ends and
// returns its address.
func serveBare(b *testing.B, srv *http.Server) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	b.Cleanup(func() {
		if err := srv.Shutdown(context.Background()); err != nil {
			b.Error(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

func benchRoundTrips(b *testing.B, addr string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := []byte("HEAD /bucket/key HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
	br := bufio.NewReaderSize(conn, 4096)
	roundTrip := func() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		first := true
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
				b.Fatalf("answer %q", line)
			}
			first = false
			if len(line) == 2 {
				return // the blank line: a HEAD answer has no body
			}
		}
	}
	for range 1000 {
		roundTrip() // warm pools and buffers
	}
	cpu0 := cpuTime(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		roundTrip()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nullConn is a connection that reads a few bytes and writes nothing, for
// measuring the request path without a network.
type nullConn struct{ net.Conn }

func (nullConn) Read(p []byte) (int, error)       { return copy(p, "HEAD"), nil }
func (nullConn) SetReadDeadline(time.Time) error  { return nil }
func (nullConn) SetWriteDeadline(time.Time) error { return nil }
func (nullConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1} }

// nullWriter is a ResponseWriter with the deadline methods of net/http's.
type nullWriter struct{ h http.Header }

func (w *nullWriter) Header() http.Header              { return w.h }
func (w *nullWriter) Write(p []byte) (int, error)      { return len(p), nil }
func (w *nullWriter) WriteHeader(int)                  {}
func (w *nullWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *nullWriter) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkRequestOverhead isolates what this package adds to a request,
// without the network: "handler" runs the tiny handler alone, "s3http"
// runs it through the server's request path and the connection hooks a
// keep-alive request passes (idle, first byte, serving). The difference
// is the package's CPU and allocations per request.
func BenchmarkRequestOverhead(b *testing.B) {
	b.Run("handler", func(b *testing.B) {
		w := &nullWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			w.h = make(http.Header)
			setTinyHeaders(w)
		}
	})
	b.Run("s3http", func(b *testing.B) {
		s, err := NewServer(Config{Address: "127.0.0.1:0", Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			setTinyHeaders(w)
		})})
		if err != nil {
			b.Fatal(err)
		}
		tc := newTrackedConn(nullConn{}, s.conns)
		s.conns.admit(tc, phaseAwaitingHeader)
		hr, _ := http.NewRequest(http.MethodHead, "http://bench/bucket/key", nil)
		hr = hr.WithContext(context.WithValue(context.Background(), connKey{}, tc))
		w := &nullWriter{}
		var buf [4]byte
		b.ReportAllocs()
		for b.Loop() {
			w.h = make(http.Header)
			s.connState(tc, http.StateIdle)
			if _, err := tc.Read(buf[:]); err != nil {
				b.Fatal(err)
			}
			s.serveHTTP(w, hr)
		}
	})
}
