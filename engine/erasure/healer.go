package erasure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/strata-storage/strata/engine/objlayer"
	"golang.org/x/time/rate"
)

// Healer repairs a pool in the background, from three sources:
//
//   - a queue of objects that a read found damaged or a write missed a
//     drive of (heal on read, heal of partial writes);
//   - whole drives that came back empty or were replaced (every object of
//     their set is healed onto them);
//   - a slow scan of every object, reading every shard (bitrot).
//
// All of it runs at a bounded rate so healing never starves clients.
type Healer struct {
	pool *Pool
	log  *slog.Logger
	opts HealerOptions

	queue   chan healItem
	mu      sync.Mutex
	pending map[healItem]bool
	// healing are the queued objects being healed now.
	healing map[healItem]bool
	drives  map[drivePos]*DriveHeal
	// behind has, per set, the positions of the drives that missed objects
	// deferred since the set's backlog was last empty (Behind).
	behind map[int]uint32
	// deferred are objects healed while some of their drives could not be
	// reached, with those drives' positions; they are healed again when
	// one of those drives is back.
	deferred map[healItem]uint32
	// outstanding counts objects queued, being healed, or on their way
	// from deferred back to the queue: Status reports it as the queue's
	// length, so "queue empty, nothing deferred" means the work is done,
	// not that the last object is being healed right now.
	outstanding atomic.Int64

	limiter *rate.Limiter
	stats   healStats
	// objectLocks keep two heals of one object (a queued one and a drive
	// rebuild) from running at once.
	objectLocks [64]sync.Mutex
}

// HealerOptions tune the healer.
type HealerOptions struct {
	// QueueSize bounds the heal queue; objects beyond it are left to the
	// scanner (and counted as dropped).
	QueueSize int
	// BytesPerSecond bounds the shard bytes the scanner and drive heals read.
	BytesPerSecond float64
	// ScanInterval is the pause between two integrity scans of everything.
	ScanInterval time.Duration
	// ScanSet, when set, picks the sets this node scans (in a cluster each
	// set is scanned by one node); nil scans every set.
	ScanSet func(set int) bool
}

// DefaultHealerOptions suit a production server.
var DefaultHealerOptions = HealerOptions{QueueSize: 10000, BytesPerSecond: 64 << 20, ScanInterval: 24 * time.Hour}

type healItem struct {
	set            int
	bucket, object string
}

type drivePos struct{ set, index int }

type healStats struct {
	queued, dropped, objects, shards, bytes, purged, failed atomic.Int64
	scanCycles, scanObjects                                 atomic.Int64
	scanning                                                atomic.Bool
	lastScanEnd                                             atomic.Int64
}

// DriveHeal is the progress of rebuilding one drive.
type DriveHeal struct {
	Set, Index int
	Started    time.Time
	Objects    atomic.Int64
	Done       atomic.Bool
	Err        atomic.Value // string
}

// HealStatus is a snapshot of the healer's counters.
type HealStatus struct {
	QueueLength    int64    `json:"queueLength"` // queued or being healed now
	Deferred       int64    `json:"deferred"`
	DeferredSample []string `json:"deferredSample,omitempty"`
	Queued         int64    `json:"queued"`
	Dropped        int64    `json:"dropped"`
	ObjectsHealed  int64    `json:"objectsHealed"`
	ShardsHealed   int64    `json:"shardsHealed"`
	BytesHealed    int64    `json:"bytesHealed"`
	Purged         int64    `json:"danglingPurged"`
	Failed         int64    `json:"failed"`
	ScanCycles     int64    `json:"scanCycles"`
	ScanObjects    int64    `json:"scanObjects"`
	Scanning       bool     `json:"scanning"`
	// WritesBehind counts writes that finished at write quorum while a
	// slow drive still had work for them, which goes on in the background
	// (slowwrite.go); a failure there is queued for healing.
	WritesBehind int64            `json:"writesBehind"`
	LastScanEnd  *time.Time       `json:"lastScanEnd,omitempty"`
	Drives       []DriveHealState `json:"drives,omitempty"`
}

// DriveHealState reports one drive rebuild.
type DriveHealState struct {
	Set     int       `json:"set"`
	Index   int       `json:"index"`
	Started time.Time `json:"started"`
	Objects int64     `json:"objectsHealed"`
	Done    bool      `json:"done"`
	Error   string    `json:"error,omitempty"`
}

