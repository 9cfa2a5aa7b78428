package s3front

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
)

// A bucket's configuration documents (ACL, policy, CORS, object lock,
// ownership) live in its record, on every drive, like its versioning. The
// front end parses, validates and enforces them (access checks, CORS
// answers, retention on deletes); this file stores and returns them.

// CreateBucket creates a bucket owned by its creator, with the ACL, object
// ownership, tags and object lock the request asked for. Creating a bucket
// one already owns answers success in us-east-1 (as S3 does there) and
// BucketAlreadyOwnedByYou elsewhere; another owner's bucket answers
// BucketAlreadyExists.
//
// A request that names no object ownership gets none (the front end
// passes its default, BucketOwnerEnforced, which would refuse every ACL):
// see aclserve.go.
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, acl []byte) error {
	parsed, err := auth.ParseACL(acl)
	if err != nil {
		return err
	}
	if asked, ok := ownershipAsked(ctx); ok {
		in.ObjectOwnership = asked
	}
	return b.createBucket(ctx, in, parsed.Owner, acl)
}

// createBucket creates a bucket owned by owner, with ACL document acl.
func (b *Backend) createBucket(ctx context.Context, in *s3.CreateBucketInput, owner string, acl []byte) error {
	bucket := str(in.Bucket)
	if !validBucketName(bucket) {
		return s3err.GetAPIError(s3err.ErrInvalidBucketName)
	}
	if existing, err := b.pool.StatBucket(ctx, bucket); err == nil {
		return BucketExistsAnswer(bucket, b.ownerOf(existing), owner, b.region)
	}
	var tags map[string]string
	if in.CreateBucketConfiguration != nil {
		var err error
		if tags, err = backend.ParseCreateBucketTags(in.CreateBucketConfiguration.Tags); err != nil {
			return err
		}
	}
	info := objlayer.BucketInfo{
		Name: bucket, Owner: owner, ACL: clone(acl), Ownership: string(in.ObjectOwnership), Tags: tags,
	}
	if in.ObjectLockEnabledForBucket != nil && *in.ObjectLockEnabledForBucket {
		// Object lock needs versioning, which it turns on for good.
		now := time.Now().UTC()
		lock, err := json.Marshal(auth.BucketLockConfig{Enabled: true, CreatedAt: &now})
		if err != nil {
			return err
		}
		info.ObjectLock = lock
		info.Versioning = string(types.BucketVersioningStatusEnabled)
	}
	err := b.pool.CreateBucket(ctx, info)
	if errors.Is(err, objlayer.ErrBucketExists) {
		// Created by someone else in the meantime.
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyExists, bucket)
	}
	return err
}

// BucketExistsAnswer is S3's answer to creating a bucket that exists:
// success for its owner in us-east-1 (S3 keeps that legacy there),
// BucketAlreadyOwnedByYou for its owner elsewhere, BucketAlreadyExists for
// anyone else.
func BucketExistsAnswer(bucket, owner, creator, region string) error {
	switch {
	case owner != creator:
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyExists, bucket)
	case region == "us-east-1":
		return nil
	default:
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyOwnedByYou, bucket)
	}
}

// OwnerOnlyACL is the ACL document of a bucket whose owner alone has
// access (buckets from before ACLs were kept).
func OwnerOnlyACL(owner string) ([]byte, error) {
	return json.Marshal(auth.ACL{Owner: owner, Grantees: []auth.Grantee{
		{Permission: auth.PermissionFullControl, Access: owner, Type: types.TypeCanonicalUser},
	}})
}

// ownerOf is a bucket's owner: buckets from before owners were kept
// belong to the root account.
func (b *Backend) ownerOf(bk objlayer.BucketInfo) string {
	if bk.Owner == "" {
		return b.rootAccess
	}
	return bk.Owner
}

func clone(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// bucketDoc reads one document of a bucket's record.
func (b *Backend) bucketDoc(ctx context.Context, bucket string, pick func(objlayer.BucketInfo) []byte) ([]byte, error) {
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return pick(bk), nil
}

// setBucket changes a bucket's record.
func (b *Backend) setBucket(ctx context.Context, bucket string, fn func(*objlayer.BucketInfo)) error {
	own(&bucket)
	return b.pool.UpdateBucket(ctx, bucket, fn)
}

// GetBucketAcl returns the bucket's ACL document; a bucket from before
// ACLs were kept has its owner's full control only. The front end reads it
// on every bucket request (ownership, grants) and renders it for
// GetBucketAcl.
func (b *Backend) GetBucketAcl(ctx context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	bucket := str(in.Bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if aclEvaluation(ctx) {
		// Called before every bucket and object call, after the request
		// is authenticated: the root account meets its bucket policy's
		// explicit Denies here (policyserve.go).
		if err := b.rootDenied(ctx, bk); err != nil {
			return nil, err
		}
		// What the front end's access checks evaluate: the object's ACL
		// for an object's reads, as S3's ACLs grant (aclstore.go).
		return encodeACL(b.effectiveACL(ctx, bk)), nil
	}
	return encodeACL(b.storedBucketACL(bk)), nil
}

// PutBucketAcl stores the ACL document the front end built and checked.
func (b *Backend) PutBucketAcl(ctx context.Context, bucket string, data []byte) error {
	data = clone(data)
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.ACL = data })
}

