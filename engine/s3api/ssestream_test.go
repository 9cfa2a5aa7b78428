package s3api

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
		// Read a block at a time, as the erasure encoder does (packages
		// sealed straight into the caller's buffer), the layout is the
		// same.
		blocks, err := newSealReader(bytes.NewReader(plain), key, 3, -1)
		if err != nil {
			t.Fatal(err)
		}
		var whole bytes.Buffer
		if _, err := io.CopyBuffer(&whole, struct{ io.Reader }{blocks}, make([]byte, 1<<20)); err != nil || whole.Len() != len(sealed) {
			t.Fatalf("size %d read in blocks: %d sealed bytes (%v), want %d", size, whole.Len(), err, len(sealed))
		}
		if size > 0 {
			var out bytes.Buffer
			w, _ := newOpenWriter(&out, key, 3, 0, 0, size)
			if _, err := w.Write(whole.Bytes()); err != nil || w.Close() != nil || !bytes.Equal(out.Bytes(), plain) {
				t.Fatalf("size %d read in blocks: does not open to the plaintext (%v)", size, err)
			}
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
			// Written in pieces that split packages anywhere (a package
			// partly buffered, then whole ones in one write, then a tail).
			for _, first := range []int{1000, pkgSealed - 1, pkgSealed, pkgSealed + 5} {
				out.Reset()
				w, _ := newOpenWriter(&out, key, 3, 0, 0, size)
				for rest, n := again, min(first, len(again)); len(rest) > 0; n = min(2*pkgSealed+3, len(rest)) {
					if _, err := w.Write(rest[:n]); err != nil {
						t.Fatalf("size %d, first write %d: %v", size, first, err)
					}
					rest = rest[n:]
				}
				if err := w.Close(); err != nil || !bytes.Equal(out.Bytes(), plain) {
					t.Fatalf("size %d, first write %d: does not open to the plaintext (%v)", size, first, err)
				}
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

// BenchmarkOpenWriter: decrypting a 1 MiB object as a GET does (the erasure
// decoder writes it in blocks of a few packages).
func BenchmarkOpenWriter(b *testing.B) {
	key := make([]byte, 32)
	plain := make([]byte, 1<<20)
	_, _ = rand.Read(plain)
	r, _ := newSealReader(bytes.NewReader(plain), key, 1, int64(len(plain)))
	sealed, _ := io.ReadAll(r)
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		w, _ := newOpenWriter(io.Discard, key, 1, 0, 0, int64(len(plain)))
		for rest := sealed; len(rest) > 0; {
			n := min(256<<10, len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
