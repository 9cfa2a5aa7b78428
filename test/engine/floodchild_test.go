package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/sys/unix"
)

// The client side of a connection flood. A process may hold 20,000
// descriptors, as the server may, so a flood bigger than a server can hold
// is spread over child processes: this test binary run again with
// -test.run=^TestFloodChild$ and the flood's description in
// $STRATA_FLOOD_CHILD. A child holds its connections on raw non-blocking
// sockets: one goroutine per floodGroupSize of them wakes every floodTick,
// polls its epoll set for what the server closed or answered, writes the
// bytes that are due and opens again what the server closed. Goroutines,
// buffers and timers do not grow with the connections.

const floodChildEnv = "STRATA_FLOOD_CHILD"

const (
	floodGroupSize = 1000
	floodTick      = 100 * time.Millisecond
	// floodConnectTimeout gives up a connect the server's backlog has not
	// taken (SYNs dropped); it is retried at once.
	floodConnectTimeout = 15 * time.Second
	// floodAnswerKept is how much of an answer is kept to name it.
	floodAnswerKept = 512
)

// floodSpec is what one child does.
type floodSpec struct {
	// Addr is the server's IPv4 address and port.
	Addr string
	// Sources are the local addresses connections are made from, in turn.
	Sources []string
	// Tricklers send a request header a byte at a time, every TrickleEvery,
	// and never end it.
	Tricklers    int
	TrickleEvery time.Duration
	// SlowBodies send a whole signed PUT header (unsigned payload,
	// BodyLength bytes declared), then the body a byte every BodyEvery.
	SlowBodies int
	BodyEvery  time.Duration
	BodyLength int64
	Bucket     string
	Access     string
	Secret     string
	// Reopen is how long a connection the server closed waits to be opened
	// again (as slowloris does on its next turn; 0: at the next tick).
	TrickleReopen time.Duration
	BodyReopen    time.Duration
	// Name tells the children apart in object keys and logs.
	Name string
}

type floodKind int

const (
	kindTrickle floodKind = iota
	kindSlowBody
	numFloodKinds
)

var floodKindNames = [numFloodKinds]string{"trickle", "slow-body"}

// floodReport is what a child saw, by kind of connection.
type floodReport struct {
	Kinds map[string]*floodStats
}

// floodStats counts one kind's connections.
type floodStats struct {
	// Opened counts connections established; Closed those the server
	// closed (or reset); Answers what it said first, if anything, before
	// closing ("400 RequestTimeout", "none").
	Opened  int64
	Closed  int64
	Answers map[string]int64
	// ConnectFailed counts refused connects, ConnectTimeouts connects still
	// pending after floodConnectTimeout, SocketErrors sockets that could not
	// be made or bound.
	ConnectFailed   int64
	ConnectTimeouts int64
	SocketErrors    int64
	// Lifetime: from established to closed by the server. OpenAtStop: the
	// age of the connections still open when the flood stopped.
	Lifetime   durations
	OpenAtStop durations
}

func newFloodStats() *floodStats {
	return &floodStats{Answers: map[string]int64{}, Lifetime: newDurations(), OpenAtStop: newDurations()}
}

func (s *floodStats) merge(o *floodStats) {
	s.Opened += o.Opened
	s.Closed += o.Closed
	s.ConnectFailed += o.ConnectFailed
	s.ConnectTimeouts += o.ConnectTimeouts
	s.SocketErrors += o.SocketErrors
	for k, v := range o.Answers {
		s.Answers[k] += v
	}
	s.Lifetime.merge(o.Lifetime)
	s.OpenAtStop.merge(o.OpenAtStop)
}

// durations is a histogram of durations in durationStep buckets, the last
// holding everything longer; Max is exact.
type durations struct {
	Buckets []int64
	Max     time.Duration
}

const (
	durationStep    = 100 * time.Millisecond
	durationBuckets = 1200
)

func newDurations() durations { return durations{Buckets: make([]int64, durationBuckets)} }

