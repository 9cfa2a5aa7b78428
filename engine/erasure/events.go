package erasure

import (
	"context"
	"errors"
	"maps"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Writes' event notifications stored with their versions
// (objlayer.PutOptions.Events): each drive that commits the version
// commits its events in the same batch (drive/events.go), so the write
// costs no commit more for them. The events count as stored when write
// quorum of the drives that committed the version can carry them.

// The layer stores writes' events with their versions: the S3 front end
// and the queue find that out by asserting objlayer.EventStore.
var _ objlayer.EventStore = Layer{}

// EventDrive is a drive that stores events with records: drive.Local, and
// a peer's drive when the peer's protocol has them.
type EventDrive interface {
	CarriesEvents() bool
	ListEvents(ctx context.Context, after [16]byte, fn func(id [16]byte, events []byte) bool) error
	DeleteEvents(ctx context.Context, ids [][16]byte) error
	HasEvent(ctx context.Context, id [16]byte) (bool, error)
}

func carriesEvents(d Drive) bool {
	ed, ok := d.(EventDrive)
	return ok && ed.CarriesEvents()
}

// writeEvents are a write's events (objlayer.PutOptions.Events) as its
// commit rounds stamp them. Which drives are sent them is decided once,
// before the first round, from whether each carries events then: a
// drive's record goes with the events or without them, never dropped on
// the way (a peer that can no longer take them fails the item), so the
// drives counted as holding them do.
type writeEvents struct {
	id             [16]byte
	bucket, object string
	make           func(objlayer.ObjectInfo) []byte
	carries        []bool
	// mark is opts.EventMark when every drive of the write carries
	// events (so a committed version has them on write quorum), else "".
	mark string
}

// newWriteEvents is nil when the write has no events to store.
func newWriteEvents(bucket, object string, opts objlayer.PutOptions, drives []Drive) *writeEvents {
	if opts.Events == nil {
		return nil
	}
	e := &writeEvents{id: uuid.New(), bucket: bucket, object: object, make: opts.Events, carries: make([]bool, len(drives)), mark: opts.EventMark}
	for pos, d := range drives {
		e.carries[pos] = d != nil && carriesEvents(d)
		if !e.carries[pos] {
			e.mark = ""
		}
	}
	return e
}

// stamp sets rec's events from its stamp of this round.
func (e *writeEvents) stamp(rec *drive.Record) {
	if e == nil {
		return
	}
	rec.EventID = e.id
	rec.Events = e.make(infoFromRecord(e.bucket, e.object, rec))
	if len(rec.Events) == 0 {
		rec.EventID = [16]byte{}
	}
	if e.mark == "" {
		return
	}
	// The caller's map is not changed; a round stamped again keeps the
	// mark (the ID is the write's, not the round's).
	want := ""
	if rec.EventID != ([16]byte{}) {
		want = objlayer.EventMarkValue(rec.EventID)
	}
	if rec.Meta[e.mark] == want {
		return
	}
	meta := maps.Clone(rec.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	if want == "" {
		delete(meta, e.mark)
	} else {
		meta[e.mark] = want
	}
	rec.Meta = meta
}

// own is the record sent to the drive at pos: without the events when
// that drive is not sent them.
func (e *writeEvents) own(r *drive.Record, pos int) *drive.Record {
	if e != nil && !e.carries[pos] {
		r.EventID, r.Events = [16]byte{}, nil
	}
	return r
}

// stored reports whether the events rec carries are on write quorum of
// drives; when they are not (drives of peers that cannot carry them),
// the copies that were stored are removed, so that the caller's other way
// of storing them is the only one.
func (e *writeEvents) stored(ctx context.Context, s *Set, drives []Drive, rec *drive.Record, errs []error) bool {
	if e == nil || rec.EventID == ([16]byte{}) {
		return false
	}
	n := 0
	for pos, err := range errs {
		if err == nil && e.carries[pos] {
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
// holds, each write's once; objlayer.ErrPartialListing when a drive was
// offline, could not be listed or stores no events.
func (s *Set) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	seen := map[[16]byte]bool{}
	partial := false
	for _, d := range s.Drives() {
		if d == nil || !carriesEvents(d) {
			partial = true
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
		// Another drive holds the events of a write that reached
		// quorum, or the next listing finds them.
		partial = partial || err != nil
	}
	if partial {
		return objlayer.ErrPartialListing
	}
	return nil
}

// EventStored asks every online drive that carries events whether it
// holds the write's events id. A version marked with them
// (PutOptions.EventMark) had them committed on write quorum, so while
// they are stored, any read quorum of drives holds a copy: when fewer
// than read quorum answer, they count as stored (the safe answer for a
// status that says "not yet delivered").
func (s *Set) EventStored(ctx context.Context, id [16]byte) (bool, error) {
	type answer struct {
		held bool
		err  error
	}
	drives := s.Drives()
	answers := make(chan answer, len(drives))
	asked := 0
	for _, d := range drives {
		if d == nil || !carriesEvents(d) {
			continue
		}
		asked++
		driveWork.run(func() {
			held, err := d.(EventDrive).HasEvent(ctx, id)
			answers <- answer{held, err}
		})
	}
	// One drive holding them settles it; so do read quorum of drives
	// without them (a slow drive is not waited for).
	quorum, without := s.layout.ReadQuorum(), 0
	for range asked {
		a := <-answers
		switch {
		case a.held:
			return true, nil
		case a.err == nil:
			if without++; without >= quorum {
				return false, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return true, nil
}

// ForgetEvents removes delivered events from the set's drives.
func (s *Set) ForgetEvents(ctx context.Context, ids [][16]byte) error {
	return s.deleteEvents(ctx, s.Drives(), ids)
}

// listEach runs n listings in turn: the first error other than
// objlayer.ErrPartialListing ends them; that one is returned once all ran
// when any returned it.
func listEach(n int, list func(i int) error) error {
	partial := false
	for i := range n {
		err := list(i)
		if err != nil && !errors.Is(err, objlayer.ErrPartialListing) {
			return err
		}
		partial = partial || err != nil
	}
	if partial {
		return objlayer.ErrPartialListing
	}
	return nil
}

// ListEvents implements objlayer.EventStore over a pool's sets.
func (p *Pool) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	return listEach(len(p.sets), func(i int) error { return p.sets[i].ListEvents(ctx, fn) })
}

// ForgetEvents implements objlayer.EventStore for a pool.
func (p *Pool) ForgetEvents(ctx context.Context, refs []objlayer.EventRef) error {
	bySet := map[*Set][][16]byte{}
	for _, r := range refs {
		s := p.SetFor(r.Bucket, r.Object)
		bySet[s] = append(bySet[s], r.ID)
	}
	var errs []error
	for s, ids := range bySet {
		errs = append(errs, s.ForgetEvents(ctx, ids))
	}
	return errors.Join(errs...)
}

// EventStored implements objlayer.EventStore for a pool.
func (p *Pool) EventStored(ctx context.Context, ref objlayer.EventRef) (bool, error) {
	return p.SetFor(ref.Bucket, ref.Object).EventStored(ctx, ref.ID)
}

// ListEvents implements objlayer.EventStore over every pool.
func (ps *Pools) ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error {
	entries := ps.Entries()
	return listEach(len(entries), func(i int) error { return entries[i].Pool.ListEvents(ctx, fn) })
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

// EventStored implements objlayer.EventStore: the events are in the set
// of whichever pool the version went to (a version moved since keeps
// them in the pool it left until they are delivered), so each pool's is
// asked.
func (ps *Pools) EventStored(ctx context.Context, ref objlayer.EventRef) (bool, error) {
	for _, e := range ps.Entries() {
		ok, err := e.Pool.EventStored(ctx, ref)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}
