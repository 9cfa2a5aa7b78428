package drive

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
)

func heldEvents(t *testing.T, d *Local) map[[16]byte]string {
	t.Helper()
	got := map[[16]byte]string{}
	if err := d.ListEvents(t.Context(), [16]byte{}, func(id [16]byte, ev []byte) bool {
		got[id] = string(ev)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestEventsCommitWithTheirRecord: a version's events are stored by the
// PutVersion that stores it and by no write the drive drops (a null
// version older than the one held); a rollback of the version removes
// them; DeleteEvents removes delivered ones; a listing goes on after an
// ID.
func TestEventsCommitWithTheirRecord(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	put := func(modTime int64, events string) (*Record, PutResult) {
		t.Helper()
		rec := &Record{ModTime: modTime, ETag: events, DataDir: uuid.New(), EventID: uuid.New(), Events: []byte(events)}
		res, err := d.PutVersion(t.Context(), "b", "obj", rec, NotStaged)
		if err != nil {
			t.Fatal(err)
		}
		return rec, res
	}
	first, _ := put(10, "first")
	second, _ := put(20, "second")
	if _, res := put(15, "late"); !res.Superseded {
		t.Fatal("an older null version was not dropped")
	}
	got := heldEvents(t, d)
	if len(got) != 2 || got[first.EventID] != "first" || got[second.EventID] != "second" {
		t.Fatalf("events held: %v; want first and second only (a dropped write stores none)", got)
	}
	if _, err := d.RollbackVersion(t.Context(), "b", "obj", second); err != nil {
		t.Fatal(err)
	}
	if got := heldEvents(t, d); len(got) != 1 || got[first.EventID] != "first" {
		t.Fatalf("after the rollback of second: %v", got)
	}
	third, _ := put(30, "third")
	// The record holds no events: a read gives none back.
	if r, err := d.GetVersion(t.Context(), "b", "obj", nil); err != nil || r.ETag != "third" || r.Events != nil || r.EventID != ([16]byte{}) {
		t.Fatalf("read back %+v, %v", r, err)
	}
	lo, hi := first.EventID, third.EventID
	if bytes.Compare(lo[:], hi[:]) > 0 {
		lo, hi = hi, lo
	}
	var after [][16]byte
	if err := d.ListEvents(t.Context(), lo, func(id [16]byte, _ []byte) bool { after = append(after, id); return true }); err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || after[0] != hi {
		t.Fatalf("listed after the lower ID: %x, want only %x", after, hi)
	}
	if err := d.DeleteEvents(t.Context(), [][16]byte{first.EventID, uuid.New()}); err != nil {
		t.Fatal(err)
	}
	if got := heldEvents(t, d); len(got) != 1 || got[third.EventID] != "third" {
		t.Fatalf("after deleting first's: %v", got)
	}
}

// TestEventsOfAWriteStampedAgainStayRemoved: a write stamped again sets
// its events' key a second time on a drive that took the first stamp;
// once delivered and removed (a SingleDelete), no copy comes back when
// the store flushes and compacts (a SingleDelete meeting two SETs would
// let the older one back, to be delivered again long after).
func TestEventsOfAWriteStampedAgainStayRemoved(t *testing.T) {
	// The null version and a version of its own ID.
	for _, versionID := range [][16]byte{{}, uuid.New()} {
		d := openTestDrive(t, t.TempDir(), nil)
		id, dataDir := uuid.New(), uuid.New()
		for i, stamp := range []int64{10, 20} {
			rec := &Record{VersionID: versionID, ModTime: stamp, ETag: "e", DataDir: dataDir, EventID: id, Events: []byte{byte(i)}}
			if _, err := d.PutVersion(t.Context(), "b", "obj", rec, NotStaged); err != nil {
				t.Fatal(err)
			}
		}
		if got := heldEvents(t, d); len(got) != 1 || got[id] != "\x01" {
			t.Fatalf("after the second stamp: %q", got)
		}
		if err := d.DeleteEvents(t.Context(), [][16]byte{id}); err != nil {
			t.Fatal(err)
		}
		if err := d.meta.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.meta.db.Compact(t.Context(), []byte{0}, []byte{0xff}, true); err != nil {
			t.Fatal(err)
		}
		if got := heldEvents(t, d); len(got) != 0 {
			t.Fatalf("version %x: removed events came back after a flush and compaction: %q", versionID, got)
		}
	}
}
