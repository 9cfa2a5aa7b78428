package drive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

// Version record encoding. Records are the values of the metadata store:
// one per object version per drive. The layout is a magic byte, a version
// byte, the fields below as varints and length-prefixed bytes, and a CRC32C
// of everything before it, so a flipped bit in the store is detected rather
// than served.
const (
	recordMagic = 0xD5
	// RecordVersion is the record encoding this build writes.
	RecordVersion = 1
	// RecordMinReadVersion is the oldest record encoding this build reads.
	RecordMinReadVersion = 1

	// maxRecordField bounds any single length-prefixed field, so a corrupt
	// length cannot make the decoder allocate gigabytes.
	maxRecordField = 64 << 20
	maxRecordItems = 1 << 16
)

// ErrCorruptRecord means a record failed its checksum or did not decode.
var ErrCorruptRecord = errors.New("corrupt version record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record flags.
const (
	FlagDeleteMarker uint64 = 1 << iota
	// FlagInline: the object's data is in Inline, not in shard files.
	FlagInline
)

// Record is one object version as one drive stores it. Every drive of the
// set holds the same record except for Erasure.Index and Inline, which are
// that drive's own shard.
type Record struct {
	// VersionID is 16 bytes; all zero is the S3 "null" version.
	VersionID [16]byte
	// ModTime is the version's time in Unix nanoseconds; with VersionID it
	// orders concurrent writes (last writer wins).
	ModTime int64
	Flags   uint64
	// Size is the object's size in bytes.
	Size int64
	ETag string
	// Meta holds user metadata (x-amz-meta-*) and stored system headers
	// (Content-Type, Cache-Control, tagging, checksums...), keyed by header.
	Meta map[string]string
	// DataDir names the shard files' directory (a UUID) for non-inline data.
	DataDir [16]byte
	Erasure ErasureInfo
	Parts   []Part
	// Inline is this drive's shard of an inline object, with bitrot
	// checksums as in a shard file.
	Inline []byte

	// EventID and Events are the write's event notifications, stored by
	// PutVersion beside the record in the same commit (events.go) and
	// removed with it by RollbackVersion; they are not part of the record
	// (MarshalRecord leaves them out).
	EventID [16]byte
	Events  []byte
}

// ErasureInfo says how an object was encoded.
type ErasureInfo struct {
	Data, Parity int
	// BlockSize is the object bytes per erasure block (before splitting).
	BlockSize int
	// Index is this drive's shard number (0-based; < Data are data shards).
	Index int
	// Distribution maps a set position to the shard number it holds.
	Distribution []int
}

// Part is one part of a multipart object (a single-part object has one).
type Part struct {
	Number int
	Size   int64
	ETag   string
}

// IsDeleteMarker reports whether the version is a delete marker.
func (r *Record) IsDeleteMarker() bool { return r.Flags&FlagDeleteMarker != 0 }

// IsInline reports whether the data is stored in the record.
func (r *Record) IsInline() bool { return r.Flags&FlagInline != 0 }

// Newer reports whether r wins over o under last-writer-wins: the later
// ModTime, ties broken by the larger VersionID so every node agrees.
func (r *Record) Newer(o *Record) bool {
	if r.ModTime != o.ModTime {
		return r.ModTime > o.ModTime
	}
	for i := range r.VersionID {
		if r.VersionID[i] != o.VersionID[i] {
			return r.VersionID[i] > o.VersionID[i]
		}
	}
	return false
}

// SameVersion reports whether r and o are the same version of an object
// (the same write): they may differ in metadata and in each drive's own
// shard.
func (r *Record) SameVersion(o *Record) bool {
	return r.ModTime == o.ModTime && r.VersionID == o.VersionID && r.ETag == o.ETag &&
		r.Size == o.Size && r.Flags == o.Flags && r.DataDir == o.DataDir
}

// MarshalRecord encodes r, appending to dst. AppendWithoutData walks
// these fields in this order too.
func MarshalRecord(dst []byte, r *Record) []byte {
	start := len(dst)
	dst = append(dst, recordMagic, RecordVersion)
	dst = append(dst, r.VersionID[:]...)
	dst = binary.AppendVarint(dst, r.ModTime)
	dst = binary.AppendUvarint(dst, r.Flags)
	dst = binary.AppendVarint(dst, r.Size)
	dst = appendString(dst, r.ETag)

	keys := make([]string, 0, len(r.Meta))
	for k := range r.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic bytes for identical records
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = appendString(dst, k)
		dst = appendString(dst, r.Meta[k])
	}

	dst = append(dst, r.DataDir[:]...)
	e := r.Erasure
	dst = binary.AppendUvarint(dst, uint64(e.Data))
	dst = binary.AppendUvarint(dst, uint64(e.Parity))
	dst = binary.AppendUvarint(dst, uint64(e.BlockSize))
	dst = binary.AppendUvarint(dst, uint64(e.Index))
	dst = binary.AppendUvarint(dst, uint64(len(e.Distribution)))
	for _, d := range e.Distribution {
		dst = binary.AppendUvarint(dst, uint64(d))
	}

	dst = binary.AppendUvarint(dst, uint64(len(r.Parts)))
	for _, p := range r.Parts {
		dst = binary.AppendUvarint(dst, uint64(p.Number))
		dst = binary.AppendVarint(dst, p.Size)
		dst = appendString(dst, p.ETag)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Inline)))
	dst = append(dst, r.Inline...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// UnmarshalRecord decodes a record, verifying its checksum.
func UnmarshalRecord(data []byte) (*Record, error) { return unmarshalRecord(data, true) }

// unmarshalRecord decodes a record; without withData an inline object's
// shard is checked (the record's checksum covers it) but not kept: walks
// list records, and nothing that walks reads an object's data from them.
func unmarshalRecord(data []byte, withData bool) (*Record, error) {
	body, err := checkedBody(data)
	if err != nil {
		return nil, err
	}
	d := decoder{buf: body[2:]}
	r := &Record{}
	d.fixed(r.VersionID[:])
	r.ModTime = d.varint()
	r.Flags = d.uvarint()
	r.Size = d.varint()
	r.ETag = d.string()
	if n := d.count(); n > 0 {
		r.Meta = make(map[string]string, n)
		for i := 0; i < n && d.err == nil; i++ {
			k := d.string()
			r.Meta[k] = d.string()
		}
	}
	d.fixed(r.DataDir[:])
	r.Erasure.Data = d.int()
	r.Erasure.Parity = d.int()
	r.Erasure.BlockSize = d.int()
	r.Erasure.Index = d.int()
	if n := d.count(); n > 0 {
		r.Erasure.Distribution = make([]int, n)
		for i := range r.Erasure.Distribution {
			r.Erasure.Distribution[i] = d.int()
		}
	}
	if n := d.count(); n > 0 {
		r.Parts = make([]Part, n)
		for i := range r.Parts {
			r.Parts[i] = Part{Number: d.int(), Size: d.varint(), ETag: d.string()}
		}
	}
	if n := d.length(); n > 0 && withData {
		r.Inline = make([]byte, n)
		d.fixed(r.Inline)
	} else if n > 0 && d.err == nil {
		if n > len(d.buf) {
			d.fail("inline data of %d bytes, %d left", n, len(d.buf))
		} else {
			d.buf = d.buf[n:]
		}
	}
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, d.err)
	}
	return r, nil
}