// NewHealer returns a healer of pool; Run starts it.
func NewHealer(pool *Pool, opts HealerOptions, log *slog.Logger) *Healer {
	h := &Healer{
		pool: pool, log: log, opts: opts,
		queue:    make(chan healItem, opts.QueueSize),
		pending:  map[healItem]bool{},
		healing:  map[healItem]bool{},
		behind:   map[int]uint32{},
		drives:   map[drivePos]*DriveHeal{},
		deferred: map[healItem]uint32{},
		limiter:  rate.NewLimiter(rate.Limit(opts.BytesPerSecond), int(max(opts.BytesPerSecond, 4<<20))),
	}
	for i, s := range pool.sets {
		set := i
		s.OnPartialWrite(func(bucket, object string, _ [16]byte) { h.enqueue(set, bucket, object) })
	}
	return h
}

// Enqueue asks for an object to be healed soon.
func (h *Healer) Enqueue(bucket, object string) {
	h.enqueue(SetIndex(h.pool.deployment, bucket, object, len(h.pool.sets)), bucket, object)
}

func (h *Healer) enqueue(set int, bucket, object string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enqueueLocked(healItem{set, bucket, object})
}

// enqueueLocked queues an object unless it is queued already; h.mu is held
// (the send does not wait: a full queue drops the object, left to the scan).
func (h *Healer) enqueueLocked(it healItem) {
	if h.pending[it] {
		return
	}
	h.pending[it] = true
	h.outstanding.Add(1)
	select {
	case h.queue <- it:
		h.stats.queued.Add(1)
	default:
		h.outstanding.Add(-1)
		delete(h.pending, it)
		h.stats.dropped.Add(1)
	}
}

// maxDeferred bounds the objects remembered for drives that are away; past
// it, the integrity scan heals the rest.
const maxDeferred = 100000

// defer remembers an object to heal again when its missing drives return
// (missed: their positions).
func (h *Healer) deferHeal(it healItem, missed uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.behind[it.set] |= missed
	if _, ok := h.deferred[it]; !ok && len(h.deferred) >= maxDeferred {
		h.stats.dropped.Add(1)
		return
	}
	h.deferred[it] |= missed
}

// retryEvery is how often, in watchReturns' ticks (seconds), deferred
// objects whose missed drives look online are tried again without a drive
// having been seen to return: a node restarted between two pings never
// looks away, and a drive its node reports online may still refuse calls
// (opening, or failing).
const retryEvery = 5

// watchReturns re-queues deferred objects when one of the drives they
// missed comes back (a restarted node, a drive reopened), and every
// retryEvery ticks those whose missed drives are online now. It moves no
// more than the queue has room for: the rest wait for the next tick
// instead of being dropped to the integrity scan.
func (h *Healer) watchReturns(ctx context.Context) {
	masks := make([]uint32, len(h.pool.sets))
	for i, s := range h.pool.sets {
		masks[i] = s.onlineMask()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		retry := make([]uint32, len(h.pool.sets))
		some := false
		for i, s := range h.pool.sets {
			m := s.onlineMask()
			retry[i] = m &^ masks[i]
			masks[i] = m
			if tick%retryEvery == 0 {
				retry[i] = m
			}
			some = some || retry[i] != 0
		}
		if !some {
			continue
		}
		// Moved to the queue under the lock: Behind never sees the
		// objects in neither place.
		h.mu.Lock()
		room := cap(h.queue) - len(h.queue)
		moved := make([]int, len(retry))
		first := make([]string, len(retry))
		for it, missed := range h.deferred {
			if room == 0 {
				break
			}
			if missed&retry[it.set] == 0 {
				continue
			}
			if moved[it.set] == 0 {
				first[it.set] = it.bucket + "/" + it.object
			}
			moved[it.set]++
			room--
			delete(h.deferred, it)
			h.enqueueLocked(it)
		}
		h.mu.Unlock()
		for set, n := range moved {
			if n > 0 {
				h.log.Info("healing again what drives missed while away", "set", set, "objects", n, "first", first[set])
			}
		}
	}
}

