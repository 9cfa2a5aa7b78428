package internode

import (
	"sync"
	"time"
)

// maxNonces bounds the replay cache: 2^21 nonces of 16 bytes, a few tens of
// MiB at most. Signed requests outside the framed channel (which carries
// batches and shard reads) would have to arrive at over 8,000 a second for
// four minutes to fill it; a full cache refuses requests rather than forget
// a nonce inside its window.
const maxNonces = 1 << 21

// nonces remembers the nonces of the signed requests a server accepted
// until their time window has passed.
type nonces struct {
	mu        sync.Mutex
	until     map[[16]byte]time.Time
	lastSweep time.Time
}

// first records nonce, valid until until; false when it was seen before (a
// replay) or the cache is full.
func (n *nonces) first(nonce [16]byte, until time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if n.until == nil {
		n.until = map[[16]byte]time.Time{}
	}
	full := len(n.until) >= maxNonces
	if now.Sub(n.lastSweep) > 10*time.Second || full && now.Sub(n.lastSweep) > time.Second {
		for k, t := range n.until {
			if now.After(t) {
				delete(n.until, k)
			}
		}
		n.lastSweep = now
	}
	if _, seen := n.until[nonce]; seen || len(n.until) >= maxNonces {
		return false
	}
	n.until[nonce] = until
	return true
}
