package drive

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Events stored with the writes that made them. A write that must not be
// acknowledged before its event notifications are stored (engine/notify)
// hands them to PutVersion with its record (Record.EventID, Events): they
// are set under a key of their own in the same batch as the record, so a
// drive that holds the version holds its events, at no commit of their
// own. Once the events are delivered they are removed (DeleteEvents,
// unsynced: a crash before that sends them again).
//
//	n\x00<event ID>          a write's events, as the notifier encoded them
var eventPrefix = []byte{'n', sep}

func eventKey(id [16]byte) []byte {
	return append(append(make([]byte, 0, len(eventPrefix)+len(id)), eventPrefix...), id[:]...)
}

// hasEvents reports whether rec carries events to store with it.
func (r *Record) hasEvents() bool { return r.EventID != ([16]byte{}) && len(r.Events) > 0 }

// setEvents stages rec's events in the object's batch. Delivered events
// are removed with a SingleDelete, which is only sound for a key set once
// since its last delete: a write stamped again (the same events, a new
// stamp) sets its key a second time on a drive that took the first
// stamp, so a key already held is deleted before it is set again
// (SET, DEL, SET: the SingleDelete then meets one SET). Only a drive that
// held a version of the record's ID before this put (put's heldBefore)
// can hold its events: the others skip the lookup, which misses through
// every level of the store (a lookup per write cost more than the
// events' own SET).
func (t *objectTxn) setEvents(rec *Record) error {
	if !rec.hasEvents() {
		return nil
	}
	key := eventKey(rec.EventID)
	if t.heldBefore {
		_, closer, err := t.b.Get(key)
		switch {
		case err == nil:
			_ = closer.Close()
			if err := t.b.Delete(key, nil); err != nil {
				return err
			}
		case !errors.Is(err, pebble.ErrNotFound):
			return err
		}
	}
	return t.b.Set(key, rec.Events, nil)
}

// CarriesEvents reports that the drive stores events with records.
func (d *Local) CarriesEvents() bool { return true }

// ListEvents calls fn with every write's events the drive holds whose ID
// sorts after after, in the order of their IDs, until fn returns false.
// The value is fn's only during the call.
func (d *Local) ListEvents(ctx context.Context, after [16]byte, fn func(id [16]byte, events []byte) bool) error {
	lower := eventKey(after)
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(eventPrefix)})
	if err != nil {
		return fmt.Errorf("drive %s: listing events: %w", d.root, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ended(ctx); err != nil {
			return err
		}
		k := it.Key()
		if len(k) != len(eventPrefix)+16 || !bytes.HasPrefix(k, eventPrefix) || bytes.Equal(k, lower) {
			continue
		}
		var id [16]byte
		copy(id[:], k[len(eventPrefix):])
		if !fn(id, it.Value()) {
			break
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("drive %s: listing events: %w", d.root, err)
	}
	return nil
}

// HasEvent reports whether the drive holds the write's events id (not yet
// delivered and removed).
func (d *Local) HasEvent(ctx context.Context, id [16]byte) (bool, error) {
	if err := ended(ctx); err != nil {
		return false, err
	}
	_, closer, err := d.meta.Get(eventKey(id))
	switch {
	case err == nil:
		_ = closer.Close()
		return true, nil
	case errors.Is(err, pebble.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("drive %s: looking up events: %w", d.root, err)
}

// DeleteEvents removes delivered writes' events, in one unsynced batch:
// a crash that loses it makes them delivered again, which at-least-once
// delivery allows. IDs the drive does not hold are no error.
func (d *Local) DeleteEvents(ctx context.Context, ids [][16]byte) error {
	if err := ended(ctx); err != nil {
		return err
	}
	b := d.meta.NewBatch()
	defer b.Close()
	for _, id := range ids {
		if err := b.SingleDelete(eventKey(id), nil); err != nil {
			return err
		}
	}
	if err := d.meta.Commit(b, pebble.NoSync); err != nil {
		return fmt.Errorf("drive %s: removing delivered events: %w", d.root, err)
	}
	return nil
}
