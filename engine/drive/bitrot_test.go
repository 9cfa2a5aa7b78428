package drive

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestBitrotRoundTripAndRanges(t *testing.T) {
	const block = 1000
	for _, size := range []int{1, 999, 1000, 1001, 4500} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rand.IntN(256))
		}
		var buf bytes.Buffer
		w := NewBitrotWriter(&buf)
		for off := 0; off < size; off += block {
			if err := w.WriteBlock(data[off:min(off+block, size)]); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := int64(buf.Len()), BitrotSize(int64(size), block); got != want || w.Written() != want {
			t.Fatalf("size %d: wrote %d bytes, BitrotSize says %d", size, got, want)
		}
		if framed := AppendBitrot(nil, data, block); !bytes.Equal(framed, buf.Bytes()) {
			t.Fatalf("size %d: AppendBitrot differs from BitrotWriter", size)
		}
		r := NewBitrotReader(bytes.NewReader(buf.Bytes()), int64(size), block)
		var back []byte
		for i := 0; i < r.Blocks(); i++ {
			b, err := r.ReadBlock(i)
			if err != nil {
				t.Fatalf("size %d block %d: %v", size, i, err)
			}
			back = append(back, b...)
		}
		if !bytes.Equal(back, data) {
			t.Fatalf("size %d: data differs after round trip", size)
		}
	}
}

func TestBitrotDetectsCorruptionInTheBlockReadOnly(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefgh"), 500) // 4000 bytes, 4 blocks
	framed := AppendBitrot(nil, data, 1000)
	framed[2*(1000+BitrotChecksumSize)+10] ^= 1 // a byte of block 2
	r := NewBitrotReader(bytes.NewReader(framed), int64(len(data)), 1000)
	for i := 0; i < 4; i++ {
		_, err := r.ReadBlock(i)
		if i == 2 && !errors.Is(err, ErrBitrot) {
			t.Fatalf("block 2: err = %v, want ErrBitrot", err)
		}
		if i != 2 && err != nil {
			t.Fatalf("block %d is intact but: %v", i, err)
		}
	}
	short := NewBitrotReader(bytes.NewReader(framed[:1500]), int64(len(data)), 1000)
	if _, err := short.ReadBlock(1); !errors.Is(err, ErrBitrot) {
		t.Fatalf("truncated shard: err = %v, want ErrBitrot", err)
	}
}
