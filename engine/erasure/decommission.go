package erasure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Decommission: a draining pool takes no new objects, and its objects move,
// every version with its metadata, to the active pools. Each set is drained
// by one node; its progress (the last object moved) is saved after every
// object, so a drain resumes where it stopped after a restart. The set is
// done when it holds no object and no multipart upload.

// DrainMarker is where a set's drain stands.
type DrainMarker struct {
	Bucket string `json:"bucket,omitempty"`
	Object string `json:"object,omitempty"`
	// Objects and Bytes moved so far.
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
	Done    bool  `json:"done"`
}

// DrainSet moves every object of a set of a draining pool to the active
// pools, starting after marker; save is called after each object.
func (ps *Pools) DrainSet(ctx context.Context, from *PoolEntry, set int, marker DrainMarker, save func(DrainMarker) error) (DrainMarker, error) {
	s := from.Pool.sets[set]
	for {
		buckets, err := ps.drainBuckets(ctx)
		if err != nil {
			return marker, err
		}
		for _, b := range buckets {
			if b.Name < marker.Bucket {
				continue
			}
			after := ""
			if b.Name == marker.Bucket {
				after = marker.Object
			}
			for {
				entries, _, err := s.walkDrives(ctx, b.Name, "", "", after, listBatch, len(s.Drives()), false)
				if err != nil {
					return marker, err
				}
				for _, e := range entries {
					if err := ctx.Err(); err != nil {
						return marker, err
					}
					n, err := ps.moveObject(ctx, from, b.Name, e.name, e.versions)
					if err != nil {
						return marker, fmt.Errorf("moving %s/%s: %w", b.Name, e.name, err)
					}
					marker.Bucket, marker.Object = b.Name, e.name
					marker.Objects++
					marker.Bytes += n
					if err := save(marker); err != nil {
						return marker, err
					}
				}
				if len(entries) < listBatch {
					break
				}
				after = entries[len(entries)-1].name
			}
		}
		// Another pass finds objects that arrived behind the marker (a
		// multipart upload completed in the draining pool meanwhile).
		empty, err := setEmpty(ctx, s, buckets)
		if err != nil {
			return marker, err
		}
		if empty {
			marker.Done = true
			return marker, save(marker)
		}
		marker.Bucket, marker.Object = "", ""
		select {
		case <-ctx.Done():
			return marker, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// drainBuckets lists the buckets a drain walks, in name order: every bucket
// any pool of the deployment lists, not only those whose records the
// draining pool holds. A pool stores objects of a bucket before the
// bucket's record reaches it (records are copied to an added pool in the
// background, and a pool lists a bucket only from read quorum of its first
// set), so a drain that walked the draining pool's own list could leave
// objects behind and call the pool empty: they were lost with it (an
// object put into a pool decommissioned 30 s after it was added, in the
// day-2 test). A pool that cannot list its buckets fails the drain, which
// is tried again.
func (ps *Pools) drainBuckets(ctx context.Context) ([]objlayer.BucketInfo, error) {
	ps.mu.RLock()
	entries := slices.Clone(ps.pools)
	ps.mu.RUnlock()
	byName := map[string]objlayer.BucketInfo{}
	for _, e := range entries {
		if e.State() == StateDecommissioned {
			continue
		}
		bs, err := e.Pool.ListBuckets(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the buckets of pool %s: %w", e.Name, err)
		}
		for _, b := range bs {
			byName[b.Name] = b
		}
	}
	out := slices.Collect(maps.Values(byName))
	slices.SortFunc(out, func(a, b objlayer.BucketInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// setEmpty reports whether a set holds no object and no upload. Uploads
// are looked at first: no upload can start in a draining pool, so once
// none is left no completion can add an object behind the objects' check
// (the other order missed an upload completed between the two).
func setEmpty(ctx context.Context, s *Set, buckets []objlayer.BucketInfo) (bool, error) {
	for _, b := range buckets {
		found := false
		err := eachUpload(ctx, s.uploadsPage, b.Name, "", drive.UploadPos{}, func(objlayer.UploadInfo) (bool, error) {
			found = true
			return false, nil
		})
		if err != nil || found {
			return false, err
		}
	}
	for _, b := range buckets {
		entries, _, err := s.walkDrives(ctx, b.Name, "", "", "", 1, len(s.Drives()), true)
		if err != nil || len(entries) > 0 {
			return false, err
		}
	}
	return true, nil
}

// moveObject copies every version of an object (oldest first, same IDs,
// times, ETags and metadata) into the active pools, then removes them from
// the draining pool. It returns the bytes moved.
func (ps *Pools) moveObject(ctx context.Context, from *PoolEntry, bucket, object string, versions []*drive.Record) (int64, error) {
	to, err := ps.placement(ctx)
	if err != nil {
		return 0, err
	}
	var moved int64
	for i := len(versions) - 1; i >= 0; i-- {
		v := versions[i]
		vid := v.VersionID
		h, err := from.Pool.OpenObject(ctx, bucket, object, &vid)
		if errors.Is(err, objlayer.ErrObjectNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return moved, err
		}
		rec := h.rec
		if rec.IsDeleteMarker() {
			if err := to.Pool.SetFor(bucket, object).putMarker(ctx, bucket, object, rec); err != nil {
				return moved, err
			}
			continue
		}
		pr, pw := io.Pipe()
		go func() {
			_, err := h.WriteRange(ctx, pw, 0, -1)
			pw.CloseWithError(err)
		}()
		_, err = to.Pool.PutObject(ctx, bucket, object, pr, rec.Size, objlayer.PutOptions{
			VersionID: rec.VersionID, ModTime: time.Unix(0, rec.ModTime), Meta: rec.Meta, ETag: rec.ETag,
		})
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if err != nil {
			return moved, err
		}
		moved += rec.Size
	}
	for _, v := range versions {
		vid := v.VersionID
		if _, err := from.Pool.DeleteObject(ctx, bucket, object, &vid, objlayer.DeleteUnversioned); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// putMarker writes a delete marker record as it is (a moved version).
func (s *Set) putMarker(ctx context.Context, bucket, object string, rec *drive.Record) error {
	drives := s.Drives()
	marker := *rec
	errs := putVersions(ctx, nil, drives, bucket, object, func(int) (*drive.Record, [16]byte, error) {
		return &marker, drive.NotStaged, nil
	}, nil)
	acceptSuperseded(errs)
	_, err := s.finishPut(ctx, drives, bucket, object, &marker, errs)
	return err
}
