package erasure

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Writes' event notifications stored with their versions
// (objlayer.PutOptions.Events): each drive that commits the version
// commits its events in the same batch (drive/events.go), so the write
// costs no commit more for them. The events count as stored when write
// quorum of the drives that committed the version can carry them.

// EventDrive is a drive that stores events with records: drive.Local, and
// a peer's drive when the peer's protocol has them.
type EventDrive interface {
	CarriesEvents() bool
	ListEvents(ctx context.Context, after [16]byte, fn func(id [16]byte, events []byte) bool) error
	DeleteEvents(ctx context.Context, ids [][16]byte) error
}

func carriesEvents(d Drive) bool {
	ed, ok := d.(EventDrive)
	return ok && ed.CarriesEvents()
}

// eventsStamp is what sets a version's events before each commit round
// (commitVersion), or nil when the write has none to store.
func eventsStamp(bucket, object string, opts objlayer.PutOptions) func(rec *drive.Record) {
	if opts.Events == nil {
		return nil
	}
	id := uuid.New()
	return func(rec *drive.Record) {
		rec.EventID = id
		rec.Events = opts.Events(infoFromRecord(bucket, object, rec))
		if len(rec.Events) == 0 {
			rec.EventID = [16]byte{}
		}
	}
}

// eventsStored reports whether the events rec carries are on write quorum
// of drives; when they are not (drives of peers that cannot carry them),
// the copies that were stored are removed, so that the caller's other way
// of storing them is the only one.
func (s *Set) eventsStored(ctx context.Context, drives []Drive, rec *drive.Record, errs []error) bool {
	if rec.EventID == ([16]byte{}) {
		return false
	}
	n := 0
	for pos, err := range errs {
		if err == nil && carriesEvents(drives[pos]) {
			n++
		}
	}
	if n >= s.layout.WriteQuorum() {
		return true
	}
	// Best effort: a copy left behind is found by a later listing and
	// delivered again (a duplicate, which at least once allows).
	_ = s.deleteEvents(committing(ctx), drives, [][16]byte{rec.EventID})
	return false
}

// deleteEvents removes events from every online drive that carries them.
func (s *Set) deleteEvents(ctx context.Context, drives []Drive, ids [][16]byte) error {
	errs := forEachDrive(drives, func(_ int, d Drive) error {
		if !carriesEvents(d) {
			return nil
		}
		return d.(EventDrive).DeleteEvents(ctx, ids)
	})
	return errors.Join(errs...)
}

// ListEvents calls fn with the events every online drive of the set
// holds, each write's once.
func (s *Set) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	seen := map[[16]byte]bool{}
	for _, d := range s.Drives() {
		if d == nil || !carriesEvents(d) {
			continue
		}
		var fnErr error
		err := d.(EventDrive).ListEvents(ctx, [16]byte{}, func(id [16]byte, events []byte) bool {
			if seen[id] {
				return true
			}
			seen[id] = true
			fnErr = fn(id, events)
			return fnErr == nil
		})
		if fnErr != nil {
			return fnErr
		}
		if err != nil && ctx.Err() != nil {
			return err
		}
		// A drive that fails to list is skipped: another holds the
		// events of a write that reached quorum, or the next listing
		// finds them.
	}
	return nil
}

// ForgetEvents removes delivered events from the set's drives.
func (s *Set) ForgetEvents(ctx context.Context, ids [][16]byte) error {
	return s.deleteEvents(ctx, s.Drives(), ids)
}

// ListEvents implements objlayer.EventStore over a pool's sets.
func (p *Pool) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	for _, s := range p.sets {
		if err := s.ListEvents(ctx, fn); err != nil {
			return err
		}
	}
	return nil
}

// ForgetEvents implements objlayer.EventStore for a pool.
func (p *Pool) ForgetEvents(ctx context.Context, refs []objlayer.EventRef) error {
	bySet := map[*Set][][16]byte{}
	for _, r := range refs {
		if r.Bucket == "" && r.Object == "" {
			for _, s := range p.sets {
				bySet[s] = append(bySet[s], r.ID)
			}
			continue
		}
		s := p.SetFor(r.Bucket, r.Object)
		bySet[s] = append(bySet[s], r.ID)
	}
	var errs []error
	for s, ids := range bySet {
		errs = append(errs, s.ForgetEvents(ctx, ids))
	}
	return errors.Join(errs...)
}

// ListEvents implements objlayer.EventStore over every pool.
func (ps *Pools) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	for _, e := range ps.Entries() {
		if err := e.Pool.ListEvents(ctx, fn); err != nil {
			return err
		}
	}
	return nil
}

// ForgetEvents implements objlayer.EventStore: a write's events are in
// the pool its version went to, which the caller does not know; they are
// removed from its set in every pool (a delete of a key a drive does not
// hold costs nothing).
func (ps *Pools) ForgetEvents(ctx context.Context, refs []objlayer.EventRef) error {
	var errs []error
	for _, e := range ps.Entries() {
		errs = append(errs, e.Pool.ForgetEvents(ctx, refs))
	}
	return errors.Join(errs...)
}
