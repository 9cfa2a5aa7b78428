package s3http

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

func TestVictimOrder(t *testing.T) {
	type step struct {
		conn  int
		phase connPhase // phaseClosed: remove
	}
	tests := []struct {
		name  string
		steps []step
		want  int // index of the victim, -1 none
	}{
		{"empty", nil, -1},
		{"only serving", []step{{0, phaseServing}, {1, phaseServing}}, -1},
		{"oldest waiting", []step{{0, phaseAwaitingHeader}, {1, phaseAwaitingHeader}}, 0},
		{"handshaking counts as waiting", []step{{0, phaseHandshaking}, {1, phaseAwaitingHeader}}, 0},
		{"handshake done keeps age", []step{{0, phaseHandshaking}, {1, phaseAwaitingHeader}, {0, phaseAwaitingHeader}}, 0},
		{"waiting before idle", []step{{0, phaseIdle}, {1, phaseServing}, {2, phaseAwaitingHeader}}, 2},
		{"oldest idle when none waits", []step{{0, phaseServing}, {1, phaseIdle}, {2, phaseIdle}}, 1},
		{"idle again goes to the back", []step{{0, phaseIdle}, {1, phaseIdle}, {0, phaseServing}, {0, phaseIdle}}, 1},
		{"removed is not a victim", []step{{0, phaseAwaitingHeader}, {1, phaseIdle}, {0, phaseClosed}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(0, 0, new(counters))
			conns := map[int]*trackedConn{}
			for _, s := range tt.steps {
				c, ok := conns[s.conn]
				switch {
				case !ok:
					c = &trackedConn{tracker: tr}
					conns[s.conn] = c
					tr.admit(c, s.phase)
				case s.phase == phaseClosed:
					tr.remove(c)
				default:
					tr.move(c, s.phase)
				}
			}
			tr.mu.Lock()
			v := tr.victimLocked()
			tr.mu.Unlock()
			got := -1
			for i, c := range conns {
				if c == v {
					got = i
				}
			}
			if got != tt.want {
				t.Errorf("victim = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTrackerCounts(t *testing.T) {
	tr := newTracker(0, 0, new(counters))
	a, b, c := &trackedConn{tracker: tr}, &trackedConn{tracker: tr}, &trackedConn{tracker: tr}
	tr.admit(a, phaseHandshaking)
	tr.admit(b, phaseAwaitingHeader)
	tr.admit(c, phaseAwaitingHeader)
	tr.move(b, phaseServing)
	tr.move(c, phaseServing)
	tr.move(c, phaseIdle)
	tr.wake(c, 1)
	tr.remove(a)
	tr.remove(a)
	got := tr.openByPhase()
	want := [numPhases]int{phaseAwaitingHeader: 1, phaseServing: 1}
	if got != want || tr.total != 2 {
		t.Errorf("open = %v (total %d), want %v (total 2)", got, tr.total, want)
	}
}

// Connections trickling a header are cut off by HeaderTimeout while an
// ordinary client is served throughout.
func TestHeaderTrickle(t *testing.T) {
	ts := startServer(t, Config{
		Handler: okHandler,
		Limits:  Limits{HeaderTimeout: time.Second, IdleTimeout: 30 * time.Second},
	})
	const n = 200
	start := time.Now()
	tricklers := make([]*trickler, n)
	for i := range tricklers {
		tricklers[i] = dialTrickler(t, ts.addr, 200*time.Millisecond)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	for time.Since(start) < 2*time.Second {
		if err := get(client, "http://"+ts.addr+"/bucket/key"); err != nil {
			t.Fatalf("ordinary request during the trickle: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, tr := range tricklers {
		select {
		case <-tr.closed:
		case <-time.After(time.Until(start.Add(5 * time.Second))):
			t.Fatalf("trickler %d still open %v after start", i, time.Since(start))
		}
	}
	t.Logf("all %d tricklers closed within %v", n, time.Since(start))
	if got := ts.Stats().HeaderTimeouts; got < n {
		t.Errorf("HeaderTimeouts = %d, want >= %d", got, n)
	}
}

// On a keep-alive connection the header deadline runs from the first byte
// of the next request, not from the fourth (net/http's idle peek).
func TestKeepAliveTrickle(t *testing.T) {
	ts := startServer(t, Config{
		Handler: okHandler,
		Limits:  Limits{HeaderTimeout: time.Second, IdleTimeout: 30 * time.Second},
	})
	conn, status, err := rawRequest(ts.addr, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if status != http.StatusOK {
		t.Fatalf("first request: status %d", status)
	}
	eventually(t, 5*time.Second, "connection idle", func() bool { return ts.Stats().Idle == 1 })

	// At 900 ms a byte, net/http alone would not start its header deadline
	// until 2.7 s (four bytes), closing at 3.7 s.
	tr := &trickler{conn: conn, closed: make(chan struct{})}
	go tr.watch()
	start := time.Now()
	go tr.trickle(900 * time.Millisecond)
	select {
	case <-tr.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("keep-alive trickler never closed")
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("keep-alive trickler closed after %v, want about HeaderTimeout (1 s)", took)
	}
	if got := ts.Stats().HeaderTimeouts; got != 1 {
		t.Errorf("HeaderTimeouts = %d, want 1", got)
	}
}

// At MaxConnections, new connections close the connections that have been
// waiting for their header the longest.
func TestShedOldestTricklers(t *testing.T) {
	const max = 100
	ts := startServer(t, Config{
		Handler: okHandler,
		Limits:  Limits{MaxConnections: max, HeaderTimeout: time.Minute},
	})
	tricklers := make([]*trickler, max)
	for i := range tricklers {
		tricklers[i] = dialTrickler(t, ts.addr, 500*time.Millisecond)
		// Accepted in dial order, so age order is index order.
		eventually(t, 5*time.Second, "trickler accepted", func() bool { return ts.Stats().AwaitingHeader == i+1 })
	}

	// Each ordinary request keeps its connection open (idle) so every one
	// of them needs a fresh slot.
	const requests = 50
	var kept []net.Conn
	defer func() {
		for _, c := range kept {
			c.Close()
		}
	}()
	for i := range requests {
		conn, status, err := rawRequest(ts.addr, "GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		kept = append(kept, conn)
		if status != http.StatusOK {
			t.Fatalf("request %d: status %d", i, status)
		}
	}
	for i := range requests {
		select {
		case <-tricklers[i].closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("trickler %d (among the %d oldest) was not shed", i, requests)
		}
	}
	for i := requests; i < max; i++ {
		if tricklers[i].isClosed() {
			t.Errorf("trickler %d was shed though older ones were enough", i)
		}
	}
	if st := ts.Stats(); st.ShedAtLimit != requests {
		t.Errorf("ShedAtLimit = %d, want %d", st.ShedAtLimit, requests)
	}
	// The last answer may reach us before its connection turns idle.
	eventually(t, 5*time.Second, "ordinary connections idle", func() bool {
		st := ts.Stats()
		return st.Idle == requests && st.AwaitingHeader == max-requests
	})
}

// With every connection serving, a new one is closed rather than one that
// is doing work.
func TestNeverShedServing(t *testing.T) {
	entered := make(chan struct{}, 2)
	release := make(chan struct{})
	ts := startServer(t, Config{
		Handler: HandlerFunc(func(w http.ResponseWriter, r *Request) {
			entered <- struct{}{}
			<-release
		}),
		Limits: Limits{MaxConnections: 2},
	})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- get(&http.Client{Timeout: 10 * time.Second}, "http://"+ts.addr+"/b/k")
		}()
		<-entered
	}
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(conn); err != nil {
		t.Fatalf("third connection: %v, want it closed", err)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("serving request: %v", err)
		}
	}
	if got := ts.Stats().RejectedAtLimit; got != 1 {
		t.Errorf("RejectedAtLimit = %d, want 1", got)
	}
}
