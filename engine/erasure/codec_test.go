package erasure

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// shardStore holds the framed shards of one object in memory.
type shardStore struct {
	bufs []*bytes.Buffer
}

// newShardStore returns an empty store for c's shards and a writer into
// each of them.
func newShardStore(c *Codec) (*shardStore, []*drive.BitrotWriter) {
	s := &shardStore{}
	writers := make([]*drive.BitrotWriter, c.Layout().SetSize())
	for i := range writers {
		b := &bytes.Buffer{}
		s.bufs = append(s.bufs, b)
		writers[i] = drive.NewBitrotWriter(b)
	}
	return s, writers
}

// blockWriters is ws as the encoder takes them.
func blockWriters(ws []*drive.BitrotWriter) []BlockWriter {
	out := make([]BlockWriter, len(ws))
	for i, w := range ws {
		out[i] = w
	}
	return out
}

func encodeObject(t testing.TB, c *Codec, data []byte) *shardStore {
	t.Helper()
	s, ws := newShardStore(c)
	writers := blockWriters(ws)
	n, errs, err := c.Encode(bytes.NewReader(data), writers, c.Layout().WriteQuorum())
	if err != nil || n != int64(len(data)) {
		t.Fatalf("encode: n=%d err=%v errs=%v", n, err, errs)
	}
	return s
}

