package notify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
)

// DefaultRegion is the region in target ARNs (the S3 front end's).
const DefaultRegion = notifytargets.DefaultRegion

// EnvTargetsFile names the targets file (TargetsFile) a server reads.
const EnvTargetsFile = notifytargets.EnvVar

// Bucket is the reserved bucket the queue keeps its batches in (a name S3
// clients cannot make or see).
const Bucket = ".strata-events"

// Item is one message for one target.
type Item struct {
	Target string `json:"t"`
	// Key is the object key the event is about (for the log).
	Key string `json:"k"`
	Msg []byte `json:"m"`
	// event and config make Msg when it is nil (events stored with a
	// version: their message is made when delivered).
	event  *Event
	config string
}

// message is what the item's target receives.
func (it *Item) message() []byte {
	if it.Msg == nil && it.event != nil {
		return Message(*it.event, it.config)
	}
	return it.Msg
}

// Queue holds events durably until their targets take them. Writes hand
// their events to Add, which returns once they are stored in the object
// layer (the events of writes that arrive together stored as one batch
// object, written as any object is: erasure-coded with write quorum); the
// write is acknowledged only then. Run delivers each batch's items in
// order, a target that fails holding back its later items (so the events
// of one key reach it in order), and deletes a batch once every item is
// delivered. Batches are named by the node that wrote them and their
// time: a node delivers its own at once, including those found after a
// restart, and another node's once they are older than TakeOver and Takes
// says so (that node is gone; an item it had delivered before it went
// arrives again).
type Queue struct {
	store objlayer.Layer
	node  string
	// targets are the targets by ARN (SetTargets replaces the map whole);
	// retired those it replaced, closed by Run once no busy lane holds
	// them (under mu).
	targets atomic.Pointer[map[string]Target]
	retired []Target
	// waiting: the targets are not known yet (HoldUntilTargets): events
	// for targets the queue does not have wait, however old.
	waiting atomic.Bool
	log     *slog.Logger

	// TakeOver is how old another node's batch must be before this node
	// delivers it; Rescan how often the stored batches are listed.
	TakeOver, Rescan time.Duration
	// UnknownGrace is how old an event for a target the queue does not
	// have must be before it is dropped (OnDrop): the pods of a tenant
	// read their targets file each at its own time (when the kubelet
	// syncs the pod, a minute apart at most by default), so a write
	// through one may make an event for a target another has and it has
	// not read yet; the event waits for it.
	UnknownGrace time.Duration
	// OnDrop, when set, is told of each event dropped because its target
	// is not one the server has (a replication remote removed): an error
	// keeps the event, to be dropped again later. Set before Run.
	OnDrop func(ctx context.Context, target string, e Event) error
	// Takes, when set, reports whether this node delivers another node's
	// old batches: not while that node is up, and of the nodes that are,
	// only one should (nil: every node does).
	Takes func(node string) bool

	mu       sync.Mutex
	next     *batch
	flushing bool
	// unstored are batches whose store failed (their writes answered an
	// error after making their changes), in order, unstoredItems their
	// events: storeAgain retries them, at storeNext, storeWait after the
	// last failure (only Run reads those two).
	unstored []*stored
	// storedOK: a batch was stored since storeAgain last looked (the
	// store takes writes again: those waiting are tried at once).
	storedOK      atomic.Bool
	unstoredItems int
	storeNext     time.Time
	storeWait     time.Duration
	seq           uint64
	pending       map[string]*stored // batch name -> what is left of it
	held          int                // items in pending
	// overflow: events were left in the store for want of room (MaxPending).
	overflow bool
	// scanned: the store was listed once since the queue started.
	scanned bool
	// toForget are delivered events stored with versions not yet removed
	// from the store; forgotAt when that was last done (forgetStored).
	toForget []objlayer.EventRef
	forgotAt time.Time
	// Delivered events stored with versions that a listing begun before
	// their removal from the store may still find, which scanEvents skips:
	// goneWaiting while toForget holds them, goneRemoved once removed, and
	// goneScanning those removed before the running listing began (dropped
	// when it ends: two maps swapped, not one swept under the lock).
	goneWaiting, goneRemoved, goneScanning map[string]struct{}
	// oldestOf is each target's oldest undelivered item's time as the
	// last delivery pass found it; heldOf counts each target's undelivered
	// items (TargetBacklog), a target's *atomic.Int64 by its ARN, known to
	// the queue or not (one removed and added again counts on).
	oldestOf map[string]time.Time
	heldOf   sync.Map
	// bucketMade: Bucket is known to exist.
	bucketMade atomic.Bool
	kick       chan struct{}
	// retry is when each lane that failed (or stopped at an event whose
	// target's grace runs) is started again, and how long it waited the
	// last time (under mu): a key that keeps failing (a version that
	// cannot be read) holds its own lane only, and the other lanes and
	// targets are delivered to meanwhile. Only the lane itself sets or
	// clears its entry, as it never runs twice at once.
	retry map[laneKey]*retryState
	// busy are the lanes delivering now (under mu). A lane runs on its own
	// goroutine, apart from the pass that started it: a target that hangs,
	// or a replication copy of a large version, holds its own lane and no
	// other target's, and a pass starts no lane that is busy (a key's
	// events stay in order). lanes counts them, for Run's end.
	busy  map[laneKey]*laneRun
	lanes sync.WaitGroup
	// ended is closed when Run has returned (Wait).
	ended chan struct{}
	// passes counts delivery passes (tests).
	passes atomic.Int64
	// reopened are ARNs SetTargets gave a new target for (under mu): their
	// lanes' retry times are dropped.
	reopened []string

	stats Stats
}

