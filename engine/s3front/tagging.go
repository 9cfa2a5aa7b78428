package s3front

import (
	"context"
	"errors"

	"github.com/versity/versitygw/s3err"

	"github.com/strata-storage/strata/engine/erasure"
)

// Object tags are kept in the version record's metadata (so they move with
// copies and heal with the record); bucket tags in the bucket record.

// GetObjectTagging returns a version's tags.
func (b *Backend) GetObjectTagging(_ context.Context, bucket, object, versionID string) (map[string]string, error) {
	own(&bucket, &object, &versionID)
	h, markerTime, err := b.openVersion(bucket, object, versionID)
	if markerTime != nil {
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	t, err := tags(h.Info.Meta)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// PutObjectTagging replaces a version's tags.
func (b *Backend) PutObjectTagging(_ context.Context, bucket, object, versionID string, t map[string]string) error {
	own(&bucket, &object, &versionID)
	return b.setObjectTags(bucket, object, versionID, t)
}

// DeleteObjectTagging removes a version's tags.
func (b *Backend) DeleteObjectTagging(_ context.Context, bucket, object, versionID string) error {
	own(&bucket, &object, &versionID)
	return b.setObjectTags(bucket, object, versionID, nil)
}

func (b *Backend) setObjectTags(bucket, object, versionID string, t map[string]string) error {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return err
	}
	if _, err := b.pool.StatBucket(bucket); err != nil {
		return err
	}
	_, err = b.pool.UpdateObjectMeta(bucket, object, vid, func(m map[string]string) map[string]string {
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
	if errors.Is(err, erasure.ErrObjectNotFound) && vid != nil {
		return s3err.GetNoSuchVersionErr(object, versionID)
	}
	return err
}

// GetBucketTagging returns a bucket's tags.
func (b *Backend) GetBucketTagging(_ context.Context, bucket string) (map[string]string, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(bucket)
	if err != nil {
		return nil, err
	}
	if len(bk.Tags) == 0 {
		return nil, s3err.GetAPIError(s3err.ErrBucketTaggingNotFound)
	}
	return bk.Tags, nil
}

// PutBucketTagging replaces a bucket's tags.
func (b *Backend) PutBucketTagging(_ context.Context, bucket string, t map[string]string) error {
	own(&bucket)
	return b.pool.UpdateBucket(bucket, func(bk *erasure.BucketInfo) { bk.Tags = t })
}

// DeleteBucketTagging removes a bucket's tags.
func (b *Backend) DeleteBucketTagging(_ context.Context, bucket string) error {
	own(&bucket)
	return b.pool.UpdateBucket(bucket, func(bk *erasure.BucketInfo) { bk.Tags = nil })
}
