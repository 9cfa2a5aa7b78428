package erasure

import (
	"errors"
	"sync/atomic"
	"time"
)

// Slow drives on writes. A write is acknowledged once write quorum of its
// set's drives committed it; the others are waited for so that every drive
// holds every object, not for durability. A drive that answers, but slowly
// (a failing disk retrying its sectors, a saturated LUN), would otherwise
// pace every write of its set: a streamed PUT hands each block to every
// drive, and a commit waited for every drive's record.
//
// So a write waits for drives beyond its write quorum within a budget:
// once write quorum of drives did what a stage of the write needs of them
// (took a block, finished their shard, committed the record), the others
// get the write's allowance, which every stage of the write draws on. A
// drive still busy when it runs out is left behind:
//
//   - staging a shard, its shard is incomplete: its writer takes no more
//     blocks and removes the staged file once its last write returns, so no
//     record ever points at it; the object is queued for healing.
//   - committing (a record, or a staged shard moved into place), what it
//     commits is whole: the commit goes on in the background, and if it
//     fails, the object is queued for healing then (and what it staged is
//     removed).
//
// Nothing is ever left behind below write quorum: a write that has no
// quorum of drives done waits for them (or fails) as before.
const (
	// lagFloor is the least a write waits for drives beyond its quorum.
	// Below it, the hiccups of a healthy drive (an fsync behind a journal
	// commit, a disk busy with a heal) are not worth a heal.
	lagFloor = 200 * time.Millisecond
	// lagFactor bounds the waiting relative to the write: at most lagFactor
	// times the time the write took without it. A drive up to twice as slow
	// as its set's others is waited for; one that stalls is not.
	lagFactor = 1
	// lagKnownFloor replaces lagFloor when every drive waited for was left
	// behind by a write in the last lagMemory: a drive that stays slow
	// costs the first write lagFloor, and the writes after it little. The
	// factor still applies, so a drive that recovered keeps up again.
	lagKnownFloor = slowFloor
	lagMemory     = slowMemory
	// maxBehind bounds the writes left behind and still running on one
	// drive. Past it the drive is left out of new writes until they end
	// (those writes are healed onto it): a drive that hangs does not gather
	// goroutines and buffers without bound.
	maxBehind = 64
)

// Why a drive has no part in a write that succeeded without it.
var (
	// errLeftBehind: the drive fell behind the write's quorum by more than
	// its allowance while its shard was staged; the shard was abandoned.
	errLeftBehind = errors.New("drive left behind: slower than the write quorum by more than the write's allowance")
	// errStillCommitting: the drive was still committing when the write
	// finished at quorum. Its commit goes on; only a failure is healed.
	errStillCommitting = errors.New("drive still committing when the write finished at quorum")
)

// writeLags remembers, per position of a set, the writes that left its
// drive behind.
type writeLags struct {
	running []atomic.Int32 // left-behind writes still running on the drive
	at      []atomic.Int64 // unix nanoseconds of the last one
}

func newWriteLags(n int) *writeLags {
	return &writeLags{running: make([]atomic.Int32, n), at: make([]atomic.Int64, n)}
}

// leave records a write leaving the drive at pos behind; done is called
// when that write's work on the drive ends.
func (l *writeLags) leave(pos int) {
	l.running[pos].Add(1)
	l.at[pos].Store(time.Now().UnixNano())
}

func (l *writeLags) done(pos int) { l.running[pos].Add(-1) }

// recent reports whether a write left the drive at pos behind within
// lagMemory of now.
func (l *writeLags) recent(pos int, now time.Time) bool {
	return now.UnixNano()-l.at[pos].Load() <= int64(lagMemory)
}

// full reports whether the drive at pos has maxBehind writes still running.
func (l *writeLags) full(pos int) bool { return l.running[pos].Load() >= maxBehind }

// total counts the left-behind writes still running on the set's drives.
func (l *writeLags) total() int64 {
	var n int64
	for i := range l.running {
		n += int64(l.running[i].Load())
	}
	return n
}

// behind has bit pos set for each drive with left-behind writes running.
func (l *writeLags) behind() uint32 {
	var m uint32
	for i := range l.running {
		if l.running[i].Load() > 0 {
			m |= 1 << i
		}
	}
	return m
}

// writeWait is one write's budget for waiting on drives beyond its write
// quorum. Its stages run one after another, so it needs no lock.
type writeWait struct {
	lags   *writeLags
	quorum int
	start  time.Time
	waited time.Duration // spent waiting beyond quorum in the stages before
}

// newWriteWait starts the budget of a write beginning now.
func (s *Set) newWriteWait() *writeWait {
	return &writeWait{lags: s.lags, quorum: s.layout.WriteQuorum(), start: time.Now()}
}

