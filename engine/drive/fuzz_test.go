package drive

import (
	"testing"
)

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
