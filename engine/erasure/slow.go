package erasure

import (
	"slices"
	"sync/atomic"
	"time"
)

// Slow drives. A drive that answers, but slowly (a failing disk retrying
// its sectors, a saturated array LUN), would hold up every read that asks
// it. A set keeps, per position, a moving average of how long its drive
// took to answer a read (a record, a shard's block); a drive much slower
// than its set's others is read last: a GET's records come from the other
// drives when enough of them answer, and its shards are rebuilt from
// parity rather than read from it. A drive left out gets no new samples:
// its mark lapses after slowMemory, so the next read asks it again and a
// drive that recovered is used again.
type latencies struct {
	ewma []atomic.Int64 // nanoseconds
	at   []atomic.Int64 // unix nanoseconds of the last sample
}

// Slow-drive thresholds: a drive is slow when its average is over
// slowFloor and over slowFactor times the median of its set's others.
const (
	slowFloor  = 20 * time.Millisecond
	slowFactor = 4
	slowMemory = 10 * time.Second
)

func newLatencies(n int) *latencies {
	return &latencies{ewma: make([]atomic.Int64, n), at: make([]atomic.Int64, n)}
}

// observe adds a read's duration at pos (weight 1/4: a drive that turns
// slow is seen within a few reads).
func (l *latencies) observe(pos int, d time.Duration) {
	if l == nil || pos >= len(l.ewma) {
		return
	}
	l.observeAt(pos, d, time.Now().UnixNano())
}

// observeAt is observe with the time of the sample's end (unix ns).
func (l *latencies) observeAt(pos int, d time.Duration, now int64) {
	old := l.ewma[pos].Load()
	if now-l.at[pos].Load() > int64(slowMemory) {
		old = int64(d) // the last sample is stale: start again
	}
	l.ewma[pos].Store(old - old/4 + int64(d)/4)
	l.at[pos].Store(now)
}

// slow reports whether the drive at pos is slow beside its set's others.
func (l *latencies) slow(pos int) bool {
	if l == nil || pos >= len(l.ewma) {
		return false
	}
	mine := l.ewma[pos].Load()
	if mine < int64(slowFloor) {
		return false // the usual answer, without reading the clock
	}
	now := time.Now().UnixNano()
	fresh := func(i int) bool { return now-l.at[i].Load() <= int64(slowMemory) }
	if !fresh(pos) {
		return false
	}
	var others []int64
	for i := range l.ewma {
		if i != pos && fresh(i) {
			others = append(others, l.ewma[i].Load())
		}
	}
	if len(others) == 0 {
		return false
	}
	slices.Sort(others)
	return mine > slowFactor*others[len(others)/2]
}

// timed runs fn and records its duration at pos.
func (l *latencies) timed(pos int, fn func()) {
	start := time.Now()
	fn()
	if l == nil || pos >= len(l.ewma) {
		return
	}
	end := time.Now()
	l.observeAt(pos, end.Sub(start), end.UnixNano())
}
