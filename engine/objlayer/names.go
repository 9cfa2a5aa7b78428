package objlayer

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Size limits, S3's: of a part and a multipart upload's part count, of
// an object written in one request (PUT, POST form, copy), and of any
// object.
const (
	MinPartSize   = 5 << 20
	MaxPartSize   = 5 << 30
	MaxParts      = 10000
	MaxPutSize    = 5 << 30
	MaxObjectSize = 5 << 40
)

// NullVersion is the version ID of the S3 "null" version.
var NullVersion [16]byte

// FormatVersionID renders a version ID as S3 shows it: "null" for the null
// version, a UUID otherwise.
func FormatVersionID(id [16]byte) string {
	if id == NullVersion {
		return "null"
	}
	return uuid.UUID(id).String()
}

// VersionBefore reports whether the version of ID id and time modTime
// was made before the version of ID marker, as far as the IDs tell: the
// version IDs this engine makes (UUIDv7, and the gateway's earlier ULIDs)
// begin with their time in milliseconds, so they sort in the order they
// were made. The null version (all zero) is placed by its time against
// the time in marker's ID. A version listing continues with it when its
// marker version is gone: the versions made before the marker follow it.
func VersionBefore(id [16]byte, modTime time.Time, marker [16]byte) bool {
	if id == NullVersion {
		return modTime.UnixMilli() < idMillis(marker)
	}
	return bytes.Compare(id[:], marker[:]) < 0
}

// VersionsAfter returns the versions of one key (vs, newest first) that a
// version listing continues with after the version marker: those after
// it, or, when it is no longer among them (deleted since the page
// before), those made before it (VersionBefore). version gives a
// version's ID and time.
func VersionsAfter[V any](vs []V, marker [16]byte, version func(V) ([16]byte, time.Time)) []V {
	for i, v := range vs {
		if id, _ := version(v); id == marker {
			return vs[i+1:]
		}
	}
	var out []V
	for _, v := range vs {
		if id, at := version(v); VersionBefore(id, at, marker) {
			out = append(out, v)
		}
	}
	return out
}

// idMillis is the time a time-ordered version ID begins with, in Unix
// milliseconds (its first 48 bits).
func idMillis(id [16]byte) int64 {
	var b [8]byte
	copy(b[2:], id[:6])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// ParseVersionID parses what FormatVersionID renders, and the 26-character
// ULIDs the gateway's earlier releases issued (their versions keep working
// with the IDs clients were given).
func ParseVersionID(s string) ([16]byte, error) {
	if s == "null" {
		return NullVersion, nil
	}
	if len(s) == 26 {
		if id, ok := parseULID(s); ok {
			return id, nil
		}
		return NullVersion, ErrInvalidVersionID
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return NullVersion, ErrInvalidVersionID
	}
	return id, nil
}

// FormatUploadID renders a multipart upload's ID.
func FormatUploadID(id [16]byte) string { return uuid.UUID(id).String() }

// ParseUploadID parses what FormatUploadID renders.
func ParseUploadID(s string) ([16]byte, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return [16]byte{}, ErrUploadNotFound
	}
	return id, nil
}

// crockford is the alphabet of ULIDs' string form.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// parseULID decodes a ULID's 26 characters (5 bits each, the first
// carrying 3) into its 16 bytes.
func parseULID(s string) ([16]byte, bool) {
	var id [16]byte
	s = strings.ToUpper(s)
	if s[0] > '7' {
		return id, false // more than 128 bits
	}
	var acc uint64
	bits := 0
	out := 0
	for i := 0; i < len(s); i++ {
		v := strings.IndexByte(crockford, s[i])
		if v < 0 {
			return id, false
		}
		n := 5
		if i == 0 {
			n = 3 // 26*5 = 130 bits: the first character holds 3
		}
		acc = acc<<n | uint64(v)
		bits += n
		for bits >= 8 {
			bits -= 8
			id[out] = byte(acc >> bits)
			out++
		}
	}
	return id, out == 16
}

// FormatULID renders a 16-byte ID as a ULID string (the gateway's layout
// stores version IDs so).
func FormatULID(id [16]byte) string {
	var b [26]byte
	// 130 bits: two leading zero bits, then the 128 of id, 5 at a time.
	var acc uint64
	bits := 2 // the two leading zero bits
	in := 0
	for i := 0; i < 26; i++ {
		for bits < 5 && in < 16 {
			acc = acc<<8 | uint64(id[in])
			in++
			bits += 8
		}
		bits -= 5
		b[i] = crockford[(acc>>bits)&31]
	}
	return string(b[:])
}
