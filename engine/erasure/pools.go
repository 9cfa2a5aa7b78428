package erasure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Pools are the server pools of a deployment: one namespace. A new object
// goes to an active pool chosen by free space; an existing object stays in
// its pool; reads and listings look at every pool. A draining pool takes
// no new objects while its objects move out (decommission).
type Pools struct {
	mu    sync.RWMutex
	pools []*PoolEntry
	// OnBucketChange is told when a bucket is created, changed or
	// removed here, so peers drop their cached record; nil: nobody.
	OnBucketChange func(bucket string)
	// KnownBy counts the other nodes serving reads that know the pool
	// named (a pool just added to the topology is not known to a node that
	// has not loaded it yet, which would not find an object put there);
	// nil: every pool is known alike. Set before the pools serve.
	KnownBy func(pool string) int
}

// PoolEntry is one pool of the deployment.
type PoolEntry struct {
	Name string
	Pool *Pool
	mu   sync.Mutex
	// state is Active, Draining or Decommissioned (cluster.Pool* values).
	state string
	// free is the pool's free bytes (all drives), refreshed now and then.
	free     uint64
	full     bool
	freeTime time.Time
	// awaiting: the pool was added while this node runs (Add) and its
	// servers have not yet been seen up (listable).
	awaiting atomic.Bool
	// writes counts the writes this node placed in the pool (poolFor) that
	// are still running.
	writes atomic.Int64
}

// WritesInFlight counts the writes this node placed in the pool (new
// objects, versions and delete markers) that have not finished: a drain
// waits for those placed before every node knew the pool was draining.
func (e *PoolEntry) WritesInFlight() int64 { return e.writes.Load() }

// placed counts a write placed in e until the returned function is called.
func (e *PoolEntry) placed() func() {
	e.writes.Add(1)
	return func() { e.writes.Add(-1) }
}

// Pool states.
const (
	StateActive         = "Active"
	StateDraining       = "Draining"
	StateDecommissioned = "Decommissioned"
)

// NewPools groups pools into one namespace.
func NewPools(entries ...*PoolEntry) *Pools { return &Pools{pools: entries} }

// NewPoolEntry names a pool and gives its state.
func NewPoolEntry(name string, p *Pool, state string) *PoolEntry {
	return &PoolEntry{Name: name, Pool: p, state: state}
}

// State is the pool's state.
func (e *PoolEntry) State() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// SetState changes the pool's state.
func (e *PoolEntry) SetState(s string) {
	e.mu.Lock()
	e.state = s
	e.mu.Unlock()
}

// Entries returns the pools in order.
func (ps *Pools) Entries() []*PoolEntry {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return append([]*PoolEntry(nil), ps.pools...)
}

// Add appends a pool (expansion). Listings leave it out until its servers
// are first seen up (listable).
func (ps *Pools) Add(e *PoolEntry) {
	e.awaiting.Store(true)
	ps.mu.Lock()
	ps.pools = append(ps.pools, e)
	ps.mu.Unlock()
}

// Remove drops a pool (after decommission).
func (ps *Pools) Remove(name string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, e := range ps.pools {
		if e.Name == name {
			ps.pools = append(ps.pools[:i:i], ps.pools[i+1:]...)
			return
		}
	}
}