type retryState struct {
	at      time.Time
	backoff time.Duration
}

// laneKey is one lane of one target.
type laneKey struct {
	target string
	lane   uint32
}

// laneRun is a lane delivering: its target as the pass that started it
// had it (closeRetired leaves that open until the lane ends) and the time
// of its oldest undelivered item (the backlog's age). until is set when
// the lane stopped at an event for a target the queue does not have,
// younger than UnknownGrace: when that grace ends.
type laneRun struct {
	t      Target
	lanes  uint32 // lanesOf(t) when the lane started
	oldest atomic.Int64
	until  time.Time
}

// Stats count the queue's work.
type Stats struct {
	Queued, Delivered, Failed atomic.Int64
	// Backlog is the items stored and not yet delivered; Oldest the time
	// of the oldest batch holding one (Unix nanoseconds, 0 for none).
	Backlog, Oldest atomic.Int64
}

type batch struct {
	items []Item
	done  chan struct{}
	err   error
}

// stored is a batch in the store, or one write's events stored with its
// version (ref set), and which of its items are delivered.
type stored struct {
	name  string
	at    int64
	items []Item
	// delivered[i] is written by the lane that holds item i while it is
	// busy, and read by passes only when it is not; left counts the items
	// not delivered.
	delivered []bool
	left      atomic.Int32
	ref       *objlayer.EventRef
}

func newStored(name string, at int64, items []Item, ref *objlayer.EventRef) *stored {
	s := &stored{name: name, at: at, items: items, delivered: make([]bool, len(items)), ref: ref}
	s.left.Store(int32(len(items)))
	return s
}

// MaxPending bounds the undelivered events a queue holds in memory (a
// target down for long): events stored beyond it wait in the store, and
// a later listing takes them once those before are delivered.
const MaxPending = 100_000

// NewQueue is a queue over store for node (a name no other node of the
// tenant has, stable across restarts) delivering to targets.
func NewQueue(store objlayer.Layer, node string, targets []Target, log *slog.Logger) *Queue {
	q := &Queue{store: store, node: strings.ReplaceAll(node, "/", "_"), log: log,
		TakeOver: time.Minute, Rescan: 15 * time.Second, UnknownGrace: 2 * time.Minute, retry: map[laneKey]*retryState{}, busy: map[laneKey]*laneRun{}, pending: map[string]*stored{}, goneWaiting: map[string]struct{}{}, goneRemoved: map[string]struct{}{}, kick: make(chan struct{}, 1), ended: make(chan struct{})}
	q.targets.Store(byARN(targets))
	return q
}

func byARN(targets []Target) *map[string]Target {
	m := make(map[string]Target, len(targets))
	for _, t := range targets {
		m[t.ARN()] = t
	}
	return &m
}

// SetTargets makes targets the queue's, as a targets file read again
// lists them. Events for a target no longer among them are dropped at
// their next delivery, as after a restart without it (OnDrop first); a
// target no longer among them (an entry removed, or changed and opened
// again) is closed once no lane delivering to it is busy.
// A target passed again is kept as it is.
func (q *Queue) SetTargets(targets []Target) {
	next := byARN(targets)
	kept := make(map[Target]bool, len(targets))
	for _, t := range targets {
		kept[t] = true
	}
	q.mu.Lock()
	old := *q.targets.Load()
	for _, t := range old {
		if !kept[t] {
			q.retired = append(q.retired, t)
		}
	}
	for arn, t := range *next {
		if old[arn] != t {
			q.reopened = append(q.reopened, arn)
		}
	}
	q.targets.Store(next)
	q.waiting.Store(false)
	q.mu.Unlock()
	q.wake()
}

// HoldUntilTargets makes events for targets the queue does not have wait,
// however old, until SetTargets gives the targets (the targets file is
// not there yet: not knowing a target is not its removal).
func (q *Queue) HoldUntilTargets() { q.waiting.Store(true) }

// closeRetired closes the targets SetTargets replaced that no busy lane
// holds; Run calls it after each pass (a lane that ends wakes it).
func (q *Queue) closeRetired() {
	q.mu.Lock()
	var closing, kept []Target
	for _, t := range q.retired {
		if q.inUseLocked(t) {
			kept = append(kept, t)
		} else {
			closing = append(closing, t)
		}
	}
	q.retired = kept
	q.mu.Unlock()
	for _, t := range closing {
		t.Close()
	}
}

// inUseLocked reports whether a busy lane delivers to t; q.mu is held.
func (q *Queue) inUseLocked(t Target) bool {
	for _, run := range q.busy {
		if run.t == t {
			return true
		}
	}
	return false
}

// Known reports whether arn is one of the queue's targets.
func (q *Queue) Known(arn string) bool { _, ok := (*q.targets.Load())[arn]; return ok }

