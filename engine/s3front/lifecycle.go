package s3front

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"golang.org/x/time/rate"

	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/metrics"
)

// Bucket lifecycle: the ?lifecycle sub-resource (served like ?encryption,
// subresource.go), the x-amz-expiration header of current versions, and
// the lifecycle pass (Lifecycle.Run) that carries the rules out.

// bucketLifecycler is a backend that keeps lifecycle configurations.
type bucketLifecycler interface {
	PutBucketLifecycle(ctx context.Context, bucket string, doc []byte) error
	GetBucketLifecycle(ctx context.Context, bucket string) ([]byte, error)
	DeleteBucketLifecycle(ctx context.Context, bucket string) error
}

var errNoLifecycle = s3err.APIError{Code: "NoSuchLifecycleConfiguration",
	Description: "The lifecycle configuration does not exist", HTTPStatusCode: http.StatusNotFound}

func serveBucketLifecycle(be backend.Backend, lc bucketLifecycler, iam auth.IAMService) fiber.Handler {
	return serveSubresourceDoc(be, iam, subresourceDoc{
		query: "lifecycle", getAction: auth.GetLifecycleConfigurationAction, putAction: auth.PutLifecycleConfigurationAction,
		get: lc.GetBucketLifecycle, put: lc.PutBucketLifecycle, del: lc.DeleteBucketLifecycle,
	})
}

// PutBucketLifecycle checks a lifecycle document as S3 does and stores it.
func (b *Backend) PutBucketLifecycle(ctx context.Context, bucket string, doc []byte) error {
	cfg, err := lifecycle.Parse(doc)
	if err != nil {
		var le *lifecycle.Error
		if errors.As(err, &le) {
			return s3err.APIError{Code: le.Code, Description: le.Message, HTTPStatusCode: http.StatusBadRequest}
		}
		return err
	}
	stored := cfg.Marshal()
	return b.setBucket(ctx, bucket, func(bk *erasure.BucketInfo) { bk.Lifecycle = stored })
}

// GetBucketLifecycle returns a bucket's lifecycle document.
func (b *Backend) GetBucketLifecycle(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if len(bk.Lifecycle) == 0 {
		return nil, errNoLifecycle
	}
	return bk.Lifecycle, nil
}

// DeleteBucketLifecycle removes a bucket's lifecycle configuration (a
// success when there is none, as S3 answers).
func (b *Backend) DeleteBucketLifecycle(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *erasure.BucketInfo) { bk.Lifecycle = nil })
}

// parsedLifecycles caches documents already parsed, by their bytes: the
// header of every GET and HEAD in a bucket with rules needs them.
var parsedLifecycles sync.Map // string -> *lifecycle.Configuration

func lifecycleOf(bk erasure.BucketInfo) *lifecycle.Configuration {
	if len(bk.Lifecycle) == 0 {
		return nil
	}
	if c, ok := parsedLifecycles.Load(string(bk.Lifecycle)); ok {
		return c.(*lifecycle.Configuration)
	}
	c, err := lifecycle.Parse(bk.Lifecycle)
	if err != nil {
		return nil // stored only after Parse accepted it
	}
	parsedLifecycles.Store(string(bk.Lifecycle), c)
	return c
}

// versionFacts is what the lifecycle rules look at in a version.
func versionFacts(info erasure.ObjectInfo, now time.Time) lifecycle.Version {
	v := lifecycle.Version{ModTime: info.ModTime, Size: info.Size, DeleteMarker: info.DeleteMarker}
	if q := info.Meta[metaTagging]; q != "" {
		if vals, err := url.ParseQuery(q); err == nil {
			v.Tags = make(map[string]string, len(vals))
			for k, vs := range vals {
				v.Tags[k] = vs[0]
			}
		}
	}
	_, until, hold := lockHeaders(info.Meta)
	v.Locked = hold == "ON" || until != nil && until.After(now)
	return v
}