// Entry returns a pool by name (nil when unknown).
func (ps *Pools) Entry(name string) *PoolEntry {
	for _, e := range ps.Entries() {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// live are the pools that may hold objects (not decommissioned). Bucket
// records are kept in these only: a decommissioned pool is empty for good,
// and its servers may already be gone while nodes still list it.
func (ps *Pools) live() []*PoolEntry {
	var out []*PoolEntry
	for _, e := range ps.Entries() {
		if e.State() != StateDecommissioned {
			out = append(out, e)
		}
	}
	return out
}

// listable are the live pools a listing reads. A pool added while this
// node runs is left out until every set of it first has write quorum
// online: its nodes agree on its format before they serve it, and a
// listing that met it then failed for the seconds its servers take to
// start. No object is in it before that as far as this node can read: it
// places none there (placement ranks a pool without quorum last), and its
// drives do not answer. Another node may see its servers up first, by at
// most a ping (a second).
func (ps *Pools) listable() []*PoolEntry {
	var out []*PoolEntry
	for _, e := range ps.live() {
		if e.awaiting.Load() {
			if !e.Pool.writable() {
				continue
			}
			e.awaiting.Store(false)
		}
		out = append(out, e)
	}
	return out
}

// first is the pool whose bucket records answer for all: the first one
// not decommissioned (bucket records are kept in every pool).
func (ps *Pools) first() *Pool {
	es := ps.Entries()
	for _, e := range es {
		if e.State() != StateDecommissioned {
			return e.Pool
		}
	}
	return es[0].Pool
}

func (ps *Pools) bucketChanged(name string) {
	for _, e := range ps.Entries() {
		e.Pool.ForgetBucket(name)
	}
	if ps.OnBucketChange != nil {
		ps.OnBucketChange(name)
	}
}

// ForgetBucket drops a bucket's cached record in every pool.
func (ps *Pools) ForgetBucket(name string) {
	for _, e := range ps.Entries() {
		e.Pool.ForgetBucket(name)
	}
}

// MakeBucket creates a bucket in every pool.
func (ps *Pools) MakeBucket(ctx context.Context, name string) error {
	return ps.CreateBucket(ctx, objlayer.BucketInfo{Name: name})
}

// CreateBucket creates a bucket with the given record in every pool, with
// one creation time.
func (ps *Pools) CreateBucket(ctx context.Context, info objlayer.BucketInfo) error {
	defer ps.bucketChanged(info.Name)
	if _, err := ps.first().readBucket(ctx, info.Name); err == nil {
		return objlayer.ErrBucketExists
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	for _, e := range ps.live() {
		if err := e.Pool.CreateBucket(ctx, info); err != nil && !errors.Is(err, objlayer.ErrBucketExists) {
			return err
		}
	}
	return nil
}

// StatBucket returns a bucket's record (the first pool's).
func (ps *Pools) StatBucket(ctx context.Context, name string) (objlayer.BucketInfo, error) {
	return ps.first().StatBucket(ctx, name)
}

// UpdateBucket changes a bucket's record in every pool.
func (ps *Pools) UpdateBucket(ctx context.Context, name string, fn func(b *objlayer.BucketInfo)) error {
	defer ps.bucketChanged(name)
	for _, e := range ps.live() {
		if err := e.Pool.UpdateBucket(ctx, name, fn); err != nil {
			return err
		}
	}
	return nil
}

// ListBuckets lists buckets (the first pool's).
func (ps *Pools) ListBuckets(ctx context.Context) ([]objlayer.BucketInfo, error) {
	return ps.first().ListBuckets(ctx)
}

// DeleteBucket removes a bucket without objects in any pool, with its
// unfinished multipart uploads.
func (ps *Pools) DeleteBucket(ctx context.Context, name string) error {
	defer ps.bucketChanged(name)
	if _, err := ps.first().readBucket(ctx, name); err != nil {
		return err
	}
	for _, e := range ps.live() {
		full, err := e.Pool.hasObjects(ctx, name)
		if err != nil {
			return err
		}
		if full {
			return objlayer.ErrBucketNotEmpty
		}
	}
	for _, e := range ps.live() {
		if err := e.Pool.abortUploads(ctx, name); err != nil {
			return err
		}
	}
	for _, e := range ps.live() {
		if err := e.Pool.RemoveBucket(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// HealBuckets copies the first pool's buckets to pools that miss them (a
// pool added later). A pool that cannot tell whether it has a bucket (its
// drives do not answer yet) is an error, so the caller tries again.
func (ps *Pools) HealBuckets(ctx context.Context) error {
	buckets, err := ps.first().ListBuckets(ctx)
	if err != nil {
		return err
	}
	src := ps.first()
	var errs []error
	for _, e := range ps.live() {
		if e.Pool == src {
			continue
		}
		for _, b := range buckets {
			_, err := e.Pool.readBucket(ctx, b.Name)
			if errors.Is(err, objlayer.ErrBucketNotFound) {
				err = e.Pool.forEachSet(func(s *Set) error {
					errs := s.forEach(func(_ int, d Drive) error { return d.SetBucket(committing(ctx), drive.BucketInfo(b)) })
					return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), objlayer.ErrWriteQuorum))
				})
				e.Pool.ForgetBucket(b.Name)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("pool %s, bucket %s: %w", e.Name, b.Name, err))
				break // this pool does not answer now; the next one may
			}
		}
	}
	return errors.Join(errs...)
}

// fullFraction is how full a drive may be before its pool takes no new
// objects.
const fullFraction = 0.85

// freeSpace refreshes (at most every few seconds) and returns a pool's free
// bytes, and whether one of its drives is over fullFraction.
func (e *PoolEntry) freeSpace(ctx context.Context) (uint64, bool) {
	e.mu.Lock()
	if time.Since(e.freeTime) < 5*time.Second {
		defer e.mu.Unlock()
		return e.free, e.full
	}
	e.mu.Unlock()
	var free uint64
	full := false
	var mu sync.Mutex
	for _, s := range e.Pool.sets {
		s.forEach(func(_ int, d Drive) error {
			u, err := d.DiskInfo(ctx)
			if err != nil || u.Total == 0 {
				return err
			}
			mu.Lock()
			free += u.Free
			if float64(u.Total-u.Free) > fullFraction*float64(u.Total) {
				full = true
			}
			mu.Unlock()
			return nil
		})
	}
	e.mu.Lock()
	e.free, e.full, e.freeTime = free, full, time.Now()
	e.mu.Unlock()
	return free, full
}

// placement picks the pool of a new object: weighted by free space among
// active pools that are not full, and among those, the ones known to the
// most nodes, and among those, the pools whose every set can reach write
// quorum now (when any can): an object in a pool some node does not know
// yet would be missing from that node's reads, and a pool whose servers
// are still starting would only refuse the write. The pools known to the
// most nodes, not to all: when some node knows no pool (it never answered:
// the servers of a second pool being added, still starting), "known to
// all" holds for none, and the first pool being added, known to fewer
// nodes than the old ones, must still take nothing (2026-11-28: the day-2
// test's expansion by two pools read 404 for an object placed so).
func (ps *Pools) placement(ctx context.Context) (*PoolEntry, error) {
	var candidates []*PoolEntry
	var weights []uint64
	var total uint64
	best := -1
	for _, e := range ps.Entries() {
		if e.State() != StateActive {
			continue
		}
		free, full := e.freeSpace(ctx)
		if full {
			continue
		}
		rank := 0
		if ps.KnownBy != nil {
			rank = 2 * ps.KnownBy(e.Name)
		}
		if e.Pool.writable() {
			rank++
		}
		switch {
		case rank > best:
			candidates, weights, total, best = nil, nil, 0, rank
		case rank < best:
			continue
		}
		candidates = append(candidates, e)
		weights = append(weights, free)
		total += free
	}
	switch {
	case len(candidates) == 0:
		return nil, fmt.Errorf("%w: every active pool has a drive over 85%% full", objlayer.ErrNoSpace)
	case len(candidates) == 1 || total == 0:
		return candidates[0], nil
	}
	r := rand.Uint64N(total)
	for i, w := range weights {
		if r < w {
			return candidates[i], nil
		}
		r -= w
	}
	return candidates[len(candidates)-1], nil
}

// poolResult is one pool's answer to a lookup.
type poolResult struct {
	entry *PoolEntry
	h     *ObjectHandle
	err   error
}

// lookup resolves an object version in every live pool in parallel, for
// reading when withData (else OpenObjectMeta).
func (ps *Pools) lookup(ctx context.Context, bucket, object string, versionID *[16]byte, withData bool) []poolResult {
	live := ps.live()
	res := make([]poolResult, len(live))
	var wg sync.WaitGroup
	for i, e := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			open := e.Pool.OpenObjectMeta
			if withData {
				open = e.Pool.OpenObject
			}
			h, err := open(ctx, bucket, object, versionID)
			res[i] = poolResult{entry: e, h: h, err: err}
		}()
	}
	wg.Wait()
	return res
}