// heldFor is target's count of undelivered items.
func (q *Queue) heldFor(target string) *atomic.Int64 {
	if c, ok := q.heldOf.Load(target); ok {
		return c.(*atomic.Int64)
	}
	c, _ := q.heldOf.LoadOrStore(target, &atomic.Int64{})
	return c.(*atomic.Int64)
}

// Stats returns the queue's counters.
func (q *Queue) Stats() *Stats { return &q.stats }

// Snapshot is the queue's counters for the metrics.
func (q *Queue) Snapshot() metrics.Notifications {
	n := metrics.Notifications{Queued: q.stats.Queued.Load(), Delivered: q.stats.Delivered.Load(), Failed: q.stats.Failed.Load(),
		Backlog: q.stats.Backlog.Load()}
	if at := q.stats.Oldest.Load(); at != 0 {
		n.Oldest = time.Unix(0, at)
	}
	return n
}

// TargetBacklog is one target's undelivered events.
type TargetBacklog struct {
	Events int64
	// Oldest is the time the oldest of them was stored (zero: none).
	Oldest time.Time
}

// Backlog returns target's undelivered events held in memory (events
// waiting in the store beyond MaxPending not counted), and the time of
// the oldest as the last delivery pass found it.
func (q *Queue) Backlog(target string) TargetBacklog {
	var b TargetBacklog
	b.Events = q.heldFor(target).Load()
	if b.Events > 0 {
		q.mu.Lock()
		b.Oldest = q.oldestOf[target]
		q.mu.Unlock()
	}
	return b
}

// Add stores items durably and returns once they are (or the store
// failed: the caller answers an error, and the client's retry writes and
// queues again).
//
// It is the way for events of a layer that cannot store them with their
// versions, and of writes that do not (see Encode).
func (q *Queue) Add(ctx context.Context, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	q.mu.Lock()
	if q.next == nil {
		q.next = &batch{done: make(chan struct{})}
	}
	b := q.next
	b.items = append(b.items, items...)
	if !q.flushing {
		q.flushing = true
		go q.flush()
	}
	q.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush stores the batches collected while the one before was stored.
func (q *Queue) flush() {
	for {
		q.mu.Lock()
		b := q.next
		q.next = nil
		if b == nil {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		at := time.Now().UnixNano()
		name := q.batchNameLocked(at)
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b.err = q.put(ctx, name, b.items)
		cancel()
		s := newStored(name, at, b.items, nil)
		switch {
		case b.err == nil:
			q.stats.Queued.Add(int64(len(b.items)))
			q.storedOK.Store(true)
			q.remember(s)
		case q.keepUnstored(s):
			// The writes answer an error, but their changes were made:
			// Run stores the events again until the store takes them.
			// A client's retry of a delete makes a second delete marker,
			// and the first must reach a replica too.
			q.log.Warn("notifications: storing events failed; their writes answer an error, and the events are stored again", "events", len(b.items), "error", b.err)
			b.err = fmt.Errorf("%w: %w", ErrKept, b.err)
		default:
			q.log.Error("notifications: storing events failed and too many wait to be stored again; these are dropped", "events", len(b.items), "error", b.err)
		}
		q.wake()
		close(b.done)
	}
}

// ErrKept wraps the error of an Add whose events could not be stored:
// the queue keeps them and stores them again until the store takes them
// (while its node runs), so the caller need not add them again.
var ErrKept = errors.New("notifications: the events are kept, to be stored again")

// batchNameLocked names a new batch stored at at; q.mu is held.
func (q *Queue) batchNameLocked(at int64) string {
	q.seq++
	return fmt.Sprintf("q/%s/%020d-%08d", q.node, at, q.seq)
}

// keepUnstored keeps s, whose store failed, for storeAgain, counted in
// the backlog, unless MaxPending events wait so already. It reports
// whether s was kept.
func (q *Queue) keepUnstored(s *stored) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.unstoredItems+len(s.items) > MaxPending {
		return false
	}
	q.unstored = append(q.unstored, s)
	q.unstoredItems += len(s.items)
	q.countHeldLocked(s.items, 1)
	return true
}

// countHeldLocked adds d for each of items to the backlog and to its
// target's; q.mu is held.
func (q *Queue) countHeldLocked(items []Item, d int64) {
	q.stats.Backlog.Add(d * int64(len(items)))
	for _, it := range items {
		q.heldFor(it.Target).Add(d)
	}
}

// Encode is e, for rules, as the object layer stores it with the version
// the write made (objlayer.PutOptions.Events): with this node's name and
// the time, so another node can deliver it when this one is gone.
func (q *Queue) Encode(e Event, rules []*Rule) []byte {
	w := withVersion{node: q.node, at: time.Now().UnixNano(), event: e, rules: targetsOf(rules)}
	return w.marshal()
}

// Committed hands the queue e, for rules, which the object layer stored
// with the version the write made (ref names it): delivered from memory,
// then removed from the store.
//
// A listing may have found them on some of the write's drives, and
// delivered and removed them, before a slower drive committed them: that
// drive's copy would stay until a listing took it as left over and sent
// it again. Now that the write is done, such events are removed once more.
func (q *Queue) Committed(ref objlayer.EventRef, e Event, rules []*Rule) {
	w := withVersion{event: e, rules: targetsOf(rules)}
	items := w.items()
	q.stats.Queued.Add(int64(len(items)))
	s := newStored(eventsName(ref.ID), time.Now().UnixNano(), items, &ref)
	if q.remember(s) {
		q.mu.Lock()
		q.forgetLaterLocked(ref)
		q.mu.Unlock()
	}
	q.wake()
}

// eventsName is what the queue calls a write's events stored with its
// version.
func eventsName(id [16]byte) string { return "e/" + hex.EncodeToString(id[:]) }

func (q *Queue) put(ctx context.Context, name string, items []Item) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range items {
		if err := enc.Encode(&items[i]); err != nil {
			return err
		}
	}
	// The object layer leaves checking that a bucket exists to its
	// caller: it is made once, before the first batch.
	if !q.bucketMade.Load() {
		if err := objlayer.EnsureBucket(ctx, q.store, Bucket); err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		q.bucketMade.Store(true)
	}
	_, err := q.store.PutObject(ctx, Bucket, name, bytes.NewReader(buf.Bytes()), int64(buf.Len()),
		objlayer.PutOptions{Meta: map[string]string{objlayer.MetaContentType: "application/x-ndjson"}})
	return err
}

