package bodymd5

import (
	"bytes"
	"crypto/md5"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// Every body gets crypto/md5's sum, in the lanes or not, whatever the
// sizes and write lengths, with many hashed at once.
func TestSumsAreMD5(t *testing.T) {
	for _, from := range []int64{1, LanesFrom, 1 << 20} {
		h := newHashers(2, from)
		var wg sync.WaitGroup
		for g := range 24 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), uint64(from)))
				for range 6 {
					body := make([]byte, rng.IntN(3<<20))
					for i := range body {
						body[i] = byte(rng.Uint32())
					}
					sum := h.New()
					for rest := body; len(rest) > 0; {
						n := min(len(rest), 1+rng.IntN(200<<10))
						if _, err := sum.Write(rest[:n]); err != nil {
							t.Error(err)
							return
						}
						rest = rest[n:]
					}
					want := md5.Sum(body)
					if got := sum.Sum(nil); !bytes.Equal(got, want[:]) {
						t.Errorf("threshold %d, %d bytes: sum %x, want %x", from, len(body), got, want)
					}
					sum.Close()
					sum.Close() // a second Close changes nothing
				}
			})
		}
		wg.Wait()
		if n := h.InUse(); n != 0 {
			t.Errorf("threshold %d: %d hashes still counted in use after every Close", from, n)
		}
		// Lane hashes are kept for the next body, never closed (the
		// server would keep a closed one's entry): per server at most as
		// many as were ever in use at once, not one a body.
		if n := h.kept(); n > 2*24 {
			t.Errorf("threshold %d: %d lane hashes made by 2 servers for 144 bodies, 24 at once at most", from, n)
		}
	}
}

// A body starts in the lanes only once enough others are being hashed.
func TestLanesOnlyWhenBusy(t *testing.T) {
	h := newHashers(1, 3)
	var open []Hash
	for i := range 4 {
		open = append(open, h.New())
		if lanes, want := open[i].(*counted).lanes != nil, i >= 2; lanes != want {
			t.Errorf("hash %d of %d in use: in the lanes %v, want %v", i+1, i+1, lanes, want)
		}
	}
	for _, s := range open {
		s.Close()
	}
	if s := h.New(); s.(*counted).lanes != nil {
		t.Error("a hash alone went to the lanes")
	}
}

func BenchmarkSixteenBodies(b *testing.B) {
	body := make([]byte, 16<<20)
	for _, c := range []struct {
		name string
		from int64
	}{{"crypto-md5", 1 << 20}, {"lanes", LanesFrom}} {
		b.Run(c.name, func(b *testing.B) {
			h := newHashers(1, c.from)
			b.SetBytes(16 * int64(len(body)))
			for b.Loop() {
				var wg sync.WaitGroup
				for range 16 {
					wg.Go(func() {
						s := h.New()
						defer s.Close()
						for off := 0; off < len(body); off += 1 << 20 {
							_, _ = s.Write(body[off : off+1<<20])
						}
						s.Sum(nil)
					})
				}
				wg.Wait()
			}
		})
	}
}

// Bodies hashed in the lanes one after another leave nothing behind in
// the server: md5-simd v1.1.2 kept every closed hash, which grew the heap
// by about 300 bytes a body and the server's every pass with it.
func TestLaneHashesLeaveNothingBehind(t *testing.T) {
	h := newHashers(1, 1)
	body := make([]byte, 4<<10)
	hashAll := func(n int) {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range n / 4 {
					s := h.New()
					_, _ = s.Write(body)
					s.Sum(nil)
					s.Close()
				}
			})
		}
		wg.Wait()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	hashAll(2000) // the server and its buffers
	before := heap()
	hashAll(40000)
	if grown := int64(heap()) - int64(before); grown > 2<<20 {
		t.Fatalf("the heap grew %d bytes over 40,000 bodies hashed in the lanes", grown)
	}
}
