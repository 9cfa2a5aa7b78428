package s3http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"
)

func TestRequestIDs(t *testing.T) {
	ids := newRequestIDs()
	hex16 := regexp.MustCompile(`^[0-9A-F]{16}$`)
	seen := make(map[[16]byte]bool)
	for range 100000 {
		var b [16]byte
		ids.fill(&b)
		if !hex16.Match(b[:]) {
			t.Fatalf("request ID %q is not 16 upper-case hex digits", b)
		}
		if seen[b] {
			t.Fatalf("request ID %q repeated", b)
		}
		seen[b] = true
	}
}

func TestRouteMatch(t *testing.T) {
	tests := []struct {
		route        Route
		method, path string
		want         bool
	}{
		{Route{Path: "/strata/health/live"}, "GET", "/strata/health/live", true},
		{Route{Path: "/strata/health/live"}, "GET", "/strata/health/live/x", false},
		{Route{Method: "GET", Path: "/strata/metrics"}, "PUT", "/strata/metrics", false},
		{Route{Path: "/strata/admin/v1/*"}, "POST", "/strata/admin/v1/heal", true},
		{Route{Path: "/strata/admin/v1/*"}, "POST", "/strata/admin/v2/heal", false},
		{Route{Path: "/strata/admin/v1/*"}, "GET", "/bucket/strata/admin/v1/x", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if got := tt.route.matches(r); got != tt.want {
			t.Errorf("%+v matches %s %s = %v, want %v", tt.route, tt.method, tt.path, got, tt.want)
		}
	}
}

func TestNewServerChecks(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no handler", Config{Address: ":0"}},
		{"no address", Config{Handler: okHandler}},
		{"route without handler", Config{Address: ":0", Handler: okHandler, Routes: []Route{{Path: "/x"}}}},
	}
	for _, tt := range tests {
		if _, err := NewServer(tt.cfg); err == nil {
			t.Errorf("%s: NewServer accepted it", tt.name)
		}
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if err := Serve(context.Background(), Config{Address: taken.Addr().String(), Handler: okHandler}); err == nil {
		t.Error("Serve on a taken address returned nil")
	}
}

// The handler gets a Request with ID, client, time and the ID headers set.
func TestRequestValue(t *testing.T) {
	seen := make(chan *Request, 1)
	ts := startServer(t, Config{
		HostID: "host-id",
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			seen <- r
			fmt.Fprint(w, r.ID)
		}),
	})
	before := time.Now()
	resp, err := http.Get("http://" + ts.addr + "/b/k")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := <-seen
	if resp.Header.Get(headerRequestID) != r.ID || string(body) != r.ID {
		t.Errorf("X-Amz-Request-Id %q, body %q, Request.ID %q", resp.Header.Get(headerRequestID), body, r.ID)
	}
	if got := resp.Header.Get(headerHostID); got != "host-id" {
		t.Errorf("X-Amz-Id-2 = %q", got)
	}
	if r.Client.String() != "127.0.0.1" || r.Secure || r.Received.Before(before) {
		t.Errorf("Request: client %v secure %v received %v", r.Client, r.Secure, r.Received)
	}
}

// Cancelling Serve's context lets the request in flight finish, refuses
// new connections, closes waiting ones, and Serve returns nil.
func TestDrain(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			if r.URL.Path == "/slow" {
				close(entered)
				<-release
			}
			fmt.Fprint(w, "done")
		}),
		DrainTimeout: 20 * time.Second,
		Limits:       Limits{HeaderTimeout: time.Minute, IdleTimeout: time.Minute},
	})
	idle, status, err := rawRequest(ts.addr, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil || status != http.StatusOK {
		t.Fatalf("keep-alive request: status %d, %v", status, err)
	}
	defer idle.Close()
	trickler := dialTrickler(t, ts.addr, 200*time.Millisecond)

	type result struct {
		body string
		err  error
	}
	inFlight := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + ts.addr + "/slow")
		if err != nil {
			inFlight <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		inFlight <- result{string(b), err}
	}()
	<-entered
	ts.cancel()

	eventually(t, 5*time.Second, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", ts.addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case <-trickler.closed:
	case <-time.After(5 * time.Second):
		t.Error("trickler not closed by the drain")
	}
	if err := idle.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("idle connection not closed by the drain: %v", err)
	}
	select {
	case err := <-ts.done:
		t.Fatalf("Serve returned with a request in flight: %v", err)
	default:
	}

	close(release)
	if r := <-inFlight; r.err != nil || r.body != "done" {
		t.Errorf("request in flight: %q, %v", r.body, r.err)
	}
	select {
	case err := <-ts.done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
		close(ts.done)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
	if st := ts.Stats(); st.Handshaking+st.AwaitingHeader+st.Serving+st.Idle != 0 {
		t.Errorf("connections still tracked after Serve returned: %+v", st)
	}
	for i := range ts.conns.clients.shards {
		if n := len(ts.conns.clients.shards[i].clients); n != 0 {
			t.Errorf("client table shard %d still holds %d addresses", i, n)
		}
	}
}

// A drain that runs out of time closes the requests still running.
func TestDrainTimeout(t *testing.T) {
	entered := make(chan struct{})
	cancelled := make(chan struct{})
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			close(entered)
			<-r.Context().Done()
			close(cancelled)
		}),
		DrainTimeout: 500 * time.Millisecond,
	})
	go func() {
		// The drain cuts this request off: any answer, or none, will do.
		if resp, err := http.Get("http://" + ts.addr + "/b/k"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if err := ts.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Error("handler's context not cancelled when the drain timed out")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
