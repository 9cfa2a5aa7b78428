package replicate

import (
	"bytes"
	"io"
	"runtime"
	"sync/atomic"
)

// Small versions' bytes, kept from their write to their copy: the write
// has them in hand, and reading them back from the drives (a read quorum
// of records, decoded) cost a replicated PUT more CPU than the copy's own
// request. A snapshot rides on the write's event in the queue's memory
// (notify.Event.Snapshot); an event read back from the store after a
// restart has none, and its copy opens the version as before.

// SnapshotMax is the largest version a write keeps a snapshot of.
const SnapshotMax = 64 << 10

// snapshotBudget bounds the bytes all snapshots hold: a destination that
// is down leaves events waiting, and beyond the budget their writes keep
// none (their copies read the versions back).
const snapshotBudget = 16 << 20

var snapshotBytes atomic.Int64

// reservation is snapshot bytes counted against the budget, given back
// once: when the copy is made, or when the snapshot is collected (an event
// dropped, a copy that failed for good).
type reservation struct {
	n    int64
	done atomic.Bool
}

func (r *reservation) release() {
	if r.done.CompareAndSwap(false, true) {
		snapshotBytes.Add(-r.n)
	}
}

// Reserve counts n bytes of a snapshot about to be taken against the
// budget; false when they do not fit (no snapshot then). A reservation
// not handed to NewSnapshot is given back with Unreserve.
func Reserve(n int64) bool {
	if n < 0 || n > SnapshotMax {
		return false
	}
	if snapshotBytes.Add(n) > snapshotBudget {
		snapshotBytes.Add(-n)
		return false
	}
	return true
}

// Unreserve gives back a reservation no snapshot took.
func Unreserve(n int64) { snapshotBytes.Add(-n) }

// SnapshotBytes is what snapshots hold now (for tests and metrics).
func SnapshotBytes() int64 { return snapshotBytes.Load() }

// Snapshot is a version as its write stored it: its ID, its description
// in the source's own encoding (Source.FromSnapshot reads it) and its
// plaintext. It is kept as a few byte slices rather than as a Version
// (maps of headers, strings shared with the request that wrote it):
// thousands wait in memory while a destination lags, and the collector
// scans every pointer they hold.
type Snapshot struct {
	VersionID string
	Desc      []byte
	// data is dropped once a copy is made: the event may wait in memory
	// for other targets (a notification, another rule's destination),
	// which read the version back if they need it.
	data atomic.Pointer[[]byte]
	res  *reservation
}

// NewSnapshot takes over a reservation of len(data) bytes (Reserve).
func NewSnapshot(versionID string, desc, data []byte) *Snapshot {
	s := &Snapshot{VersionID: versionID, Desc: desc, res: &reservation{n: int64(len(data))}}
	s.data.Store(&data)
	runtime.AddCleanup(s, (*reservation).release, s.res)
	return s
}

// body is the snapshot's plaintext, a reader of its own (a retry reads
// it again); false once a copy was made from it.
func (s *Snapshot) body() (io.ReadCloser, bool) {
	p := s.data.Load()
	if p == nil {
		return nil, false
	}
	return io.NopCloser(bytes.NewReader(*p)), true
}

// bodyOf is body for a copy of versionID (false for a nil snapshot or
// another version's).
func (s *Snapshot) bodyOf(versionID string) (io.ReadCloser, bool) {
	if s == nil || s.VersionID != versionID {
		return nil, false
	}
	return s.body()
}

// done drops the snapshot's bytes and gives them back to the budget once
// a copy is made from it.
func (s *Snapshot) done() {
	s.data.Store(nil)
	s.res.release()
}
