package gateway

import (
	"context"
	"log/slog"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/s3front"
)

// Backend is versitygw's posix backend with what the gateway adds around
// it: keys are checked to map onto files inside their bucket (symbolic
// links included), access comes from the tenant's users as in `strata
// server` (bucket policies synthesised from their grants, no stored ACLs or
// policies), files created on the filesystem get their ETag on first
// read, writes feed the large-directory watch, and GETs report their time
// to first byte.
type Backend struct {
	*posix.Posix
	vol    *volume
	access s3front.Access
	etags  *etagFiller
	dirs   *dirWatch
	// firstByte observes a GET's time to its first body byte; may be nil.
	firstByte func(seconds float64)
	// fsync: sync written objects before acknowledging them.
	fsync bool
	log   *slog.Logger
}

// String names the backend in versitygw's logs.
func (b *Backend) String() string { return "strata gateway (posix)" }

// ListBuckets lists the buckets a user may see: all of them for root, the
// ones its grants name for others (the posix backend would list those it
// owns by ACL, which strata does not keep).
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
		if b.access == nil || !b.access.CanList(in.Owner, bk.Name) {
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

// GetBucketAcl is the front end's existence check on every bucket and
// object request; it also refuses a bucket that is a symbolic link. As in
// `strata server`, no ACL is kept: the owner is root and users get access
// through their grants.
func (b *Backend) GetBucketAcl(_ context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	bucket := str(in.Bucket)
	exists, err := b.vol.Bucket(bucket)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, s3err.GetBucketErr(s3err.ErrNoSuchBucket, bucket)
	}
	return nil, nil
}

// CreateBucket creates a bucket directory. An existing directory is
// answered BucketAlreadyOwnedByYou, as `strata server` answers an existing
// bucket: ownership is not kept, and a directory made through POSIX has no
// ACL for the posix backend to compare against (it would fail).
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, acl []byte) error {
	ctx = detach(ctx)
	bucket := str(in.Bucket)
	exists, err := b.vol.Bucket(bucket)
	if err != nil {
		return err
	}
	if exists {
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyOwnedByYou, bucket)
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

// PutBucketAcl is refused: access is managed through the tenant's users.
func (b *Backend) PutBucketAcl(context.Context, string, []byte) error {
	return s3err.GetAPIError(s3err.ErrNotImplemented)
}

// PutObjectAcl is refused: access is managed through the tenant's users.
func (b *Backend) PutObjectAcl(context.Context, *s3.PutObjectAclInput) error {
	return s3err.GetAPIError(s3err.ErrNotImplemented)
}

// GetBucketPolicy answers the policy synthesised from the users' grants on
// the bucket, as `strata server` does; "no policy" when none has any.
func (b *Backend) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	ctx = detach(ctx)
	if _, err := b.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &bucket}); err != nil {
		return nil, err
	}
	if b.access != nil {
		if p := b.access.BucketPolicy(bucket); p != nil {
			return p, nil
		}
	}
	return nil, s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
}

// PutBucketPolicy is refused: policies come from the tenant's users.
func (b *Backend) PutBucketPolicy(context.Context, string, []byte) error {
	return s3err.GetAPIError(s3err.ErrNotImplemented)
}

// DeleteBucketPolicy is refused: policies come from the tenant's users.
func (b *Backend) DeleteBucketPolicy(context.Context, string) error {
	return s3err.GetAPIError(s3err.ErrNotImplemented)
}

// ListObjects lists a bucket; a prefix no key can match lists nothing.
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListObjectsResult{}, err
	}
	if !prefixCanMatch(str(in.Prefix)) {
		f := false
		return s3response.ListObjectsResult{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, Marker: in.Marker,
			MaxKeys: in.MaxKeys, IsTruncated: &f}, nil
	}
	return b.Posix.ListObjects(ctx, in)
}

// ListObjectsV2 lists a bucket; a prefix no key can match lists nothing.
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	if !prefixCanMatch(str(in.Prefix)) {
		f, zero := false, int32(0)
		return s3response.ListObjectsV2Result{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, StartAfter: in.StartAfter,
			ContinuationToken: in.ContinuationToken, MaxKeys: in.MaxKeys, KeyCount: &zero, IsTruncated: &f}, nil
	}
	return b.Posix.ListObjectsV2(ctx, in)
}

// ListObjectVersions lists versions; a prefix no key can match lists
// nothing.
func (b *Backend) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput) (s3response.ListVersionsResult, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListVersionsResult{}, err
	}
	if !prefixCanMatch(str(in.Prefix)) {
		f := false
		return s3response.ListVersionsResult{Name: in.Bucket, Prefix: in.Prefix, Delimiter: in.Delimiter, KeyMarker: in.KeyMarker,
			VersionIdMarker: in.VersionIdMarker, MaxKeys: in.MaxKeys, IsTruncated: &f}, nil
	}
	return b.Posix.ListObjectVersions(ctx, in)
}

// ListMultipartUploads lists uploads of a bucket reached without a link.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	ctx = detach(ctx)
	if err := b.vol.Contain(str(in.Bucket), ""); err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	return b.Posix.ListMultipartUploads(ctx, in)
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