// setExpirationHeader sets x-amz-expiration on the answer about the
// current version of key, when a rule of the bucket expires it.
func (b *Backend) setExpirationHeader(ctx context.Context, bk erasure.BucketInfo, key string, info erasure.ObjectInfo) {
	c := lifecycleOf(bk)
	if c == nil || !c.HasCurrentExpiry() {
		return
	}
	if h := c.ExpirationHeader(key, versionFacts(info, time.Now()), b.lifecycleDay()); h != "" {
		setResponseHeader(ctx, "X-Amz-Expiration", h)
	}
}

// lifecycleDay is the length of a lifecycle day: lifecycle.Day, unless
// the Backend was built for tests with a shorter one.
func (b *Backend) lifecycleDay() time.Duration {
	if b.day > 0 {
		return b.day
	}
	return lifecycle.Day
}

// Lifecycle runs the lifecycle rules of every bucket that has some.
type Lifecycle struct {
	b       *Backend
	limiter *rate.Limiter

	runs, versions atomic.Int64
	lastRunEnd     atomic.Int64
	mu             sync.Mutex
	actions        map[string]int64
}

// LifecycleOptions tune the lifecycle pass.
type LifecycleOptions struct {
	// ActionsPerSecond bounds the deletes and aborts a pass issues (and so
	// its I/O); default 200.
	ActionsPerSecond float64
}

// NewLifecycle returns the lifecycle pass over layer, with the Backend's
// options (Day included).
func NewLifecycle(layer ObjectLayer, opts Options, lo LifecycleOptions) *Lifecycle {
	if lo.ActionsPerSecond <= 0 {
		lo.ActionsPerSecond = 200
	}
	return &Lifecycle{b: newBackend(layer, opts), limiter: rate.NewLimiter(rate.Limit(lo.ActionsPerSecond), 1), actions: map[string]int64{}}
}

