package server

import (
	"context"
	"fmt"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/objlayer"
)

// BucketUsage is the admin API's usage of a bucket: read from the drives
// (engine/erasure/quota.go), with its quota.
func (n *Node) BucketUsage(ctx context.Context, bucket string) (adminapi.BucketUsage, error) {
	ps := n.dep.Pools
	info, err := ps.StatBucket(ctx, bucket)
	if err != nil {
		return adminapi.BucketUsage{}, err
	}
	u, err := ps.BucketUsage(ctx, bucket)
	if err != nil {
		return adminapi.BucketUsage{}, err
	}
	out := adminapi.BucketUsage{Bucket: bucket, Bytes: u.Bytes, Objects: u.Objects}
	if q := info.Quota; q != nil {
		out.Quota = &adminapi.Quota{Bytes: q.Bytes, Objects: q.Objects}
	}
	return out, nil
}

// SetBucketQuota sets a bucket's quota (both figures zero: none). Writes
// already stored stay when the new quota is below them; new ones are
// refused until the bucket is under it again.
func (n *Node) SetBucketQuota(ctx context.Context, bucket string, q adminapi.Quota) error {
	if q.Bytes < 0 || q.Objects < 0 {
		return fmt.Errorf("%w: a quota of %d bytes and %d objects: neither may be negative", admin.ErrInvalid, q.Bytes, q.Objects)
	}
	return n.dep.Pools.UpdateBucket(ctx, bucket, func(b *objlayer.BucketInfo) {
		b.Quota = nil
		if q != (adminapi.Quota{}) {
			b.Quota = &objlayer.Quota{Bytes: q.Bytes, Objects: q.Objects}
		}
	})
}

// quotaMetrics is every bucket with a quota and its usage, for the
// metrics (buckets without one cost a scrape nothing).
func (n *Node) quotaMetrics(ctx context.Context) []metrics.BucketQuota {
	ps := n.dep.Pools
	if ps == nil {
		return nil
	}
	buckets, err := ps.ListBuckets(ctx)
	if err != nil {
		return nil
	}
	var out []metrics.BucketQuota
	for _, b := range buckets {
		if b.Quota == nil {
			continue
		}
		if u, err := ps.BucketUsage(ctx, b.Name); err == nil {
			out = append(out, metrics.BucketQuota{Bucket: b.Name, Bytes: u.Bytes, Objects: u.Objects,
				QuotaBytes: b.Quota.Bytes, QuotaObjects: b.Quota.Objects})
		}
	}
	return out
}

// ReplicationStatus is the node's bucket replication (admin API).
func (n *Node) ReplicationStatus(ctx context.Context) (adminapi.ReplicationStatus, error) {
	return n.replication.Status(ctx)
}

// ResyncReplication queues a bucket's versions not yet replicated.
func (n *Node) ResyncReplication(ctx context.Context, bucket string) (adminapi.ResyncResult, error) {
	return n.replication.ResyncBucket(ctx, bucket)
}