// Run works the queue and the periodic scan until ctx ends.
func (h *Healer) Run(ctx context.Context) {
	go h.scanLoop(ctx)
	go h.watchReturns(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-h.queue:
			h.mu.Lock()
			delete(h.pending, it)
			h.healing[it] = true
			h.mu.Unlock()
			// Queued objects were found damaged or missed a write: their
			// shards are read and verified, not just counted.
			h.healOne(ctx, it, true, 0)
			h.mu.Lock()
			delete(h.healing, it)
			h.mu.Unlock()
			h.outstanding.Add(-1)
		}
	}
}

func (h *Healer) healOne(ctx context.Context, it healItem, deep bool, settle time.Duration) HealResult {
	lock := &h.objectLocks[xxhash.Sum64String(it.bucket+"/"+it.object)%uint64(len(h.objectLocks))]
	lock.Lock()
	res, err := h.pool.sets[it.set].healObject(ctx, it.bucket, it.object, deep, settle)
	lock.Unlock()
	if res.Shards > 0 {
		h.stats.objects.Add(1)
		h.stats.shards.Add(int64(res.Shards))
		h.stats.bytes.Add(res.Bytes)
	}
	h.stats.purged.Add(int64(res.Purged))
	if res.Skipped > 0 {
		h.log.Debug("heal deferred until drives return", "bucket", it.bucket, "object", it.object, "drives", res.Skipped, "reason", res.SkipReason)
		h.deferHeal(it, res.SkippedDrives)
	}
	if err != nil {
		h.stats.failed.Add(1)
		h.log.Warn("heal failed", "bucket", it.bucket, "object", it.object, "err", err)
	}
	return res
}

// HealDrive rebuilds every object of a drive's set onto it, in the
// background (a replaced or wiped drive). Progress is in Status.
func (h *Healer) HealDrive(ctx context.Context, set, index int) {
	dh := &DriveHeal{Set: set, Index: index, Started: time.Now().UTC()}
	h.mu.Lock()
	h.drives[drivePos{set, index}] = dh
	h.mu.Unlock()
	go func() {
		// A set that lacks quorum now (its other nodes still starting, say)
		// is waited for: the drive would otherwise stay unhealed until the
		// next integrity scan.
		wait := time.Second
		for {
			err := h.walkSet(ctx, set, false, func() { dh.Objects.Add(1) })
			if err == nil {
				break
			}
			if ctx.Err() != nil || !errors.Is(err, objlayer.ErrReadQuorum) && !errors.Is(err, objlayer.ErrWriteQuorum) {
				dh.Err.Store(err.Error())
				h.log.Error("drive heal stopped", "set", set, "index", index, "err", err)
				return
			}
			h.log.Warn("drive heal waits for its set's drives", "set", set, "index", index, "retryIn", wait, "err", err)
			select {
			case <-ctx.Done():
				dh.Err.Store(ctx.Err().Error())
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, maxDriveHealWait)
		}
		dh.Done.Store(true)
		h.log.Info("drive healed", "set", set, "index", index, "objects", dh.Objects.Load())
	}()
}

// maxDriveHealWait bounds the pause between two tries of a drive rebuild
// whose set lacks quorum.
const maxDriveHealWait = 30 * time.Second

// walkSet heals every object of a set's buckets (deep: reading shards),
// at the healer's rate.
func (h *Healer) walkSet(ctx context.Context, set int, deep bool, each func()) error {
	if _, err := h.pool.HealBuckets(ctx); err != nil {
		return err
	}
	buckets, err := h.pool.ListBuckets(ctx)
	if err != nil {
		return err
	}
	s := h.pool.sets[set]
	for _, b := range buckets {
		after := ""
		for {
			entries, _, err := s.walkDrives(ctx, b.Name, "", "", after, listBatch, len(s.Drives()), true)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				res := h.healOne(ctx, healItem{set, b.Name, e.name}, deep, 0)
				if deep {
					h.stats.scanObjects.Add(1)
				}
				var size int64
				for _, v := range e.versions {
					size += v.Size
				}
				if res.Bytes > size {
					size = res.Bytes
				}
				if err := h.wait(ctx, size); err != nil {
					return err
				}
				each()
			}
			if len(entries) < listBatch {
				break
			}
			after = entries[len(entries)-1].name
		}
	}
	return nil
}

