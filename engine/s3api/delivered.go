package s3api

import "sync"

// deliveredEvents remembers replication events found gone from the drives
// (delivered and forgotten), so a version whose status follows its event
// (replicate.MetaEvent) asks its drives once, not at every GET and HEAD.
// An event ID is never stored again once it is gone: the answer does not
// change. Two generations of at most deliveredGeneration IDs each bound
// its memory (about 2 MiB); the older is dropped when the newer fills.
type deliveredEvents struct {
	mu        sync.Mutex
	cur, prev map[[16]byte]struct{}
}

const deliveredGeneration = 1 << 15

func (d *deliveredEvents) has(id [16]byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, in := d.cur[id]
	if !in {
		_, in = d.prev[id]
	}
	return in
}

func (d *deliveredEvents) add(id [16]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cur) >= deliveredGeneration {
		d.prev, d.cur = d.cur, nil
	}
	if d.cur == nil {
		d.cur = make(map[[16]byte]struct{})
	}
	d.cur[id] = struct{}{}
}
