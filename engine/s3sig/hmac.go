package s3sig

import (
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"sync"
)

// macer computes Signature V4's HMAC-SHA256 chain with one SHA-256 state
// and buffers of its own. Every slice handed to a hash.Hash escapes to the
// heap, so keeping them all in one heap object is what makes a signature
// check cost a couple of allocations instead of a few dozen: it runs on
// every request, and on every chunk of a signed aws-chunked body.
type macer struct {
	h     hash.Hash
	pad   [64]byte
	inner [32]byte
	long  [32]byte // a key longer than a block, hashed
	key   [32]byte // the derived signing key
	out   [32]byte // the last MAC
	sum   [32]byte // the last plain SHA-256
	msg   []byte   // scratch: a string to sign
	canon []byte   // scratch: a canonical request

	msgArr   [384]byte
	canonArr [1024]byte
}

func newMacer() *macer {
	m := &macer{h: sha256.New()}
	m.msg = m.msgArr[:0]
	m.canon = m.canonArr[:0]
	return m
}

// mac sets m.out to HMAC-SHA256(key, msg). key and msg may alias m.out
// or m.key: they are consumed before m.out is written.
func (m *macer) mac(key, msg []byte) {
	if len(key) > len(m.pad) {
		m.h.Reset()
		m.h.Write(key)
		key = m.h.Sum(m.long[:0])
	}
	for i := range m.pad {
		m.pad[i] = 0x36
	}
	for i, b := range key {
		m.pad[i] ^= b
	}
	m.h.Reset()
	m.h.Write(m.pad[:])
	m.h.Write(msg)
	inner := m.h.Sum(m.inner[:0])
	for i := range m.pad {
		m.pad[i] ^= 0x36 ^ 0x5c
	}
	m.h.Reset()
	m.h.Write(m.pad[:])
	m.h.Write(inner)
	m.h.Sum(m.out[:0])
}

// macString is mac of a string message, copied into scratch so that no
// conversion allocates.
func (m *macer) macString(key []byte, msg string) {
	m.msg = append(m.msg[:0], msg...)
	m.mac(key, m.msg)
}

// deriveKey sets m.key to Signature V4's signing key for S3 on date
// (20060102) in region.
func (m *macer) deriveKey(secret, date, region, service string) {
	id := signingKeyID{secret, date, region, service}
	if k, ok := signingKeys.get(id); ok {
		m.key = k
		return
	}
	m.deriveKeyUncached(secret, date, region, service)
	signingKeys.put(id, m.key)
}

// signingKeyID names a derived signing key: it changes with the day.
type signingKeyID struct{ secret, date, region, service string }

// keyCache holds derived signing keys: four HMACs a request saved for a
// key that signs many the same day.
type keyCache struct {
	mu   sync.Mutex
	keys map[signingKeyID][32]byte
}

// maxSigningKeys bounds the cache: full, it starts again empty (a day's
// keys of as many credentials as that make it fill again).
const maxSigningKeys = 4096

var signingKeys keyCache

func (c *keyCache) get(id signingKeyID) ([32]byte, bool) {
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	return k, ok
}

func (c *keyCache) put(id signingKeyID, k [32]byte) {
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxSigningKeys {
		c.keys = make(map[signingKeyID][32]byte)
	}
	c.keys[id] = k
	c.mu.Unlock()
}

// macers are reused across requests (their scratch arrays are 1.5 KiB).
var macers = sync.Pool{New: func() any { return newMacer() }}

// deriveKeyUncached computes the signing key into m.key.
func (m *macer) deriveKeyUncached(secret, date, region, service string) {
	// "AWS4"+secret is built in canon's scratch: it is free until the
	// canonical request is written, which comes after.
	m.canon = append(append(m.canon[:0], "AWS4"...), secret...)
	m.macString(m.canon, date)
	m.key = m.out
	m.macString(m.key[:], region)
	m.key = m.out
	m.macString(m.key[:], service)
	m.key = m.out
	m.macString(m.key[:], "aws4_request")
	m.key = m.out
	m.canon = m.canon[:0]
}

// sha256Hex appends the hex SHA-256 of data to dst.
func (m *macer) sha256Hex(dst, data []byte) []byte {
	m.h.Reset()
	m.h.Write(data)
	m.h.Sum(m.sum[:0])
	return appendHex(dst, m.sum[:])
}

// appendHex appends lower-case hex of b.
func appendHex(dst, b []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range b {
		dst = append(dst, digits[c>>4], digits[c&15])
	}
	return dst
}

// unhex is the value of a hex digit, -1 for another byte.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// sameHex reports, in constant time for a well-formed s, whether s is the
// hex of want (either case).
func sameHex[T string | []byte](s T, want []byte) bool {
	if len(s) != 2*len(want) {
		return false
	}
	var got [64]byte
	if len(want) > len(got) {
		return false
	}
	bad := 0
	for i := range want {
		hi, lo := unhex(s[2*i]), unhex(s[2*i+1])
		bad |= (hi | lo) >> 8 // negative when either is not a digit
		got[i] = byte(hi<<4 | lo)
	}
	return bad == 0 && subtle.ConstantTimeCompare(got[:len(want)], want) == 1
}
