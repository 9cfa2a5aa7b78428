package internode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/internal/testcerts"
)

// testNode is one node's internode service over real local drives.
type testNode struct {
	srv    *Server
	hs     *http.Server
	addr   string
	drives map[string]*drive.Local
}

func startNode(t *testing.T, addr string, version int, drives map[string]*drive.Local) *testNode {
	return startTLSNode(t, addr, version, drives, nil)
}

func startTLSNode(t *testing.T, addr string, version int, drives map[string]*drive.Local, cfg *tls.Config) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{addr: l.Addr().String(), drives: drives}
	n.srv = &Server{Drive: func(p string) *drive.Local { return drives[p] }, Secret: Secret("pw"), Version: version,
		Log: slog.New(slog.DiscardHandler)}
	n.hs = &http.Server{Handler: n.srv, Protocols: new(http.Protocols)}
	n.hs.Protocols.SetHTTP1(true)
	if cfg != nil {
		n.hs.TLSConfig = cfg
		n.hs.Protocols.SetHTTP2(true)
		l = tls.NewListener(l, cfg)
	} else {
		n.hs.Protocols.SetUnencryptedHTTP2(true)
	}
	go func() { _ = n.hs.Serve(l) }()
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	_ = n.hs.Close()
	n.srv.Close()
}

