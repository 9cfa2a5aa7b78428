package drive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Bucket usage. Each drive keeps, per bucket, the bytes and the number of
// the versions it holds (delete markers are no objects and weigh nothing),
// changed in the very batch that adds or removes a version: a crash never
// leaves the figure and the records apart, and a heal, a roll-back or a
// decommission moves the figure with the versions it moves. The quota of
// a bucket (engine/erasure) is checked against it.
//
//	q\x00<bucket>   usage: one or more 16-byte deltas (bytes, objects)
//	m\x00usage      present once every bucket's usage has been counted
//
// A change adds its delta with a merge, so writers to different objects of
// a bucket never wait on one another for it. The value is a list of
// deltas which a reader sums; the store's merger folds the list into one
// delta when it meets it (a compaction, a read). Folding a list and
// concatenating it read the same, which is why the merger keeps the name
// of pebble's default one (the concatenation): a store opened by a build
// before usage was kept, or after, opens with either, and pebble checks
// the name at open.
var usageMerger = &pebble.Merger{
	Name: pebble.DefaultMerger.Name,
	Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		m := &usageFold{}
		return m, m.add(value)
	},
}

var (
	usagePrefix     = []byte{'q', sep}
	usageCountedKey = []byte{'m', sep, 'u', 's', 'a', 'g', 'e'}
)

func usageKey(bucket string) []byte {
	return append(append([]byte(nil), usagePrefix...), bucket...)
}

// Usage is what a bucket's versions hold on one drive, or in all.
type Usage struct {
	Bytes   int64 `json:"bytes"`
	Objects int64 `json:"objects"`
}

const usageDeltaSize = 16

func (u Usage) marshal() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(u.Bytes))
	return binary.LittleEndian.AppendUint64(b, uint64(u.Objects))
}

// decodeUsage sums a stored list of deltas.
func decodeUsage(v []byte) (Usage, error) {
	var u Usage
	if len(v)%usageDeltaSize != 0 {
		return u, fmt.Errorf("%w: bucket usage of %d bytes", ErrCorruptRecord, len(v))
	}
	for ; len(v) > 0; v = v[usageDeltaSize:] {
		u.Bytes += int64(binary.LittleEndian.Uint64(v))
		u.Objects += int64(binary.LittleEndian.Uint64(v[8:]))
	}
	return u, nil
}

// usageFold is the merger's fold: the sum of every delta it is given.
type usageFold struct{ sum Usage }

func (m *usageFold) add(v []byte) error {
	u, err := decodeUsage(v)
	m.sum.Bytes += u.Bytes
	m.sum.Objects += u.Objects
	return err
}

func (m *usageFold) MergeNewer(v []byte) error { return m.add(v) }
func (m *usageFold) MergeOlder(v []byte) error { return m.add(v) }
func (m *usageFold) Finish(bool) ([]byte, io.Closer, error) {
	return m.sum.marshal(), nil, nil
}

// weigh is what r adds to its bucket's usage.
func weigh(r *Record) Usage {
	if r == nil || r.IsDeleteMarker() {
		return Usage{}
	}
	return Usage{Bytes: r.Size, Objects: 1}
}

// count adds the difference between the versions added and removed to
// the bucket's usage, in t's batch.
func (t *objectTxn) count(added, removed *Record) error {
	a, r := weigh(added), weigh(removed)
	delta := Usage{Bytes: a.Bytes - r.Bytes, Objects: a.Objects - r.Objects}
	if delta == (Usage{}) {
		return nil
	}
	t.delta.Bytes += delta.Bytes
	t.delta.Objects += delta.Objects
	return t.b.Merge(usageKey(t.o.bucket), delta.marshal(), nil)
}

// commit commits t's batch, then adds its delta to the drive's figures.
func (t *objectTxn) commit() error {
	opts := t.d.writeOpts()
	if t.noSync {
		opts = pebble.NoSync
	}
	if err := t.d.meta.Commit(t.b.Batch, opts); err != nil {
		return err
	}
	if t.delta != (Usage{}) {
		t.d.usage.add(t.o.bucket, t.delta)
	}
	return nil
}

