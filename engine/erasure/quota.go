package erasure

import (
	"context"
	"fmt"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Bucket quotas. Every drive keeps its buckets' usage with the records
// (engine/drive/usage.go); a bucket's usage is, per set, the largest
// figure among the drives that answer (at least a read quorum of them: a
// drive that missed writes only ever counts less), summed over the sets of
// every live pool. A write to a bucket with a quota reads it first and is
// refused when it would pass the quota: writers racing each see what was
// committed before they looked, so together they pass it by at most one
// object each. A bucket without a quota pays for nothing but its bucket
// record, which the write reads anyway (cached).

// BucketUsage is what a set's drives hold of the bucket. This node's
// drives answer from memory, in line; other nodes' in parallel.
func (s *Set) BucketUsage(ctx context.Context, bucket string) (objlayer.Usage, error) {
	drives := s.Drives()
	usages := make([]drive.Usage, len(drives))
	errs := make([]error, len(drives))
	remote := make([]Drive, len(drives))
	for i, d := range drives {
		switch l := d.(type) {
		case nil:
			errs[i] = errDriveOffline
		case *drive.Local:
			usages[i], errs[i] = l.BucketUsage(ctx, bucket)
		default:
			remote[i] = d
		}
	}
	for i, err := range forEachDrive(remote, func(i int, d Drive) error {
		var err error
		usages[i], err = d.BucketUsage(ctx, bucket)
		return err
	}) {
		if remote[i] != nil {
			errs[i] = err
		}
	}
	if err := reduceErrors(errs, s.layout.ReadQuorum(), objlayer.ErrReadQuorum); err != nil {
		return objlayer.Usage{}, mapDriveErr(err)
	}
	var u objlayer.Usage
	for i, d := range usages {
		if errs[i] == nil {
			u.Bytes, u.Objects = max(u.Bytes, d.Bytes), max(u.Objects, d.Objects)
		}
	}
	return u, nil
}

// BucketUsage sums the bucket's usage over the pool's sets.
func (p *Pool) BucketUsage(ctx context.Context, bucket string) (objlayer.Usage, error) {
	var total objlayer.Usage
	for _, s := range p.sets {
		u, err := s.BucketUsage(ctx, bucket)
		if err != nil {
			return objlayer.Usage{}, err
		}
		total.Bytes += u.Bytes
		total.Objects += u.Objects
	}
	return total, nil
}

// BucketUsage sums the bucket's usage over the live pools (a version being
// moved by a decommission counts in both pools for that moment).
func (ps *Pools) BucketUsage(ctx context.Context, bucket string) (objlayer.Usage, error) {
	var total objlayer.Usage
	for _, e := range ps.live() {
		u, err := e.Pool.BucketUsage(ctx, bucket)
		if err != nil {
			return objlayer.Usage{}, err
		}
		total.Bytes += u.Bytes
		total.Objects += u.Objects
	}
	return total, nil
}

// admit refuses a write of size bytes (-1: not known yet) adding objects
// versions when it would take the bucket past its quota. An error reading
// the bucket is left to the write, which meets it again.
func (ps *Pools) admit(ctx context.Context, bucket string, size, objects int64) error {
	q := ps.quotaOf(ctx, bucket)
	if q == nil {
		return nil
	}
	u, err := ps.BucketUsage(ctx, bucket)
	if err != nil {
		return err
	}
	return checkQuota(*q, u, size, objects)
}

// quotaOf is the bucket's quota; nil for none, or when its record cannot
// be read (the write reads it again and reports why).
func (ps *Pools) quotaOf(ctx context.Context, bucket string) *objlayer.Quota {
	if info, err := ps.StatBucket(ctx, bucket); err == nil {
		return info.Quota
	}
	return nil
}

// checkQuota is admit's rule.
func checkQuota(q objlayer.Quota, u objlayer.Usage, size, objects int64) error {
	if q.Bytes > 0 {
		if size < 0 && u.Bytes >= q.Bytes || size >= 0 && u.Bytes+size > q.Bytes {
			return fmt.Errorf("%w: the bucket holds %d bytes of its quota of %d", objlayer.ErrQuotaExceeded, u.Bytes, q.Bytes)
		}
	}
	if q.Objects > 0 && objects > 0 && u.Objects+objects > q.Objects {
		return fmt.Errorf("%w: the bucket holds %d objects of its quota of %d", objlayer.ErrQuotaExceeded, u.Objects, q.Objects)
	}
	return nil
}
