package s3api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
)

// Encrypted objects are stored as packages: the plaintext is cut into
// 64 KiB pieces, and each is sealed with AES-256-GCM under the object's data
// key as nonce (12 random bytes) | ciphertext | tag (16 bytes). The
// package's part number and index are its additional data, so packages
// cannot be reordered or moved between parts. Random nonces keep a part
// uploaded twice (same data key) from reusing one. A range of plaintext
// maps to whole packages, so a ranged read decrypts only the packages it
// touches.
const (
	pkgPlain    = 64 << 10
	pkgNonce    = 12
	pkgTag      = 16
	pkgOverhead = pkgNonce + pkgTag
	pkgSealed   = pkgPlain + pkgOverhead
)

// errTampered: a package failed authentication (wrong key, or bytes that
// were not written by us).
var errTampered = errors.New("encrypted object does not authenticate (wrong key or damaged data)")

// sealedSize is the stored size of plain bytes of plaintext.
func sealedSize(plain int64) int64 {
	if plain <= 0 {
		return 0
	}
	n := (plain + pkgPlain - 1) / pkgPlain
	return plain + n*pkgOverhead
}

// plainSize is the plaintext size of a stored (sealed) size.
func plainSize(sealed int64) int64 {
	if sealed <= 0 {
		return 0
	}
	n := (sealed + pkgSealed - 1) / pkgSealed
	return sealed - n*pkgOverhead
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func pkgAAD(part int, index uint64) []byte {
	var ad [12]byte
	binary.BigEndian.PutUint32(ad[:4], uint32(part))
	binary.BigEndian.PutUint64(ad[4:], index)
	return ad[:]
}

// sealReader encrypts a plaintext stream into packages.
type sealReader struct {
	src    io.Reader
	aead   cipher.AEAD
	part   int
	index  uint64
	plain  []byte
	sealed []byte // the current package
	pos    int    // bytes of it already returned
	err    error
}

// newSealReader encrypts src, of size plaintext bytes (-1: unknown). A body
// smaller than a package gets buffers of its size: it is one package
// either way, and a 4 KiB PUT need not allocate two of 64 KiB.
func newSealReader(src io.Reader, key []byte, part int, size int64) (*sealReader, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	plain := pkgPlain
	if size >= 0 && size < pkgPlain {
		plain = int(size) + 1 // +1: the read that finds the end
	}
	return &sealReader{src: src, aead: aead, part: part, plain: make([]byte, plain), sealed: make([]byte, 0, plain+pkgOverhead)}, nil
}

func (s *sealReader) Read(p []byte) (int, error) {
	for s.pos == len(s.sealed) {
		if s.err != nil {
			return 0, s.err
		}
		if len(p) >= len(s.plain)+pkgOverhead {
			// Room for a whole package: sealed straight into p, without
			// a copy (the erasure encoder reads whole blocks).
			sealed, err := s.seal(p[:0])
			if len(sealed) > 0 || err != nil {
				return len(sealed), err
			}
			continue
		}
		sealed, err := s.seal(s.sealed[:0])
		if err != nil {
			return 0, err
		}
		s.sealed, s.pos = sealed, 0
	}
	n := copy(p, s.sealed[s.pos:])
	s.pos += n
	return n, nil
}

// seal reads the next package's plaintext and appends it, sealed, to dst
// (nothing at the end of the source, which s.err then holds).
func (s *sealReader) seal(dst []byte) ([]byte, error) {
	n, err := io.ReadFull(s.src, s.plain)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		s.err, err = io.EOF, nil
	}
	if err != nil {
		s.err = err
		return dst, err
	}
	if n == 0 {
		return dst, nil
	}
	nonce := dst[len(dst) : len(dst)+pkgNonce]
	if _, err := rand.Read(nonce); err != nil {
		return dst, err
	}
	s.index++
	return s.aead.Seal(dst[:len(dst)+pkgNonce], nonce, s.plain[:n], pkgAAD(s.part, s.index-1)), nil
}

// openWriter decrypts a stream of whole packages, starting at package
// index first of a part, and writes the plaintext bytes from skip on, at
// most limit of them, to dst.
type openWriter struct {
	dst         io.Writer
	aead        cipher.AEAD
	part        int
	index       uint64
	skip, limit int64
	buf         []byte
	plain       []byte
}

func newOpenWriter(dst io.Writer, key []byte, part int, first uint64, skip, limit int64) (*openWriter, error) {
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	// Buffers as large as a package, or as what is read when it is less (a
	// small object's GET); append grows them should more arrive.
	n := min(skip+limit+pkgOverhead, pkgSealed)
	return &openWriter{dst: dst, aead: aead, part: part, index: first, skip: skip, limit: limit,
		buf: make([]byte, 0, n), plain: make([]byte, 0, min(n, pkgPlain))}, nil
}

func (w *openWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= pkgSealed {
			// A whole package in what was written: opened where it lies,
			// without a copy (a large GET's usual case).
			if err := w.open(p[:pkgSealed]); err != nil {
				return total - len(p), err
			}
			p = p[pkgSealed:]
			continue
		}
		n := min(len(p), pkgSealed-len(w.buf))
		w.buf = append(w.buf, p[:n]...)
		p = p[n:]
		if len(w.buf) == pkgSealed {
			err := w.open(w.buf)
			w.buf = w.buf[:0]
			if err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// Close decrypts a last, shorter package.
func (w *openWriter) Close() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.open(w.buf)
	w.buf = w.buf[:0]
	return err
}

// open decrypts one sealed package and writes the part of its plaintext
// the reader asked for.
func (w *openWriter) open(sealed []byte) error {
	if len(sealed) <= pkgOverhead {
		return errTampered
	}
	plain, err := w.aead.Open(w.plain[:0], sealed[:pkgNonce], sealed[pkgNonce:], pkgAAD(w.part, w.index))
	w.index++
	if err != nil {
		return errTampered
	}
	if w.skip >= int64(len(plain)) {
		w.skip -= int64(len(plain))
		return nil
	}
	plain = plain[w.skip:]
	w.skip = 0
	if int64(len(plain)) > w.limit {
		plain = plain[:w.limit]
	}
	w.limit -= int64(len(plain))
	if len(plain) == 0 {
		return nil
	}
	_, err = w.dst.Write(plain)
	return err
}

// sealedSpan is where a plaintext range of one part (or a whole object)
// lies in its stored bytes: from package first, the stored offset and
// length to read, and how many plaintext bytes to skip in the first
// package.
type sealedSpan struct {
	first          uint64
	offset, length int64
	skip           int64
}

// spanOf maps plaintext [off, off+n) of a part holding sealed bytes to the
// whole packages covering it.
func spanOf(sealed, off, n int64) sealedSpan {
	first := off / pkgPlain
	last := (off + n - 1) / pkgPlain
	start := first * pkgSealed
	end := min((last+1)*pkgSealed, sealed)
	return sealedSpan{first: uint64(first), offset: start, length: end - start, skip: off - first*pkgPlain}
}