// checkedBody checks a record's checksum, magic and version, and returns
// what the checksum covers.
func checkedBody(data []byte) ([]byte, error) {
	if len(data) < 2+16+4 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrCorruptRecord, len(data))
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorruptRecord)
	}
	if body[0] != recordMagic {
		return nil, fmt.Errorf("%w: bad magic 0x%02x", ErrCorruptRecord, body[0])
	}
	if v := body[1]; v < RecordMinReadVersion || v > RecordVersion {
		return nil, fmt.Errorf("%w: record version %d, this build reads %d..%d", ErrCorruptRecord, v, RecordMinReadVersion, RecordVersion)
	}
	return body, nil
}

// AppendWithoutData appends to dst the record data encodes, with its
// inline data left out, encoded as MarshalRecord encodes it (Inline nil):
// a HEAD's record, made without decoding the record into a Record. data's
// checksum is checked first, so a damaged record is not given a valid
// one. It walks the fields in MarshalRecord's order: the two change
// together (TestAppendWithoutDataIsMarshalWithoutInline).
func AppendWithoutData(dst, data []byte) ([]byte, error) {
	body, err := checkedBody(data)
	if err != nil {
		return dst, err
	}
	d := decoder{buf: body[2:]}
	d.skip(16)         // version ID
	d.varint()         // mod time
	d.uvarint()        // flags
	d.varint()         // size
	d.skip(d.length()) // ETag
	for n := d.count(); n > 0 && d.err == nil; n-- {
		d.skip(d.length()) // meta key
		d.skip(d.length()) // and value
	}
	d.skip(16) // data dir
	for range 4 {
		d.int() // data, parity, block size, index
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		d.int() // distribution
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		d.int()            // part number
		d.varint()         // size
		d.skip(d.length()) // ETag
	}
	inline := len(body) - len(d.buf) // where the inline data's length is
	d.skip(d.length())
	if d.err == nil && len(d.buf) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return dst, fmt.Errorf("%w: %w", ErrCorruptRecord, d.err)
	}
	start := len(dst)
	dst = append(append(dst, body[:inline]...), 0) // no inline data
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads fields, remembering the first error so callers check once.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) length() int {
	v := d.uvarint()
	if v > maxRecordField || v > uint64(len(d.buf)) {
		d.fail("length %d exceeds the record", v)
		return 0
	}
	return int(v)
}

func (d *decoder) count() int {
	v := d.uvarint()
	if v > maxRecordItems || v > uint64(len(d.buf)) {
		d.fail("count %d exceeds the record", v)
		return 0
	}
	return int(v)
}

func (d *decoder) string() string {
	n := d.length()
	if d.err != nil {
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

func (d *decoder) skip(n int) {
	if d.err != nil {
		return
	}
	if len(d.buf) < n {
		d.fail("need %d bytes, have %d", n, len(d.buf))
		return
	}
	d.buf = d.buf[n:]
}

func (d *decoder) fixed(dst []byte) {
	if d.err != nil {
		return
	}
	if len(d.buf) < len(dst) {
		d.fail("need %d bytes, have %d", len(dst), len(d.buf))
		return
	}
	copy(dst, d.buf)
	d.buf = d.buf[len(dst):]
}
