package internode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
)

// putRecords commits a 3,000-byte inline record under key on each of the
// node's drives through p, and returns the items that read them back.
func putRecords(t *testing.T, p *Peer, n *testNode, key string, withoutData bool) []erasure.GetItem {
	t.Helper()
	var puts []erasure.PutItem
	var gets []erasure.GetItem
	for path := range n.drives {
		rec := record(3000)
		rec.Flags = drive.FlagInline
		puts = append(puts, erasure.PutItem{Drive: p.Drive(path), Bucket: "bk", Object: key, Rec: rec, Stage: drive.NotStaged})
		gets = append(gets, erasure.GetItem{Drive: p.Drive(path), Bucket: "bk", Object: key, WithoutData: withoutData})
	}
	for i, err := range p.PutVersions(t.Context(), puts) {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	return gets
}

// TestStatBatchesLeaveInlineDataOut: a batch of reads that all want no
// data (a HEAD's) comes back without the inline shards from a node of
// this build, and with them from a node of the protocol before, which
// cannot leave them out; a batch with one read that wants data gets it.
func TestStatBatchesLeaveInlineDataOut(t *testing.T) {
	for _, version := range []int{Protocol, statProtocol - 1} {
		n := startNode(t, "127.0.0.1:0", version, newDrives(t, "d1", "d2"))
		p := newPeer(t, n, Protocol)
		stats := putRecords(t, p, n, "k", true)
		recs, errs := p.GetVersions(t.Context(), stats)
		for i := range recs {
			if errs[i] != nil {
				t.Fatalf("protocol %d: stat %d: %v", version, i, errs[i])
			}
			if got, want := len(recs[i].Inline) > 0, version < statProtocol; got != want || !recs[i].IsInline() || recs[i].Size != 3000 {
				t.Fatalf("protocol %d: stat %d: inline data %v (want %v), flags %d, size %d", version, i, got, want, recs[i].Flags, recs[i].Size)
			}
		}
		mixed := append([]erasure.GetItem(nil), stats...)
		mixed[0].WithoutData = false
		recs, errs = p.GetVersions(t.Context(), mixed)
		for i := range recs {
			if errs[i] != nil || len(recs[i].Inline) == 0 {
				t.Fatalf("protocol %d: a batch with a read of data: %d: %v, %d bytes inline", version, i, errs[i], len(recs[i].Inline))
			}
		}
		if !framed(p) {
			t.Fatalf("protocol %d: the batches did not use the framed channel", version)
		}
	}
}

// TestANodeOfTheProtocolBeforeRefusesStatBatches: a build speaking the
// protocol before answers a stat batch with an error, as that release did
// (which is why none is sent to it).
func TestANodeOfTheProtocolBeforeRefusesStatBatches(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", statProtocol-1, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	if _, err := p.frames(t.Context(), frameBatchStat, binaryUvarint(0)); err == nil {
		t.Fatalf("a protocol %d node answered a stat batch", statProtocol-1)
	}
	if _, err := p.frames(t.Context(), frameBatchGet, binaryUvarint(0)); err != nil {
		t.Fatalf("and a get batch: %v", err)
	}
}

// TestABatchIsTimedToItsAnswer: the time a started batch reports is when
// its answer came, not when its caller, busy with its own drives, waited
// for it: the set's slow-drive figures would otherwise blame the peer's
// drives for the caller's.
func TestABatchIsTimedToItsAnswer(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	p := newPeer(t, n, Protocol)
	gets := putRecords(t, p, n, "k", false)
	wait := p.StartGetVersions(t.Context(), gets)
	const busy = 300 * time.Millisecond
	time.Sleep(busy) // the caller reads its own drives
	recs, errs, took := wait()
	for i := range recs {
		if errs[i] != nil || len(recs[i].Inline) != 3000 {
			t.Fatalf("get %d: %v", i, errs[i])
		}
	}
	if took <= 0 || took >= busy {
		t.Fatalf("the batch reports %s, its caller waited %s before asking for it", took, busy)
	}
}

// TestAppendRecordIsAppendBytes: a record appended in place encodes as
// appendBytes of its encoding, for lengths of one to four varint bytes.
func TestAppendRecordIsAppendBytes(t *testing.T) {
	for _, size := range []int{0, 40, 200, 20000, 3 << 20} {
		rec := record(size)
		prefix := []byte("before")
		got := appendRecord(bytes.Clone(prefix), rec)
		want := appendBytes(bytes.Clone(prefix), drive.MarshalRecord(nil, rec))
		if !bytes.Equal(got, want) {
			t.Fatalf("inline %d: appended %d bytes, want %d", size, len(got), len(want))
		}
		in := reader{buf: got[len(prefix):]}
		if back, err := drive.UnmarshalRecord(in.bytes()); err != nil || !bytes.Equal(back.Inline, rec.Inline) || in.err != nil {
			t.Fatalf("inline %d: decodes to %v, %v", size, err, in.err)
		}
	}
}

// TestAFrameCallWithoutAnswerFailsTheChannel: a call the peer never
// answers fails once it has waited the call timeout (the channel's
// watchdog is every call's deadline), with every other call on the
// channel, which is not used again.
func TestAFrameCallWithoutAnswerFailsTheChannel(t *testing.T) {
	client, peer := net.Pipe()
	t.Cleanup(func() { client.Close(); peer.Close() })
	go func() { _, _ = io.Copy(io.Discard, peer) }() // reads every call, answers none
	fc := &frameConn{c: client, pending: map[uint64]*call{}, done: make(chan struct{})}
	go fc.readLoop(bufio.NewReader(client))
	const timeout = 200 * time.Millisecond
	go fc.watch(timeout)
	start := time.Now()
	first, second := fc.send(frameBatchGet, binaryUvarint(0), nil), fc.send(frameBatchGet, binaryUvarint(0), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // the test's own bound
	defer cancel()
	for _, c := range []*call{first, second} {
		_, _, err := c.wait(ctx, fc)
		if !strings.Contains(fmt.Sprint(err), "no answer within") || !errors.Is(err, context.DeadlineExceeded) || !transportErr(err) {
			t.Fatalf("unanswered call: %v", err)
		}
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("failed after %s, before the call timeout of %s", took, timeout)
	}
	if !fc.dead() {
		t.Fatal("the channel is still used after a call went unanswered")
	}
}

// TestAPeerMarkedOfflineEndsItsFrameCalls: calls in flight on a peer's
// channel end when the peer is marked offline, and the channel goes.
func TestAPeerMarkedOfflineEndsItsFrameCalls(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1"))
	p := newPeer(t, n, Protocol)
	if _, err := p.frames(t.Context(), frameBatchGet, binaryUvarint(0)); err != nil {
		t.Fatal(err)
	}
	fc := p.fc
	p.markOffline(errors.New("test"))
	if framed(p) || !fc.dead() {
		t.Fatal("the channel of a peer marked offline is still open")
	}
}