// usageFigures are a drive's buckets' usage in memory: read from the
// store once, at open, then moved by every commit. (A read of the store's
// key would fold every delta since the last flush, thousands of them, on
// every write to a bucket with a quota.)
type usageFigures struct {
	mu sync.Mutex
	m  map[string]Usage
}

func (f *usageFigures) add(bucket string, delta Usage) {
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]Usage{}
	}
	u := f.m[bucket]
	u.Bytes += delta.Bytes
	u.Objects += delta.Objects
	f.m[bucket] = u
	f.mu.Unlock()
}

func (f *usageFigures) get(bucket string) Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[bucket]
}

func (f *usageFigures) drop(bucket string) {
	f.mu.Lock()
	delete(f.m, bucket)
	f.mu.Unlock()
}

// loadUsage reads every bucket's usage from the store (at open).
func (d *Local) loadUsage() error {
	m := map[string]Usage{}
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: usagePrefix, UpperBound: prefixEnd(usagePrefix)})
	if err != nil {
		return err
	}
	var bad error
	for it.First(); it.Valid(); it.Next() {
		bucket := string(it.Key()[len(usagePrefix):])
		u, err := decodeUsage(it.Value())
		if err != nil {
			bad = fmt.Errorf("drive %s: usage of %s: %w", d.root, bucket, err)
			break
		}
		m[bucket] = u
	}
	if err := d.meta.after(errors.Join(bad, it.Error(), it.Close())); err != nil {
		return err
	}
	d.usage.mu.Lock()
	d.usage.m = m
	d.usage.mu.Unlock()
	return nil
}

// BucketUsage is what the bucket's versions on this drive hold.
func (d *Local) BucketUsage(ctx context.Context, bucket string) (Usage, error) {
	if err := ended(ctx); err != nil {
		return Usage{}, err
	}
	if err := d.meta.err(); err != nil {
		return Usage{}, err
	}
	return d.usage.get(bucket), nil
}

// countUsage counts every bucket's usage once, on a drive written by a
// build that kept none: at open, before the drive serves anything.
// (A drive that a build before this one wrote to after it was counted
// keeps figures short of what that build added; docs/iam.md says so.)
func (d *Local) countUsage() error {
	if _, closer, err := d.meta.Get(usageCountedKey); err == nil {
		return closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	sums := map[string]Usage{}
	it, err := d.meta.NewIter(&pebble.IterOptions{LowerBound: objectPrefix, UpperBound: prefixEnd(objectPrefix)})
	if err != nil {
		return err
	}
	var walkErr error
	for it.First(); it.Valid() && walkErr == nil; it.Next() {
		k := it.Key()[len(objectPrefix):]
		i := bytes.IndexByte(k, sep)
		if i < 0 {
			continue
		}
		bucket, name := string(k[:i]), string(k[i+1:])
		var o *object
		if o, walkErr = d.parseObject(bucket, name, it.Value(), false); walkErr != nil {
			break
		}
		var recs []*Record
		if recs, walkErr = d.allVersions(o, false); walkErr != nil {
			break
		}
		u := sums[bucket]
		for _, r := range recs {
			w := weigh(r)
			u.Bytes += w.Bytes
			u.Objects += w.Objects
		}
		sums[bucket] = u
	}
	if err := d.meta.after(errors.Join(walkErr, it.Error(), it.Close())); err != nil {
		return fmt.Errorf("drive %s: counting bucket usage: %w", d.root, err)
	}
	b := d.meta.NewBatch()
	defer b.Close()
	for bucket, u := range sums {
		if err := b.Set(usageKey(bucket), u.marshal(), nil); err != nil {
			return err
		}
	}
	if err := b.Set(usageCountedKey, nil, nil); err != nil {
		return err
	}
	return d.meta.Commit(b, d.writeOpts())
}