// PutBucketOwnershipControls sets the bucket's object ownership.
// BucketOwnerEnforced is refused while the bucket's ACL grants anyone but
// its owner (as S3 refuses it): ACLs would stop granting what it says.
func (b *Backend) PutBucketOwnershipControls(ctx context.Context, bucket string, ownership types.ObjectOwnership) error {
	own(&bucket)
	if ownership == types.ObjectOwnershipBucketOwnerEnforced {
		bk, err := b.pool.StatBucket(ctx, bucket)
		if err != nil {
			return err
		}
		if !onlyOwnerFullControl(b.storedBucketACL(bk)) {
			return s3err.GetAPIError(s3err.ErrInvalidBucketAclWithObjectOwnership)
		}
	}
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Ownership = string(ownership) })
}

// GetBucketOwnershipControls returns the bucket's object ownership.
func (b *Backend) GetBucketOwnershipControls(ctx context.Context, bucket string) (types.ObjectOwnership, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return "", err
	}
	if bk.Ownership == "" {
		return "", s3err.GetAPIError(s3err.ErrOwnershipControlsNotFound)
	}
	return types.ObjectOwnership(bk.Ownership), nil
}

// DeleteBucketOwnershipControls removes the bucket's object ownership.
func (b *Backend) DeleteBucketOwnershipControls(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Ownership = "" })
}

// PutBucketPolicy stores a bucket policy (validated by the front end).
func (b *Backend) PutBucketPolicy(ctx context.Context, bucket string, policy []byte) error {
	policy = clone(policy)
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return err
	}
	if err := checkPublicPolicy(bk, policy); err != nil {
		return err
	}
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Policy = policy })
}

// GetBucketPolicy returns the bucket's policy. The front end calls it
// only to evaluate a request (GET ?policy is served by policyserve.go):
// it is then given this package's decisions for that request
// (policyFor). The tenant's users are not in it: their grants are
// identity policies (engine/iam).
func (b *Backend) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if _, ok := frontCtx(ctx); ok {
		return b.policyFor(ctx, bk)
	}
	if len(bk.Policy) == 0 {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy)
	}
	return bk.Policy, nil
}

// DeleteBucketPolicy removes the bucket's policy.
func (b *Backend) DeleteBucketPolicy(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Policy = nil })
}

// PutBucketCors stores the bucket's CORS configuration, which the front
// end applies to preflight and actual cross-origin requests.
func (b *Backend) PutBucketCors(ctx context.Context, bucket string, cors []byte) error {
	cors = clone(cors)
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.CORS = cors })
}

// GetBucketCors returns the bucket's CORS configuration.
func (b *Backend) GetBucketCors(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	c, err := b.bucketDoc(ctx, bucket, func(bk objlayer.BucketInfo) []byte { return bk.CORS })
	if err == nil && len(c) == 0 {
		err = s3err.GetAPIError(s3err.ErrNoSuchCORSConfiguration)
	}
	return c, err
}

// DeleteBucketCors removes the bucket's CORS configuration.
func (b *Backend) DeleteBucketCors(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.CORS = nil })
}

// PutObjectLockConfiguration turns object lock on for a bucket whose
// versioning is enabled, or changes its default retention (the front end
// parsed and checked the document).
func (b *Backend) PutObjectLockConfiguration(ctx context.Context, bucket string, config []byte) error {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return err
	}
	if bk.Versioning != string(types.BucketVersioningStatusEnabled) {
		return s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotAllowed)
	}
	config = clone(config)
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.ObjectLock = config })
}

// GetObjectLockConfiguration returns the bucket's object-lock
// configuration; the front end reads it on writes and deletes to enforce
// retention.
func (b *Backend) GetObjectLockConfiguration(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	c, err := b.bucketDoc(ctx, bucket, func(bk objlayer.BucketInfo) []byte { return bk.ObjectLock })
	if err == nil && len(c) == 0 {
		err = s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotFound)
	}
	return c, err
}