// newest picks the newest version found; ErrObjectNotFound when no pool
// has it; another error when a pool that could hold it did not answer.
func newest(res []poolResult) (poolResult, error) {
	var best poolResult
	var failure error
	for _, r := range res {
		switch {
		case r.err == nil:
			if best.h == nil || r.h.rec.Newer(best.h.rec) {
				best = r
			}
		case !errors.Is(r.err, objlayer.ErrObjectNotFound) && failure == nil:
			failure = r.err
		}
	}
	if best.h != nil {
		return best, nil
	}
	if failure != nil {
		return best, failure
	}
	return best, objlayer.ErrObjectNotFound
}

// OpenObject resolves an object version across pools (the newest wins: an
// object being moved out of a draining pool may briefly be in two).
func (ps *Pools) OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	live := ps.live()
	if len(live) == 1 {
		return live[0].Pool.OpenObject(ctx, bucket, object, versionID)
	}
	r, err := newest(ps.lookup(ctx, bucket, object, versionID, true))
	return r.h, err
}

// OpenObjectMeta is OpenObject for a caller that reads no data (a HEAD):
// see Set.OpenObjectMeta.
func (ps *Pools) OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	live := ps.live()
	if len(live) == 1 {
		return live[0].Pool.OpenObjectMeta(ctx, bucket, object, versionID)
	}
	r, err := newest(ps.lookup(ctx, bucket, object, versionID, false))
	return r.h, err
}

