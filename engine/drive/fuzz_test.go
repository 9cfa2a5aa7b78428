package drive

import (
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"
)

// FuzzParseObject: a head, of this layout or the one before, either
// fails to parse or parses to one that encodes back to itself.
func FuzzParseObject(f *testing.F) {
	f.Add(encodeHead(sampleRecord(), 3))
	f.Add(encodeHead(&Record{ModTime: 1, Flags: FlagDeleteMarker}, 0))
	f.Add(EncodeVersions([]*Record{sampleRecord(), {ModTime: 1, Flags: FlagDeleteMarker}}))
	f.Add(append(EncodeVersions([]*Record{sampleRecord(), sampleRecord()}), headExt, 1))
	d := &Local{root: "fuzz"}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := d.parseObject("b", "o", data, true)
		if err != nil {
			return
		}
		if o.latest == nil || o.older < 0 || o.isLegacy && o.older != len(o.legacy) {
			t.Fatalf("parsed head: latest %v, %d older, legacy %v (%d)", o.latest != nil, o.older, o.isLegacy, len(o.legacy))
		}
		if o.isLegacy {
			return
		}
		again, err := d.parseObject("b", "o", encodeHead(o.latest, o.older), true)
		if err != nil || again.isLegacy || again.older != o.older || !again.latest.SameVersion(o.latest) {
			t.Fatalf("re-encoded head: %+v, %v; want %d older", again, err, o.older)
		}
	})
}

// FuzzDecodeVersions: an object's version list, as stored or as a peer
// sends it, decodes or fails without panicking; a list that decodes
// encodes back to one that decodes to as many versions, and a limit
// returns at most that many.
func FuzzDecodeVersions(f *testing.F) {
	f.Add(EncodeVersions([]*Record{sampleRecord(), {ModTime: 1, Flags: FlagDeleteMarker}}))
	f.Add(EncodeVersions(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeVersions(data, -1)
		if err != nil {
			return
		}
		again, err := DecodeVersions(EncodeVersions(recs), -1)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded list: %d versions, %v; want %d", len(again), err, len(recs))
		}
		if one, err := DecodeVersions(data, 1); err != nil || len(one) > 1 {
			t.Fatalf("limit 1: %d versions, %v", len(one), err)
		}
	})
}

// FuzzAppendWithoutData: a record with its inline data left out without
// decoding it is refused exactly when decoding it without data fails, and
// otherwise decodes to what that decoding gives. The input is signed
// first, so the fields, not the checksum, are what is explored.
func FuzzAppendWithoutData(f *testing.F) {
	for _, r := range []*Record{sampleRecord(), {ModTime: 1, Flags: FlagDeleteMarker}} {
		data := MarshalRecord(nil, r)
		f.Add(data[:len(data)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		want, werr := unmarshalRecord(data, false)
		out, err := AppendWithoutData(nil, data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("AppendWithoutData: %v; decoding without data: %v", err, werr)
		}
		if err != nil {
			return
		}
		got, err := UnmarshalRecord(out)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("decodes to %+v (%v), want %+v", got, err, want)
		}
	})
}