func (d *durations) add(v time.Duration) {
	d.Buckets[min(max(int(v/durationStep), 0), durationBuckets-1)]++
	d.Max = max(d.Max, v)
}

func (d *durations) merge(o durations) {
	for i, n := range o.Buckets {
		d.Buckets[i] += n
	}
	d.Max = max(d.Max, o.Max)
}

func (d *durations) count() int64 {
	var n int64
	for _, c := range d.Buckets {
		n += c
	}
	return n
}

// quantile is the upper edge of the bucket holding quantile q.
func (d *durations) quantile(q float64) time.Duration {
	total := d.count()
	if total == 0 {
		return 0
	}
	want := int64(q * float64(total))
	var seen int64
	for i, c := range d.Buckets {
		if seen += c; seen > want {
			return min(time.Duration(i+1)*durationStep, d.Max)
		}
	}
	return d.Max
}

// over counts the durations longer than limit (to the bucket).
func (d *durations) over(limit time.Duration) int64 {
	var n int64
	for i := int(limit/durationStep) + 1; i < durationBuckets; i++ {
		n += d.Buckets[i]
	}
	return n
}

// TestFloodChild is a flood's child process (see floodSpec); run alone it
// skips. It prints FLOOD-READY once every connection has been opened (or
// tried for floodConnectTimeout), holds the flood until its standard input
// ends, then closes everything and prints FLOOD-REPORT and its figures.
func TestFloodChild(t *testing.T) {
	raw := os.Getenv(floodChildEnv)
	if raw == "" {
		t.Skip("a flood's child process, started by the flood tests")
	}
	var spec floodSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	conns, err := floodConns(&spec)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := netip.ParseAddrPort(spec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var groups []*floodGroup
	var ready, done sync.WaitGroup
	for start := 0; start < len(conns); start += floodGroupSize {
		g, err := newFloodGroup(&spec, dst, conns[start:min(start+floodGroupSize, len(conns))])
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			g.run(stop, ready.Done)
		}()
	}
	ready.Wait()
	fmt.Printf("FLOOD-READY %d connections\n", len(conns))
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it, or dies
	close(stop)
	done.Wait()
	report := floodReport{Kinds: map[string]*floodStats{}}
	for k := range numFloodKinds {
		all := newFloodStats()
		for _, g := range groups {
			all.merge(g.stats[k])
		}
		report.Kinds[floodKindNames[k]] = all
	}
	out, _ := json.Marshal(report)
	fmt.Printf("FLOOD-REPORT %s\n", out)
}

// floodConn is one hostile connection's slot; it is opened again when the
// server closes it.
type floodConn struct {
	kind floodKind
	src  [4]byte
	// slot is the connection's index in its group, its epoll key.
	slot int32
	// fd is -1 while closed; connecting until the handshake is done.
	fd         int
	connecting bool
	opened     bool
	// since is when the connect began, or the connection was established.
	since time.Time
	// next is when the next byte is due, or when to open again.
	next time.Time
	// sent counts the bytes of the trickled header sent.
	sent int
	// request is a slow body's header.
	request []byte
	// answer is the start of what the server sent.
	answer []byte
}

// floodConns lays out a child's connections, sources taken in turn.
func floodConns(spec *floodSpec) ([]floodConn, error) {
	var srcs [][4]byte
	for _, s := range spec.Sources {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("flood source %q: not an IPv4 address", s)
		}
		srcs = append(srcs, a.As4())
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("flood: no source addresses")
	}
	conns := make([]floodConn, 0, spec.Tricklers+spec.SlowBodies)
	for i := range spec.Tricklers {
		conns = append(conns, floodConn{kind: kindTrickle, src: srcs[i%len(srcs)], fd: -1})
	}
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: spec.Access, SecretAccessKey: spec.Secret}
	for i := range spec.SlowBodies {
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/%s/slow-%s-%d", spec.Addr, spec.Bucket, spec.Name, i), nil)
		req.ContentLength = spec.BodyLength
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		if err := signer.SignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			return nil, err
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.URL.RequestURI(), req.Host, spec.BodyLength)
		_ = req.Header.Write(&b)
		b.WriteString("\r\n")
		conns = append(conns, floodConn{kind: kindSlowBody, src: srcs[(spec.Tricklers+i)%len(srcs)], fd: -1, request: b.Bytes()})
	}
	return conns, nil
}