// poolFor is where a write of an object goes: the active pool already
// holding it, else a new placement.
func (ps *Pools) poolFor(ctx context.Context, bucket, object string) (*PoolEntry, error) {
	live := ps.live()
	if len(live) == 1 && live[0].State() == StateActive {
		return live[0], nil
	}
	if r, err := newest(ps.lookup(ctx, bucket, object, nil, false)); err == nil && r.entry.State() == StateActive {
		return r.entry, nil
	}
	return ps.placement(ctx)
}

// PutObject stores an object in its pool.
func (ps *Pools) PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if err := ps.admit(ctx, bucket, size, 1); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	e, err := ps.poolFor(ctx, bucket, object)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	defer e.placed()()
	return e.Pool.PutObject(ctx, bucket, object, r, size, opts)
}

// DeleteObject deletes an object or a version wherever it is.
func (ps *Pools) DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode objlayer.DeleteMode) (objlayer.DeleteResult, error) {
	live := ps.live()
	if len(live) == 1 {
		return live[0].Pool.DeleteObject(ctx, bucket, object, versionID, mode)
	}
	if versionID == nil && mode != objlayer.DeleteUnversioned || mode == objlayer.DeleteMarkerAs {
		// A delete marker goes where the object's next version would.
		e, err := ps.poolFor(ctx, bucket, object)
		if err != nil {
			return objlayer.DeleteResult{}, err
		}
		defer e.placed()()
		return e.Pool.DeleteObject(ctx, bucket, object, versionID, mode)
	}
	var res objlayer.DeleteResult
	for _, e := range live {
		r, err := e.Pool.DeleteObject(ctx, bucket, object, versionID, mode)
		if err != nil {
			return objlayer.DeleteResult{}, err
		}
		if r.DeleteMarker {
			res = r
		} else if res.VersionID == objlayer.NullVersion {
			res.VersionID = r.VersionID
		}
	}
	return res, nil
}

// UpdateObjectMeta rewrites a version's metadata in the pool holding it.
func (ps *Pools) UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (objlayer.ObjectInfo, error) {
	live := ps.live()
	if len(live) == 1 {
		return live[0].Pool.UpdateObjectMeta(ctx, bucket, object, versionID, fn)
	}
	r, err := newest(ps.lookup(ctx, bucket, object, versionID, false))
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	return r.entry.Pool.UpdateObjectMeta(ctx, bucket, object, versionID, fn)
}

// walk merges the live pools' listings; an object in several pools (during
// a move) shows the union of its versions.
func (ps *Pools) walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	return mergeWalks(ctx, ps.listable(), bucket, prefix, delimiter, startAfter, limit, latestOnly)
}

func (ps *Pools) delimits() bool { return allDelimit(ps.listable()) }

func (e *PoolEntry) walk(ctx context.Context, bucket, prefix, delimiter, startAfter string, limit int, latestOnly bool) ([]listEntry, bool, error) {
	return e.Pool.walk(ctx, bucket, prefix, delimiter, startAfter, limit, latestOnly)
}

func (e *PoolEntry) delimits() bool { return e.Pool.delimits() }

// ListObjects lists the latest versions across pools.
func (ps *Pools) ListObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	if _, err := ps.StatBucket(ctx, bucket); err != nil {
		return objlayer.ListResult{}, err
	}
	return listObjects(ctx, ps, bucket, prefix, marker, delimiter, maxKeys)
}

// ListObjectVersions lists every version across pools.
func (ps *Pools) ListObjectVersions(ctx context.Context, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	if _, err := ps.StatBucket(ctx, bucket); err != nil {
		return objlayer.ListResult{}, err
	}
	return listVersions(ctx, ps, bucket, prefix, keyMarker, versionMarker, delimiter, maxKeys)
}

// NewMultipartUpload starts an upload in the pool the object goes to.
func (ps *Pools) NewMultipartUpload(ctx context.Context, bucket, object string, meta map[string]string) (objlayer.UploadInfo, error) {
	if err := ps.admit(ctx, bucket, -1, 1); err != nil {
		return objlayer.UploadInfo{}, err
	}
	e, err := ps.poolFor(ctx, bucket, object)
	if err != nil {
		return objlayer.UploadInfo{}, err
	}
	return e.Pool.NewMultipartUpload(ctx, bucket, object, meta)
}

