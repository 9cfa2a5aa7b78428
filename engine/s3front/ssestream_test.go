package s3front

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
)

func TestSealedPackagesRoundTripAndRanges(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	for _, size := range []int64{0, 1, pkgPlain - 1, pkgPlain, pkgPlain + 1, 3*pkgPlain + 17} {
		plain := make([]byte, size)
		_, _ = rand.Read(plain)
		r, err := newSealReader(bytes.NewReader(plain), key, 3, -1)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(sealed)) != sealedSize(size) || plainSize(int64(len(sealed))) != size {
			t.Fatalf("size %d: sealed %d, sealedSize %d, plainSize %d", size, len(sealed), sealedSize(size), plainSize(int64(len(sealed))))
		}
		// Sealed with the size known (small bodies get small buffers), the
		// layout is the same.
		known, err := newSealReader(bytes.NewReader(plain), key, 3, size)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := io.ReadAll(known); err != nil || len(again) != len(sealed) {
			t.Fatalf("size %d known: %d sealed bytes (%v), want %d", size, len(again), err, len(sealed))
		} else if size > 0 {
			var out bytes.Buffer
			w, err := newOpenWriter(&out, key, 3, 0, 0, size)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(again); err != nil || w.Close() != nil || !bytes.Equal(out.Bytes(), plain) {
				t.Fatalf("size %d known: does not open to the plaintext (%v)", size, err)
			}
		}
		// A run of 16 random bytes shows up in ciphertext by chance with
		// negligible probability; a shorter one would (1 byte: about 1 in 9).
		if size >= 16 && bytes.Contains(sealed, plain[:min(size, 32)]) {
			t.Fatalf("size %d: plaintext visible in the sealed bytes", size)
		}
		for _, rg := range [][2]int64{{0, size}, {0, 1}, {size / 2, size - size/2}, {pkgPlain - 3, 10}, {size - 1, 1}} {
			off, n := rg[0], rg[1]
			if size == 0 || off < 0 || n <= 0 || off+n > size {
				continue
			}
			sp := spanOf(int64(len(sealed)), off, n)
			var out bytes.Buffer
			w, err := newOpenWriter(&out, key, 3, sp.first, sp.skip, n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(sealed[sp.offset : sp.offset+sp.length]); err != nil {
				t.Fatalf("size %d range %v: %v", size, rg, err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("size %d range %v: %v", size, rg, err)
			}
			if !bytes.Equal(out.Bytes(), plain[off:off+n]) {
				t.Fatalf("size %d range %v: wrong plaintext", size, rg)
			}
		}
		if size == 0 {
			continue
		}
		// Another key, another part number, or a flipped bit: refused.
		for name, c := range map[string]struct {
			key  []byte
			part int
			flip bool
		}{"key": {make([]byte, 32), 3, false}, "part": {key, 4, false}, "bit": {key, 3, true}} {
			data := append([]byte(nil), sealed...)
			if c.flip {
				data[len(data)/2] ^= 1
			}
			w, _ := newOpenWriter(io.Discard, c.key, c.part, 0, 0, size)
			_, err := w.Write(data)
			if err == nil {
				err = w.Close()
			}
			if !errors.Is(err, errTampered) {
				t.Fatalf("size %d, wrong %s: %v", size, name, err)
			}
		}
	}
}
