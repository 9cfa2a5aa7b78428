package drive

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// StoreStats is what a drive's metadata store reports of its own work: how
// much it writes for what it is given (its write amplification), how far
// its compactions are behind, and how often writes waited for them. A
// store that cannot keep up with an ingest shows it here before its
// clients see slower writes.
type StoreStats struct {
	// AppliedBytes are the bytes of the writes the store applied (its batches
	// as logged); WALBytes, FlushedBytes and CompactedBytes are what it
	// wrote for them: to its write-ahead log, flushing memtables into
	// tables, and compacting tables.
	AppliedBytes, WALBytes, FlushedBytes, CompactedBytes uint64
	// CompactionDebt estimates the bytes compactions must still rewrite to
	// bring the levels within their sizes.
	CompactionDebt uint64
	// L0Sublevels are the overlapping layers of freshly flushed tables a
	// read may have to look in; writes stop at l0StopWrites (32) until
	// compactions bring them down.
	L0Sublevels int
	// Stalls count the times writes were held up for a flush or a
	// compaction; StallTime is how long in all.
	Stalls    uint64
	StallTime time.Duration
	// LiveBytes is the size of the store's tables.
	LiveBytes uint64
	// CacheHits and CacheMisses count the block cache's lookups.
	CacheHits, CacheMisses int64
}

// StoreStats reports the drive's metadata store's work (zero once the
// store failed or was closed).
func (d *Local) StoreStats() StoreStats { return d.meta.stats() }

// stats reads pebble's metrics. A store closed or failed meanwhile (the
// drive taken offline between the caller's lookup and this call) reports
// nothing.
func (s *store) stats() (st StoreStats) {
	if s.enter() != nil {
		return StoreStats{}
	}
	defer s.leave()
	m := s.db.Metrics()
	st = StoreStats{
		AppliedBytes: m.WAL.BytesIn, WALBytes: m.WAL.BytesWritten,
		CompactionDebt: m.Compact.EstimatedDebt, L0Sublevels: int(m.Levels[0].Sublevels),
		Stalls: s.stalls.Load(), StallTime: time.Duration(s.stallNanos.Load()),
		LiveBytes: m.Table.Local.LiveSize,
		CacheHits: m.BlockCache.Hits, CacheMisses: m.BlockCache.Misses,
	}
	// The levels' own sums: pebble's Total() counts the WAL's bytes as
	// flushed too.
	for i := range m.Levels {
		st.FlushedBytes += m.Levels[i].TableBytesFlushed
		st.CompactedBytes += m.Levels[i].TableBytesCompacted
	}
	if begun := s.stallBegun.Load(); begun != 0 {
		st.StallTime += time.Since(time.Unix(0, begun))
	}
	return st
}

// writeStallBegin and writeStallEnd are pebble's events around a time
// writes are held up.
func (s *store) writeStallBegin(pebble.WriteStallBeginInfo) {
	s.stalls.Add(1)
	s.stallBegun.Store(time.Now().UnixNano())
}

func (s *store) writeStallEnd() {
	if begun := s.stallBegun.Swap(0); begun != 0 {
		s.stallNanos.Add(time.Now().UnixNano() - begun)
	}
}