// wait spends n bytes of the healer's read budget.
func (h *Healer) wait(ctx context.Context, n int64) error {
	for n > 0 {
		chunk := min(n, int64(h.limiter.Burst()))
		if err := h.limiter.WaitN(ctx, int(chunk)); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// scanLoop runs a deep scan of every set, then pauses ScanInterval.
func (h *Healer) scanLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.opts.ScanInterval):
		}
		h.Scan(ctx)
	}
}

// Scan reads and verifies every object of the pool once.
func (h *Healer) Scan(ctx context.Context) {
	if !h.stats.scanning.CompareAndSwap(false, true) {
		return // one scan at a time
	}
	defer h.stats.scanning.Store(false)
	for set := range h.pool.sets {
		if h.opts.ScanSet != nil && !h.opts.ScanSet(set) {
			continue
		}
		if err := h.walkSet(ctx, set, true, func() {}); err != nil {
			if ctx.Err() == nil {
				h.log.Warn("integrity scan of a set stopped", "set", set, "err", err)
			}
			return
		}
	}
	h.stats.scanCycles.Add(1)
	h.stats.lastScanEnd.Store(time.Now().UnixNano())
}

// Status snapshots the healer's counters and drive rebuilds.
func (h *Healer) Status() HealStatus {
	st := HealStatus{
		Queued: h.stats.queued.Load(), Dropped: h.stats.dropped.Load(),
		ObjectsHealed: h.stats.objects.Load(), ShardsHealed: h.stats.shards.Load(), BytesHealed: h.stats.bytes.Load(),
		Purged: h.stats.purged.Load(), Failed: h.stats.failed.Load(),
		ScanCycles: h.stats.scanCycles.Load(), ScanObjects: h.stats.scanObjects.Load(), Scanning: h.stats.scanning.Load(),
	}
	for _, s := range h.pool.sets {
		st.WritesBehind += s.lags.total()
	}
	h.mu.Lock()
	st.QueueLength = h.outstanding.Load()
	st.Deferred = int64(len(h.deferred))
	for it := range h.deferred {
		if len(st.DeferredSample) == 3 {
			break
		}
		st.DeferredSample = append(st.DeferredSample, fmt.Sprintf("set %d: %q/%q", it.set, it.bucket, it.object))
	}
	h.mu.Unlock()
	if ns := h.stats.lastScanEnd.Load(); ns != 0 {
		t := time.Unix(0, ns).UTC()
		st.LastScanEnd = &t
	}
	h.mu.Lock()
	for _, d := range h.drives {
		ds := DriveHealState{Set: d.Set, Index: d.Index, Started: d.Started, Objects: d.Objects.Load(), Done: d.Done.Load()}
		if e, ok := d.Err.Load().(string); ok {
			ds.Error = e
		}
		st.Drives = append(st.Drives, ds)
	}
	h.mu.Unlock()
	return st
}

// Behind reports, per set, the positions of the drives that lack objects
// this healer has still to rebuild on them: drives that missed writes
// while they were away (the objects deferred, queued or being healed),
// drives being rebuilt, and drives that writes left behind while work of
// theirs still runs (slowwrite.go). Sets with none are left out. A node's maintenance
// gate counts these drives as not holding every object. Objects dropped
// past maxDeferred are not known here (the scan heals them).
func (h *Healer) Behind() map[int]uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	busy := map[int]bool{}
	for it := range h.deferred {
		busy[it.set] = true
	}
	for _, items := range []map[healItem]bool{h.pending, h.healing} {
		for it := range items {
			busy[it.set] = true
		}
	}
	out := map[int]uint32{}
	for set, missed := range h.behind {
		if !busy[set] {
			delete(h.behind, set) // the backlog drained: caught up
			continue
		}
		out[set] = missed
	}
	for pos, d := range h.drives {
		if !d.Done.Load() && d.Err.Load() == nil {
			out[pos.set] |= 1 << pos.index
		}
	}
	for set, s := range h.pool.sets {
		if m := s.lags.behind(); m != 0 {
			out[set] |= m
		}
	}
	return out
}

// Healing reports whether a drive is being rebuilt.
func (h *Healer) Healing(set, index int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.drives[drivePos{set, index}]
	return ok && !d.Done.Load() && d.Err.Load() == nil
}