// floodGroup is the connections one goroutine holds, with their epoll set.
type floodGroup struct {
	spec   *floodSpec
	dst    unix.SockaddrInet4
	conns  []floodConn
	ep     int
	events []unix.EpollEvent
	buf    []byte
	header []byte
	stats  [numFloodKinds]*floodStats
	// unopened counts connections not yet established once.
	unopened int
}

func newFloodGroup(spec *floodSpec, dst netip.AddrPort, conns []floodConn) (*floodGroup, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	g := &floodGroup{
		spec: spec, dst: unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}, conns: conns, ep: ep,
		events: make([]unix.EpollEvent, 256), buf: make([]byte, 4096), unopened: len(conns),
		header: fmt.Appendf(nil, "GET /%s/canary HTTP/1.1\r\nHost: %s\r\nX-Amz-Trickle: ", spec.Bucket, spec.Addr),
	}
	for k := range g.stats {
		g.stats[k] = newFloodStats()
	}
	for i := range conns {
		conns[i].slot = int32(i)
	}
	return g, nil
}

// run holds the group's connections until stop, calling ready once each
// has been opened (or tried for floodConnectTimeout).
func (g *floodGroup) run(stop <-chan struct{}, ready func()) {
	defer unix.Close(g.ep)
	tick := time.NewTicker(floodTick)
	defer tick.Stop()
	begun := time.Now()
	for {
		now := time.Now()
		g.poll(now)
		g.service(now)
		if ready != nil && (g.unopened == 0 || now.Sub(begun) > floodConnectTimeout) {
			ready()
			ready = nil
		}
		select {
		case <-stop:
			g.poll(time.Now())
			g.closeAll(time.Now())
			if ready != nil {
				ready()
			}
			return
		case <-tick.C:
		}
	}
}

// poll takes every event ready, without waiting.
func (g *floodGroup) poll(now time.Time) {
	for {
		n, err := unix.EpollWait(g.ep, g.events, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		for _, ev := range g.events[:max(n, 0)] {
			if c := &g.conns[ev.Fd]; c.fd >= 0 {
				g.ready(c, ev.Events, now)
			}
		}
		if n < len(g.events) {
			return
		}
	}
}

// ready handles an event: a connect finished, or the server sent
// something or closed.
func (g *floodGroup) ready(c *floodConn, events uint32, now time.Time) {
	st := g.stats[c.kind]
	if c.connecting {
		if soErr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soErr != 0 {
			st.ConnectFailed++
			g.drop(c, now)
			return
		}
		if events&unix.EPOLLOUT == 0 {
			return
		}
		c.connecting, c.since = false, now
		if !c.opened {
			c.opened = true
			g.unopened--
		}
		st.Opened++
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: c.slot}
		_ = unix.EpollCtl(g.ep, unix.EPOLL_CTL_MOD, c.fd, &ev)
		c.sent = 0
		if c.kind == kindSlowBody {
			g.send(c, c.request, now)
			c.next = now.Add(g.spec.BodyEvery)
		} else {
			g.trickle(c, now)
		}
		return
	}
	for {
		n, err := unix.Read(c.fd, g.buf)
		switch {
		case n > 0:
			if len(c.answer) < floodAnswerKept {
				c.answer = append(c.answer, g.buf[:min(n, floodAnswerKept-len(c.answer))]...)
			}
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return
		}
		g.closedByServer(c, now) // end of stream, or reset
		return
	}
}

