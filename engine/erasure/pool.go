package erasure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Pool is one server pool: its erasure sets, sharing a deployment ID.
// Objects map to a set by SetIndex; buckets exist on every drive.
type Pool struct {
	deployment uuid.UUID
	sets       []*Set
	buckets    bucketCache
}

// NewPool groups sets into a pool.
func NewPool(deployment uuid.UUID, sets []*Set) (*Pool, error) {
	if len(sets) == 0 {
		return nil, errors.New("erasure: a pool needs at least one set")
	}
	p := &Pool{deployment: deployment, sets: sets}
	p.buckets.ttl = DefaultBucketCacheTTL
	return p, nil
}

// DefaultBucketCacheTTL bounds how long a bucket's record is served from
// memory. Every request checks its bucket (and its versioning state), so
// reading it from the drives each time would double the metadata reads of
// a small GET.
const DefaultBucketCacheTTL = 2 * time.Second

// Sets returns the pool's sets.
func (p *Pool) Sets() []*Set { return p.sets }

// Deployment is the pool's deployment ID.
func (p *Pool) Deployment() uuid.UUID { return p.deployment }

// SetFor returns the set an object lives in.
func (p *Pool) SetFor(bucket, object string) *Set {
	return p.sets[SetIndex(p.deployment, bucket, object, len(p.sets))]
}

// forEachSet runs fn on every set and returns the first error.
func (p *Pool) forEachSet(fn func(s *Set) error) error {
	var first error
	for _, s := range p.sets {
		if err := fn(s); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// bucketCache keeps recently read bucket records (and their absence).
// forgets counts the records dropped: a record read from the drives is
// kept only when nothing was forgotten while it was read, so a read that
// began before a change cannot put the old record back after the change
// dropped it.
type bucketCache struct {
	ttl     time.Duration
	mu      sync.RWMutex
	m       map[string]cachedBucket
	forgets uint64
}

type cachedBucket struct {
	info objlayer.BucketInfo
	err  error
	at   time.Time
}

func (c *bucketCache) get(name string) (cachedBucket, bool) {
	c.mu.RLock()
	e, ok := c.m[name]
	c.mu.RUnlock()
	return e, ok && time.Since(e.at) < c.ttl
}

// generation is the count of forgets so far, taken before a read.
func (c *bucketCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.forgets
}

// put keeps a record read since generation gen, unless a forget came since.
func (c *bucketCache) put(name string, info objlayer.BucketInfo, err error, gen uint64) {
	c.mu.Lock()
	if c.forgets != gen {
		c.mu.Unlock()
		return
	}
	if c.m == nil {
		c.m = map[string]cachedBucket{}
	}
	c.m[name] = cachedBucket{info: info, err: err, at: time.Now()}
	c.mu.Unlock()
}

// Forget drops a bucket from the cache (it changed here or on a peer).
func (c *bucketCache) forget(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.forgets++
	c.mu.Unlock()
}

// ForgetBucket drops a bucket's cached record, after a peer changed it.
func (p *Pool) ForgetBucket(name string) { p.buckets.forget(name) }

// MakeBucket creates a bucket on every drive; each set needs write quorum.
func (p *Pool) MakeBucket(ctx context.Context, name string) error {
	return p.CreateBucket(ctx, objlayer.BucketInfo{Name: name})
}

// CreateBucket creates a bucket with the given record (its creation time
// set now when zero) on every drive; each set needs write quorum.
func (p *Pool) CreateBucket(ctx context.Context, info objlayer.BucketInfo) error {
	name := info.Name
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	defer p.buckets.forget(name)
	// Refuse an existing bucket before writing anything.
	if _, err := p.readBucket(ctx, name); err == nil {
		return objlayer.ErrBucketExists
	} else if !errors.Is(err, objlayer.ErrBucketNotFound) {
		return err
	}
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error { return d.MakeBucket(committing(ctx), drive.BucketInfo(info)) })
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), objlayer.ErrWriteQuorum))
	})
}

