package notify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/objlayer"
)

// erasureLayer is a real erasure-coded layer over four drives (2+2).
func erasureLayer(t *testing.T) objlayer.Layer {
	t.Helper()
	layer, _ := erasureLayerDrives(t)
	return layer
}

// erasureLayerDrives is erasureLayer and its drives.
func erasureLayerDrives(t *testing.T) (objlayer.Layer, []*drive.Local) {
	t.Helper()
	var drives []erasure.Drive
	var locals []*drive.Local
	for i := range 4 {
		d, err := drive.OpenLocal(filepath.Join(t.TempDir(), fmt.Sprintf("d%d", i)), drive.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		drives = append(drives, d)
		locals = append(locals, d)
	}
	set, err := erasure.NewSet(drives, 2)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := erasure.NewPool(uuid.New(), []*erasure.Set{set})
	if err != nil {
		t.Fatal(err)
	}
	return erasure.Layer{Pools: erasure.NewPools(erasure.NewPoolEntry("pool-0", pool, erasure.StateActive))}, locals
}

// receiver is a webhook that records what it takes and refuses while down.
// A message beginning with hangOn (when set) is not answered until gate
// closes (hanging counts them).
type receiver struct {
	srv     *httptest.Server
	down    atomic.Bool
	mu      sync.Mutex
	got     []string
	hangOn  string
	gate    chan struct{}
	hanging atomic.Int32
	// refuseOn (when set): messages beginning with it are refused.
	refuseOn string
	refused  atomic.Int32
}

func newReceiver(t *testing.T) *receiver { return newReceiverWith(t, "", "") }

func newReceiverWith(t *testing.T, hangOn, refuseOn string) *receiver {
	rc := &receiver{hangOn: hangOn, refuseOn: refuseOn, gate: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if rc.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if rc.refuseOn != "" && strings.HasPrefix(string(b), rc.refuseOn) {
			rc.refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if rc.hangOn != "" && strings.HasPrefix(string(b), rc.hangOn) {
			rc.hanging.Add(1)
			select {
			case <-rc.gate:
			case <-r.Context().Done():
				return
			}
		}
		rc.mu.Lock()
		rc.got = append(rc.got, string(b))
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) messages() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got...)
}

func (rc *receiver) target(t *testing.T) Target { return rc.targetNamed(t, "hook") }

func (rc *receiver) targetNamed(t *testing.T, id string) Target {
	tg, err := OpenTarget(TargetSpec{ID: id, Type: "webhook", Endpoint: rc.srv.URL}, DefaultRegion)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func items(target string, from, n int) []Item {
	var out []Item
	for i := from; i < from+n; i++ {
		out = append(out, Item{Target: target, Key: "k", Msg: fmt.Appendf(nil, "m%04d", i)})
	}
	return out
}

// runningQueue is node-1's queue over layer delivering to a webhook,
// running until the test ends (ctx).
func runningQueue(t *testing.T, layer objlayer.Layer) (*Queue, *receiver, Target, context.Context) {
	rc := newReceiver(t)
	tg := rc.target(t)
	q := NewQueue(layer, "node-1", []Target{tg}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go q.Run(ctx)
	return q, rc, tg, ctx
}

// startQueue is node-1's queue over layer delivering to targets, running
// until the test ends (and waited for then).
func startQueue(t *testing.T, layer objlayer.Layer, targets ...Target) *Queue {
	q := NewQueue(layer, "node-1", targets, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); q.Wait(10 * time.Second) })
	go q.Run(ctx)
	return q
}

func storedBatches(t *testing.T, layer objlayer.Layer) int {
	t.Helper()
	res, err := layer.ListObjects(t.Context(), Bucket, "q/", "", "", 1000)
	if errors.Is(err, objlayer.ErrBucketNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Objects)
}

// TestQueueDeliversInOrderAndRetries: events added by concurrent writers
// are stored before Add returns and reach the webhook in the order they
// were added; while the webhook refuses, they wait (backlog counted) and
// then arrive in order, none missing; delivered batches are removed.
func TestQueueDeliversInOrderAndRetries(t *testing.T) {
	layer := erasureLayer(t)
	q, rc, tg, _ := runningQueue(t, layer)

	for i := range 50 {
		if err := q.Add(t.Context(), items(tg.ARN(), i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "50 events", func() bool { return len(rc.messages()) == 50 })
	rc.down.Store(true)
	var wg sync.WaitGroup
	for w := range 4 { // concurrent writers: their events share batches
		wg.Go(func() {
			for i := range 25 {
				if err := q.Add(t.Context(), items(tg.ARN(), 1000*(w+1)+i, 1)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "a failed delivery", func() bool { return q.Stats().Failed.Load() > 0 })
	if b := q.Stats().Backlog.Load(); b != 100 {
		t.Fatalf("backlog %d while the webhook refuses, want 100", b)
	}
	rc.down.Store(false)
	waitFor(t, "every event", func() bool { return len(rc.messages()) == 150 })
	last := map[int]int{}
	for _, m := range rc.messages()[50:] {
		var n int
		if _, err := fmt.Sscanf(m, "m%d", &n); err != nil {
			t.Fatalf("message %q: %v", m, err)
		}
		w := n / 1000
		if n <= last[w] && last[w] != 0 {
			t.Fatalf("writer %d's events out of order: %d after %d", w, n, last[w])
		}
		last[w] = n
	}
	waitFor(t, "delivered batches removed", func() bool { return storedBatches(t, layer) == 0 })
	if q.Stats().Backlog.Load() != 0 || q.Stats().Delivered.Load() != 150 {
		t.Fatalf("after delivery: backlog %d, delivered %d", q.Stats().Backlog.Load(), q.Stats().Delivered.Load())
	}
}

// TestQueueSurvivesARestart: events stored by a queue that never
// delivered them (its process died) are delivered by the next queue of
// the same node at once, and by another node's only once they are older
// than TakeOver and their node is not alive.
func TestQueueSurvivesARestart(t *testing.T) {
	layer := erasureLayer(t)
	rc := newReceiver(t)
	tg := rc.target(t)
	dead := NewQueue(layer, "node-1", []Target{tg}, slog.New(slog.DiscardHandler))
	if err := dead.Add(t.Context(), items(tg.ARN(), 0, 3)); err != nil {
		t.Fatal(err)
	}
	other := NewQueue(layer, "node-2", []Target{tg}, slog.New(slog.DiscardHandler))
	other.TakeOver, other.Rescan = 300*time.Millisecond, 100*time.Millisecond
	alive := atomic.Bool{}
	alive.Store(true)
	other.Takes = func(node string) bool { return node != "node-1" || !alive.Load() }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go other.Run(ctx)
	time.Sleep(600 * time.Millisecond)
	if n := len(rc.messages()); n != 0 {
		t.Fatalf("another node delivered %d events of a node that is alive", n)
	}
	alive.Store(false)
	waitFor(t, "the events taken over", func() bool { return len(rc.messages()) == 3 })
	if storedBatches(t, layer) != 0 {
		waitFor(t, "the batch removed", func() bool { return storedBatches(t, layer) == 0 })
	}

	// The same node restarted takes its own at once.
	if err := dead.Add(t.Context(), items(tg.ARN(), 3, 2)); err != nil {
		t.Fatal(err)
	}
	again := NewQueue(layer, "node-1", []Target{tg}, slog.New(slog.DiscardHandler))
	go again.Run(ctx)
	waitFor(t, "the restarted node's events", func() bool { return len(rc.messages()) == 5 })
}

// putWithEvents writes key through the layer with its event stored with
// the version, as the S3 front end does (the event's ETag is "m" and n),
// and returns the reference the layer gave it (zero when it stored none).
func putWithEvents(t *testing.T, layer objlayer.Layer, q *Queue, tg Target, key string, n int) (objlayer.EventRef, Event, []*Rule) {
	t.Helper()
	rules := []*Rule{{ID: "cfg", Target: tg.ARN()}}
	var e Event
	info, err := layer.PutObject(t.Context(), "bk", key, strings.NewReader("body"), 4, objlayer.PutOptions{
		Events: func(info objlayer.ObjectInfo) []byte {
			e = Event{Name: ObjectCreatedPut, Bucket: "bk", Key: key, Size: info.Size, ETag: fmt.Sprintf("m%04d", n), Time: time.Now()}
			return q.Encode(e, rules)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return objlayer.EventRef{Bucket: "bk", Object: key, ID: info.EventID}, e, rules
}

// etags are the ETags of the event messages a receiver took.
func etags(t *testing.T, msgs []string) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		var doc struct {
			Records []struct {
				S3 struct {
					ConfigurationID string `json:"configurationId"`
					Object          struct {
						Key  string `json:"key"`
						ETag string `json:"eTag"`
					} `json:"object"`
				} `json:"s3"`
			}
		}
		if err := json.Unmarshal([]byte(m), &doc); err != nil || len(doc.Records) != 1 || doc.Records[0].S3.ConfigurationID != "cfg" {
			t.Fatalf("message %q: %v", m, err)
		}
		out = append(out, doc.Records[0].S3.Object.ETag)
	}
	return out
}

func storedEvents(t *testing.T, layer objlayer.Layer) int {
	t.Helper()
	n := 0
	if err := layer.(objlayer.EventStore).ListEvents(t.Context(), func([16]byte, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCommittedAfterAListingDeliveredIt: a queue's listing can find a
// write's events on the drives before the write hands them over
// (Committed): a queue starting while writes go on takes its own node's
// events of any age. Handed over after they were delivered, they are not
// sent again; and a drive of the write that committed them only after
// that delivery removed them (a slow drive) has them removed at the
// hand-over, or by the next listing when later still, not left for a
// listing to send again.
func TestCommittedAfterAListingDeliveredIt(t *testing.T) {
	layer, drives := erasureLayerDrives(t)
	if err := objlayer.EnsureBucket(t.Context(), layer, "bk"); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	tg := rc.target(t)
	q := NewQueue(layer, "node-1", []Target{tg}, slog.New(slog.DiscardHandler))
	ref, e, rules := putWithEvents(t, layer, q, tg, "k", 1) // stored, not yet handed over
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	slow, err := drives[3].GetVersion(t.Context(), "bk", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	go q.Run(ctx) // its first listing takes the write's events
	waitFor(t, "the listed events delivered", func() bool { return len(rc.messages()) == 1 })
	waitFor(t, "the delivered events removed", func() bool { return storedEvents(t, layer) == 0 })
	// The slow drive commits the write's record and events now.
	slow.EventID, slow.Events = ref.ID, q.Encode(e, rules)
	if _, err := drives[3].PutVersion(t.Context(), "bk", "k", slow, drive.NotStaged); err != nil {
		t.Fatal(err)
	}
	if n := storedEvents(t, layer); n != 1 {
		t.Fatalf("%d events on the drives after the slow drive's commit, want 1", n)
	}
	q.Committed(ref, e, rules)
	waitFor(t, "the slow drive's copy removed at the hand-over", func() bool { return storedEvents(t, layer) == 0 })
	// A drive later still (the write answered at quorum while it was
	// committing): the next listing removes its copy.
	if _, err := drives[3].PutVersion(t.Context(), "bk", "k", slow, drive.NotStaged); err != nil {
		t.Fatal(err)
	}
	if err := q.scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	q.wake()
	waitFor(t, "a later copy removed by the next listing", func() bool { return storedEvents(t, layer) == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := len(rc.messages()); n != 1 {
		t.Fatalf("the events were delivered %d times, want once", n)
	}
}

// failingStore is a layer whose PutObject into the events' bucket fails
// while fail is set.
type failingStore struct {
	objlayer.Layer
	fail atomic.Bool
}

func (f *failingStore) PutObject(ctx context.Context, bucket, name string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if bucket == Bucket && f.fail.Load() {
		return objlayer.ObjectInfo{}, objlayer.ErrWriteQuorum
	}
	return f.Layer.PutObject(ctx, bucket, name, r, size, opts)
}

// TestEventsStoredAgainAfterAFailedStore: events whose store failed (the
// write they came from answers an error, but its change is made, as a
// delete marker is) are stored again once the store takes writes, and
// delivered in order with those added after them.
func TestEventsStoredAgainAfterAFailedStore(t *testing.T) {
	store := &failingStore{Layer: erasureLayer(t)}
	q, rc, tg, _ := runningQueue(t, store)
	if err := q.Add(t.Context(), items(tg.ARN(), 0, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first event", func() bool { return len(rc.messages()) == 1 })
	store.fail.Store(true)
	for i := 1; i <= 3; i++ {
		if err := q.Add(t.Context(), items(tg.ARN(), i, 1)); !errors.Is(err, objlayer.ErrWriteQuorum) || !errors.Is(err, ErrKept) {
			t.Fatalf("Add while the store fails: %v, want the store's error and ErrKept", err)
		}
	}
	time.Sleep(500 * time.Millisecond) // Run tries again, and fails again
	if b, tb := q.Stats().Backlog.Load(), q.Backlog(tg.ARN()); b != 3 || tb.Events != 3 || q.Stats().Oldest.Load() == 0 {
		t.Fatalf("backlog %d, target's %+v, oldest %d while 3 events wait to be stored, want 3, 3 and a time", b, tb, q.Stats().Oldest.Load())
	}
	store.fail.Store(false)
	if err := q.Add(t.Context(), items(tg.ARN(), 4, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the events of the failed stores", func() bool { return len(rc.messages()) == 5 })
	if got := strings.Join(rc.messages(), " "); got != "m0000 m0001 m0002 m0003 m0004" {
		t.Fatalf("delivered %q, want m0000 to m0004 in order", got)
	}
	waitFor(t, "delivered batches removed", func() bool { return storedBatches(t, store) == 0 })
	if b := q.Stats().Backlog.Load(); b != 0 {
		t.Fatalf("backlog %d after delivery", b)
	}
}

// pickyStore is a layer whose PutObject into the events' bucket fails
// for a batch holding the message refuse, while it is set.
type pickyStore struct {
	objlayer.Layer
	refuse atomic.Pointer[string]
}

func (p *pickyStore) PutObject(ctx context.Context, bucket, name string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if bad := p.refuse.Load(); bucket == Bucket && bad != nil {
		b, err := io.ReadAll(r)
		if err != nil {
			return objlayer.ObjectInfo{}, err
		}
		if bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(*bad)))) { // Item.Msg in JSON
			return objlayer.ObjectInfo{}, objlayer.ErrWriteQuorum
		}
		r = bytes.NewReader(b)
	}
	return p.Layer.PutObject(ctx, bucket, name, r, size, opts)
}

// TestEventsOfAKeyWaitForOneStoredAgain: while an event waits to be
// stored again (its batch refused, again and again), later events of its
// key are stored but not delivered before it; other keys' go on.
func TestEventsOfAKeyWaitForOneStoredAgain(t *testing.T) {
	store := &pickyStore{Layer: erasureLayer(t)}
	q, rc, tg, _ := runningQueue(t, store)
	if err := q.Add(t.Context(), items(tg.ARN(), 0, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first event", func() bool { return len(rc.messages()) == 1 })
	refused := "m0001"
	store.refuse.Store(&refused)
	if err := q.Add(t.Context(), items(tg.ARN(), 1, 1)); !errors.Is(err, ErrKept) {
		t.Fatalf("Add of a batch the store refuses: %v, want ErrKept", err)
	}
	if err := q.Add(t.Context(), items(tg.ARN(), 2, 1)); err != nil {
		t.Fatalf("a later event of the key is stored: %v", err)
	}
	other := []Item{{Target: tg.ARN(), Key: "other", Msg: []byte("o0000")}}
	if err := q.Add(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "another key's event", func() bool { return len(rc.messages()) == 2 })
	time.Sleep(300 * time.Millisecond) // more passes, and the refused batch tried again
	if got := strings.Join(rc.messages(), " "); got != "m0000 o0000" {
		t.Fatalf("delivered %q while m0001 waits to be stored again, want m0000 o0000 (m0002 held back)", got)
	}
	if b := q.Backlog(tg.ARN()); b.Events != 2 || b.Oldest.IsZero() {
		t.Fatalf("target's backlog %+v, want 2 events (one waiting to be stored, one held back) and a time", b)
	}
	store.refuse.Store(nil)
	waitFor(t, "the held events", func() bool { return len(rc.messages()) == 4 })
	if got := strings.Join(rc.messages(), " "); got != "m0000 o0000 m0001 m0002" {
		t.Fatalf("delivered %q, want m0000 o0000 m0001 m0002", got)
	}
}

// TestEventsStoredWithVersions: a write's events committed with its
// version (no batch object of their own) are delivered from memory and
// then removed from the drives; events whose node died before delivering
// them are delivered by its next queue at once, and by another node's
// only when the first is gone and they are older than TakeOver; a write
// rolled back leaves none.
func TestEventsStoredWithVersions(t *testing.T) {
	layer := erasureLayer(t)
	if err := objlayer.EnsureBucket(t.Context(), layer, "bk"); err != nil {
		t.Fatal(err)
	}
	q, rc, tg, ctx := runningQueue(t, layer)
	for i := range 20 {
		ref, e, rules := putWithEvents(t, layer, q, tg, fmt.Sprintf("k%d", i%3), i)
		if ref.ID == ([16]byte{}) {
			t.Fatal("the erasure layer stored no events with the version")
		}
		q.Committed(ref, e, rules)
	}
	waitFor(t, "20 events", func() bool { return len(rc.messages()) == 20 })
	waitFor(t, "delivered events removed from the drives", func() bool { return storedEvents(t, layer) == 0 })
	if storedBatches(t, layer) != 0 {
		t.Fatal("events stored with versions made batch objects too")
	}

	// A node that died after its writes were acknowledged.
	dead := NewQueue(layer, "node-2", []Target{tg}, slog.New(slog.DiscardHandler))
	for i := range 3 {
		putWithEvents(t, layer, dead, tg, "lost", 100+i)
	}
	if n := storedEvents(t, layer); n != 3 {
		t.Fatalf("%d writes' events on the drives, want 3", n)
	}
	other := NewQueue(layer, "node-3", []Target{tg}, slog.New(slog.DiscardHandler))
	other.TakeOver, other.Rescan = 300*time.Millisecond, 100*time.Millisecond
	alive := atomic.Bool{}
	alive.Store(true)
	other.Takes = func(node string) bool { return node != "node-2" || !alive.Load() }
	go other.Run(ctx)
	time.Sleep(600 * time.Millisecond)
	if n := len(rc.messages()); n != 20 {
		t.Fatalf("%d events more than the first 20 while node-2 is alive: %v (its are m0100-m0102; others are sent twice)", n-20, etags(t, rc.messages()))
	}
	alive.Store(false)
	waitFor(t, "the lost node's events taken over", func() bool { return len(rc.messages()) == 23 })
	// In order per key (k0, k1, k2 take lanes of their own, so not across
	// keys).
	last := map[int]int{}
	for _, m := range etags(t, rc.messages()[:20]) {
		var i int
		if _, err := fmt.Sscanf(m, "m%04d", &i); err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[i%3]; ok && prev >= i {
			t.Fatalf("delivered from memory out of order for key k%d: %v", i%3, etags(t, rc.messages()[:20]))
		}
		last[i%3] = i
	}
	for i, m := range etags(t, rc.messages()[20:]) {
		if want := fmt.Sprintf("m%04d", 100+i); m != want {
			t.Fatalf("taken-over event %d is %q, want %q (in order)", i, m, want)
		}
	}
	waitFor(t, "taken-over events removed", func() bool { return storedEvents(t, layer) == 0 })

	// The same node restarted delivers its own at once.
	putWithEvents(t, layer, dead, tg, "again", 200)
	restarted := NewQueue(layer, "node-2", []Target{tg}, slog.New(slog.DiscardHandler))
	go restarted.Run(ctx)
	waitFor(t, "the restarted node's events", func() bool { return len(rc.messages()) == 24 })
	waitFor(t, "its events removed", func() bool { return storedEvents(t, layer) == 0 })
}

// TestEventMarkFollowsDelivery: a write asking for its events' mark
// (PutOptions.EventMark) carries their ID in its metadata, inline or in
// shard files, and the layer says they are stored until they are
// delivered and forgotten; a write without the option carries no mark.
func TestEventMarkFollowsDelivery(t *testing.T) {
	const mark = objlayer.InternalMetaPrefix + "Test-Event"
	layer := erasureLayer(t)
	if err := objlayer.EnsureBucket(t.Context(), layer, "bk"); err != nil {
		t.Fatal(err)
	}
	q, rc, tg, _ := runningQueue(t, layer)
	rc.down.Store(true)
	rules := []*Rule{{ID: "cfg", Target: tg.ARN()}}
	es := layer.(objlayer.EventStore)
	type written struct {
		ref objlayer.EventRef
		e   Event
	}
	var all []written
	for _, size := range []int{4, 1 << 20} {
		for _, withMark := range []bool{true, false} {
			key := fmt.Sprintf("k-%d-%v", size, withMark)
			var e Event
			opts := objlayer.PutOptions{Events: func(info objlayer.ObjectInfo) []byte {
				e = Event{Name: ObjectCreatedPut, Bucket: "bk", Key: key, Size: info.Size, ETag: key, Time: time.Now()}
				return q.Encode(e, rules)
			}}
			if withMark {
				opts.EventMark = mark
			}
			info, err := layer.PutObject(t.Context(), "bk", key, strings.NewReader(strings.Repeat("x", size)), int64(size), opts)
			if err != nil || info.EventID == ([16]byte{}) {
				t.Fatalf("%s: %v, events %x", key, err, info.EventID)
			}
			h, err := layer.OpenObjectMeta(t.Context(), "bk", key, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := h.Info().Meta[mark]
			h.Close()
			if want := map[bool]string{true: objlayer.EventMarkValue(info.EventID)}[withMark]; got != want {
				t.Fatalf("%s: mark %q, want %q", key, got, want)
			}
			ref := objlayer.EventRef{Bucket: "bk", Object: key, ID: info.EventID}
			if stored, err := es.EventStored(t.Context(), ref); !stored || err != nil {
				t.Fatalf("%s: EventStored before delivery: %v, %v", key, stored, err)
			}
			all = append(all, written{ref, e})
		}
	}
	for _, w := range all {
		q.Committed(w.ref, w.e, rules)
	}
	rc.down.Store(false)
	waitFor(t, "the events delivered and forgotten", func() bool {
		for _, w := range all {
			if stored, err := es.EventStored(t.Context(), w.ref); stored || err != nil {
				return false
			}
		}
		return true
	})
	if n := len(rc.messages()); n != len(all) {
		t.Fatalf("%d messages, want %d", n, len(all))
	}
}

// closeCounted is a target that counts its Close calls.
type closeCounted struct {
	Target
	closed atomic.Int32
}

func (c *closeCounted) Close() { c.closed.Add(1); c.Target.Close() }

// TestSetTargetsWhileRunning: a target added to a running queue is known
// at once and takes its events; one removed is closed once, its events
// waiting out UnknownGrace and then dropped (the backlog empties), and the
// one kept is neither closed nor held back. Before the targets are known
// at all (HoldUntilTargets), events for a target the queue does not have
// wait however old, and reach it once it is set.
func TestSetTargetsWhileRunning(t *testing.T) {
	layer := erasureLayer(t)
	first := newReceiver(t)
	kept := &closeCounted{Target: first.target(t)}
	q := NewQueue(layer, "node-1", nil, slog.New(slog.DiscardHandler))
	q.UnknownGrace = 300 * time.Millisecond
	q.HoldUntilTargets()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go q.Run(ctx)
	if err := q.Add(t.Context(), items(kept.ARN(), 0, 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * q.UnknownGrace) // older than the grace: held all the same
	if b := q.Stats().Backlog.Load(); b != 2 || len(first.messages()) != 0 {
		t.Fatalf("before the targets are known: backlog %d, %d delivered; want 2 and 0", b, len(first.messages()))
	}

	rc := newReceiver(t)
	tg, err := OpenTarget(TargetSpec{ID: "later", Type: "webhook", Endpoint: rc.srv.URL}, DefaultRegion)
	if err != nil {
		t.Fatal(err)
	}
	added := &closeCounted{Target: tg}
	if q.Known(added.ARN()) || q.Known(kept.ARN()) {
		t.Fatal("a target not yet set is known")
	}
	q.SetTargets([]Target{kept, added})
	if !q.Known(added.ARN()) || !q.Known(kept.ARN()) {
		t.Fatal("the targets set are not known")
	}
	waitFor(t, "the events held for the targets", func() bool { return len(first.messages()) == 2 })
	if err := q.Add(t.Context(), append(items(added.ARN(), 0, 3), items(kept.ARN(), 2, 2)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the added target's events", func() bool { return len(rc.messages()) == 3 && len(first.messages()) == 4 })
	if b := q.Backlog(added.ARN()); b.Events != 0 {
		t.Fatalf("the added target's backlog after delivery: %d", b.Events)
	}

	rc.down.Store(true) // its events wait, then are dropped with it
	queued := time.Now()
	if err := q.Add(t.Context(), items(added.ARN(), 3, 2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a failed delivery", func() bool { return q.Stats().Failed.Load() > 0 })
	if b := q.Backlog(added.ARN()).Events; b != 2 {
		t.Fatalf("backlog %d while the added target refuses, want 2", b)
	}
	q.SetTargets([]Target{kept})
	if q.Known(added.ARN()) {
		t.Fatal("a removed target is still known")
	}
	waitFor(t, "the removed target closed and its events dropped", func() bool {
		return added.closed.Load() == 1 && q.Stats().Backlog.Load() == 0
	})
	if waited := time.Since(queued); waited < q.UnknownGrace {
		t.Fatalf("the removed target's events were dropped %s after they were queued, within the grace", waited)
	}
	if err := q.Add(t.Context(), items(kept.ARN(), 4, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kept target's next event", func() bool { return len(first.messages()) == 5 })
	if got := len(rc.messages()); got != 3 || added.closed.Load() != 1 || kept.closed.Load() != 0 {
		t.Fatalf("the removed target got %d messages (want 3) and was closed %d times (want 1); the kept one closed %d times (want 0)",
			got, added.closed.Load(), kept.closed.Load())
	}
}

// TestAFailingTargetHoldsNoOtherBack: while one target refuses (its
// retries backing off towards 10 s), another takes a new event at once,
// not at the failing one's next retry; the failing one, opened again (its
// entry fixed), gets its events at once and in order.
func TestAFailingTargetHoldsNoOtherBack(t *testing.T) {
	layer := erasureLayer(t)
	down, up := newReceiver(t), newReceiver(t)
	failing, healthy := down.target(t), up.targetNamed(t, "healthy")
	q := startQueue(t, layer, failing, healthy)
	down.down.Store(true)
	if err := q.Add(t.Context(), items(failing.ARN(), 0, 3)); err != nil {
		t.Fatal(err)
	}
	// Four failures: its next retry is 3.2 s away.
	waitFor(t, "four failed deliveries", func() bool { return q.Stats().Failed.Load() >= 4 })
	for i := range 3 {
		start := time.Now()
		if err := q.Add(t.Context(), items(healthy.ARN(), i, 1)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the healthy target's event", func() bool { return len(up.messages()) == i+1 })
		if took := time.Since(start); took > time.Second {
			t.Fatalf("the healthy target's event %d took %s while the other target failed", i, took)
		}
	}
	// Its entry fixed: the target opened again is tried at once, not at
	// the old one's next retry.
	down.down.Store(false)
	reopened := time.Now()
	q.SetTargets([]Target{down.target(t), healthy})
	waitFor(t, "the failing target's events once it answers", func() bool { return len(down.messages()) == 3 })
	if took := time.Since(reopened); took > time.Second {
		t.Fatalf("the target opened again waited %s for the old one's retry", took)
	}
	if got := down.messages(); got[0] != "m0000" || got[1] != "m0001" || got[2] != "m0002" {
		t.Fatalf("the failing target's events out of order: %v", got)
	}
}

// TestAHangingTargetHoldsNoOtherBack: a target that takes a delivery and
// does not answer (rather than refusing) holds that delivery's lane only:
// another target takes its events at once, and so do the hanging target's
// other lanes; the held key's later event waits behind the one that hangs
// and follows it, in order, once it is answered.
func TestAHangingTargetHoldsNoOtherBack(t *testing.T) {
	layer := erasureLayer(t)
	slow, up := newReceiverWith(t, "hang", ""), newReceiver(t)
	slowT, healthy := slow.target(t), up.targetNamed(t, "healthy")
	q := startQueue(t, layer, slowT, healthy)
	other := "other"
	for i := 0; laneOf(other, Lanes) == laneOf("stuck", Lanes); i++ {
		other = fmt.Sprintf("other-%d", i)
	}
	if err := q.Add(t.Context(), []Item{{Target: slowT.ARN(), Key: "stuck", Msg: []byte("hang-0")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delivery that hangs", func() bool { return slow.hanging.Load() == 1 })
	if err := q.Add(t.Context(), []Item{{Target: slowT.ARN(), Key: "stuck", Msg: []byte("after-0")}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if err := q.Add(t.Context(), []Item{{Target: healthy.ARN(), Key: "k", Msg: fmt.Appendf(nil, "m%04d", i)},
			{Target: slowT.ARN(), Key: other, Msg: fmt.Appendf(nil, "o%04d", i)}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the other target's event and the hanging target's other key", func() bool {
			return len(up.messages()) == i+1 && len(slow.messages()) == i+1
		})
		if took := time.Since(start); took > time.Second {
			t.Fatalf("event %d took %s while a delivery hung", i, took)
		}
	}
	if got := q.Backlog(slowT.ARN()); got.Events != 2 || got.Oldest.IsZero() {
		t.Fatalf("the hanging target's backlog: %+v, want its 2 held events", got)
	}
	close(slow.gate)
	waitFor(t, "the held key's events", func() bool { return len(slow.messages()) == 5 })
	got := slow.messages()
	if got[3] != "hang-0" || got[4] != "after-0" {
		t.Fatalf("the held key's events out of order: %v", got)
	}
	waitFor(t, "the delivered batches removed", func() bool { return storedBatches(t, layer) == 0 })
	if b := q.Stats().Backlog.Load(); b != 0 {
		t.Fatalf("backlog %d after every event was delivered", b)
	}
}

// TestAKeyThatKeepsFailingHoldsItsLaneOnly: a target refuses one key's
// event every time (a version that cannot be read, say) and takes every
// other: the other keys' events arrive at once, and the refused one's
// retries back off (200 ms doubling) however many other deliveries
// succeed meanwhile.
func TestAKeyThatKeepsFailingHoldsItsLaneOnly(t *testing.T) {
	layer := erasureLayer(t)
	rc := newReceiverWith(t, "", "bad")
	tg := rc.target(t)
	q := startQueue(t, layer, tg)
	if err := q.Add(t.Context(), []Item{{Target: tg.ARN(), Key: "poisoned", Msg: []byte("bad")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first refusal", func() bool { return rc.refused.Load() == 1 })
	start, sent := time.Now(), 0
	for time.Since(start) < 2500*time.Millisecond {
		key := fmt.Sprintf("good-%d", sent)
		if laneOf(key, Lanes) == laneOf("poisoned", Lanes) {
			sent++
			continue
		}
		begin, n := time.Now(), len(rc.messages())+1
		if err := q.Add(t.Context(), []Item{{Target: tg.ARN(), Key: key, Msg: fmt.Appendf(nil, "g%04d", sent)}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "another key's event", func() bool { return len(rc.messages()) >= n })
		if took := time.Since(begin); took > time.Second {
			t.Fatalf("another key's event took %s while one key kept failing", took)
		}
		sent++
		time.Sleep(50 * time.Millisecond)
	}
	// Backing off, the refused event is tried at about 0.2, 0.6, 1.4 and
	// 3.0 s after the first refusal: 4 or 5 times in all by 2.5 s, not
	// every 200 ms.
	switch n := rc.refused.Load(); {
	case n > 5:
		t.Fatalf("the refused event was tried %d times in 2.5 s: its backoff did not grow", n)
	case n < 3:
		t.Fatalf("the refused event was tried %d times in 2.5 s: it is not retried", n)
	}
	if got := q.Backlog(tg.ARN()); got.Events != 1 {
		t.Fatalf("backlog %+v, want the refused event only", got)
	}
}

// TestARetryThatHangsIsWaitedForQuietly: a lane that failed and then hangs
// in its retry leaves Run idle meanwhile (its past retry time is no
// reason for another pass).
func TestARetryThatHangsIsWaitedForQuietly(t *testing.T) {
	layer := erasureLayer(t)
	rc := newReceiverWith(t, "hang", "")
	tg := rc.target(t)
	q := startQueue(t, layer, tg)
	rc.down.Store(true)
	if err := q.Add(t.Context(), []Item{{Target: tg.ARN(), Key: "k", Msg: []byte("hang-0")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first failure", func() bool { return q.Stats().Failed.Load() == 1 })
	rc.down.Store(false)
	waitFor(t, "the retry that hangs", func() bool { return rc.hanging.Load() == 1 })
	before := q.passes.Load()
	time.Sleep(time.Second)
	if n := q.passes.Load() - before; n > 5 {
		t.Fatalf("%d delivery passes in a second while the only lane hung in its retry", n)
	}
	close(rc.gate)
	waitFor(t, "the event once answered", func() bool { return len(rc.messages()) == 1 })
}

// slowTarget takes each message after a round trip's wait, counting the
// deliveries in flight at once and keeping each key's messages in the
// order they arrived (messages are "key/n").
type slowTarget struct {
	arn   string
	lanes int // 0: not Laned
	wait  time.Duration

	mu       sync.Mutex
	inFlight int
	most     int
	byKey    map[string][]string
}

func (s *slowTarget) ARN() string { return s.arn }
func (s *slowTarget) Close()      {}

func (s *slowTarget) Deliver(ctx context.Context, msg []byte) error {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	time.Sleep(s.wait)
	key, _, _ := strings.Cut(string(msg), "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if s.byKey == nil {
		s.byKey = map[string][]string{}
	}
	s.byKey[key] = append(s.byKey[key], string(msg))
	return nil
}

// received is how many messages arrived, and the most in flight at once.
func (s *slowTarget) received() (n, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.byKey {
		n += len(m)
	}
	return n, s.most
}

// checkOrder fails the test unless every key's messages arrived in the
// order they were queued.
func (s *slowTarget) checkOrder(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, msgs := range s.byKey {
		for i, m := range msgs {
			if want := fmt.Sprintf("%s/%03d", key, i); m != want {
				t.Errorf("%s: key %s's message %d is %s, want %s (order lost)", s.arn, key, i, m, want)
				break
			}
		}
	}
}

// slowLaned is a slowTarget that asks for its own number of lanes.
type slowLaned struct{ *slowTarget }

func (s slowLaned) Lanes() int { return s.lanes }

// keyed are n events for each of keys keys, to target, a key's in order.
func keyed(target string, keys, n, from int) []Item {
	var out []Item
	for i := from; i < from+n; i++ {
		for k := range keys {
			key := fmt.Sprintf("key%02d", k)
			out = append(out, Item{Target: target, Key: key, Msg: fmt.Appendf(nil, "%s/%03d", key, i)})
		}
	}
	return out
}

// TestALanedTargetTakesItsLanes: a target that asks for 32 lanes (a
// replication remote, whose copies each wait a round trip) has more than
// the queue's 8 deliveries in flight at once and at most 32, while a
// plain target beside it keeps 8; each key's events arrive in order at
// both. With 8 lanes a remote 30 ms away took at most 266 events a second.
func TestALanedTargetTakesItsLanes(t *testing.T) {
	layer := erasureLayer(t)
	wide := slowLaned{&slowTarget{arn: "arn:strata:replication:us-east-1:wide:s3", lanes: 32, wait: 30 * time.Millisecond}}
	plain := &slowTarget{arn: "arn:strata:sqs:us-east-1:plain:webhook", wait: 30 * time.Millisecond}
	q := startQueue(t, layer, wide, plain)
	const keys, each = 64, 4
	if err := q.Add(t.Context(), append(keyed(wide.arn, keys, each, 0), keyed(plain.arn, keys, each, 0)...)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, "the laned target's events", func() bool { n, _ := wide.received(); return n == keys*each })
	took := time.Since(start)
	waitFor(t, "the plain target's events", func() bool { n, _ := plain.received(); return n == keys*each })
	_, wideMost := wide.received()
	_, plainMost := plain.received()
	t.Logf("%d events 30 ms each: 32 lanes took %s, at most %d in flight; the plain target at most %d", keys*each, took.Round(time.Millisecond), wideMost, plainMost)
	if wideMost <= Lanes || wideMost > 32 {
		t.Errorf("the laned target had at most %d deliveries in flight, want more than %d and at most 32", wideMost, Lanes)
	}
	if plainMost > Lanes {
		t.Errorf("the plain target had %d deliveries in flight, more than its %d lanes", plainMost, Lanes)
	}
	wide.checkOrder(t)
	plain.checkOrder(t)
}

// TestAKeyKeepsItsOrderWhenItsTargetsLanesChange: a target replaced (same
// ARN) by one with more lanes while its lanes are busy puts a key in
// another lane; the key's later events wait for the old lanes to end, so
// they still arrive after its earlier ones.
func TestAKeyKeepsItsOrderWhenItsTargetsLanesChange(t *testing.T) {
	layer := erasureLayer(t)
	arn := "arn:strata:replication:us-east-1:dr:s3"
	old := &slowTarget{arn: arn, wait: 100 * time.Millisecond}
	q := startQueue(t, layer, old)
	const keys = 16
	if err := q.Add(t.Context(), keyed(arn, keys, 3, 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first deliveries", func() bool { n, _ := old.received(); return n > 0 })
	wide := slowLaned{&slowTarget{arn: arn, lanes: 32, wait: time.Millisecond}}
	q.SetTargets([]Target{wide})
	if n, _ := old.received(); n >= keys*3-Lanes {
		t.Fatalf("the old target took %d of %d events before it was replaced: its lanes were not busy then", n, keys*3)
	}
	if err := q.Add(t.Context(), keyed(arn, keys, 3, 3)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every event", func() bool {
		a, _ := old.received()
		b, _ := wide.received()
		return a+b == keys*6
	})
	// Every key: what the old target took, then what the new one took,
	// each in order, together 0..5.
	old.mu.Lock()
	wide.mu.Lock()
	defer old.mu.Unlock()
	defer wide.mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("key%02d", k)
		got := append(slices.Clone(old.byKey[key]), wide.byKey[key]...)
		for i, m := range got {
			if want := fmt.Sprintf("%s/%03d", key, i); m != want {
				t.Fatalf("key %s: %v (old target %v, new %v): order lost", key, got, old.byKey[key], wide.byKey[key])
			}
		}
	}
}
