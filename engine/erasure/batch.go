package erasure

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/drive"
)

// The hot metadata operations of a set (the records of a small PUT, the
// record reads of a GET or HEAD) are sent to each node once, for all of its
// drives in the set, instead of once per drive: a small PUT costs one round
// trip per node.

// NodeBatcher takes several of one node's drives' operations in one round
// trip.
type NodeBatcher interface {
	PutVersions(ctx context.Context, items []PutItem) []error
	// StartGetVersions sends several drives' GetVersion and returns
	// without waiting for the answer: wait (called once) returns it, and
	// how long after the call it came.
	StartGetVersions(ctx context.Context, items []GetItem) (wait func() ([]*drive.Record, []error, time.Duration))
}

// Batched is implemented by drives on another node. Batcher returns nil
// when that node cannot batch (an older protocol): operations then go
// drive by drive.
type Batched interface {
	Batcher() NodeBatcher
}

// PutItem is one drive's PutVersion in a batch.
type PutItem struct {
	Drive          Drive
	Bucket, Object string
	Rec            *drive.Record
	Stage          [16]byte
}

// GetItem is one drive's GetVersion in a batch (StatVersion when
// WithoutData).
type GetItem struct {
	Drive          Drive
	Bucket, Object string
	VersionID      *[16]byte
	WithoutData    bool
}

// read runs the item on d.
func (it GetItem) read(ctx context.Context, d Drive) (*drive.Record, error) {
	if it.WithoutData {
		return d.StatVersion(ctx, it.Bucket, it.Object, it.VersionID)
	}
	return d.GetVersion(ctx, it.Bucket, it.Object, it.VersionID)
}

// nodeGroup is the positions of a set whose drives one node batches.
type nodeGroup struct {
	nb        NodeBatcher
	positions []int
}

// groupByNode splits a snapshot's online drives into batches per node and
// drives to call one by one (this node's, and those of a node that cannot
// batch).
func groupByNode(drives []Drive) (groups []nodeGroup, single []int) {
	single = make([]int, 0, len(drives))
	for pos, d := range drives {
		var nb NodeBatcher
		if b, ok := d.(Batched); ok {
			nb = b.Batcher()
		}
		switch {
		case d == nil:
		case nb == nil:
			single = append(single, pos)
		default:
			i := slices.IndexFunc(groups, func(g nodeGroup) bool { return g.nb == nb })
			if i < 0 {
				groups = append(groups, nodeGroup{nb: nb, positions: make([]int, 0, len(drives)-pos)})
				i = len(groups) - 1
			}
			groups[i].positions = append(groups[i].positions, pos)
		}
	}
	return groups, single
}

// putVersions commits rec(pos) on every online drive (errDriveOffline for
// the others), one round trip per node. A position whose rec is nil is
// skipped with the error rec returned; a drive that held a newer null
// version answers drive.ErrSuperseded. With a budget (w), drives still
// committing when write quorum of them did and the allowance ran out are
// left to finish in the background (errStillCommitting); late, when not
// nil, hears how each of those ended.
func putVersions(ctx context.Context, w *writeWait, drives []Drive, bucket, object string,
	rec func(pos int) (*drive.Record, [16]byte, error), late func(pos int, err error)) []error {
	errs := make([]error, len(drives))
	results := make(chan driveResult[struct{}], len(drives))
	var pending []int
	for pos, d := range drives {
		if d == nil {
			errs[pos] = errDriveOffline
		} else {
			pending = append(pending, pos)
		}
	}
	done := func(pos int, err error) { results <- driveResult[struct{}]{pos: pos, err: err} }
	groups, single := groupByNode(drives)
	for _, pos := range single {
		driveWork.run(func() {
			r, stage, err := rec(pos)
			if r == nil {
				done(pos, err)
				return
			}
			res, err := drives[pos].PutVersion(committing(ctx), bucket, object, r, stage)
			if err == nil && res.Superseded {
				err = drive.ErrSuperseded
			}
			done(pos, err)
		})
	}
	for _, g := range groups {
		go func() {
			items := make([]PutItem, 0, len(g.positions))
			sent := make([]int, 0, len(g.positions))
			for _, pos := range g.positions {
				r, stage, err := rec(pos)
				if r == nil {
					done(pos, err)
					continue
				}
				items = append(items, PutItem{Drive: drives[pos], Bucket: bucket, Object: object, Rec: r, Stage: stage})
				sent = append(sent, pos)
			}
			if len(items) == 0 {
				return
			}
			for i, err := range g.nb.PutVersions(committing(ctx), items) {
				done(sent[i], err)
			}
		}()
	}
	var lateOne func(int, struct{}, error)
	if late != nil {
		lateOne = func(pos int, _ struct{}, err error) { late(pos, err) }
	}
	collect(w, results, pending, make([]struct{}, len(drives)), errs, errStillCommitting, lateOne)
	return errs
}

// getVersionsTimed reads one version's record (get) from every online
// drive, one round trip per node, recording each answer's time in lat (a
// node's batch: the batch's time for each of its drives). Other nodes'
// batches are sent first; this node's drives are read while they travel,
// on this goroutine one after the other (a record lookup takes a small
// part of a round trip, and a goroutine each costs more than the lookup),
// or, with no batch out, on goroutines of their own but the last. Drives
// of a node that cannot batch are called on goroutines of their own.
func getVersionsTimed(ctx context.Context, drives []Drive, get GetItem, lat *latencies) ([]*drive.Record, []error) {
	recs := make([]*drive.Record, len(drives))
	errs := make([]error, len(drives))
	for pos, d := range drives {
		if d == nil {
			errs[pos] = errDriveOffline
		}
	}
	groups, single := groupByNode(drives)
	type sent struct {
		positions []int
		wait      func() ([]*drive.Record, []error, time.Duration)
	}
	batches := make([]sent, 0, len(groups))
	for _, g := range groups {
		items := make([]GetItem, len(g.positions))
		for i, pos := range g.positions {
			items[i] = get
			items[i].Drive = drives[pos]
		}
		batches = append(batches, sent{g.positions, g.nb.StartGetVersions(ctx, items)})
	}
	var wg sync.WaitGroup
	for i, pos := range single {
		read := func() {
			lat.timed(pos, func() { recs[pos], errs[pos] = get.read(ctx, drives[pos]) })
		}
		_, remote := drives[pos].(Batched) // a node that cannot batch
		if !remote && (len(batches) > 0 || i == len(single)-1) {
			read()
			continue
		}
		wg.Add(1)
		driveWork.run(func() {
			defer wg.Done()
			read()
		})
	}
	for _, b := range batches {
		rs, es, took := b.wait()
		for i, pos := range b.positions {
			recs[pos], errs[pos] = rs[i], es[i]
			lat.observe(pos, took)
		}
	}
	wg.Wait()
	return recs, errs
}
