// Package s3front is the S3 front end of `strata server`: versitygw's S3
// protocol layer (routing, SigV4, chunked and trailer payloads, checksums,
// XML) over our erasure-coded object layer, which this package adapts to
// versitygw's backend.Backend. Operations not implemented here answer
// NotImplemented (from backend.BackendUnsupported), never a wrong success.
package s3front

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

// Backend adapts an object layer to versitygw's backend.Backend.
type Backend struct {
	backend.BackendUnsupported
	pool       ObjectLayer
	region     string
	rootAccess string
	keys       KeyRing
	hooks      Hooks
	access     Access
	identities Identities
	iamService auth.IAMService
	log        *slog.Logger
	// day is the lifecycle day (Options.LifecycleDay).
	day time.Duration
}

// Access says which buckets users other than root see in ListBuckets (what
// they may do is their identity policy, which the front end evaluates).
type Access interface {
	// CanList reports whether a user sees a bucket in ListBuckets.
	CanList(access, bucket string) bool
}

// Options configure a Backend.
type Options struct {
	// Region answered in bucket locations; default us-east-1.
	Region string
	Hooks  Hooks
	// Access says which buckets users see; nil: only their own.
	Access Access
	// Identities name principals in ACLs; nil: by access key.
	Identities Identities
	// IAM resolves users for the ACL calls the backend serves (aclserve.go).
	IAM auth.IAMService
	// RootAccess is the root account's access key, the owner of buckets
	// from before owners were kept.
	RootAccess string
	// Keys are the master keys of SSE-S3 and SSE-KMS; nil: those modes are
	// refused (SSE-C needs none).
	Keys KeyRing
	Log  *slog.Logger
	// LifecycleDay, for tests only, shortens the day of lifecycle rules
	// (expiry headers and the lifecycle pass); 0 is S3's day.
	LifecycleDay time.Duration
}

// New returns the S3 backend over an object layer. Its every call answers
// S3 errors: the methods of Backend return the object layer's errors as
// they are, and the generated decorator s3Errors (zz_generated_errors.go,
// from hack/s3errors) maps them with toS3, once, on the way out.
func New(layer ObjectLayer, opts Options) backend.Backend {
	return s3Errors{newBackend(layer, opts)}
}

func newBackend(layer ObjectLayer, opts Options) *Backend {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	return &Backend{pool: layer, region: opts.Region, rootAccess: opts.RootAccess, keys: opts.Keys, hooks: opts.Hooks, access: opts.Access,
		identities: opts.Identities, iamService: opts.IAM, log: opts.Log, day: opts.LifecycleDay}
}

// String names the backend in versitygw's logs.
func (b *Backend) String() string { return "strata" }

// Shutdown is called by the front end on exit; drives are closed by the
// server that opened them.
func (b *Backend) Shutdown() {}

// str reads a request string. The front end's strings may point into the
// request's buffer, which the HTTP server reuses for the next request once
// this one is answered: anything kept past the call (caches, heal queues,
// a streaming body's goroutine) would change under us. So every request
// string is copied on the way in (see also own).
func str(p *string) string {
	if p == nil {
		return ""
	}
	return strings.Clone(*p)
}

// own copies request strings passed by value (see str).
func own(ss ...*string) {
	for _, s := range ss {
		*s = strings.Clone(*s)
	}
}

// ListBuckets lists buckets in name order, with prefix and pagination.
func (b *Backend) ListBuckets(ctx context.Context, in s3response.ListBucketsInput) (s3response.ListAllMyBucketsResult, error) {
	buckets, err := b.pool.ListBuckets(ctx)
	if err != nil {
		return s3response.ListAllMyBucketsResult{}, err
	}
	res := s3response.ListAllMyBucketsResult{
		Owner:  s3response.CanonicalUser{ID: *b.owner(in.Owner).ID, DisplayName: *b.owner(in.Owner).DisplayName},
		Prefix: in.Prefix,
	}
	for _, bk := range buckets {
		if !in.IsAdmin && b.ownerOf(bk) != in.Owner && (b.access == nil || !b.access.CanList(in.Owner, bk.Name)) {
			continue
		}
		if !strings.HasPrefix(bk.Name, in.Prefix) || (in.ContinuationToken != "" && bk.Name <= in.ContinuationToken) {
			continue
		}
		if in.MaxBuckets > 0 && len(res.Buckets.Bucket) == int(in.MaxBuckets) {
			res.ContinuationToken = res.Buckets.Bucket[len(res.Buckets.Bucket)-1].Name
			break
		}
		res.Buckets.Bucket = append(res.Buckets.Bucket, s3response.ListAllMyBucketsEntry{
			Name: bk.Name, BucketRegion: b.region, CreationDate: bk.Created,
		})
	}
	return res, nil
}

// HeadBucket reports whether a bucket exists.
func (b *Backend) HeadBucket(ctx context.Context, in *s3.HeadBucketInput) (*s3.HeadBucketOutput, error) {
	bucket := str(in.Bucket)
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return nil, err
	}
	return &s3.HeadBucketOutput{BucketRegion: &b.region}, nil
}

// DeleteBucket removes an empty bucket.
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	own(&bucket)
	return b.pool.DeleteBucket(ctx, bucket)
}

// PutBucketVersioning enables or suspends versioning.
func (b *Backend) PutBucketVersioning(ctx context.Context, bucket string, status types.BucketVersioningStatus) error {
	own(&bucket)
	switch status {
	case types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended:
	default:
		return s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	if status == types.BucketVersioningStatusSuspended {
		// Object lock keeps versions; once on, versioning stays enabled.
		if bk, err := b.pool.StatBucket(ctx, bucket); err == nil && len(bk.ObjectLock) > 0 {
			return ErrVersioningLocked
		}
	}
	return b.pool.UpdateBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Versioning = string(status) })
}

// GetBucketVersioning reports the versioning state (none when never set).
func (b *Backend) GetBucketVersioning(ctx context.Context, bucket string) (s3response.GetBucketVersioningOutput, error) {
	own(&bucket)
	info, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return s3response.GetBucketVersioningOutput{}, err
	}
	var out s3response.GetBucketVersioningOutput
	if info.Versioning != "" {
		st := types.BucketVersioningStatus(info.Versioning)
		out.Status = &st
	}
	return out, nil
}

// parseVersionID parses an S3 version ID: "" is the latest, "null" the
// null version, otherwise one of our UUIDs.
func parseVersionID(s string) (*[16]byte, error) {
	if s == "" {
		return nil, nil
	}
	id, err := objlayer.ParseVersionID(s)
	if err != nil {
		return nil, s3err.GetInvalidArgumentErr(s3err.InvalidArgVersionId, s)
	}
	return &id, nil
}

// validBucketName applies the S3 naming rules the front end's check leaves
// out (it checks length, characters and IP addresses): no adjacent
// periods, no period next to a hyphen, and none of the reserved prefixes
// and suffixes.
func validBucketName(name string) bool {
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(name, bad) {
			return false
		}
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, sfx := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, sfx) {
			return false
		}
	}
	return true
}