// uploadPool finds the pool holding an upload: one where a drive holds it
// (an upload's ID is its own), as a completion cut short leaves it on
// fewer drives than read quorum, for the pool to finish.
func (ps *Pools) uploadPool(ctx context.Context, bucket, object string, uploadID [16]byte) (*Pool, error) {
	live := ps.live()
	if len(live) == 1 {
		return live[0].Pool, nil
	}
	var failure error
	for _, e := range live {
		s := e.Pool.SetFor(bucket, object)
		ups, errs := readUploads(ctx, s.Drives(), bucket, object, uploadID)
		if firstUpload(ups) != nil {
			return e.Pool, nil
		}
		_, _, err := s.uploadQuorum(ups, errs)
		if !errors.Is(err, objlayer.ErrUploadNotFound) && failure == nil {
			failure = err
		}
	}
	if failure != nil {
		return nil, failure
	}
	return nil, objlayer.ErrUploadNotFound
}

// StatUpload returns an upload's record.
func (ps *Pools) StatUpload(ctx context.Context, bucket, object string, uploadID [16]byte) (objlayer.UploadInfo, error) {
	p, err := ps.uploadPool(ctx, bucket, object, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, err
	}
	return p.StatUpload(ctx, bucket, object, uploadID)
}

// PutObjectPart stores a part in its upload's pool.
func (ps *Pools) PutObjectPart(ctx context.Context, bucket, object string, uploadID [16]byte, number int, r io.Reader, size int64, opts objlayer.PartOptions) (objlayer.PartInfo, error) {
	if err := ps.admit(ctx, bucket, size, 0); err != nil {
		return objlayer.PartInfo{}, err
	}
	p, err := ps.uploadPool(ctx, bucket, object, uploadID)
	if err != nil {
		return objlayer.PartInfo{}, err
	}
	return p.PutObjectPart(ctx, bucket, object, uploadID, number, r, size, opts)
}

// ListParts lists an upload's parts.
func (ps *Pools) ListParts(ctx context.Context, bucket, object string, uploadID [16]byte, partMarker, maxParts int) (objlayer.UploadInfo, []objlayer.PartInfo, bool, error) {
	p, err := ps.uploadPool(ctx, bucket, object, uploadID)
	if err != nil {
		return objlayer.UploadInfo{}, nil, false, err
	}
	return p.ListParts(ctx, bucket, object, uploadID, partMarker, maxParts)
}

// CompleteMultipartUpload completes an upload in its pool.
func (ps *Pools) CompleteMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte, parts []objlayer.CompletePart, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if err := ps.admit(ctx, bucket, -1, 1); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	p, err := ps.uploadPool(ctx, bucket, object, uploadID)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	return p.CompleteMultipartUpload(ctx, bucket, object, uploadID, parts, opts)
}

// AbortMultipartUpload aborts an upload in its pool.
func (ps *Pools) AbortMultipartUpload(ctx context.Context, bucket, object string, uploadID [16]byte) error {
	p, err := ps.uploadPool(ctx, bucket, object, uploadID)
	if err != nil {
		return err
	}
	return p.AbortMultipartUpload(ctx, bucket, object, uploadID)
}

// uploadsPage merges a batch of every live pool.
func (ps *Pools) uploadsPage(ctx context.Context, bucket, prefix string, after drive.UploadPos, limit int) (uploadPage, error) {
	var pagers []uploadPager
	for _, e := range ps.listable() {
		pagers = append(pagers, e.Pool.uploadsPage)
	}
	return mergeUploadPages(ctx, pagers, bucket, prefix, after, limit)
}

// EachUpload calls fn for each upload of a bucket in every pool (see
// Pool.EachUpload).
func (ps *Pools) EachUpload(ctx context.Context, bucket, prefix string, fn func(objlayer.UploadInfo) (bool, error)) error {
	return eachUpload(ctx, ps.uploadsPage, bucket, prefix, drive.UploadPos{}, fn)
}

// ListMultipartUploads pages through the uploads of every pool.
func (ps *Pools) ListMultipartUploads(ctx context.Context, bucket, prefix, keyMarker string, uploadIDMarker [16]byte, delimiter string, maxUploads int) (objlayer.UploadList, error) {
	return listUploads(ctx, ps.uploadsPage, bucket, prefix, keyMarker, uploadIDMarker, delimiter, maxUploads)
}
