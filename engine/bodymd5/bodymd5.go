// Package bodymd5 computes the MD5 of object bodies, their S3 ETags.
//
// MD5 is serial within one body: crypto/md5 hashes about 0.95 GB a second
// per core on this project's machines, and it was 59% of the server's CPU
// under 16 clients PUTting 16 MiB objects (docs/benchmarks.md). Many bodies
// hashed at once can share a core instead: github.com/minio/md5-simd hashes
// up to 16 independent bodies in the lanes of one AVX-512 (8 with AVX2)
// pass. It only pays when the lanes fill; alone, a body hashes slower
// there than with crypto/md5. So a body is hashed in the lanes when enough
// others are being hashed when it starts, and with crypto/md5 otherwise.
package bodymd5

import (
	"hash"
	"runtime"
	"sync"
	"sync/atomic"

	md5simd "github.com/minio/md5-simd"
)

// LanesFrom is how many bodies must be hashing, this one included, for a
// new one to go to the lanes. Measured on an AVX-512 machine (Zen 5):
// bytes hashed per CPU second, lanes against crypto/md5, 0.65x with one
// body, 0.75x with 2, 1.2x with 4, 2.2x with 8, 3.2x with 16.
const LanesFrom = 4

// Hash is the MD5 of one body. Close gives its lane back; Sum is valid
// before Close only.
type Hash interface {
	hash.Hash
	Close()
}

// Hashers hands out hashes, counting those in use to choose where a new
// one runs. Its lane servers (one goroutine each) start on first use.
//
// A lane hash is never closed, only reset and kept for the next body:
// md5-simd v1.1.2 keeps every closed hash in its server's list of clients
// (a closed client's ID is read from the zero value its channel gives,
// minio/md5-simd#27), and scans that list at every pass, so closing them
// made a long-lived server slower with each body it had hashed. Kept
// hashes bound the list to the most ever in use at once.
type Hashers struct {
	inUse   atomic.Int64
	next    atomic.Uint64
	once    sync.Once
	servers []*laneServer
	count   int
	from    int64
}

// laneServer is one md5-simd server and the hashes it made that are free.
type laneServer struct {
	md5simd.Server
	mu   sync.Mutex
	free []md5simd.Hasher
}

// New returns hashers with the given number of lane servers (each fills
// one core's lanes); at least one.
func New(servers int) *Hashers { return newHashers(servers, LanesFrom) }

// newHashers is New with another threshold (tests).
func newHashers(servers int, from int64) *Hashers {
	return &Hashers{count: max(servers, 1), from: from}
}

// Shared is the process's hashers: lanes fill only when every body hashed
// at once shares them. One server per four cores, at most 16.
var Shared = New(min(runtime.GOMAXPROCS(0)/4, 16))

// New returns a hash for one body.
func (h *Hashers) New() Hash {
	if h.inUse.Add(1) < h.from {
		return &counted{Hasher: md5simd.StdlibHasher(), of: h}
	}
	h.once.Do(func() {
		h.servers = make([]*laneServer, h.count)
		for i := range h.servers {
			h.servers[i] = &laneServer{Server: md5simd.NewServer()}
		}
	})
	s := h.servers[h.next.Add(1)%uint64(len(h.servers))]
	s.mu.Lock()
	var kept md5simd.Hasher
	if n := len(s.free); n > 0 {
		kept, s.free = s.free[n-1], s.free[:n-1]
	}
	s.mu.Unlock()
	if kept == nil {
		kept = s.NewHash()
	}
	return &counted{Hasher: kept, of: h, lanes: s}
}

// InUse is the number of hashes handed out and not closed.
func (h *Hashers) InUse() int { return int(h.inUse.Load()) }

// kept is the number of lane hashes kept for the next bodies (tests).
func (h *Hashers) kept() int {
	n := 0
	for _, s := range h.servers {
		s.mu.Lock()
		n += len(s.free)
		s.mu.Unlock()
	}
	return n
}

type counted struct {
	md5simd.Hasher
	of     *Hashers
	lanes  *laneServer // nil: crypto/md5
	closed bool
}

func (c *counted) Close() {
	if c.closed {
		return
	}
	c.closed = true
	if c.lanes != nil {
		// Queued after the body's blocks: the server forgets its state
		// once they are hashed, and the next body starts afresh.
		c.Reset()
		c.lanes.mu.Lock()
		c.lanes.free = append(c.lanes.free, c.Hasher)
		c.lanes.mu.Unlock()
	} else {
		c.Hasher.Close()
	}
	c.Hasher = nil
	c.of.inUse.Add(-1)
}
