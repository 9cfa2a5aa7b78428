package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/s3front"
)

// Backend is versitygw's posix backend with what the gateway adds around
// it: keys are checked to map onto files inside their bucket (symbolic
// links included), buckets made through POSIX belong to the root account,
// users see the buckets their grants name (what they may do is their
// identity policy, as in `strata server`), files created on the filesystem
// get their ETag on first read, writes feed the large-directory watch, and
// GETs report their time to first byte.
type Backend struct {
	*posix.Posix
	vol    *volume
	access s3front.Access
	// rootAccess owns buckets without a stored ACL (made through POSIX);
	// region decides how re-creating one's own bucket is answered.
	rootAccess, region string
	etags              *etagFiller
	dirs               *dirWatch
	// firstByte observes a GET's time to its first body byte; may be nil.
	firstByte func(seconds float64)
	// fsync: sync written objects before acknowledging them.
	fsync bool
	log   *slog.Logger
	// meta is the posix backend's metadata store (bucket attributes).
	meta meta.MetadataStorer
	// day is a lifecycle day (0: S3's; tests shorten it).
	day time.Duration
	// claimBase is how long a completion claimed by another replica may
	// take, beyond its parts' size, before it is taken over.
	claimBase time.Duration
}

// String names the backend in versitygw's logs.
func (b *Backend) String() string { return "strata gateway (posix)" }

// ListBuckets lists the buckets a user may see: all of them for root, and
// for others the ones they own and the ones their grants name.
func (b *Backend) ListBuckets(ctx context.Context, in s3response.ListBucketsInput) (s3response.ListAllMyBucketsResult, error) {
	ctx = detach(ctx)
	if in.IsAdmin {
		return b.Posix.ListBuckets(ctx, in)
	}
	all, err := b.Posix.ListBuckets(ctx, s3response.ListBucketsInput{Owner: in.Owner, IsAdmin: true, Prefix: in.Prefix, MaxBuckets: math.MaxInt32})
	if err != nil {
		return all, err
	}
	res := s3response.ListAllMyBucketsResult{Owner: s3response.CanonicalUser{ID: in.Owner, DisplayName: in.Owner}, Prefix: in.Prefix}
	for _, bk := range all.Buckets.Bucket {
		if (b.access == nil || !b.access.CanList(in.Owner, bk.Name)) && b.owner(ctx, bk.Name) != in.Owner {
			continue
		}
		if in.ContinuationToken != "" && bk.Name <= in.ContinuationToken {
			continue
		}
		if in.MaxBuckets > 0 && len(res.Buckets.Bucket) == int(in.MaxBuckets) {
			res.ContinuationToken = res.Buckets.Bucket[len(res.Buckets.Bucket)-1].Name
			break
		}
		res.Buckets.Bucket = append(res.Buckets.Bucket, bk)
	}
	return res, nil
}

// owner is a bucket's owner ("" when it cannot be read).
func (b *Backend) owner(ctx context.Context, bucket string) string {
	doc, err := b.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &bucket})
	if err != nil {
		return ""
	}
	acl, err := auth.ParseACL(doc)
	if err != nil {
		return ""
	}
	return acl.Owner
}

// GetBucketAcl is the front end's existence check on every bucket and
// object request; it also refuses a bucket that is a symbolic link. A
// bucket made through POSIX has no stored ACL: it belongs to root.
func (b *Backend) GetBucketAcl(ctx context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	ctx = detach(ctx)
	bucket := str(in.Bucket)
	exists, err := b.vol.Bucket(bucket)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	}
	doc, err := b.Posix.GetBucketAcl(ctx, in)
	if err != nil || len(doc) > 0 {
		return doc, err
	}
	return s3front.OwnerOnlyACL(b.rootAccess)
}