// remember keeps s to deliver, unless it is known, or delivered already
// (a write's events a listing found and delivered before the write handed
// them over: Committed), or s is stored with a version and the queue
// holds MaxPending events already (it waits in the store: overflow). It
// reports whether s was delivered already.
func (q *Queue) remember(s *stored) (delivered bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[s.name]; ok {
		return false
	}
	if s.ref != nil && q.deliveredLocked(s.name) {
		return true
	}
	if s.ref != nil && q.held+len(s.items) > MaxPending {
		q.overflow = true
		return false
	}
	q.pending[s.name] = s
	q.held += len(s.items)
	q.countHeldLocked(s.items, 1)
	return false
}

// deliveredLocked reports whether the events stored with a version under
// name were delivered (removed from the store or about to be); q.mu is
// held.
func (q *Queue) deliveredLocked(name string) bool {
	for _, gone := range []map[string]struct{}{q.goneWaiting, q.goneRemoved, q.goneScanning} {
		if _, ok := gone[name]; ok {
			return true
		}
	}
	return false
}

// forget drops a delivered s.
func (q *Queue) forget(s *stored) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[s.name]; ok {
		delete(q.pending, s.name)
		q.held -= len(s.items)
	}
}

func (q *Queue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends.
func (q *Queue) Run(ctx context.Context) {
	defer close(q.ended)
	lastScan := time.Time{}
	for {
		if time.Since(lastScan) >= q.Rescan {
			if err := q.scan(ctx); err != nil && ctx.Err() == nil {
				q.log.Warn("notifications: listing stored events", "error", err)
			} else {
				lastScan = time.Now()
			}
		}
		storeIn := q.storeAgain(ctx)
		passStart := time.Now()
		retryAt, busy := q.deliver(ctx)
		q.closeRetired()
		work := time.Since(passStart)
		wait := q.Rescan
		if !retryAt.IsZero() {
			wait = min(wait, max(time.Until(retryAt), time.Millisecond))
		}
		if storeIn > 0 {
			wait = min(wait, storeIn)
		}
		q.mu.Lock()
		if len(q.toForget) > 0 {
			wait = min(wait, forgetEvery)
		}
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			q.stop()
			return
		case <-q.kick:
			if busy || !retryAt.IsZero() {
				// A pass reads the whole backlog, that of a target
				// waiting for its retry or held by a busy lane too: while
				// one is, passes come no closer than 8 times the pass's
				// own work (20 ms at least while one waits for a retry,
				// a second at most), an eighth of a core at most.
				floor := time.Duration(0)
				if !retryAt.IsZero() {
					floor = 20 * time.Millisecond
				}
				if d := min(time.Until(passStart.Add(max(floor, 8*work))), time.Second); d > 0 {
					pause := time.NewTimer(d)
					select {
					case <-pause.C:
					case <-t.C: // a retry, a grace or a removal is due
					case <-ctx.Done():
					}
					pause.Stop()
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// Wait waits, up to timeout, for Run to return after its context ended:
// what its lanes delivered has left the store then, and none uses the
// object layer any more (the server closes its drives after it). It
// reports whether Run returned.
func (q *Queue) Wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-q.ended:
		return true
	case <-t.C:
		return false
	}
}

// stop ends Run: the lanes end with its context (a few seconds at most
// are waited for), and what they delivered leaves the store before the
// node stops.
func (q *Queue) stop() {
	q.mu.Lock()
	if n := q.unstoredItems; n > 0 {
		q.log.Error("notifications: stopping with events never stored; they are lost", "events", n)
	}
	q.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		q.lanes.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		q.log.Warn("notifications: a delivery did not end with the server; what it delivered may be sent again")
	}
	fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q.settle(fctx, q.pendingByTime())
	q.forgetStored(fctx, true)
	q.closeRetired()
}

// storeAgain stores the batches whose first store failed, oldest first,
// under new names (another node could take one under its old name, as
// old enough, and deliver it too), each kept at its first time for the
// order of delivery, and hands each one stored to delivery. It stops at
// the first that fails again and returns how long until it tries again
// (200 ms doubling to 10 s, or at once when another batch was stored
// meanwhile; 0 when none waits).
func (q *Queue) storeAgain(ctx context.Context) time.Duration {
	q.mu.Lock()
	waiting := len(q.unstored) > 0
	q.mu.Unlock()
	if !waiting {
		return 0
	}
	if wait := time.Until(q.storeNext); wait > 0 && !q.storedOK.Swap(false) {
		return wait
	}
	q.mu.Lock()
	list := q.unstored
	q.unstored = nil
	q.mu.Unlock()
	for i, s := range list {
		q.mu.Lock()
		name := q.batchNameLocked(time.Now().UnixNano())
		q.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := q.put(sctx, name, s.items)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				q.log.Warn("notifications: storing events again failed; retrying", "events", len(s.items), "error", err)
			}
			q.storeWait = min(max(2*q.storeWait, 200*time.Millisecond), 10*time.Second)
			q.storeNext = time.Now().Add(q.storeWait)
			q.mu.Lock()
			q.unstored = append(list[i:], q.unstored...)
			q.mu.Unlock()
			return q.storeWait
		}
		s.name = name
		q.mu.Lock()
		q.unstoredItems -= len(s.items)
		q.countHeldLocked(s.items, -1)
		q.mu.Unlock()
		q.stats.Queued.Add(int64(len(s.items)))
		q.remember(s)
	}
	q.storeWait = 0
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.unstored) > 0 {
		return time.Millisecond // kept while these were stored
	}
	return 0
}