// writeDrives is the snapshot of drives a write goes to: the online ones,
// less those with maxBehind left-behind writes still running.
func (s *Set) writeDrives() []Drive {
	drives, copied := s.Drives(), false
	for pos, d := range drives {
		if d == nil || !s.lags.full(pos) {
			continue
		}
		if !copied {
			drives, copied = append([]Drive(nil), drives...), true
		}
		drives[pos] = nil
	}
	return drives
}

// allowance is how long, from since (when the stage reached quorum), the
// write still waits for the drives at positions late: max(floor, lagFactor
// x the write's time so far without waiting), less what it waited before.
func (w *writeWait) allowance(since time.Time, late []int) time.Duration {
	floor := lagKnownFloor
	for _, pos := range late {
		if !w.lags.recent(pos, since) {
			floor = lagFloor
			break
		}
	}
	work := since.Sub(w.start) - w.waited
	return max(floor, lagFactor*work) - w.waited
}

// stall is one stage's wait beyond quorum: started when quorum was first
// reached, charged to the write when the stage ends.
type stall struct {
	w     *writeWait
	since time.Time
	timer *time.Timer
}

// expiry returns the channel that fires when the drives at late have had
// their allowance (nil when there is no budget, so the wait goes on) and
// whether it has passed already. Called while quorum is reached.
func (st *stall) expiry(late []int) (<-chan time.Time, bool) {
	if st.w == nil {
		return nil, false
	}
	if st.since.IsZero() {
		st.since = time.Now()
	}
	left := st.w.allowance(st.since, late) - time.Since(st.since)
	if left <= 0 {
		return nil, true
	}
	if st.timer == nil {
		st.timer = time.NewTimer(left)
	} else {
		st.timer.Reset(left)
	}
	return st.timer.C, false
}

// end charges the stall to the write.
func (st *stall) end() {
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.w != nil && !st.since.IsZero() {
		st.w.waited += time.Since(st.since)
		st.since = time.Time{}
	}
}

// driveResult is one drive's outcome of a call.
type driveResult[T any] struct {
	pos int
	val T
	err error
}

// collect gathers the outcomes of calls to the drives at positions pending
// from results (which has room for all of them) into vals and errs. Without
// a budget it waits for all. With one, once write quorum of them succeeded,
// the rest get the write's allowance; those still running after it are
// left behind with errs[pos] = behind, and their outcomes go to late when
// they come (in a goroutine of their own; late may be nil).
func collect[T any](w *writeWait, results <-chan driveResult[T], pending []int, vals []T, errs []error,
	behind error, late func(pos int, val T, err error)) {
	waiting := append([]int(nil), pending...)
	ok := 0
	st := stall{w: w}
	defer st.end()
	leave := func() {
		for _, pos := range waiting {
			errs[pos] = behind
			w.lags.leave(pos)
		}
		go func(n int) {
			for range n {
				r := <-results
				if late != nil {
					late(r.pos, r.val, r.err)
				}
				w.lags.done(r.pos)
			}
		}(len(waiting))
	}
	for len(waiting) > 0 {
		var expired <-chan time.Time
		if w != nil && ok >= w.quorum {
			var passed bool
			if expired, passed = st.expiry(waiting); passed {
				leave()
				return
			}
		}
		select {
		case r := <-results:
			vals[r.pos], errs[r.pos] = r.val, r.err
			if r.err == nil {
				ok++
			}
			waiting = deleteValue(waiting, r.pos)
		case <-expired:
			leave()
			return
		}
	}
}

func deleteValue(s []int, v int) []int {
	for i, x := range s {
		if x == v {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// forEachDriveWait runs fn on every non-nil drive of a snapshot in
// parallel, as forEachDrive, and waits for them as collect does: with a
// budget, drives still running when write quorum succeeded and the
// allowance ran out are left behind (errs[pos] = behind) and their
// outcomes go to late.
func forEachDriveWait[T any](w *writeWait, drives []Drive, fn func(pos int, d Drive) (T, error),
	behind error, late func(pos int, val T, err error)) ([]T, []error) {
	vals := make([]T, len(drives))
	errs := make([]error, len(drives))
	results := make(chan driveResult[T], len(drives))
	var pending []int
	for pos, d := range drives {
		if d == nil {
			errs[pos] = errDriveOffline
			continue
		}
		pending = append(pending, pos)
		driveWork.run(func() {
			v, err := fn(pos, d)
			results <- driveResult[T]{pos, v, err}
		})
	}
	collect(w, results, pending, vals, errs, behind, late)
	return vals, errs
}
