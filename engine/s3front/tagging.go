package s3front

import (
	"context"
	"errors"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3err"
)

// Object tags are kept in the version record's metadata (so they move with
// copies and heal with the record); bucket tags in the bucket record.

// GetObjectTagging returns a version's tags.
func (b *Backend) GetObjectTagging(ctx context.Context, bucket, object, versionID string) (map[string]string, error) {
	own(&bucket, &object, &versionID)
	h, markerTime, err := b.openVersion(ctx, bucket, object, versionID, false)
	if markerTime != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	t, err := tags(h.Info().Meta)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// PutObjectTagging replaces a version's tags.
func (b *Backend) PutObjectTagging(ctx context.Context, bucket, object, versionID string, t map[string]string) error {
	own(&bucket, &object, &versionID)
	return b.setObjectTags(ctx, bucket, object, versionID, t)
}

// DeleteObjectTagging removes a version's tags.
func (b *Backend) DeleteObjectTagging(ctx context.Context, bucket, object, versionID string) error {
	own(&bucket, &object, &versionID)
	return b.setObjectTags(ctx, bucket, object, versionID, nil)
}

func (b *Backend) setObjectTags(ctx context.Context, bucket, object, versionID string, t map[string]string) error {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return err
	}
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return err
	}
	_, err = b.pool.UpdateObjectMeta(ctx, bucket, object, vid, func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		if len(t) == 0 {
			delete(m, metaTagging)
		} else {
			m[metaTagging] = encodeTags(t)
		}
		return m
	})
	if errors.Is(err, objlayer.ErrObjectNotFound) && vid != nil {
		return s3err.GetNoSuchVersionErr(object, versionID)
	}
	return err
}

// GetBucketTagging returns a bucket's tags.
func (b *Backend) GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if len(bk.Tags) == 0 {
		return nil, s3err.GetAPIError(s3err.ErrBucketTaggingNotFound)
	}
	return bk.Tags, nil
}

// PutBucketTagging replaces a bucket's tags.
func (b *Backend) PutBucketTagging(ctx context.Context, bucket string, t map[string]string) error {
	own(&bucket)
	return b.pool.UpdateBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Tags = t })
}

// DeleteBucketTagging removes a bucket's tags.
func (b *Backend) DeleteBucketTagging(ctx context.Context, bucket string) error {
	own(&bucket)
	return b.pool.UpdateBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Tags = nil })
}