// StatBucket returns a bucket's record.
func (p *Pool) StatBucket(ctx context.Context, name string) (objlayer.BucketInfo, error) {
	if e, ok := p.buckets.get(name); ok {
		return e.info, e.err
	}
	gen := p.buckets.generation()
	info, err := p.readBucket(ctx, name)
	if err == nil {
		// Only buckets that exist are kept: a "not found" read while the
		// bucket was being created could be put back after the create
		// forgot the name, and then answer NoSuchBucket for a bucket that
		// exists (a HEAD right after a CreateBucket did, in the conformance
		// suite).
		p.buckets.put(name, info, nil, gen)
	}
	return info, err
}

// readBucket reads a bucket's record from the drives; read quorum in the
// first set decides. Drives that disagree (a versioning change that missed
// one) are settled by the latest change.
func (p *Pool) readBucket(ctx context.Context, name string) (objlayer.BucketInfo, error) {
	s := p.sets[0]
	drives := s.Drives()
	infos := make([]drive.BucketInfo, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		var err error
		infos[pos], err = d.StatBucket(ctx, name)
		return err
	})
	if err := reduceErrors(errs, s.layout.ReadQuorum(), objlayer.ErrReadQuorum); err != nil {
		return objlayer.BucketInfo{}, mapDriveErr(err)
	}
	var best drive.BucketInfo
	for pos, info := range infos {
		if errs[pos] == nil && (best.Name == "" || info.Updated.After(best.Updated)) {
			best = info
		}
	}
	return objlayer.BucketInfo(best), nil
}

// UpdateBucket changes a bucket's record on every drive (versioning,
// tags): fn edits the current record.
func (p *Pool) UpdateBucket(ctx context.Context, name string, fn func(b *objlayer.BucketInfo)) error {
	defer p.buckets.forget(name)
	info, err := p.readBucket(ctx, name)
	if err != nil {
		return err
	}
	fn(&info)
	info.Updated = time.Now().UTC()
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error { return d.SetBucket(committing(ctx), drive.BucketInfo(info)) })
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), objlayer.ErrWriteQuorum))
	})
}

// SetBucketVersioning records a bucket's versioning state on every drive.
func (p *Pool) SetBucketVersioning(ctx context.Context, name, state string) error {
	return p.UpdateBucket(ctx, name, func(b *objlayer.BucketInfo) { b.Versioning = state })
}

