package s3http

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConnectionBudget(t *testing.T) {
	tests := []struct {
		soft uint64
		want int
	}{
		{0, DefaultMaxConnections},
		{256, 128},
		{1024, 512},
		{4096, 3072},
		{20000, 16384},
		{1 << 20, 16384},
		{^uint64(0), 16384},
	}
	for _, tt := range tests {
		if got := connectionBudget(tt.soft); got != tt.want {
			t.Errorf("connectionBudget(%d) = %d, want %d", tt.soft, got, tt.want)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := Limits{IdleTimeout: -1, MaxRequests: 7, MaxHeaderBytes: -1}.withDefaults(4096)
	want := Limits{
		HeaderTimeout:        DefaultHeaderTimeout,
		IdleTimeout:          -1,
		TLSHandshakeTimeout:  DefaultTLSHandshakeTimeout,
		MinBodyRate:          DefaultMinBodyRate,
		BodyGrace:            DefaultBodyGrace,
		WriteStall:           DefaultWriteStall,
		MaxHeaderBytes:       DefaultMaxHeaderBytes,
		MaxConnections:       3072,
		MaxRequests:          7,
		MaxRequestsPerClient: DefaultMaxRequestsPerClient,
	}
	if got != want {
		t.Errorf("withDefaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestRequestLimiter(t *testing.T) {
	clients := newClientTable()
	addrA, addrB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	a, a2, b := clients.join(addrA), clients.join(addrA), clients.join(addrB)
	if a != a2 {
		t.Fatal("two connections from one address got two counts")
	}
	l := newRequestLimiter(3, 2)
	steps := []struct {
		client *clientCount
		want   RefuseReason // 0: admitted
	}{
		{a, 0}, {a2, 0}, {a, RefuseClientBusy}, {b, 0}, {b, RefuseServerBusy},
	}
	for i, s := range steps {
		reason, ok := l.acquire(s.client)
		if ok != (s.want == 0) || reason != s.want {
			t.Fatalf("step %d: acquire(%v) = %v, %v; want %v", i, s.client.addr, reason, ok, s.want)
		}
	}
	l.release(a)
	if _, ok := l.acquire(b); !ok {
		t.Error("b refused after a released one")
	}
	l.release(a)
	l.release(b)
	l.release(b)
	if n := l.inFlight.Load(); n != 0 || a.inFlight.Load() != 0 || b.inFlight.Load() != 0 {
		t.Errorf("in flight %d (a %d, b %d) after releasing all", n, a.inFlight.Load(), b.inFlight.Load())
	}
	clients.leave(a)
	clients.leave(a2)
	clients.leave(b)
	for i := range clients.shards {
		if len(clients.shards[i].clients) != 0 {
			t.Errorf("shard %d still holds %v", i, clients.shards[i].clients)
		}
	}
}

// Beyond MaxRequestsPerClient requests are answered through Refuse; routes
// are not limited.
func TestRequestLimits(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	refused := make(chan RefuseReason, 10)
	block := func(w http.ResponseWriter) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	}
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) { block(w) }),
		Routes: []Route{{
			Path:    "/strata/health/*",
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { block(w) }),
		}},
		Refuse: func(w http.ResponseWriter, r *Request, reason RefuseReason) {
			refused <- reason
			w.WriteHeader(http.StatusTooManyRequests)
		},
		Limits: Limits{MaxRequestsPerClient: 2},
	})
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 0}}
	status := make(chan int, 10)
	var wg sync.WaitGroup
	request := func(path string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get("http://" + ts.addr + path)
			if err != nil {
				t.Error(err)
				status <- 0
				return
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Error(err)
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
	}

	for range 4 {
		request("/bucket/key")
	}
	for range 2 {
		<-entered
	}
	for range 2 {
		if got := <-status; got != http.StatusTooManyRequests {
			t.Fatalf("request beyond the limit answered %d, want 429 from Refuse", got)
		}
		if reason := <-refused; reason != RefuseClientBusy {
			t.Errorf("refused for %v, want %v", reason, RefuseClientBusy)
		}
	}
	// Routes get through while the client is at its limit.
	for range 3 {
		request("/strata/health/live")
	}
	for range 3 {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatal("route held back by the S3 request limit")
		}
	}
	if st := ts.Stats(); st.InFlight != 2 || st.RefusedClientBusy != 2 {
		t.Errorf("stats: in flight %d, refused %d; want 2 and 2", st.InFlight, st.RefusedClientBusy)
	}
	close(release)
	wg.Wait()
	close(status)
	for got := range status {
		if got != http.StatusOK {
			t.Errorf("admitted request answered %d", got)
		}
	}
}

// The default Refuse answers a plain 503 and keeps the request ID headers.
func TestDefaultRefuse(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			close(entered)
			<-release
		}),
		Limits: Limits{MaxRequests: 1},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := get(&http.Client{Timeout: 10 * time.Second}, "http://"+ts.addr+"/b/k"); err != nil {
			t.Errorf("admitted request: %v", err)
		}
	}()
	<-entered
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}).Get("http://" + ts.addr + "/b/k")
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refusal: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
	}
	if id := resp.Header.Get(headerRequestID); len(id) != 16 {
		t.Errorf("refusal has request ID %q", id)
	}
	if st := ts.Stats(); st.RefusedServerBusy != 1 {
		t.Errorf("RefusedServerBusy = %d, want 1", st.RefusedServerBusy)
	}
}

// countingReader notes whether the client sent any of its body.
type countingReader struct {
	read atomic.Bool
	r    io.Reader
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.read.Store(true)
	return c.r.Read(p)
}

// A refused upload is answered at once, without waiting for (or asking
// for) its body, and its connection closed.
func TestRefuseUnreadBody(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			if r.URL.Path == "/hold" {
				close(entered)
				<-release
			}
			// Only the held GET gets here, with no body to speak of.
			_, _ = io.Copy(io.Discard, r.Body)
		}),
		Limits: Limits{MaxRequests: 1},
	})
	held := make(chan error, 1)
	go func() { held <- get(&http.Client{Timeout: 20 * time.Second}, "http://"+ts.addr+"/hold") }()
	<-entered
	defer func() {
		close(release)
		if err := <-held; err != nil {
			t.Errorf("held request: %v", err)
		}
	}()

	t.Run("body not sent", func(t *testing.T) {
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer while the body is withheld: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
			t.Errorf("answer %s (close %v), want 503 and close", resp.Status, resp.Close)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		body := &countingReader{r: bytes.NewReader(make([]byte, 10<<20))}
		req, _ := http.NewRequest(http.MethodPut, "http://"+ts.addr+"/b/k", body)
		req.ContentLength = 10 << 20
		req.Header.Set("Expect", "100-continue")
		client := &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{ExpectContinueTimeout: 30 * time.Second},
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("no answer to a refused Expect: 100-continue upload: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("answer %s, want 503", resp.Status)
		}
		if body.read.Load() {
			t.Error("the client was made to send its body")
		}
	})
}
