package erasure

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/drive"
)

// slowWriter frames shards into a buffer, taking its time over each block
// (a drive slower than the client).
type slowWriter struct {
	bw    *drive.BitrotWriter
	delay time.Duration
}

func (w slowWriter) WriteBlock(b []byte) error {
	time.Sleep(w.delay)
	return w.bw.WriteBlock(b)
}

// encodeSlowly encodes data as a PUT does (its first block read ahead)
// onto drives that take delay over each block, and checks the shards
// decode to data.
func encodeSlowly(t *testing.T, c *Codec, data []byte, delay time.Duration) {
	t.Helper()
	store, ws := newShardStore(c)
	writers := make([]BlockWriter, len(ws))
	for i, w := range ws {
		writers[i] = slowWriter{w, delay}
	}
	r := bytes.NewReader(data)
	head, err := c.readHead(r, min(int64(c.BlockSize()), int64(len(data))))
	if err != nil {
		t.Fatal(err)
	}
	n, errs, err := c.encode(head, r, writers, c.Layout().WriteQuorum(), nil, nil, nil)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("encode: %d bytes, %v %v", n, err, errs)
	}
	var out bytes.Buffer
	size := int64(len(data))
	if _, err := c.Decode(&out, store.readers(c, size), 0, size, size); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("decode: %d bytes, %v", out.Len(), err)
	}
}

// TestEncodeBlockBuffers: a body of one block holds one block buffer, not
// a second one to find its end; a longer body onto slow drives takes a
// second (reading its next block while they write), one of the process's
// spares; with none left, encodes wait for their drives instead, and their
// spares never exceed the bound and all come back.
func TestEncodeBlockBuffers(t *testing.T) {
	l, _ := NewLayout(4, 2) // 2+2
	const block = 64 << 10
	for _, tc := range []struct {
		size int
		want int64
	}{{block, 1}, {block - 1, 1}, {block + 1, 2}, {3 * block, 2}} {
		c, _ := NewCodec(l, block)
		encodeSlowly(t, c, randomBytes(tc.size), 5*time.Millisecond)
		if got := c.made.Load(); got != tc.want {
			t.Errorf("a body of %d bytes (blocks of %d) onto slow drives took %d block buffers, want %d", tc.size, block, got, tc.want)
		}
	}

	const bound = 2
	defer func(f func() int64) { spareBlocks.bound = f }(spareBlocks.bound)
	spareBlocks.bound = func() int64 { return bound }
	var most atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if u := spareBlocks.used.Load(); u > most.Load() {
				most.Store(u)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	c, _ := NewCodec(l, block)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { encodeSlowly(t, c, randomBytes(6*block+5), 2*time.Millisecond) })
	}
	wg.Wait()
	close(stop)
	<-sampled
	if m := most.Load(); m > bound || m == 0 {
		t.Errorf("8 encodes onto slow drives held up to %d spare block buffers at once, want 1..%d", m, bound)
	}
	if u := spareBlocks.used.Load(); u != 0 {
		t.Errorf("%d spare block buffers not given back", u)
	}
}
