package drive

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// versionsOf is every version the drive holds of b/obj, checked newest
// first, and the versions a full walk of the bucket gives for it.
func versionsOf(t *testing.T, d *Local, obj string) []*Record {
	t.Helper()
	vs, err := d.Versions(t.Context(), "b", obj)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(vs); i++ {
		if !vs[i-1].Newer(vs[i]) {
			t.Fatalf("versions not newest first at %d: %d then %d", i, vs[i-1].ModTime, vs[i].ModTime)
		}
	}
	var walked []*Record
	if err := d.WalkObjects(t.Context(), "b", obj, "", false, func(o string, recs []*Record) bool {
		if o == obj {
			walked = recs
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(walked)) != fmt.Sprint(ids(vs)) {
		t.Fatalf("a walk gives %v, Versions %v", ids(walked), ids(vs))
	}
	return vs
}

func ids(recs []*Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%x@%d", r.VersionID[:2], r.ModTime)
	}
	return out
}

// headSize is the size of the object's head value.
func headSize(t *testing.T, d *Local, obj string) int {
	t.Helper()
	v, closer, err := d.meta.Get(objectKey("b", obj))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	return len(v)
}

// TestVersionsLiveUnderKeysOfTheirOwn: however many versions an object
// has, its head holds one record; older versions are read by ID, listed
// newest first, deleted (the next newest taking the head when the newest
// goes), rolled back and given new metadata where they are.
func TestVersionsLiveUnderKeysOfTheirOwn(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	if err := d.MakeBucket(t.Context(), BucketInfo{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"X-Amz-Meta-Pad": string(make([]byte, 200))}
	var recs []*Record
	for i := 0; i < 500; i++ {
		r := &Record{VersionID: [16]byte(uuid.New()), ModTime: int64(10 * (i + 1)), Meta: meta}
		recs = append(recs, r)
		if _, err := d.PutVersion(t.Context(), "b", "obj", r, NotStaged); err != nil {
			t.Fatal(err)
		}
	}
	if n := headSize(t, d, "obj"); n > 600 {
		t.Fatalf("head of 500 versions is %d bytes; want one record's", n)
	}
	// An older version written late (a heal) goes where it belongs.
	late := &Record{VersionID: [16]byte(uuid.New()), ModTime: 15}
	if _, err := d.PutVersion(t.Context(), "b", "obj", late, NotStaged); err != nil {
		t.Fatal(err)
	}
	vs := versionsOf(t, d, "obj")
	if len(vs) != 501 || vs[0].VersionID != recs[499].VersionID || vs[499].VersionID != late.VersionID {
		t.Fatalf("%d versions, newest %v", len(vs), ids(vs[:1]))
	}
	for _, r := range []*Record{recs[0], recs[250], late} {
		got, err := d.GetVersion(t.Context(), "b", "obj", &r.VersionID)
		if err != nil || got.ModTime != r.ModTime {
			t.Fatalf("version %x: %+v, %v", r.VersionID[:2], got, err)
		}
	}
	// New metadata on an older version and on the newest.
	for _, r := range []*Record{recs[100], recs[499]} {
		if err := d.SetVersionMeta(t.Context(), "b", "obj", r, map[string]string{"X-Amz-Tagging": "k=v"}); err != nil {
			t.Fatal(err)
		}
		got, err := d.GetVersion(t.Context(), "b", "obj", &r.VersionID)
		if err != nil || got.Meta["X-Amz-Tagging"] != "k=v" {
			t.Fatalf("metadata of %x: %+v, %v", r.VersionID[:2], got, err)
		}
	}
	// The newest deleted: the next newest takes the head.
	if _, err := d.DeleteVersion(t.Context(), "b", "obj", recs[499].VersionID); err != nil {
		t.Fatal(err)
	}
	if got, err := d.GetVersion(t.Context(), "b", "obj", nil); err != nil || got.VersionID != recs[498].VersionID {
		t.Fatalf("newest after deleting the newest: %+v, %v", got, err)
	}
	// An older one deleted, another rolled back; one not held refused.
	if _, err := d.DeleteVersion(t.Context(), "b", "obj", recs[7].VersionID); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.RollbackVersion(t.Context(), "b", "obj", recs[8]); !ok || err != nil {
		t.Fatalf("rollback of an older version: %v %v", ok, err)
	}
	if _, err := d.DeleteVersion(t.Context(), "b", "obj", recs[7].VersionID); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("deleting a deleted version: %v", err)
	}
	if vs := versionsOf(t, d, "obj"); len(vs) != 498 {
		t.Fatalf("%d versions after removing 3 of 501", len(vs))
	}
	// Every version removed, newest first: the object is gone.
	for {
		latest, err := d.GetVersion(t.Context(), "b", "obj", nil)
		if errors.Is(err, ErrVersionNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.DeleteVersion(t.Context(), "b", "obj", latest.VersionID); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteBucket(t.Context(), "b", false); err != nil {
		t.Fatalf("deleting the bucket with no versions left: %v", err)
	}
}

// TestNullVersionAmongOlderVersions: a null version that is not the newest
// lives under its own key and is replaced there, or by a newer null
// version taking the head, with the replaced one reported for its data.
func TestNullVersionAmongOlderVersions(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	put := func(r *Record) PutResult {
		t.Helper()
		res, err := d.PutVersion(t.Context(), "b", "obj", r, NotStaged)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	put(&Record{ModTime: 10, ETag: "null-1"})
	put(&Record{VersionID: [16]byte(uuid.New()), ModTime: 20})
	if res := put(&Record{ModTime: 15, ETag: "null-2"}); res.Replaced == nil || res.Replaced.ETag != "null-1" {
		t.Fatalf("an older null replacing the older null: %+v", res)
	}
	if res := put(&Record{ModTime: 12, ETag: "stale"}); !res.Superseded {
		t.Fatalf("a null older than the one held must lose: %+v", res)
	}
	if res := put(&Record{ModTime: 30, ETag: "null-3"}); res.Replaced == nil || res.Replaced.ETag != "null-2" {
		t.Fatalf("a newer null: %+v", res)
	}
	vs := versionsOf(t, d, "obj")
	if len(vs) != 2 || vs[0].ETag != "null-3" || vs[1].ModTime != 20 {
		t.Fatalf("versions: %v", ids(vs))
	}
}

// TestLegacyVersionListIsReadAndMovedOnWrite: a head of the layout before
// (every version in one list) is read as it is, and its older versions
// move to keys of their own at the object's first write.
func TestLegacyVersionListIsReadAndMovedOnWrite(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	var legacy []*Record
	for i := 5; i >= 1; i-- {
		legacy = append(legacy, &Record{VersionID: [16]byte(uuid.New()), ModTime: int64(i * 10)})
	}
	legacy = append(legacy, &Record{ModTime: 5, ETag: "null"}) // a null version, oldest
	if err := d.meta.Set(objectKey("b", "old"), encodeVersions(legacy), d.writeOpts()); err != nil {
		t.Fatal(err)
	}
	if vs := versionsOf(t, d, "old"); fmt.Sprint(ids(vs)) != fmt.Sprint(ids(legacy)) {
		t.Fatalf("legacy read: %v, want %v", ids(vs), ids(legacy))
	}
	if got, err := d.GetVersion(t.Context(), "b", "old", &legacy[3].VersionID); err != nil || got.ModTime != 20 {
		t.Fatalf("legacy version by ID: %+v, %v", got, err)
	}
	// The first write moves the older versions out.
	newest := &Record{VersionID: [16]byte(uuid.New()), ModTime: 60}
	if _, err := d.PutVersion(t.Context(), "b", "old", newest, NotStaged); err != nil {
		t.Fatal(err)
	}
	want := append([]*Record{newest}, legacy...)
	vs := versionsOf(t, d, "old")
	if fmt.Sprint(ids(vs)) != fmt.Sprint(ids(want)) {
		t.Fatalf("after the first write: %v, want %v", ids(vs), ids(want))
	}
	o, err := d.readObject("b", "old")
	if err != nil || o.isLegacy || o.older != len(legacy) {
		t.Fatalf("head after the first write: legacy %v, %d older (want %d), %v", o.isLegacy, o.older, len(legacy), err)
	}
	// The null version, now under its own key, is still replaced by a
	// newer null.
	if res, err := d.PutVersion(t.Context(), "b", "old", &Record{ModTime: 70, ETag: "null-2"}, NotStaged); err != nil || res.Replaced == nil || res.Replaced.ETag != "null" {
		t.Fatalf("null replaced after the move: %+v, %v", res, err)
	}
	if vs := versionsOf(t, d, "old"); len(vs) != len(want) || vs[0].ETag != "null-2" || slices.ContainsFunc(vs, func(r *Record) bool { return r.ETag == "null" }) {
		t.Fatalf("after replacing the null version: %v", ids(vs))
	}
}

// TestWalksCarryNoInlineData: a walk lists an inline object's record
// without its shard (listings never read data from it, and a remote walk
// would ship it); a read by version gives it whole.
func TestWalksCarryNoInlineData(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	r := &Record{VersionID: [16]byte(uuid.New()), ModTime: 10, Size: 5, Flags: FlagInline, Inline: []byte("hello")}
	if _, err := d.PutVersion(t.Context(), "b", "obj", r, NotStaged); err != nil {
		t.Fatal(err)
	}
	for _, latestOnly := range []bool{true, false} {
		var got []*Record
		if err := d.WalkObjects(t.Context(), "b", "", "", latestOnly, func(_ string, vs []*Record) bool { got = vs; return true }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Inline != nil || !got[0].IsInline() || got[0].Size != 5 {
			t.Fatalf("latestOnly %v: walked %+v", latestOnly, got)
		}
	}
	full, err := d.GetVersion(t.Context(), "b", "obj", nil)
	if err != nil || string(full.Inline) != "hello" {
		t.Fatalf("GetVersion: %+v %v", full, err)
	}
}

// TestDeletingTheNewestVersionOfALegacyObject: the first change to an
// object of the layout before moves its older versions to their own keys in
// the change's batch; deleting its newest version in that change must find
// them there (it read the store, found none, and left the older versions
// under keys no head counted: the object vanished).
func TestDeletingTheNewestVersionOfALegacyObject(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	var legacy []*Record
	for i := 3; i >= 1; i-- {
		legacy = append(legacy, &Record{VersionID: [16]byte(uuid.New()), ModTime: int64(i * 10)})
	}
	if err := d.meta.Set(objectKey("b", "old"), encodeVersions(legacy), d.writeOpts()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteVersion(t.Context(), "b", "old", legacy[0].VersionID); err != nil {
		t.Fatal(err)
	}
	if vs := versionsOf(t, d, "old"); fmt.Sprint(ids(vs)) != fmt.Sprint(ids(legacy[1:])) {
		t.Fatalf("after deleting the newest version: %v, want %v", ids(vs), ids(legacy[1:]))
	}
}

// TestStatVersionLeavesInlineDataOut: StatVersion answers the record
// GetVersion does, newest or by ID, without the inline shard (a HEAD reads
// no data), and the same error for a version the drive lacks.
func TestStatVersionLeavesInlineDataOut(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	older := &Record{VersionID: [16]byte(uuid.New()), ModTime: 10, Size: 5, Flags: FlagInline, ETag: "o",
		Meta: map[string]string{"Content-Type": "text/plain"}, Inline: []byte("older")}
	newer := &Record{VersionID: [16]byte(uuid.New()), ModTime: 20, Size: 5, Flags: FlagInline, ETag: "n", Inline: []byte("newer")}
	for _, r := range []*Record{older, newer} {
		if _, err := d.PutVersion(t.Context(), "b", "obj", r, NotStaged); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range map[string]*[16]byte{"newest": nil, "older by ID": &older.VersionID, "newest by ID": &newer.VersionID} {
		full, err := d.GetVersion(t.Context(), "b", "obj", id)
		if err != nil || len(full.Inline) != 5 {
			t.Fatalf("%s: GetVersion %+v %v", name, full, err)
		}
		stat, err := d.StatVersion(t.Context(), "b", "obj", id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if stat.Inline != nil || !stat.IsInline() {
			t.Fatalf("%s: StatVersion kept the data or lost the flag: %+v", name, stat)
		}
		full.Inline = nil
		if fmt.Sprintf("%+v", stat) != fmt.Sprintf("%+v", full) {
			t.Fatalf("%s: StatVersion %+v, GetVersion without its data %+v", name, stat, full)
		}
	}
	missing := [16]byte(uuid.New())
	if _, err := d.StatVersion(t.Context(), "b", "obj", &missing); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("a version the drive lacks: %v", err)
	}
	if _, err := d.StatVersion(t.Context(), "b", "none", nil); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("an object the drive lacks: %v", err)
	}
}
