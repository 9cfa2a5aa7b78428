package objlayer

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// The gateway's earlier releases issued ULIDs as version IDs: ours must
// read and write the same 26 characters for the same 16 bytes.
func TestULIDMatchesTheLibrarysEncoding(t *testing.T) {
	for range 1000 {
		u := ulid.Make()
		if got := FormatULID(u); got != u.String() {
			t.Fatalf("FormatULID(%x) = %s, want %s", u[:], got, u.String())
		}
		id, err := ParseVersionID(u.String())
		if err != nil || id != [16]byte(u) {
			t.Fatalf("ParseVersionID(%s) = %x, %v; want %x", u, id, err, u[:])
		}
	}
	if _, err := ParseVersionID("8ZZZZZZZZZZZZZZZZZZZZZZZZZ"); err == nil {
		t.Fatal("a ULID over 128 bits parsed")
	}
}

func TestVersionIDs(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"null", true},
		{"4f1b2b7e-3d2a-4c1e-9a77-0c3b5e6f7a81", true},
		{"", false},
		{"abc", false},
	} {
		if _, err := ParseVersionID(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseVersionID(%q): err %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	id, _ := ParseVersionID("4f1b2b7e-3d2a-4c1e-9a77-0c3b5e6f7a81")
	if FormatVersionID(id) != "4f1b2b7e-3d2a-4c1e-9a77-0c3b5e6f7a81" || FormatVersionID(NullVersion) != "null" {
		t.Fatal("FormatVersionID does not render what ParseVersionID parsed")
	}
}

func TestVersionBefore(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	id := func(ms int64, rest byte) [16]byte {
		var b [16]byte
		for i := range 6 {
			b[5-i] = byte(ms >> (8 * i))
		}
		b[6], b[15] = 0x70, rest
		return b
	}
	marker := id(at.UnixMilli(), 5)
	for _, c := range []struct {
		name    string
		id      [16]byte
		modTime time.Time
		want    bool
	}{
		{"made a millisecond earlier", id(at.UnixMilli()-1, 9), at, true},
		{"same millisecond, smaller", id(at.UnixMilli(), 4), at, true},
		{"same millisecond, larger", id(at.UnixMilli(), 6), at, false},
		{"made later", id(at.UnixMilli()+1, 0), at, false},
		{"null version, older", NullVersion, at.Add(-time.Millisecond), true},
		{"null version, same millisecond", NullVersion, at, false},
		{"null version, newer", NullVersion, at.Add(time.Second), false},
	} {
		if got := VersionBefore(c.id, c.modTime, marker); got != c.want {
			t.Errorf("%s: VersionBefore = %v, want %v", c.name, got, c.want)
		}
	}
}