// service writes the bytes due, opens what is closed and gives up on
// connects that hang.
func (g *floodGroup) service(now time.Time) {
	for i := range g.conns {
		c := &g.conns[i]
		switch {
		case c.fd < 0:
			if !now.Before(c.next) {
				g.open(c, now)
			}
		case c.connecting:
			if now.Sub(c.since) > floodConnectTimeout {
				g.stats[c.kind].ConnectTimeouts++
				g.drop(c, now)
				g.open(c, now)
			}
		case !now.Before(c.next):
			if c.kind == kindSlowBody {
				g.send(c, []byte{'b'}, now)
				c.next = c.next.Add(g.spec.BodyEvery)
			} else {
				g.trickle(c, now)
			}
		}
	}
}

// trickle sends the header's next byte.
func (g *floodGroup) trickle(c *floodConn, now time.Time) {
	b := byte('a')
	if c.sent < len(g.header) {
		b = g.header[c.sent]
	}
	if g.send(c, []byte{b}, now) {
		c.sent++
	}
	c.next = now.Add(g.spec.TrickleEvery)
}

// send writes p without waiting; a full buffer skips it.
func (g *floodGroup) send(c *floodConn, p []byte, now time.Time) bool {
	_, err := unix.SendmsgN(c.fd, p, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
	switch {
	case err == nil:
		return true
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return false
	}
	g.closedByServer(c, now) // EPIPE, ECONNRESET
	return false
}

// open starts a non-blocking connect from c's source.
func (g *floodGroup) open(c *floodConn, now time.Time) {
	st := g.stats[c.kind]
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		st.SocketErrors++
		c.next = now.Add(time.Second)
		return
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: c.src}); err != nil {
		unix.Close(fd)
		st.SocketErrors++
		c.next = now.Add(time.Second)
		return
	}
	if err := unix.Connect(fd, &g.dst); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		st.ConnectFailed++
		c.next = now.Add(time.Second)
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLIN | unix.EPOLLRDHUP, Fd: c.slot}
	if err := unix.EpollCtl(g.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		st.SocketErrors++
		c.next = now.Add(time.Second)
		return
	}
	c.fd, c.connecting, c.since, c.answer = fd, true, now, c.answer[:0]
}

// closedByServer notes a connection the server ended, and when to open
// it again.
func (g *floodGroup) closedByServer(c *floodConn, now time.Time) {
	st := g.stats[c.kind]
	st.Closed++
	st.Lifetime.add(now.Sub(c.since))
	st.Answers[answerName(c.answer)]++
	reopen := g.spec.TrickleReopen
	if c.kind == kindSlowBody {
		reopen = g.spec.BodyReopen
	}
	unix.Close(c.fd)
	c.fd, c.connecting, c.next = -1, false, now.Add(reopen)
}

// drop closes a connection that never opened.
func (g *floodGroup) drop(c *floodConn, now time.Time) {
	unix.Close(c.fd)
	c.fd, c.connecting, c.next = -1, false, now.Add(time.Second)
}

// closeAll ends the flood: the age of what is still open is noted.
func (g *floodGroup) closeAll(now time.Time) {
	for i := range g.conns {
		c := &g.conns[i]
		if c.fd < 0 {
			continue
		}
		if !c.connecting {
			g.stats[c.kind].OpenAtStop.add(now.Sub(c.since))
		}
		unix.Close(c.fd)
		c.fd = -1
	}
}

var answerCode = regexp.MustCompile(`<Code>([^<]*)</Code>`)

// answerName is "status code" for an S3 error answer, "status" for
// another, "none" when the server said nothing.
func answerName(answer []byte) string {
	if len(answer) == 0 {
		return "none"
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), nil)
	if err != nil {
		return "unreadable"
	}
	_ = resp.Body.Close() // a reader over answer: nothing to release
	name := strconv.Itoa(resp.StatusCode)
	if m := answerCode.FindSubmatch(answer); m != nil {
		name += " " + string(m[1])
	}
	return name
}