// CreateBucket creates a bucket directory owned by its creator. Re-creating
// one's own bucket answers success in us-east-1 and BucketAlreadyOwnedByYou
// elsewhere (as S3 does); another owner's bucket, BucketAlreadyExists.
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, acl []byte) error {
	ctx = detach(ctx)
	bucket := str(in.Bucket)
	exists, err := b.vol.Bucket(bucket)
	if err != nil {
		return err
	}
	if exists {
		creator, err := auth.ParseACL(acl)
		if err != nil {
			return err
		}
		return s3front.BucketExistsAnswer(bucket, b.owner(ctx, bucket), creator.Owner, b.region)
	}
	return b.Posix.CreateBucket(ctx, in, acl)
}

// HeadBucket refuses a linked bucket, then asks the backend.
func (b *Backend) HeadBucket(ctx context.Context, in *s3.HeadBucketInput) (*s3.HeadBucketOutput, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return nil, err
	}
	return b.Posix.HeadBucket(ctx, in)
}

// ListObjects lists a bucket; a prefix no key can match lists nothing.
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListObjectsResult{}, err
	}
	out := s3response.ListObjectsResult{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, Marker: in.Marker,
		MaxKeys: in.MaxKeys, IsTruncated: new(bool)}
	if prefixCanMatch(str(in.Prefix)) {
		var err error
		if out, err = b.Posix.ListObjects(detach(ctx), in); err != nil {
			return out, err
		}
	}
	if err := shapeV1(ctx, &out); err != nil {
		return out, err
	}
	return s3front.HandOffListingV1(ctx, out), nil
}

// ListObjectsV2 lists a bucket; a prefix no key can match lists nothing.
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	out := s3response.ListObjectsV2Result{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, StartAfter: in.StartAfter,
		ContinuationToken: in.ContinuationToken, MaxKeys: in.MaxKeys, KeyCount: new(int32), IsTruncated: new(bool)}
	if prefixCanMatch(str(in.Prefix)) {
		var err error
		if out, err = b.Posix.ListObjectsV2(detach(ctx), in); err != nil {
			return out, err
		}
	}
	if err := shapeV2(ctx, in.ContinuationToken, &out); err != nil {
		return out, err
	}
	return s3front.HandOffListing(ctx, out), nil
}

// ListObjectVersions lists versions; a prefix no key can match lists
// nothing.
func (b *Backend) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput) (s3response.ListVersionsResult, error) {
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListVersionsResult{}, err
	}
	out := s3response.ListVersionsResult{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, KeyMarker: in.KeyMarker,
		VersionIdMarker: in.VersionIdMarker, MaxKeys: in.MaxKeys, IsTruncated: new(bool)}
	if prefixCanMatch(str(in.Prefix)) {
		var err error
		if out, err = b.Posix.ListObjectVersions(detach(ctx), in); err != nil {
			return out, err
		}
	}
	return out, shapeVersions(ctx, b.owner(ctx, str(in.Bucket)), &out)
}

// ListMultipartUploads lists uploads of a bucket reached without a link.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	return b.Posix.ListMultipartUploads(ctx, in)
}

// PutBucketVersioning answers a refused suspension (object lock) as S3.
func (b *Backend) PutBucketVersioning(ctx context.Context, bucket string, status types.BucketVersioningStatus) error {
	err := b.Posix.PutBucketVersioning(detach(ctx), bucket, status)
	if errors.Is(err, s3err.GetAPIError(s3err.ErrSuspendedVersioningNotAllowed)) {
		return s3front.ErrVersioningLocked
	}
	return err
}

// DeleteBucket removes an empty bucket reached without a link.
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	ctx = detach(ctx)
	if err := b.vol.Contain(bucket, ""); err != nil {
		return err
	}
	return b.Posix.DeleteBucket(ctx, bucket)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// check validates a key and that it resolves inside its bucket.
func (b *Backend) check(bucket, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return b.vol.Contain(bucket, key)
}

// parentDir is the directory (relative to the root) a key's file lives in.
func parentDir(bucket, key string) string {
	key = strings.TrimSuffix(key, "/")
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return bucket + "/" + key[:i]
	}
	return bucket
}

// detach keeps a request's values but not its cancellation: the front end
// cancels every request context when shutdown begins, and the posix
// backend would then abort uploads in flight that the drain is meant to
// let finish.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
