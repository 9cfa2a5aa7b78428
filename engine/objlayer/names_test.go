package objlayer

import (
	"testing"

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
