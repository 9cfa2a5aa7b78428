package drive

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleRecord() *Record {
	return &Record{
		VersionID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ModTime:   1_795_000_000_123_456_789,
		Flags:     FlagInline,
		Size:      4096,
		ETag:      "9e107d9d372bb6826bd81d3542a419d6",
		Meta:      map[string]string{"content-type": "image/jpeg", "x-amz-meta-camera": "x100"},
		DataDir:   [16]byte{0xaa, 0xbb},
		Erasure:   ErasureInfo{Data: 2, Parity: 2, BlockSize: 1 << 20, Index: 3, Distribution: []int{2, 3, 0, 1}},
		Parts:     []Part{{Number: 1, Size: 4096, ETag: "9e107d9d372bb6826bd81d3542a419d6"}},
		Inline:    AppendBitrot(nil, bytes.Repeat([]byte("x"), 2048), 1<<19),
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for name, r := range map[string]*Record{
		"inline object": sampleRecord(),
		"delete marker": {ModTime: 1, Flags: FlagDeleteMarker},
		"negative time": {ModTime: -5, Size: 0},
	} {
		t.Run(name, func(t *testing.T) {
			data := MarshalRecord(nil, r)
			got, err := UnmarshalRecord(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
			}
		})
	}
}

func TestRecordDetectsCorruption(t *testing.T) {
	data := MarshalRecord(nil, sampleRecord())
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, err := UnmarshalRecord(bad); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("flipping a bit of byte %d: err = %v, want ErrCorruptRecord", i, err)
		}
	}
	if _, err := UnmarshalRecord(data[:len(data)-1]); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("truncated record: err = %v", err)
	}
}

func TestRecordIsDeterministic(t *testing.T) {
	// Map iteration order must not leak into the bytes: identical records
	// on different drives compare equal byte for byte.
	a, b := MarshalRecord(nil, sampleRecord()), MarshalRecord(nil, sampleRecord())
	if !bytes.Equal(a, b) {
		t.Fatal("same record encoded to different bytes")
	}
}

func TestNewer(t *testing.T) {
	older := &Record{ModTime: 10, VersionID: [16]byte{9}}
	newer := &Record{ModTime: 11, VersionID: [16]byte{1}}
	tieHigh := &Record{ModTime: 10, VersionID: [16]byte{10}}
	if !newer.Newer(older) || older.Newer(newer) {
		t.Error("later ModTime must win")
	}
	if !tieHigh.Newer(older) || older.Newer(tieHigh) {
		t.Error("equal ModTime: larger VersionID must win")
	}
	if older.Newer(older) {
		t.Error("a record is not newer than itself")
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	f.Add(MarshalRecord(nil, sampleRecord()))
	f.Add(MarshalRecord(nil, &Record{Flags: FlagDeleteMarker}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := UnmarshalRecord(data)
		if err != nil {
			return
		}
		// A record that decodes survives another round trip unchanged.
		again, err := UnmarshalRecord(MarshalRecord(nil, r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoded record: %+v, %v; want %+v", again, err, r)
		}
	})
}