// scan lists the stored batches and events: this node's are taken at
// once, another node's once older than TakeOver.
func (q *Queue) scan(ctx context.Context) error {
	if err := q.scanEvents(ctx); err != nil {
		return err
	}
	marker := ""
	for {
		res, err := q.store.ListObjects(ctx, Bucket, "q/", marker, "", 1000)
		if errors.Is(err, objlayer.ErrBucketNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, o := range res.Objects {
			node, at, ok := parseName(o.Name)
			if !ok {
				continue
			}
			q.mu.Lock()
			_, known := q.pending[o.Name]
			q.mu.Unlock()
			if known || node != q.node && (time.Since(time.Unix(0, at)) < q.TakeOver || q.Takes != nil && !q.Takes(node)) {
				continue
			}
			items, err := q.read(ctx, o.Name)
			if errors.Is(err, objlayer.ErrObjectNotFound) {
				continue // delivered meanwhile
			}
			if err != nil {
				return err
			}
			if node != q.node {
				q.log.Info("notifications: delivering another node's events", "batch", o.Name, "events", len(items))
			}
			q.remember(newStored(o.Name, at, items, nil))
		}
		if !res.IsTruncated {
			return nil
		}
		marker = res.NextMarker
	}
}

// scanEvents lists the events stored with versions: this node's found
// until a listing has seen every drive (after a restart), or left in the
// store for want of room, and another node's as batches are.
func (q *Queue) scanEvents(ctx context.Context) error {
	es, ok := q.store.(objlayer.EventStore)
	if !ok {
		return nil
	}
	q.mu.Lock()
	first, overflow := !q.scanned, q.overflow
	q.overflow = false
	q.goneScanning, q.goneRemoved = q.goneRemoved, map[string]struct{}{}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.goneScanning = nil
		q.mu.Unlock()
	}()
	takes := map[string]bool{}
	err := es.ListEvents(ctx, func(id [16]byte, b []byte) error {
		name := eventsName(id)
		q.mu.Lock()
		_, known := q.pending[name]
		delivered := q.deliveredLocked(name)
		full := q.held >= MaxPending
		q.mu.Unlock()
		if known || full {
			return nil
		}
		w, err := unmarshalWithVersion(b)
		if err != nil {
			q.log.Warn("notifications: stored events that do not decode are dropped", "id", name, "error", err)
			return nil
		}
		if delivered {
			// A copy a drive committed after the removal reached it (the
			// write answered at quorum while that drive still committed),
			// or one a listing begun before the removal still sees:
			// removed (again), not delivered again.
			q.mu.Lock()
			q.forgetLaterLocked(objlayer.EventRef{Bucket: w.event.Bucket, Object: w.event.Key, ID: id})
			q.mu.Unlock()
			return nil
		}
		age := time.Since(time.Unix(0, w.at))
		if w.node == q.node {
			// Fresh ones are in memory, or were just delivered.
			leftOver := overflow && age >= 10*time.Second
			if !first && !leftOver && age < q.TakeOver {
				return nil
			}
		} else {
			if age < q.TakeOver {
				return nil
			}
			t, seen := takes[w.node]
			if !seen {
				t = q.Takes == nil || q.Takes(w.node)
				takes[w.node] = t
			}
			if !t {
				return nil
			}
			q.log.Info("notifications: delivering another node's events", "node", w.node, "object", w.event.Key, "events", len(w.rules))
		}
		items := w.items()
		q.remember(newStored(name, w.at, items, &objlayer.EventRef{Bucket: w.event.Bucket, Object: w.event.Key, ID: id}))
		return nil
	})
	switch {
	case err == nil:
		q.mu.Lock()
		q.scanned = true
		q.mu.Unlock()
	case errors.Is(err, objlayer.ErrPartialListing):
		// Drives left out (a peer not yet known after a restart, a drive
		// offline): this node's events there are not all in memory, so
		// listings go on taking its own of any age until one sees all.
		return nil
	}
	return err
}

