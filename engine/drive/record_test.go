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

// TestAppendWithoutDataIsMarshalWithoutInline: a record's encoding with
// its inline data left out, made without decoding it, is the encoding of
// the record without Inline; a damaged record is refused, not re-signed.
func TestAppendWithoutDataIsMarshalWithoutInline(t *testing.T) {
	multipart := sampleRecord()
	multipart.Flags, multipart.Inline = 0, nil
	multipart.Parts = []Part{{Number: 1, Size: 5 << 20, ETag: "a"}, {Number: 2, Size: 7, ETag: "b"}}
	for name, r := range map[string]*Record{
		"inline object": sampleRecord(),
		"large inline":  {ModTime: 9, Flags: FlagInline, Inline: bytes.Repeat([]byte{1}, 100<<10)},
		"multipart":     multipart,
		"delete marker": {ModTime: 1, Flags: FlagDeleteMarker},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := AppendWithoutData([]byte("prefix"), MarshalRecord(nil, r))
			if err != nil {
				t.Fatal(err)
			}
			without := *r
			without.Inline = nil
			if want := append([]byte("prefix"), MarshalRecord(nil, &without)...); !bytes.Equal(got, want) {
				t.Fatalf("got %x\nwant %x", got, want)
			}
		})
	}
	data := MarshalRecord(nil, sampleRecord())
	data[len(data)/2] ^= 1
	if out, err := AppendWithoutData([]byte("prefix"), data); !errors.Is(err, ErrCorruptRecord) || string(out) != "prefix" {
		t.Fatalf("damaged record: %q, %v", out, err)
	}
}

// TestAppendVersionIsWhatGetVersionReturns: a drive's answer to a peer,
// copied from its store, decodes to the record GetVersion (or, without
// data, StatVersion) returns, the newest or by ID, and fails the same
// way for a version it lacks.
func TestAppendVersionIsWhatGetVersionReturns(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	older, newer := sampleRecord(), sampleRecord()
	older.VersionID[0], older.ModTime = 0xee, older.ModTime-1
	for _, r := range []*Record{older, newer} {
		if _, err := d.PutVersion(t.Context(), "b", "obj", r, NotStaged); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []*[16]byte{nil, &older.VersionID, &newer.VersionID} {
		for _, withData := range []bool{true, false} {
			want, err := d.getVersion(t.Context(), "b", "obj", id, withData)
			if err != nil {
				t.Fatal(err)
			}
			b, err := d.AppendVersion(t.Context(), []byte("prefix"), "b", "obj", id, withData)
			if err != nil || !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatalf("id %v, data %v: %v", id != nil, withData, err)
			}
			got, err := UnmarshalRecord(b[len("prefix"):])
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("id %v, data %v: decodes to %+v (%v), want %+v", id != nil, withData, got, err, want)
			}
		}
	}
	missing := [16]byte{9}
	for _, id := range []*[16]byte{nil, &missing} {
		obj := "obj"
		if id == nil {
			obj = "none"
		}
		if _, err := d.AppendVersion(t.Context(), nil, "b", obj, id, true); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("a version the drive lacks (id %v): %v", id != nil, err)
		}
	}
}
