package internode

import (
	"testing"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
)

// TestEventsTravelWithRecords: a record's events reach a peer's drive in
// the same batch and are listed, rolled back and removed there; a peer of
// the protocol before says its drives carry none (so the writer sends it
// none and stores the events another way), and if sent some anyway fails
// the items rather than storing the records without them; a single
// PutVersion (no batch) refuses a record with events.
func TestEventsTravelWithRecords(t *testing.T) {
	for _, version := range []int{Protocol, eventsProtocol - 1} {
		n := startNode(t, "127.0.0.1:0", version, newDrives(t, "d1", "d2"))
		p := newPeer(t, n, Protocol)
		var puts []erasure.PutItem
		id := uuid.New()
		for path := range n.drives {
			rec := record(10)
			rec.EventID, rec.Events = id, []byte("events of the write")
			puts = append(puts, erasure.PutItem{Drive: p.Drive(path), Bucket: "bk", Object: "k", Rec: rec, Stage: drive.NotStaged})
		}
		for i, err := range p.PutVersions(t.Context(), puts) {
			if (err != nil) != (version < eventsProtocol) {
				t.Fatalf("protocol %d: put %d: %v", version, i, err)
			}
		}
		for path, local := range n.drives {
			rd := p.Drive(path)
			if got, want := rd.CarriesEvents(), version >= eventsProtocol; got != want {
				t.Fatalf("protocol %d: CarriesEvents %v", version, got)
			}
			var held []string
			if err := local.ListEvents(t.Context(), [16]byte{}, func(got [16]byte, ev []byte) bool {
				if got == id {
					held = append(held, string(ev))
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if version < eventsProtocol {
				if len(held) != 0 {
					t.Fatalf("protocol %d: the drive stored events", version)
				}
				continue
			}
			if len(held) != 1 || held[0] != "events of the write" {
				t.Fatalf("drive %s holds %q", path, held)
			}
			// A lookup finds the write's events and no neighbour's (the
			// peer answers it with its listing from just before the ID).
			other := id
			other[15] ^= 1
			for _, c := range []struct {
				id   [16]byte
				want bool
			}{{id, true}, {other, false}, {[16]byte{}, false}} {
				for name, d := range map[string]erasure.EventDrive{"remote": rd, "local": local} {
					if got, err := d.HasEvent(t.Context(), c.id); err != nil || got != c.want {
						t.Fatalf("%s HasEvent(%x) = %v, %v; want %v", name, c.id, got, err, c.want)
					}
				}
			}
			var listed int
			if err := rd.ListEvents(t.Context(), [16]byte{}, func(got [16]byte, ev []byte) bool {
				listed++
				return got == id && string(ev) == "events of the write"
			}); err != nil || listed != 1 {
				t.Fatalf("remote listing: %d, %v", listed, err)
			}
		}
		if version < eventsProtocol {
			continue
		}
		single := record(10)
		single.EventID, single.Events = uuid.New(), []byte("x")
		for path := range n.drives {
			if _, err := p.Drive(path).PutVersion(t.Context(), "bk", "single", single, drive.NotStaged); err == nil {
				t.Fatal("a single PutVersion stored a record with events (without them)")
			}
		}
		// A rollback removes the events on one drive; DeleteEvents on the other.
		var paths []string
		for path := range n.drives {
			paths = append(paths, path)
		}
		if _, err := p.Drive(paths[0]).RollbackVersion(t.Context(), "bk", "k", puts[0].Rec); err != nil {
			t.Fatal(err)
		}
		if err := p.Drive(paths[1]).DeleteEvents(t.Context(), [][16]byte{id}); err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if held, err := p.Drive(path).HasEvent(t.Context(), id); held || err != nil {
				t.Fatalf("drive %s: HasEvent after removal: %v, %v", path, held, err)
			}
			if err := p.Drive(path).ListEvents(t.Context(), [16]byte{}, func([16]byte, []byte) bool {
				t.Fatalf("drive %s still holds events", path)
				return false
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
