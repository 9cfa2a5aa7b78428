package internode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/hlc"
)

// TestPingsSayWhichDrivesAreServed: a node's pings say which drives it
// serves and whether it is still starting, and its peers count a drive as
// online only when it serves it and has started. A node that says nothing
// (an older build) serves every drive.
func TestPingsSayWhichDrivesAreServed(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	if !p.Serves("/any") || !p.Drive("/any").Online() {
		t.Fatal("a node that says nothing of its drives: its drives are not counted")
	}

	var mu sync.Mutex
	served, starting := []string{"/a"}, true
	n.srv.Served = func() ([]string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return served, starting
	}
	set := func(paths []string, start bool) {
		mu.Lock()
		served, starting = paths, start
		mu.Unlock()
		if err := p.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		served   []string
		starting bool
		a, b     bool
	}{
		{[]string{"/a"}, true, false, false}, // starting: none counted yet
		{[]string{"/a"}, false, true, false},
		{nil, false, false, false}, // started without its drives (none opened)
		{[]string{"/a", "/b"}, false, true, true},
	} {
		set(c.served, c.starting)
		if got := p.Drive("/a").Online(); got != c.a {
			t.Errorf("serving %v, starting %v: /a online %v, want %v", c.served, c.starting, got, c.a)
		}
		if got := p.Drive("/b").Online(); got != c.b {
			t.Errorf("serving %v, starting %v: /b online %v, want %v", c.served, c.starting, got, c.b)
		}
	}
}

// TestPingAnswerIsReadByEveryBuild pins the ping's answer both ways: an
// older client reads its protocol from the new answer, and an older
// node's answer (the protocol alone) leaves every drive served.
func TestPingAnswerIsReadByEveryBuild(t *testing.T) {
	paths := []string{"/data0"}
	b, err := json.Marshal(pingAnswer{Protocol: Protocol, Drives: &paths, Starting: true})
	if err != nil {
		t.Fatal(err)
	}
	var old struct{ Protocol int } // what builds before this one decode
	if err := json.Unmarshal(b, &old); err != nil || old.Protocol != Protocol {
		t.Fatalf("an older client reads %s as %+v (%v)", b, old, err)
	}
	none := []string{}
	if b, _ := json.Marshal(pingAnswer{Protocol: Protocol, Drives: &none}); string(b) != fmt.Sprintf(`{"protocol":%d,"drives":[]}`, Protocol) {
		t.Fatalf("a node serving no drive answers %s", b)
	}

	var a pingAnswer
	if err := json.Unmarshal([]byte(`{"protocol":3}`), &a); err != nil {
		t.Fatal(err)
	}
	p := &Peer{opts: PeerOptions{Log: slog.New(slog.DiscardHandler)}}
	p.served.Store(&servedDrives{}) // what a newer answer had said
	p.pinged(a)
	if !p.Serves("/data0") || p.version.Load() != 3 {
		t.Fatalf("an older node's answer: serves /data0 %v, version %d", p.Serves("/data0"), p.version.Load())
	}
}

// TestHelloIsAnsweredAfterThePingBack: a node that says it is back is
// pinged back before its hello is answered, so once it has told its peers
// none of them still holds it offline.
func TestHelloIsAnsweredAfterThePingBack(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	var mu sync.Mutex
	var heard []string
	n.srv.OnHello = func(ctx context.Context, host string) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the ping back has no deadline")
		}
		mu.Lock()
		heard = append(heard, host)
		mu.Unlock()
	}
	p := newPeer(t, n, Protocol)
	if err := p.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Hello(t.Context(), "10.0.0.7:9000"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || heard[0] != "10.0.0.7:9000" {
		t.Fatalf("hellos heard: %v (a plain ping is not one)", heard)
	}
}

// TestCheckSeesANodeThatJustStopped: Check asks the peer now rather than
// trusting the last heartbeat, and finds it back as soon as it answers.
func TestCheckSeesANodeThatJustStopped(t *testing.T) {
	drives := newDrives(t, "d1")
	n := startNode(t, "127.0.0.1:0", Protocol, drives)
	p := newPeer(t, n, Protocol)
	n.stop()
	if err := p.Check(t.Context()); err == nil || p.Online() {
		t.Fatalf("Check of a stopped node: %v, online %v", err, p.Online())
	}
	startNode(t, n.addr, Protocol, drives)
	if err := p.Check(t.Context()); err != nil || !p.Online() {
		t.Fatalf("Check of the node back: %v, online %v", err, p.Online())
	}
}

// TestNodesRefuseCallsForAnotherNode: a call that reaches another node
// than the one addressed (a stale address) is refused before it runs, over
// HTTP/2 and on the framed channel alike, and the peer counts as not
// answering; the node addressed serves it.
func TestNodesRefuseCallsForAnotherNode(t *testing.T) {
	drives := newDrives(t, "d1")
	var path string
	for p := range drives {
		path = p
	}
	n := startNode(t, "127.0.0.1:0", Protocol, drives)
	var names atomic.Pointer[[]string]
	names.Store(&[]string{"10.0.0.9:9000"}) // not the peer's "127.0.0.1:1"
	n.srv.Names = func() []string { return *names.Load() }
	p := newPeerNoPing(t, n, nil)
	if err := p.Ping(t.Context()); !errors.Is(err, ErrWrongNode) {
		t.Fatalf("ping of another node: %v, want ErrWrongNode", err)
	}
	rec := record(100)
	put := erasure.PutItem{Drive: p.Drive(path), Bucket: "bk", Object: "astray", Rec: rec, Stage: drive.NotStaged}
	if errs := p.PutVersions(t.Context(), []erasure.PutItem{put}); errs[0] == nil {
		t.Fatal("a batch for another node was accepted")
	}
	if _, err := p.Drive(path).PutVersion(t.Context(), "bk", "astray", rec, drive.NotStaged); err == nil {
		t.Fatal("a call for another node was accepted")
	}
	if p.Online() {
		t.Fatal("a peer whose address reaches another node is online")
	}
	if _, err := drives[path].GetVersion(t.Context(), "bk", "astray", nil); !errors.Is(err, drive.ErrVersionNotFound) {
		t.Fatalf("a write for another node landed on this one: %v", err)
	}

	names.Store(&[]string{"10.0.0.9:9000", "127.0.0.1:1"})
	if err := p.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, p, n, "addressed")
}

// TestPingsCarryClocks: a ping answer carries the node's hybrid and wall
// clocks (an older node's, neither: the peer's offset stays 0), and the
// pinging side records the offset and never stamps a time before the
// answer's.
func TestPingsCarryClocks(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	if err := p.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	// One process, one clock: the offset is the time the answer took.
	if off := p.ClockOffset(); off > 0 || off < -time.Second {
		t.Fatalf("offset to a node on the same clock: %s", off)
	}
	peerClock := hlc.Default.Peek() + int64(30*time.Second)
	peerWall := hlc.Default.Wall() + int64(30*time.Second)
	p.pinged(pingAnswer{Protocol: Protocol, Clock: peerClock, Wall: peerWall})
	if off := p.ClockOffset(); off < 29*time.Second || off > 30*time.Second {
		t.Fatalf("offset to a node 30 s ahead: %s", off)
	}
	if now := hlc.Default.Now(); now <= peerClock {
		t.Fatalf("stamped %d after a ping answered %d", now, peerClock)
	}
	old := &Peer{opts: PeerOptions{Log: slog.New(slog.DiscardHandler)}}
	old.pinged(pingAnswer{Protocol: 3})
	if old.ClockOffset() != 0 {
		t.Fatalf("an older node's answer gave an offset of %s", old.ClockOffset())
	}
}