func parseName(name string) (node string, at int64, ok bool) {
	rest, found := strings.CutPrefix(name, "q/")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", 0, false
	}
	if _, err := fmt.Sscanf(rest[i+1:], "%020d-", &at); err != nil {
		return "", 0, false
	}
	return rest[:i], at, true
}

func (q *Queue) read(ctx context.Context, name string) ([]Item, error) {
	b, err := objlayer.ReadObject(ctx, q.store, Bucket, name)
	if err != nil {
		return nil, err
	}
	var items []Item
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var it Item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			return nil, fmt.Errorf("notifications: batch %s: %w", name, err)
		}
		items = append(items, it)
	}
	return items, sc.Err()
}

// Lanes is how many deliveries run at once per target unless it says
// otherwise (Laned): a key's events always take the same lane, one after
// the other, so they arrive in order while other keys' go beside them. A
// Batcher target has one lane, whose batches hold many keys' events in
// flight at once.
const Lanes = 8

// lanesOf is how many lanes t's events are spread over (t nil: an unknown
// target's, held for its grace).
func lanesOf(t Target) uint32 {
	if _, ok := t.(Batcher); ok {
		return 1
	}
	if l, ok := t.(Laned); ok {
		return uint32(max(1, l.Lanes()))
	}
	return Lanes
}

// ref is one undelivered item of a pending batch.
type ref struct {
	s *stored
	i int
}

// pendingByTime is the pending batches, oldest first.
func (q *Queue) pendingByTime() []*stored {
	q.mu.Lock()
	batches := make([]*stored, 0, len(q.pending))
	for _, s := range q.pending {
		batches = append(batches, s)
	}
	q.mu.Unlock()
	sort.Slice(batches, func(i, j int) bool {
		if batches[i].at != batches[j].at {
			return batches[i].at < batches[j].at
		}
		return batches[i].name < batches[j].name
	})
	return batches
}

// deliver makes one pass over the pending batches in order (by time):
// each target's items go out on lanesOf(target) lanes chosen by key, each lane in
// order and stopping at its first failure (the rest of that lane waits
// for a later pass). A lane runs on its own (runLane): the pass starts
// the lanes that are not busy and does not wait for them; one that ends
// wakes Run for the next pass. Batches with every item delivered are
// deleted (settle).
//
// A lane that failed is not started again before its retry time (200 ms
// doubling to 10 s while it fails); the earliest of those is retryAt.
// busy reports lanes still delivering.
func (q *Queue) deliver(ctx context.Context) (retryAt time.Time, busy bool) {
	q.passes.Add(1)
	batches := q.pendingByTime()
	// The pass starts lanes to the targets as they are when it begins
	// (closeRetired leaves a target open while a lane holds it); a target
	// opened again is tried at once (its lanes' retries dropped), each
	// lane once the old target's is no longer busy.
	q.mu.Lock()
	targets := *q.targets.Load()
	for k := range q.retry {
		if slices.Contains(q.reopened, k.target) {
			delete(q.retry, k)
		}
	}
	q.reopened = nil
	waiting := waitingKeysLocked(q.unstored)
	running := maps.Clone(q.busy)
	q.mu.Unlock()
	// A target replaced by one with another number of lanes (one that
	// batches where the old did not, one added or removed) puts a key in
	// another lane: its events wait until the old lanes have ended. Else
	// a key keeps its lane, and the busy ones are skipped below.
	replaced := map[string]bool{}
	for k, run := range running {
		if run.lanes != lanesOf(targets[k.target]) {
			replaced[k.target] = true
		}
	}
	lanes := map[laneKey][]ref{}
	for _, s := range batches {
		if s.left.Load() == 0 {
			continue
		}
		for i, it := range s.items {
			if at, ok := waiting[keyOf(it)]; ok && at < s.at || replaced[it.Target] {
				continue // an earlier event of its key waits to be stored again, or its old lanes to end
			}
			k := laneKey{it.Target, laneOf(it.Key, lanesOf(targets[it.Target]))}
			if running[k] != nil {
				continue // its lane is busy (and writes delivered[i]); a later pass takes it
			}
			if !s.delivered[i] {
				lanes[k] = append(lanes[k], ref{s, i})
			}
		}
	}
	oldestOf := map[string]time.Time{}
	older := func(target string, at int64) {
		if o := oldestOf[target]; o.IsZero() || at < o.UnixNano() {
			oldestOf[target] = time.Unix(0, at)
		}
	}
	for k, refs := range lanes {
		older(k.target, refs[0].s.at)
	}
	for k, run := range running {
		if at := run.oldest.Load(); at != 0 {
			older(k.target, at)
		}
	}
	for k, at := range waiting { // older than the events they hold back
		older(k.target, at)
	}
	now := time.Now()
	q.mu.Lock()
	q.oldestOf = oldestOf
	for k, refs := range lanes {
		if r := q.retry[k]; r != nil && now.Before(r.at) {
			continue
		}
		run := &laneRun{t: targets[k.target], lanes: lanesOf(targets[k.target])}
		run.oldest.Store(refs[0].s.at)
		q.busy[k] = run
		q.lanes.Add(1)
		go q.runLane(ctx, k, run, refs)
	}
	for k, r := range q.retry {
		if _, left := lanes[k]; !left && running[k] == nil && q.busy[k] == nil {
			// Nothing left for it (a lane busy when the pass began,
			// skipped above, may have ended and set its retry since).
			delete(q.retry, k)
			continue
		}
		// A busy lane's entry is its last failure's, past: the lane sets
		// it again when it ends.
		if q.busy[k] == nil && (retryAt.IsZero() || r.at.Before(retryAt)) {
			retryAt = r.at
		}
	}
	busy = len(q.busy) > 0
	q.mu.Unlock()
	q.settle(ctx, batches)
	return retryAt, busy
}