// ListBuckets lists buckets as read quorum of the first set sees them.
func (p *Pool) ListBuckets(ctx context.Context) ([]objlayer.BucketInfo, error) {
	s := p.sets[0]
	drives := s.Drives()
	lists := make([][]drive.BucketInfo, len(drives))
	errs := forEachDrive(drives, func(pos int, d Drive) error {
		var err error
		lists[pos], err = d.ListBuckets(ctx)
		return err
	})
	if err := reduceErrors(errs, s.layout.ReadQuorum(), objlayer.ErrReadQuorum); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	byName := map[string]drive.BucketInfo{}
	for _, l := range lists {
		for _, b := range l {
			seen[b.Name]++
			if cur, ok := byName[b.Name]; !ok || b.Updated.After(cur.Updated) {
				byName[b.Name] = b
			}
		}
	}
	var out []objlayer.BucketInfo
	for name, n := range seen {
		if n >= s.layout.ReadQuorum() {
			out = append(out, objlayer.BucketInfo(byName[name]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// hasObjects reports whether a bucket holds any object version.
func (p *Pool) hasObjects(ctx context.Context, name string) (bool, error) {
	entries, _, err := p.walk(ctx, name, "", "", "", 1, true)
	return len(entries) > 0, err
}

// abortUploads aborts every unfinished multipart upload of a bucket: S3
// deletes a bucket that holds only uploads, and the uploads with it.
func (p *Pool) abortUploads(ctx context.Context, name string) error {
	return p.EachUpload(ctx, name, "", func(u objlayer.UploadInfo) (bool, error) {
		if err := p.AbortMultipartUpload(ctx, name, u.Object, u.ID); err != nil && !errors.Is(err, objlayer.ErrUploadNotFound) {
			return false, err
		}
		return true, nil
	})
}

// DeleteBucket removes a bucket without objects from every drive, with
// its unfinished multipart uploads.
func (p *Pool) DeleteBucket(ctx context.Context, name string) error {
	defer p.buckets.forget(name)
	if _, err := p.readBucket(ctx, name); err != nil {
		return err
	}
	// Check emptiness everywhere before removing anything.
	full, err := p.hasObjects(ctx, name)
	if err != nil {
		return err
	}
	if full {
		return objlayer.ErrBucketNotEmpty
	}
	if err := p.abortUploads(ctx, name); err != nil {
		return err
	}
	return p.RemoveBucket(ctx, name)
}

// RemoveBucket removes a bucket's record from every drive without checking
// that it is empty (the caller did, across pools).
func (p *Pool) RemoveBucket(ctx context.Context, name string) error {
	defer p.buckets.forget(name)
	return p.forEachSet(func(s *Set) error {
		errs := s.forEach(func(_ int, d Drive) error {
			err := d.DeleteBucket(committing(ctx), name, true)
			if errors.Is(err, drive.ErrBucketNotFound) {
				return nil
			}
			return err
		})
		return mapDriveErr(reduceErrors(errs, s.layout.WriteQuorum(), objlayer.ErrWriteQuorum))
	})
}

// PutObject stores an object in its set.
func (p *Pool) PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	return p.SetFor(bucket, object).PutObject(ctx, bucket, object, r, size, opts)
}

// StatObject resolves an object version.
func (p *Pool) StatObject(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.ObjectInfo, error) {
	return p.SetFor(bucket, object).StatObject(ctx, bucket, object, versionID)
}

// OpenObject resolves an object version for reading.
func (p *Pool) OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	return p.SetFor(bucket, object).OpenObject(ctx, bucket, object, versionID)
}

// OpenObjectMeta resolves an object version for its metadata alone.
func (p *Pool) OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (*ObjectHandle, error) {
	return p.SetFor(bucket, object).OpenObjectMeta(ctx, bucket, object, versionID)
}

// GetObject streams a range of an object version to w.
func (p *Pool) GetObject(ctx context.Context, w io.Writer, bucket, object string, versionID *[16]byte, offset, length int64) (objlayer.ObjectInfo, []int, error) {
	return p.SetFor(bucket, object).GetObject(ctx, w, bucket, object, versionID, offset, length)
}

// DeleteObject deletes an object or one of its versions.
func (p *Pool) DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode objlayer.DeleteMode) (objlayer.DeleteResult, error) {
	return p.SetFor(bucket, object).DeleteObject(ctx, bucket, object, versionID, mode)
}

// UpdateObjectMeta rewrites a version's metadata (tags) in place.
func (p *Pool) UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (objlayer.ObjectInfo, error) {
	return p.SetFor(bucket, object).UpdateObjectMeta(ctx, bucket, object, versionID, fn)
}

// ListObjects lists the latest versions of a bucket's objects.
func (p *Pool) ListObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	if _, err := p.StatBucket(ctx, bucket); err != nil {
		return objlayer.ListResult{}, err
	}
	return listObjects(ctx, p, bucket, prefix, marker, delimiter, maxKeys)
}

// ListObjectVersions lists every version of a bucket's objects.
func (p *Pool) ListObjectVersions(ctx context.Context, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	if _, err := p.StatBucket(ctx, bucket); err != nil {
		return objlayer.ListResult{}, err
	}
	return listVersions(ctx, p, bucket, prefix, keyMarker, versionMarker, delimiter, maxKeys)
}

// String describes the pool's shape.
func (p *Pool) String() string {
	l := p.sets[0].layout
	return fmt.Sprintf("%d sets of %d+%d", len(p.sets), l.Data, l.Parity)
}

// writable reports whether every set of the pool has write quorum of
// drives that can be used now (online, and on a node that serves them).
func (p *Pool) writable() bool {
	for _, s := range p.sets {
		if bits.OnesCount32(s.onlineMask()) < s.layout.WriteQuorum() {
			return false
		}
	}
	return true
}
