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
type Hashers struct {
	inUse   atomic.Int64
	next    atomic.Uint64
	once    sync.Once
	servers []md5simd.Server
	count   int
	from    int64
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
		h.servers = make([]md5simd.Server, h.count)
		for i := range h.servers {
			h.servers[i] = md5simd.NewServer()
		}
	})
	s := h.servers[h.next.Add(1)%uint64(len(h.servers))]
	return &counted{Hasher: s.NewHash(), of: h, lanes: true}
}

// InUse is the number of hashes handed out and not closed.
func (h *Hashers) InUse() int { return int(h.inUse.Load()) }

type counted struct {
	md5simd.Hasher
	of     *Hashers
	lanes  bool
	closed bool
}

func (c *counted) Close() {
	if c.closed {
		return
	}
	c.closed = true
	c.Hasher.Close()
	c.of.inUse.Add(-1)
}