// runLane delivers one lane's refs (deliverLane), then sets or clears the
// lane's retry and wakes Run when the lane changed something or its
// target did meanwhile.
func (q *Queue) runLane(ctx context.Context, k laneKey, run *laneRun, refs []ref) {
	defer q.lanes.Done()
	ok, done := q.deliverLane(ctx, run.t, refs, run)
	end := time.Now()
	q.mu.Lock()
	delete(q.busy, k)
	changed := (*q.targets.Load())[k.target] != run.t
	if changed {
		// The target's next lane k may be another target's (another
		// number of lanes): it starts without this one's backoff.
		delete(q.retry, k)
	} else {
		r := q.retry[k]
		switch {
		case !ok:
			if r == nil {
				r = &retryState{}
				q.retry[k] = r
			}
			r.backoff = min(max(2*r.backoff, 200*time.Millisecond), 10*time.Second)
			r.at = end.Add(r.backoff)
		case !run.until.IsZero():
			q.retry[k] = &retryState{at: run.until} // its first event's grace
		default:
			delete(q.retry, k)
		}
	}
	q.mu.Unlock()
	if !ok || done > 0 || !run.until.IsZero() || changed {
		q.wake()
	}
}

// settle deletes the batches of batches whose items are all delivered,
// and hands delivered events stored with versions to forgetStored; it
// sets Stats.Oldest.
func (q *Queue) settle(ctx context.Context, batches []*stored) {
	oldest := int64(0)
	var withVersions []*stored
	for _, s := range batches {
		switch {
		case s.left.Load() > 0:
			if oldest == 0 {
				oldest = s.at
			}
		case s.ref != nil:
			withVersions = append(withVersions, s)
		default:
			if _, err := q.store.DeleteObject(ctx, Bucket, s.name, nil, objlayer.DeleteUnversioned); err != nil {
				q.log.Warn("notifications: removing a delivered batch", "batch", s.name, "error", err)
				continue // delivered; removed at the next pass (and its items may be sent again after a restart)
			}
			q.forget(s)
		}
	}
	// Delivered events stored with versions leave memory now and the
	// store a little later, many at a time (forgetStored).
	for _, s := range withVersions {
		q.forget(s)
	}
	q.mu.Lock()
	for _, s := range withVersions {
		q.forgetLaterLocked(*s.ref)
	}
	q.mu.Unlock()
	q.forgetStored(ctx, false)
	q.mu.Lock()
	if len(q.unstored) > 0 && (oldest == 0 || q.unstored[0].at < oldest) {
		oldest = q.unstored[0].at
	}
	q.mu.Unlock()
	q.stats.Oldest.Store(oldest)
}

// targetKey is a target and an object key: the events whose order the
// queue keeps.
type targetKey struct{ target, key string }

func keyOf(it Item) targetKey { return targetKey{it.Target, it.Key} }

// waitingKeysLocked maps each target and key with events waiting to be
// stored again (unstored) to the time of the earliest: a later event of
// that key is not delivered before it. q.mu is held.
func waitingKeysLocked(unstored []*stored) map[targetKey]int64 {
	if len(unstored) == 0 {
		return nil
	}
	at := map[targetKey]int64{}
	for _, s := range unstored {
		for _, it := range s.items {
			if a, ok := at[keyOf(it)]; !ok || s.at < a {
				at[keyOf(it)] = s.at
			}
		}
	}
	return at
}

// forgetLaterLocked queues delivered events stored with a version for
// removal from the store (forgetStored); a listing meanwhile skips them.
// q.mu is held.
func (q *Queue) forgetLaterLocked(ref objlayer.EventRef) {
	q.toForget = append(q.toForget, ref)
	q.goneWaiting[eventsName(ref.ID)] = struct{}{}
}

// forgetEvery is how long delivered events stored with versions may wait
// to be removed from the store, gathered into one removal per drive: a
// crash in that time makes them delivered again.
const forgetEvery = 20 * time.Millisecond

// forgetStored removes the delivered events stored with versions from the
// store, when forgetEvery has passed since the last time, or now. A drive
// that missed the removal keeps them until a later listing finds them:
// they are sent again (at least once).
func (q *Queue) forgetStored(ctx context.Context, now bool) {
	q.mu.Lock()
	refs := q.toForget
	if len(refs) == 0 || !now && len(refs) < 4096 && time.Since(q.forgotAt) < forgetEvery {
		q.mu.Unlock()
		return
	}
	q.toForget, q.forgotAt = nil, time.Now()
	q.mu.Unlock()
	err := q.store.(objlayer.EventStore).ForgetEvents(ctx, refs)
	if err != nil {
		q.log.Warn("notifications: removing delivered events", "events", len(refs), "error", err)
	}
	q.mu.Lock()
	for _, r := range refs {
		name := eventsName(r.ID)
		delete(q.goneWaiting, name)
		if err == nil {
			// Else left on some drives: a later listing sends them again.
			q.goneRemoved[name] = struct{}{}
		}
	}
	q.mu.Unlock()
}