func (s *shardStore) readers(c *Codec, size int64) []BlockReader {
	rs := make([]BlockReader, len(s.bufs))
	for i, b := range s.bufs {
		if b == nil {
			continue
		}
		rs[i] = drive.NewBitrotReader(bytes.NewReader(b.Bytes()), c.ShardSize(size), c.ShardBlockSize())
	}
	return rs
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func TestCodecRoundTripAndRanges(t *testing.T) {
	shapes := [][2]int{{4, 2}, {6, 2}, {16, 4}, {2, 1}, {3, 1}}
	sizes := []int{1, 100, 4096, 65536, 65537, 200_000}
	for _, shape := range shapes {
		l, _ := NewLayout(shape[0], shape[1])
		c, err := NewCodec(l, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range sizes {
			data := randomBytes(size)
			store := encodeObject(t, c, data)
			for i, b := range store.bufs {
				if want := drive.BitrotSize(c.ShardSize(int64(size)), c.ShardBlockSize()); int64(b.Len()) != want {
					t.Fatalf("%d+%d size %d: shard %d holds %d bytes, want %d", l.Data, l.Parity, size, i, b.Len(), want)
				}
			}
			ranges := [][2]int64{{0, int64(size)}, {0, 1}, {int64(size) - 1, 1}, {int64(size) / 3, int64(size) / 2}}
			for _, rg := range ranges {
				var out bytes.Buffer
				bad, err := c.Decode(&out, store.readers(c, int64(size)), rg[0], rg[1], int64(size))
				if err != nil || len(bad) != 0 {
					t.Fatalf("%d+%d size %d range %v: err %v bad %v", l.Data, l.Parity, size, rg, err, bad)
				}
				if !bytes.Equal(out.Bytes(), data[rg[0]:rg[0]+rg[1]]) {
					t.Fatalf("%d+%d size %d range %v: wrong bytes", l.Data, l.Parity, size, rg)
				}
			}
		}
	}
}

func TestCodecSurvivesParityLostOrCorruptShards(t *testing.T) {
	l, _ := NewLayout(6, 2)
	c, _ := NewCodec(l, 32<<10)
	data := randomBytes(150_000)
	size := int64(len(data))

	for lost := 0; lost <= l.Parity; lost++ {
		for _, corrupt := range []bool{false, true} {
			store := encodeObject(t, c, data)
			var want []int
			for i := 0; i < lost; i++ {
				shard := (i * 2) % l.SetSize() // mix data and parity shards
				want = append(want, shard)
				if corrupt {
					store.bufs[shard].Bytes()[10] ^= 0xff // one flipped byte in block 0
				} else {
					store.bufs[shard] = nil // missing (wiped drive)
				}
			}
			var out bytes.Buffer
			bad, err := c.Decode(&out, store.readers(c, size), 0, size, size)
			if err != nil {
				t.Fatalf("lost %d (corrupt=%v): %v", lost, corrupt, err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("lost %d (corrupt=%v): wrong bytes", lost, corrupt)
			}
			for _, w := range want {
				// A bad data shard is always noticed; a bad parity shard only
				// when it had to be read.
				if w < l.Data && !contains(bad, w) {
					t.Errorf("lost %d (corrupt=%v): shard %d not reported bad: %v", lost, corrupt, w, bad)
				}
			}
		}
	}

	store := encodeObject(t, c, data)
	for i := 0; i <= l.Parity; i++ {
		store.bufs[i] = nil
	}
	_, err := c.Decode(io.Discard, store.readers(c, size), 0, size, size)
	if !errors.Is(err, objlayer.ErrReadQuorum) {
		t.Fatalf("parity+1 shards lost: err = %v, want ErrReadQuorum", err)
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) WriteBlock([]byte) error {
	if f.after == 0 {
		return errors.New("disk on fire")
	}
	f.after--
	return nil
}

func TestEncodeKeepsGoingWhileWriteQuorumHolds(t *testing.T) {
	l, _ := NewLayout(4, 2) // write quorum 3
	c, _ := NewCodec(l, 1024)
	data := randomBytes(10_000)

	ok := func() BlockWriter { return drive.NewBitrotWriter(io.Discard) }
	_, errs, err := c.Encode(bytes.NewReader(data), []BlockWriter{ok(), ok(), ok(), &failingWriter{after: 2}}, l.WriteQuorum())
	if err != nil || errs[3] == nil {
		t.Fatalf("one failed drive of 4 (quorum 3): err %v errs %v", err, errs)
	}
	_, _, err = c.Encode(bytes.NewReader(data), []BlockWriter{ok(), ok(), &failingWriter{after: 1}, &failingWriter{after: 3}}, l.WriteQuorum())
	if !errors.Is(err, objlayer.ErrWriteQuorum) {
		t.Fatalf("two failed drives of 4 (quorum 3): err = %v, want ErrWriteQuorum", err)
	}
	_, _, err = c.Encode(bytes.NewReader(data), []BlockWriter{ok(), nil, nil, ok()}, l.WriteQuorum())
	if !errors.Is(err, objlayer.ErrWriteQuorum) {
		t.Fatalf("two absent drives: err = %v, want ErrWriteQuorum", err)
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, shape := range [][2]int{{4, 2}, {6, 2}, {8, 4}, {16, 4}} {
		for _, size := range []int{4 << 10, 1 << 20} {
			l, _ := NewLayout(shape[0], shape[1])
			c, _ := NewCodec(l, 1<<20)
			data := randomBytes(size)
			writers := make([]BlockWriter, l.SetSize())
			for i := range writers {
				writers[i] = drive.NewBitrotWriter(io.Discard)
			}
			b.Run(fmt.Sprintf("%d+%d/%dKiB", l.Data, l.Parity, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, _, err := c.Encode(bytes.NewReader(data), writers, l.WriteQuorum()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, lost := range []int{0, 2} {
		l, _ := NewLayout(4, 2)
		c, _ := NewCodec(l, 1<<20)
		data := randomBytes(1 << 20)
		store := encodeObject(b, c, data)
		for i := 0; i < lost; i++ {
			store.bufs[i] = nil
		}
		b.Run(fmt.Sprintf("2+2/1MiB/lost%d", lost), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.Decode(io.Discard, store.readers(c, int64(len(data))), 0, int64(len(data)), int64(len(data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHeadThenEncode: a body whose first block was read ahead (readHead,
// as a PUT does before it stages anything) encodes to the same shards as
// the whole body read by the encode, whatever its size and however the
// client's bytes arrive, and the MD5 hashed beside the encode is the
// body's; and block buffers left dirty by an earlier,
// larger object change nothing (only the last data shard's padding is
// cleared before the parity is computed).
func TestHeadThenEncode(t *testing.T) {
	l, err := NewLayout(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	const block = 256 << 10
	c, err := NewCodec(l, block)
	if err != nil {
		t.Fatal(err)
	}
	encodeObject(t, c, randomBytes(3*block)) // dirties the pool's buffers
	for _, size := range []int{0, 1, headSmall - 1, headSmall, headSmall + 1, block - 1, block, block + 1, 3*block + 7} {
		for _, known := range []bool{true, false} {
			for _, trickle := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d/known=%v/trickle=%v", size, known, trickle), func(t *testing.T) {
					data := randomBytes(size)
					fresh, _ := NewCodec(l, block)
					want := encodeObject(t, fresh, data)

					var r io.Reader = bytes.NewReader(data)
					if trickle {
						r = iotest.OneByteReader(r)
					}
					first := int64(block)
					if known {
						first = min(first, int64(size))
					}
					head, err := c.readHead(r, first)
					if err != nil {
						t.Fatal(err)
					}
					if want := min(int(first), size); len(head.data) != want {
						t.Fatalf("head holds %d bytes, want %d", len(head.data), want)
					}
					// A block buffer only once headSmall bytes came and more may.
					if wantPooled := first > headSmall && size >= headSmall; (head.pooled != nil) != wantPooled {
						t.Fatalf("%d bytes read ahead, block buffer %v, want %v", len(head.data), head.pooled != nil, wantPooled)
					}
					got, ws := newShardStore(c)
					sum := md5.New()
					n, errs, err := c.encode(head, r, blockWriters(ws), l.WriteQuorum(), nil, nil, sum)
					if err != nil || n != int64(size) {
						t.Fatalf("encode: %d bytes, %v %v", n, err, errs)
					}
					if want := md5.Sum(data); !bytes.Equal(sum.Sum(nil), want[:]) {
						t.Fatalf("MD5 %x, want %x: the hasher missed or reordered bytes", sum.Sum(nil), want)
					}
					for i := range want.bufs {
						if !bytes.Equal(got.bufs[i].Bytes(), want.bufs[i].Bytes()) {
							t.Fatalf("shard %d differs from the whole body's encode", i)
						}
					}
				})
			}
		}
	}
}