// Metrics snapshots the pass's counters.
func (l *Lifecycle) Metrics() metrics.Lifecycle {
	if l == nil {
		return metrics.Lifecycle{} // scraped before the node built it
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := metrics.Lifecycle{Runs: l.runs.Load(), Versions: l.versions.Load(), Actions: make(map[string]int64, len(l.actions))}
	for k, v := range l.actions {
		m.Actions[k] = v
	}
	if t := l.lastRunEnd.Load(); t > 0 {
		m.LastRunEnd = float64(t) / 1e9
	}
	return m
}

func (l *Lifecycle) count(action string) {
	l.mu.Lock()
	l.actions[action]++
	l.mu.Unlock()
}

// Run is one pass at now over every bucket that has lifecycle rules. A
// bucket whose pass fails is logged and the others still run.
func (l *Lifecycle) Run(ctx context.Context, now time.Time) error {
	buckets, err := l.b.pool.ListBuckets(ctx)
	if err != nil {
		return err
	}
	var firstErr error
	for _, bk := range buckets {
		c := lifecycleOf(bk)
		if c == nil {
			continue
		}
		if err := l.runBucket(ctx, bk, c, now); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if l.b.log != nil {
				l.b.log.Warn("lifecycle pass of a bucket stopped", "bucket", bk.Name, "err", err)
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	l.runs.Add(1)
	l.lastRunEnd.Store(time.Now().UnixNano())
	return firstErr
}

const lifecyclePage = 1000

func (l *Lifecycle) runBucket(ctx context.Context, bk erasure.BucketInfo, c *lifecycle.Configuration, now time.Time) error {
	keyMarker := ""
	var versionMarker *[16]byte
	var key string
	var group []erasure.ObjectInfo // the versions of key, newest first
	for {
		res, err := l.b.pool.ListObjectVersions(ctx, bk.Name, "", keyMarker, versionMarker, "", lifecyclePage)
		if err != nil {
			return err
		}
		for _, o := range res.Objects {
			if o.Name != key && len(group) > 0 {
				if err := l.applyKey(ctx, bk, c, key, group, now); err != nil {
					return err
				}
				group = group[:0]
			}
			key = o.Name
			group = append(group, plainInfo(o))
		}
		if !res.IsTruncated {
			break
		}
		keyMarker = res.NextMarker
		if versionMarker, err = parseVersionID(res.NextVersionMarker); err != nil {
			return err
		}
	}
	if len(group) > 0 {
		if err := l.applyKey(ctx, bk, c, key, group, now); err != nil {
			return err
		}
	}
	return l.abortUploads(ctx, bk.Name, c, now)
}

// applyKey carries out what the rules say of one key's versions.
func (l *Lifecycle) applyKey(ctx context.Context, bk erasure.BucketInfo, c *lifecycle.Configuration, key string, versions []erasure.ObjectInfo, now time.Time) error {
	l.versions.Add(int64(len(versions)))
	facts := make([]lifecycle.Version, len(versions))
	for i, v := range versions {
		facts[i] = versionFacts(v, now)
		if i > 0 && facts[i].Locked {
			l.count("kept-locked")
		}
	}
	for _, a := range c.Decide(key, facts, now, l.b.lifecycleDay()) {
		if err := l.limiter.Wait(ctx); err != nil {
			return err
		}
		v := versions[a.Index]
		done, err := l.apply(ctx, bk, key, v, a.Kind, now)
		if err != nil {
			return err
		}
		if done {
			l.count(a.Kind.String())
		}
	}
	return nil
}

// apply does one action, after checking that the version is still the one
// the pass decided on (a write or a new lock since the listing wins).
func (l *Lifecycle) apply(ctx context.Context, bk erasure.BucketInfo, key string, v erasure.ObjectInfo, kind lifecycle.ActionKind, now time.Time) (bool, error) {
	vid := v.VersionID
	if kind == lifecycle.ExpireCurrent {
		// A DELETE without version ID, only while the version listed is
		// still the current one.
		etag, mod := v.ETag, v.ModTime
		_, err := l.b.deleteOne(ctx, bk.Name, key, "", backend.ObjectDeletePreconditions{IfMatch: &etag, IfMatchLastModTime: &mod})
		return err == nil, ignoreGone(err)
	}
	if kind == lifecycle.DeleteNoncurrent && !v.DeleteMarker {
		h, err := l.b.pool.OpenObject(ctx, bk.Name, key, &vid)
		if err != nil {
			return false, ignoreGone(err)
		}
		if versionFacts(h.Info, now).Locked {
			l.count("kept-locked")
			return false, nil
		}
	}
	_, err := l.b.pool.DeleteObject(ctx, bk.Name, key, &vid, deleteMode(bk.Versioning))
	return err == nil, ignoreGone(err)
}

// ignoreGone treats a version or precondition that no longer holds as
// nothing to do.
func ignoreGone(err error) error {
	var apiErr s3err.APIError
	if err == nil || errors.Is(err, erasure.ErrObjectNotFound) ||
		errors.As(err, &apiErr) && (apiErr.HTTPStatusCode == http.StatusPreconditionFailed || apiErr.Code == "NoSuchKey") {
		return nil
	}
	return err
}

func (l *Lifecycle) abortUploads(ctx context.Context, bucket string, c *lifecycle.Configuration, now time.Time) error {
	keyMarker := ""
	var idMarker [16]byte
	for {
		page, err := l.b.pool.ListMultipartUploads(ctx, bucket, "", keyMarker, idMarker, "", lifecyclePage)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, ok := c.AbortUpload(u.Object, u.Initiated, now, l.b.lifecycleDay()); !ok {
				continue
			}
			if err := l.limiter.Wait(ctx); err != nil {
				return err
			}
			err := l.b.pool.AbortMultipartUpload(ctx, bucket, u.Object, u.ID)
			if err != nil && !errors.Is(err, erasure.ErrUploadNotFound) {
				return err
			}
			if err == nil {
				l.count("abort-upload")
			}
		}
		if !page.IsTruncated || bytes.Equal(page.NextUploadID[:], idMarker[:]) && page.NextKeyMarker == keyMarker {
			return nil
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadID
	}
}