// batchLimit bounds the messages a Batcher target has in flight from one
// lane.
const batchLimit = 256

// deliverLane sends one lane's items in order until one fails; it
// reports whether none failed, and how many it delivered or dropped. t is
// nil for a target the server does not have: its items wait (the targets
// are not known yet, or for UnknownGrace), then are dropped. A Batcher
// target takes them in batches of distinct keys. run.oldest follows the
// lane's next item.
func (q *Queue) deliverLane(ctx context.Context, t Target, refs []ref, run *laneRun) (ok bool, done int) {
	if b, ok := t.(Batcher); ok {
		return q.deliverBatches(ctx, t, b, refs, run)
	}
	for _, r := range refs {
		it := r.s.items[r.i]
		if ctx.Err() != nil {
			return true, done // stopping: not a failure
		}
		run.oldest.Store(r.s.at)
		if t == nil {
			if q.waiting.Load() || q.Known(it.Target) {
				// Waits for its target, and the lane's later events
				// behind it (not a failure); or the target came meanwhile
				// (runLane wakes Run for it).
				return true, done
			}
			if end := time.Unix(0, r.s.at).Add(q.UnknownGrace); time.Now().Before(end) {
				run.until = end
				return true, done
			}
			if q.OnDrop != nil && it.event != nil {
				if err := q.OnDrop(ctx, it.Target, *it.event); err != nil {
					q.log.Warn("notifications: an event for a target this server does not have is kept for now", "target", it.Target, "key", it.Key, "error", err)
					return false, done
				}
			}
			q.log.Warn("notifications: dropping an event for a target this server does not have", "target", it.Target, "key", it.Key)
		} else {
			dctx, cancel := context.WithTimeout(ctx, deliveryTimeout(t))
			var err error
			if et, ok := t.(EventTarget); ok && it.event != nil {
				err = et.DeliverEvent(dctx, *it.event, it.config)
			} else {
				err = t.Deliver(dctx, it.message())
			}
			cancel()
			if err != nil {
				q.stats.Failed.Add(1)
				q.log.Warn("notifications: delivery failed; retrying", "target", it.Target, "key", it.Key, "error", err)
				return false, done
			}
			q.stats.Delivered.Add(1)
		}
		q.done(r)
		done++
	}
	return true, done
}

// EventTarget is a Target that takes an event stored with its version as
// the queue holds it, rather than as its message (a replication remote
// reads the event's fields: making the JSON and parsing it back is work
// for nothing). Events the queue read back from a batch object have only
// their message, and go to Deliver.
type EventTarget interface {
	DeliverEvent(ctx context.Context, e Event, configID string) error
}

// Timeouter is a Target whose deliveries may take longer than the 15
// seconds a message has (a replication remote copying a large object):
// it bounds them itself, within DeliveryTimeout.
type Timeouter interface {
	DeliveryTimeout() time.Duration
}

func deliveryTimeout(t Target) time.Duration {
	if tt, ok := t.(Timeouter); ok {
		return tt.DeliveryTimeout()
	}
	return 15 * time.Second
}

// done marks r delivered.
func (q *Queue) done(r ref) {
	r.s.delivered[r.i] = true
	r.s.left.Add(-1)
	q.stats.Backlog.Add(-1)
	q.heldFor(r.s.items[r.i].Target).Add(-1)
}

// deliverBatches is deliverLane for a Batcher: each batch is the lane's
// next items up to the first whose key is in it already, so a key's
// events go out one batch after the other, in order. Items after a failed
// one in its batch are of other keys and count as delivered when the
// target took them; the lane stops after that batch.
func (q *Queue) deliverBatches(ctx context.Context, t Target, b Batcher, refs []ref, run *laneRun) (ok bool, done int) {
	keys := map[string]bool{}
	for len(refs) > 0 {
		if ctx.Err() != nil {
			return true, done // stopping: not a failure
		}
		run.oldest.Store(refs[0].s.at)
		clear(keys)
		n := 0
		for n < len(refs) && n < batchLimit && !keys[refs[n].s.items[refs[n].i].Key] {
			keys[refs[n].s.items[refs[n].i].Key] = true
			n++
		}
		msgs, keyOf := make([][]byte, n), make([]string, n)
		for i, r := range refs[:n] {
			msgs[i], keyOf[i] = r.s.items[r.i].message(), r.s.items[r.i].Key
		}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		errs := b.DeliverBatch(dctx, keyOf, msgs)
		cancel()
		failed := false
		for i, r := range refs[:n] {
			if errs[i] != nil {
				if !failed {
					it := r.s.items[r.i]
					q.log.Warn("notifications: delivery failed; retrying", "target", it.Target, "key", it.Key, "error", errs[i])
				}
				q.stats.Failed.Add(1)
				failed = true
				continue
			}
			q.stats.Delivered.Add(1)
			q.done(r)
			done++
		}
		if failed {
			return false, done
		}
		refs = refs[n:]
	}
	return true, done
}

// laneOf is key's lane of n.
func laneOf(key string, n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32() % n
}