func newDrives(t *testing.T, names ...string) map[string]*drive.Local {
	t.Helper()
	ds := map[string]*drive.Local{}
	for _, name := range names {
		root := filepath.Join(t.TempDir(), name)
		d, err := drive.OpenLocal(root, drive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := d.MakeBucket(t.Context(), drive.BucketInfo{Name: "bk", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		ds[root] = d
	}
	return ds
}

func newPeer(t *testing.T, n *testNode, version int) *Peer {
	return newTLSPeer(t, n, version, nil)
}

func newTLSPeer(t *testing.T, n *testNode, version int, cfg *tls.Config) *Peer {
	t.Helper()
	_, port, _ := net.SplitHostPort(n.addr)
	pn, _ := strconv.Atoi(port)
	p, err := NewPeer("127.0.0.1:1", pn, PeerOptions{Secret: Secret("pw"), Version: version, CallTimeout: 2 * time.Second,
		TLS: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p
}

func record(size int) *drive.Record {
	id := uuid.New()
	return &drive.Record{VersionID: id, ModTime: time.Now().UnixNano(), Size: int64(size), ETag: "e",
		Meta: map[string]string{"Content-Type": "text/plain"}, Inline: bytes.Repeat([]byte{7}, size)}
}

// roundTrip writes two records to the node's two drives in one batch and
// reads them back in another, checking a missing key's sentinel survives.
func roundTrip(t *testing.T, p *Peer, n *testNode, key string) {
	t.Helper()
	var puts []erasure.PutItem
	var gets []erasure.GetItem
	var want []*drive.Record
	for path := range n.drives {
		rec := record(3000)
		want = append(want, rec)
		puts = append(puts, erasure.PutItem{Drive: p.Drive(path), Bucket: "bk", Object: key, Rec: rec, Stage: drive.NotStaged})
		gets = append(gets, erasure.GetItem{Drive: p.Drive(path), Bucket: "bk", Object: key})
	}
	for i, err := range p.PutVersions(t.Context(), puts) {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	gets = append(gets, erasure.GetItem{Drive: gets[0].Drive, Bucket: "bk", Object: key + "-missing"})
	recs, errs := p.GetVersions(t.Context(), gets)
	for i := range want {
		if errs[i] != nil {
			t.Fatalf("get %d: %v", i, errs[i])
		}
		if recs[i].VersionID != want[i].VersionID || !bytes.Equal(recs[i].Inline, want[i].Inline) || recs[i].Meta["Content-Type"] != "text/plain" {
			t.Fatalf("get %d: record differs: %+v", i, recs[i])
		}
	}
	if last := errs[len(errs)-1]; !errors.Is(last, drive.ErrVersionNotFound) {
		t.Fatalf("missing key: got %v, want ErrVersionNotFound", last)
	}
}

func TestFramedBatchesAndShardReads(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	p := newPeer(t, n, Protocol)
	if p.Version() != Protocol {
		t.Fatalf("negotiated protocol %d, want %d", p.Version(), Protocol)
	}
	roundTrip(t, p, n, "a")
	if !framed(p) {
		t.Fatal("the batches did not use the framed channel")
	}

	// A shard committed on the node, read back in ranges over frames.
	var path string
	var d *drive.Local
	for path, d = range n.drives {
		break
	}
	shard := make([]byte, 300<<10)
	for i := range shard {
		shard[i] = byte(i * 31)
	}
	dataDir := uuid.New()
	f, err := d.CreateStaged(t.Context(), dataDir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(shard); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rec := record(0)
	rec.Inline, rec.DataDir, rec.Size = nil, dataDir, int64(len(shard))
	if _, err := d.PutVersion(t.Context(), "bk", "big", rec, dataDir); err != nil {
		t.Fatal(err)
	}
	rf, err := p.Drive(path).OpenShard(t.Context(), dataDir, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100<<10)
	if k, err := rf.ReadAt(got, 50<<10); err != nil || k != len(got) || !bytes.Equal(got, shard[50<<10:150<<10]) {
		t.Fatalf("range read: %d bytes, %v", k, err)
	}
	// Past the end: the bytes there and io.EOF.
	if k, err := rf.ReadAt(got, int64(len(shard)-1000)); k != 1000 || !errors.Is(err, io.EOF) || !bytes.Equal(got[:1000], shard[len(shard)-1000:]) {
		t.Fatalf("read at the end: %d bytes, %v", k, err)
	}
	if _, err := p.Drive(path).OpenShard(t.Context(), uuid.New(), 1); err != nil {
		t.Fatal(err) // opening is lazy; the read fails
	}
	if _, err := p.Drive("/not/served").GetVersion(t.Context(), "bk", "a", nil); err == nil {
		t.Fatal("a drive the node does not serve answered")
	}
}

// TestBatchedPutSaysSuperseded: a null version that a drive drops because
// it holds a newer one comes back from a batch as drive.ErrSuperseded,
// not as success (the coordinator must not acknowledge it).
func TestBatchedPutSaysSuperseded(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	p := newPeer(t, n, Protocol)
	put := func(modTime time.Time) []error {
		var items []erasure.PutItem
		for path := range n.drives {
			rec := record(100)
			rec.VersionID, rec.ModTime = [16]byte{}, modTime.UnixNano()
			items = append(items, erasure.PutItem{Drive: p.Drive(path), Bucket: "bk", Object: "null", Rec: rec, Stage: drive.NotStaged})
		}
		return p.PutVersions(t.Context(), items)
	}
	now := time.Now()
	for i, err := range put(now) {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for i, err := range put(now.Add(-time.Second)) {
		if !errors.Is(err, drive.ErrSuperseded) {
			t.Fatalf("older put %d: %v, want ErrSuperseded", i, err)
		}
	}
}

// Many calls in flight on one connection get their own answers.
func TestFramedCallsMultiplex(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	p := newPeer(t, n, Protocol)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Go(func() {
			for i := 0; i < 20; i++ {
				roundTrip(t, p, n, "k"+strconv.Itoa(g)+"-"+strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
}

// A node that goes away fails calls at once (never hangs); once it is back
// the next calls dial a new channel.
func TestFramedChannelSurvivesARestart(t *testing.T) {
	drives := newDrives(t, "d1", "d2")
	n := startNode(t, "127.0.0.1:0", Protocol, drives)
	p := newPeer(t, n, Protocol)
	roundTrip(t, p, n, "before")

	n.stop()
	start := time.Now()
	errs := p.PutVersions(t.Context(), []erasure.PutItem{{Drive: p.Drive("x"), Bucket: "bk", Object: "o", Rec: record(10), Stage: drive.NotStaged}})
	if !errors.Is(errs[0], ErrNodeOffline) {
		t.Fatalf("call to a stopped node: %v, want ErrNodeOffline", errs[0])
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("call to a stopped node took %s", d)
	}

	n2 := startNode(t, n.addr, Protocol, drives)
	deadline := time.Now().Add(10 * time.Second)
	for !p.Online() {
		if time.Now().After(deadline) {
			t.Fatal("the peer did not come back online")
		}
		time.Sleep(50 * time.Millisecond)
	}
	roundTrip(t, p, n2, "after")
}

// A node that comes back as an older build (a roll-back, or a roll-out
// reverted) is spoken to in its protocol: the protocol learnt from the
// node before it went away does not keep it offline.
func TestANodeRolledBackToAnOlderProtocolComesBackOnline(t *testing.T) {
	drives := newDrives(t, "d1", "d2")
	n := startNode(t, "127.0.0.1:0", Protocol, drives)
	p := newPeer(t, n, Protocol)
	roundTrip(t, p, n, "before")
	if p.Version() != Protocol {
		t.Fatalf("speaks %d with a node of this build, want %d", p.Version(), Protocol)
	}
	n.stop()
	for p.Online() {
		_ = p.Check(t.Context())
	}
	old := startNode(t, n.addr, framesProtocol, drives)
	deadline := time.Now().Add(10 * time.Second)
	for !p.Online() {
		if time.Now().After(deadline) {
			t.Fatalf("the node back as a protocol %d build stays offline", framesProtocol)
		}
		time.Sleep(50 * time.Millisecond)
	}
	roundTrip(t, p, old, "after")
	if p.Version() != framesProtocol {
		t.Errorf("speaks %d with the older build, want %d", p.Version(), framesProtocol)
	}

	// Restarted between two pings, without being seen offline: the first
	// call is refused (426), the next ones are understood.
	old.stop()
	n3 := startNode(t, n.addr, framesProtocol-1, drives)
	for i := 0; ; i++ {
		err := p.Ping(t.Context())
		if err == nil {
			break
		}
		if i == 20 {
			t.Fatalf("a node restarted as a protocol %d build is never reached: %v", framesProtocol-1, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	roundTrip(t, p, n3, "after a quick restart")
}

// A node speaking protocol 2 gets the batches over HTTP/2; a client
// speaking 2 never opens the channel either.
func TestFramesNeedProtocol3OnBothSides(t *testing.T) {
	old := startNode(t, "127.0.0.1:0", 2, newDrives(t, "d1", "d2"))
	p := newPeer(t, old, Protocol)
	roundTrip(t, p, old, "a")
	if framed(p) {
		t.Fatal("the framed channel was opened to a protocol 2 node")
	}
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	p2 := newPeer(t, n, 2)
	roundTrip(t, p2, n, "a")
	if framed(p2) {
		t.Fatal("a protocol 2 client opened the framed channel")
	}
}

// Over TLS the channel is mutual TLS like the HTTP/2 calls: the client
// negotiates HTTP/1.1 for the upgrade, and both sides verify each other.
func TestFramesOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	testcerts.Write(t, dir)
	tl, err := LoadTLS(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := startTLSNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"), tl.Server)
	p := newTLSPeer(t, n, Protocol, tl.Client)
	roundTrip(t, p, n, "a")
	if !framed(p) {
		t.Fatal("the batches did not use the framed channel")
	}
	// A client without a certificate is refused.
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	bare := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	anon := newPeerNoPing(t, n, bare)
	if _, err := anon.frames(t.Context(), frameBatchGet, binaryUvarint(0)); err == nil {
		t.Fatal("a client without a certificate opened the channel")
	}
}

func newPeerNoPing(t *testing.T, n *testNode, cfg *tls.Config) *Peer {
	t.Helper()
	_, port, _ := net.SplitHostPort(n.addr)
	pn, _ := strconv.Atoi(port)
	p, err := NewPeer("127.0.0.1:1", pn, PeerOptions{Secret: Secret("pw"), Version: Protocol, TLS: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// The channel is signed like every call: a wrong secret is refused.
func TestFramesRefuseAWrongSecret(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	p.opts.Secret = Secret("other")
	if _, err := p.frames(t.Context(), frameBatchGet, binaryUvarint(0)); err == nil {
		t.Fatal("a channel signed with another secret was opened")
	}
}

func framed(p *Peer) bool {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	return p.fc != nil
}

// TestFramePanicsBecomeErrors: a call that panics on the node is answered
// with an error; the node keeps serving its channel and its other calls.
func TestFramePanicsBecomeErrors(t *testing.T) {
	drives := newDrives(t, "d1")
	n := startNode(t, "127.0.0.1:0", Protocol, drives)
	serve := n.srv.Drive
	n.srv.Drive = func(path string) *drive.Local {
		if strings.HasSuffix(path, "/boom") {
			panic("a drive lookup that panics")
		}
		return serve(path)
	}
	p := newPeer(t, n, Protocol)
	_, errs := p.GetVersions(t.Context(), []erasure.GetItem{{Drive: p.Drive("/boom"), Bucket: "bk", Object: "k"}})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "panic") {
		t.Fatalf("a panicking call answered %v", errs[0])
	}
	if !p.Online() || !framed(p) {
		t.Fatal("the node or its channel was lost to a panicking call")
	}
	roundTrip(t, p, n, "after")

	// Over HTTP too (a drive call outside the channel).
	if _, err := p.Drive("/boom").GetVersion(t.Context(), "bk", "k", nil); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("a panicking HTTP call answered %v", err)
	}
	if !p.Online() {
		t.Fatal("a panicking HTTP call marked the node offline")
	}
}

// TestRemoteUploadWalkPages: a remote walk over uploads asks its node a
// page at a time (3 here), from a position, and sees every upload once.
func TestRemoteUploadWalkPages(t *testing.T) {
	defer func(n int) { walkUploadsPage = n }(walkUploadsPage)
	walkUploadsPage = 3
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	var path string
	var d *drive.Local
	for path, d = range n.drives {
	}
	var want []drive.UploadPos
	for i := range 10 {
		u := &drive.Upload{ID: uuid.New(), Bucket: "bk", Object: fmt.Sprintf("o%d", i%4)}
		if err := d.PutUpload(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		want = append(want, u.Pos())
	}
	slices.SortFunc(want, func(a, b drive.UploadPos) int {
		if a.Less(b) {
			return -1
		}
		return 1
	})
	walk := func(after drive.UploadPos) []drive.UploadPos {
		var got []drive.UploadPos
		if err := p.Drive(path).WalkUploads(t.Context(), "bk", "", after, func(u *drive.Upload) bool {
			got = append(got, u.Pos())
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := walk(drive.UploadPos{}); !slices.Equal(got, want) {
		t.Fatalf("walk:\n got %v\nwant %v", got, want)
	}
	if got := walk(want[4]); !slices.Equal(got, want[5:]) {
		t.Fatalf("walk after the fifth:\n got %v\nwant %v", got, want[5:])
	}
}

// TestRemoteDelimitedWalkPages: a delimited walk of a peer's drive, a page
// of 2 at a time, lists what the drive's own delimited walk lists: each
// next page starts past the prefix the peer skipped.
func TestRemoteDelimitedWalkPages(t *testing.T) {
	defer func(n int) { walkPage = n }(walkPage)
	walkPage = 2
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	var path string
	var d *drive.Local
	for path, d = range n.drives {
	}
	for i, k := range []string{"a/1", "a/2", "b/1", "b/2", "c", "d/1", "d/2", "e/f/1", "g"} {
		rec := &drive.Record{ModTime: int64(i + 1)}
		if k == "b/1" {
			rec.Flags = drive.FlagDeleteMarker
		}
		if _, err := d.PutVersion(t.Context(), "bk", k, rec, drive.NotStaged); err != nil {
			t.Fatal(err)
		}
	}
	type walker interface {
		WalkDelimited(ctx context.Context, bucket, prefix, delimiter, startAfter string, fn func(string, []*drive.Record) bool) error
	}
	walk := func(w walker) []string {
		var got []string
		if err := w.WalkDelimited(t.Context(), "bk", "", "/", "", func(name string, _ []*drive.Record) bool {
			got = append(got, name)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := walk(d)
	if got := walk(p.Drive(path)); !slices.Equal(got, want) {
		t.Fatalf("remote delimited walk:\n got %v\nwant %v", got, want)
	}
	if fmt.Sprint(want) != "[a/1 b/1 b/2 c d/1 e/f/1 g]" {
		t.Fatalf("local delimited walk %v", want)
	}
}
