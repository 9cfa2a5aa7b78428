package erasure

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Read-ahead for listings that page through a set. A client listing a
// bucket asks for a page, reads it, and asks for the next: the set's
// drives sit idle while the client reads, and the client waits while the
// drives walk. Once a listing asks for its second page, the set walks the
// page after it in the background, and the next request takes that walk
// if nothing was written to the drives since it began.
//
// "Nothing was written" is checked on each drive's count of writes
// (drive.Local.Changes), which a write raises after it is applied and
// before it is acknowledged: a listing served from a walk ahead sees every
// write acknowledged before its request, as a walk of its own would. The
// count is per drive, not per bucket: any write to a drive drops the walks
// ahead over it. Only sets whose drives all count their writes (local
// drives; not drives on other nodes) read ahead.
//
// Walks ahead are for plain listings of latest versions (no delimiter),
// the shape of a client listing a bucket or prefix from end to end.

// changeCounter is a drive that counts its writes (drive.Local).
type changeCounter interface {
	Changes() uint64
}

const (
	// aheadSlots bounds the walks ahead a set keeps (listings paging at
	// once); a new one replaces the oldest.
	aheadSlots = 4
	// aheadTTL is how long a walk ahead waits for its page's request.
	aheadTTL = 10 * time.Second
	// aheadMin is the smallest batch worth walking ahead.
	aheadMin = 100
)

// aheadWalk is one walk ahead: of the drives as they were (drives, counts),
// from startAfter for limit objects.
type aheadWalk struct {
	bucket, prefix, startAfter string
	limit                      int
	drives                     []Drive
	counts                     []uint64
	began                      time.Time
	done                       chan struct{}
	entries                    []listEntry
	more                       bool
	err                        error
}

type readAhead struct {
	mu    sync.Mutex
	walks []*aheadWalk
	// served counts the walks that answered a request (for tests).
	served atomic.Int64
}

// driveCounts returns each drive's write count, or false when a drive does not
// count its writes.
func driveCounts(drives []Drive) ([]uint64, bool) {
	counts := make([]uint64, len(drives))
	for i, d := range drives {
		if d == nil {
			continue
		}
		c, ok := d.(changeCounter)
		if !ok {
			return nil, false
		}
		counts[i] = c.Changes()
	}
	return counts, true
}

// take returns the entries a walk ahead holds for a walk of limit objects
// after startAfter, if one covers it and the drives are unchanged since it
// began. It waits for a walk still going.
func (r *readAhead) take(ctx context.Context, drives []Drive, bucket, prefix, startAfter string, limit int) ([]listEntry, bool, bool) {
	// The walk that began closest before startAfter (listings paging at
	// once each have theirs).
	r.mu.Lock()
	best := -1
	for i, c := range r.walks {
		if c.bucket == bucket && c.prefix == prefix && c.limit == limit && c.startAfter <= startAfter &&
			(best < 0 || c.startAfter > r.walks[best].startAfter) {
			best = i
		}
	}
	var w *aheadWalk
	if best >= 0 {
		w = r.walks[best]
		r.walks = slices.Delete(r.walks, best, best+1)
	}
	r.mu.Unlock()
	if w == nil || time.Since(w.began) > aheadTTL {
		return nil, false, false
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return nil, false, false
	}
	if w.err != nil || !slices.Equal(w.drives, drives) {
		return nil, false, false
	}
	if counts, ok := driveCounts(drives); !ok || !slices.Equal(counts, w.counts) {
		return nil, false, false
	}
	// The walk may have begun before startAfter (at the last page's
	// look-ahead entry): what follows startAfter is the answer, if it is a
	// whole batch or the walk reached the end.
	i, found := slices.BinarySearchFunc(w.entries, startAfter, func(e listEntry, name string) int {
		return strings.Compare(e.name, name)
	})
	if found {
		i++
	}
	rest := w.entries[i:]
	switch {
	case len(rest) >= limit:
		r.served.Add(1)
		return rest[:limit], true, true
	case !w.more:
		r.served.Add(1)
		return rest, false, true
	}
	return nil, false, false
}

// start walks ahead, in the background, limit objects after startAfter.
func (r *readAhead) start(s *Set, drives []Drive, bucket, prefix, startAfter string, limit int) {
	counts, ok := driveCounts(drives)
	if !ok {
		return
	}
	w := &aheadWalk{bucket: bucket, prefix: prefix, startAfter: startAfter, limit: limit,
		drives: drives, counts: counts, began: time.Now(), done: make(chan struct{})}
	r.mu.Lock()
	r.walks = slices.DeleteFunc(r.walks, func(c *aheadWalk) bool { return time.Since(c.began) > aheadTTL })
	if len(r.walks) == aheadSlots {
		r.walks = r.walks[1:]
	}
	r.walks = append(r.walks, w)
	r.mu.Unlock()
	go func() {
		defer close(w.done)
		ctx, cancel := context.WithTimeout(context.Background(), aheadTTL)
		defer cancel()
		w.entries, w.more, w.err = s.walkDrives(ctx, bucket, prefix, "", startAfter, limit, s.layout.ListDrives(), true)
	}()
}

// walkListing is walkDrives for a listing of the set: a plain listing of
// latest versions past its first page is answered from a walk ahead when
// one covers it, and walks ahead for the page after.
func (s *Set) walkListing(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	plain := delimiter == "" && latestOnly && limit >= aheadMin
	drives := s.Drives()
	var entries []listEntry
	more, ok := false, false
	if plain {
		entries, more, ok = s.ahead.take(ctx, drives, bucket, prefix, startAfter, limit)
	}
	if !ok {
		var err error
		if entries, more, err = s.walkDrives(ctx, bucket, prefix, delimiter, startAfter, limit, s.layout.ListDrives(), latestOnly); err != nil {
			return nil, false, err
		}
	}
	if plain && more && startAfter != "" && len(entries) >= 2 {
		// The page this batch answers ends at its last entry or the one
		// before (a page of limit-1 reads one more to know it is
		// truncated): the next page starts after one of them.
		s.ahead.start(s, drives, bucket, prefix, entries[len(entries)-2].name, limit)
	}
	return entries, more, nil
}
