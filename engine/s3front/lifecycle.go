package s3front

import (
	"context"
	"errors"
	"log/slog"
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

	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/objlayer"
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

// ErrNoLifecycle answers a GET of the rules of a bucket that has none.
var ErrNoLifecycle = s3err.APIError{Code: "NoSuchLifecycleConfiguration",
	Description: "The lifecycle configuration does not exist", HTTPStatusCode: http.StatusNotFound}

func serveBucketLifecycle(be backend.Backend, lc bucketLifecycler, iam auth.IAMService) fiber.Handler {
	return serveSubresourceDoc(be, iam, subresourceDoc{
		query: "lifecycle", getAction: auth.GetLifecycleConfigurationAction, putAction: auth.PutLifecycleConfigurationAction,
		get: lc.GetBucketLifecycle, put: lc.PutBucketLifecycle, del: lc.DeleteBucketLifecycle,
	})
}

// PutBucketLifecycle checks a lifecycle document as S3 does and stores it.
func (b *Backend) PutBucketLifecycle(ctx context.Context, bucket string, doc []byte) error {
	stored, err := CheckLifecycle(doc)
	if err != nil {
		return err
	}
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Lifecycle = stored })
}

// CheckLifecycle checks a lifecycle document as S3 does: the form to
// store (every rule with an ID), or the S3 error that refuses it.
func CheckLifecycle(doc []byte) ([]byte, error) {
	cfg, err := lifecycle.Parse(doc)
	if err != nil {
		var le *lifecycle.Error
		if errors.As(err, &le) {
			return nil, s3err.APIError{Code: le.Code, Description: le.Message, HTTPStatusCode: http.StatusBadRequest}
		}
		return nil, err
	}
	return cfg.Marshal(), nil
}

// GetBucketLifecycle returns a bucket's lifecycle document.
func (b *Backend) GetBucketLifecycle(ctx context.Context, bucket string) ([]byte, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if len(bk.Lifecycle) == 0 {
		return nil, ErrNoLifecycle
	}
	return bk.Lifecycle, nil
}

// DeleteBucketLifecycle removes a bucket's lifecycle configuration (a
// success when there is none, as S3 answers).
func (b *Backend) DeleteBucketLifecycle(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Lifecycle = nil })
}

// parsedLifecycles caches documents already parsed, by their bytes: the
// header of every GET and HEAD in a bucket with rules needs them.
var parsedLifecycles sync.Map // string -> *lifecycle.Configuration

func lifecycleOf(bk objlayer.BucketInfo) *lifecycle.Configuration {
	return ParsedLifecycle(bk.Lifecycle)
}

// ParsedLifecycle is a stored lifecycle document parsed (nil for none).
func ParsedLifecycle(doc []byte) *lifecycle.Configuration {
	if len(doc) == 0 {
		return nil
	}
	if c, ok := parsedLifecycles.Load(string(doc)); ok {
		return c.(*lifecycle.Configuration)
	}
	c, err := lifecycle.Parse(doc)
	if err != nil {
		return nil // stored only after Parse accepted it
	}
	parsedLifecycles.Store(string(doc), c)
	return c
}

// versionFacts is what the lifecycle rules look at in a version.
func versionFacts(info objlayer.ObjectInfo, now time.Time) lifecycle.Version {
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
func (b *Backend) setExpirationHeader(ctx context.Context, bk objlayer.BucketInfo, key string, info objlayer.ObjectInfo) {
	SetExpirationHeader(ctx, lifecycleOf(bk), key, b.lifecycleDay(), func() lifecycle.Version { return versionFacts(info, time.Now()) })
}

// SetExpirationHeader sets x-amz-expiration on the answer about the
// current version of key when one of rules (nil for none) expires it;
// facts are read only then.
func SetExpirationHeader(ctx context.Context, rules *lifecycle.Configuration, key string, day time.Duration, facts func() lifecycle.Version) {
	if rules == nil || !rules.HasCurrentExpiry() {
		return
	}
	if h := rules.ExpirationHeader(key, facts(), day); h != "" {
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

// LifecycleStore is the storage a lifecycle pass runs over: the server's
// object layer (layerLifecycle) or the gateway's files (engine/gateway).
// The pass decides; the store lists and carries out, each action
// conditional on what the pass saw, so that a write, a new lock or another
// pass since the listing wins.
type LifecycleStore interface {
	// LifecycleBuckets lists the buckets that have lifecycle rules.
	LifecycleBuckets(ctx context.Context) ([]LifecycleBucket, error)
	// LifecycleVersions lists up to a page of versions after the markers
	// ("" for the start), each key's newest first, with their facts at
	// now. want says which facts the bucket's rules look at beyond time,
	// size and kind.
	LifecycleVersions(ctx context.Context, bk LifecycleBucket, keyMarker, versionMarker string, want LifecycleFacts, now time.Time) (LifecyclePage, error)
	// ExpireCurrent deletes v's key without a version ID (a delete marker
	// where the bucket is versioned) if v is still its current version;
	// false when it no longer is or is gone.
	ExpireCurrent(ctx context.Context, bk LifecycleBucket, v LifecycleVersion) (bool, error)
	// DeleteVersion removes version v (or delete marker) unless a
	// retention or legal hold keeps it now (locked).
	DeleteVersion(ctx context.Context, bk LifecycleBucket, v LifecycleVersion, now time.Time) (done, locked bool, err error)
	// LifecycleUploads lists up to a page of multipart uploads after the
	// markers.
	LifecycleUploads(ctx context.Context, bucket, keyMarker, idMarker string) (LifecycleUploadPage, error)
	// AbortUpload aborts u unless it is gone or changed since it was
	// listed.
	AbortUpload(ctx context.Context, bucket string, u LifecycleUpload) (bool, error)
}

// LifecycleBucket is a bucket with lifecycle rules.
type LifecycleBucket struct {
	Name  string
	Rules *lifecycle.Configuration
	// Versioning is the bucket's versioning state ("" if never enabled).
	Versioning string
}

// LifecycleFacts says what the rules of a bucket look at.
type LifecycleFacts struct {
	// Tags: some rule filters by object tags.
	Tags bool
}

// LifecycleVersion is one listed version (or delete marker) of a key.
type LifecycleVersion struct {
	Key, VersionID, ETag string
	IsLatest             bool
	Facts                lifecycle.Version
}

// LifecyclePage is one page of versions.
type LifecyclePage struct {
	Versions                     []LifecycleVersion
	NextKeyMarker, NextVersionID string
	Truncated                    bool
}

// LifecycleUpload is one listed multipart upload.
type LifecycleUpload struct {
	Key, ID   string
	Initiated time.Time
}

// LifecycleUploadPage is one page of multipart uploads.
type LifecycleUploadPage struct {
	Uploads                     []LifecycleUpload
	NextKeyMarker, NextUploadID string
	Truncated                   bool
}

// Lifecycle runs the lifecycle rules of every bucket that has some.
type Lifecycle struct {
	store   LifecycleStore
	day     time.Duration
	log     *slog.Logger
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
	// Day, for tests only, shortens a lifecycle day; 0 is S3's.
	Day time.Duration
	Log *slog.Logger
}

// NewLifecycle returns the lifecycle pass over layer, with the Backend's
// options (LifecycleDay included).
func NewLifecycle(layer ObjectLayer, opts Options, lo LifecycleOptions) *Lifecycle {
	lo.Day, lo.Log = opts.LifecycleDay, opts.Log
	return NewLifecycleOver(layerLifecycle{newBackend(layer, opts)}, lo)
}

// NewLifecycleOver returns the lifecycle pass over store.
func NewLifecycleOver(store LifecycleStore, lo LifecycleOptions) *Lifecycle {
	if lo.ActionsPerSecond <= 0 {
		lo.ActionsPerSecond = 200
	}
	if lo.Day <= 0 {
		lo.Day = lifecycle.Day
	}
	return &Lifecycle{store: store, day: lo.Day, log: lo.Log, limiter: rate.NewLimiter(rate.Limit(lo.ActionsPerSecond), 1), actions: map[string]int64{}}
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
	buckets, err := l.store.LifecycleBuckets(ctx)
	if err != nil {
		return err
	}
	var firstErr error
	for _, bk := range buckets {
		if err := l.runBucket(ctx, bk, now); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if l.log != nil {
				l.log.Warn("lifecycle pass of a bucket stopped", "bucket", bk.Name, "err", err)
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

// LifecyclePageSize is how many versions or uploads a store lists at once.
const LifecyclePageSize = 1000

func (l *Lifecycle) runBucket(ctx context.Context, bk LifecycleBucket, now time.Time) error {
	want := LifecycleFacts{Tags: bk.Rules.HasTagFilters()}
	keyMarker, versionMarker := "", ""
	var group []LifecycleVersion // the versions of one key, newest first
	seen := map[string]bool{}    // their IDs
	for {
		page, err := l.store.LifecycleVersions(ctx, bk, keyMarker, versionMarker, want, now)
		if err != nil {
			return err
		}
		for _, v := range page.Versions {
			if len(group) > 0 && v.Key != group[0].Key {
				if err := l.applyKey(ctx, bk, group, now); err != nil {
					return err
				}
				group = group[:0]
				clear(seen)
			}
			// A store that lists the version at its marker again must not
			// make it count twice (as a noncurrent copy of itself).
			if seen[v.VersionID] {
				continue
			}
			seen[v.VersionID] = true
			group = append(group, v)
		}
		if !page.Truncated {
			break
		}
		keyMarker, versionMarker = page.NextKeyMarker, page.NextVersionID
	}
	if len(group) > 0 {
		if err := l.applyKey(ctx, bk, group, now); err != nil {
			return err
		}
	}
	return l.abortUploads(ctx, bk, now)
}

// applyKey carries out what the rules say of one key's versions.
func (l *Lifecycle) applyKey(ctx context.Context, bk LifecycleBucket, versions []LifecycleVersion, now time.Time) error {
	l.versions.Add(int64(len(versions)))
	facts := make([]lifecycle.Version, len(versions))
	for i, v := range versions {
		facts[i] = v.Facts
		if i > 0 && facts[i].Locked {
			l.count("kept-locked")
		}
	}
	for _, a := range bk.Rules.Decide(versions[0].Key, facts, now, l.day) {
		if err := l.limiter.Wait(ctx); err != nil {
			return err
		}
		v := versions[a.Index]
		var done, locked bool
		var err error
		if a.Kind == lifecycle.ExpireCurrent {
			done, err = l.store.ExpireCurrent(ctx, bk, v)
		} else {
			done, locked, err = l.store.DeleteVersion(ctx, bk, v, now)
		}
		if err != nil {
			return err
		}
		if locked {
			l.count("kept-locked")
		}
		if done {
			l.count(a.Kind.String())
		}
	}
	return nil
}

func (l *Lifecycle) abortUploads(ctx context.Context, bk LifecycleBucket, now time.Time) error {
	keyMarker, idMarker := "", ""
	for {
		page, err := l.store.LifecycleUploads(ctx, bk.Name, keyMarker, idMarker)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, ok := bk.Rules.AbortUpload(u.Key, u.Initiated, now, l.day); !ok {
				continue
			}
			if err := l.limiter.Wait(ctx); err != nil {
				return err
			}
			done, err := l.store.AbortUpload(ctx, bk.Name, u)
			if err != nil {
				return err
			}
			if done {
				l.count("abort-upload")
			}
		}
		if !page.Truncated || page.NextKeyMarker == keyMarker && page.NextUploadID == idMarker {
			return nil
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadID
	}
}

// layerLifecycle is the lifecycle store of the server: its object layer.
type layerLifecycle struct{ b *Backend }

func (s layerLifecycle) LifecycleBuckets(ctx context.Context) ([]LifecycleBucket, error) {
	buckets, err := s.b.pool.ListBuckets(ctx)
	if err != nil {
		return nil, err
	}
	var out []LifecycleBucket
	for _, bk := range buckets {
		if c := lifecycleOf(bk); c != nil {
			out = append(out, LifecycleBucket{Name: bk.Name, Rules: c, Versioning: bk.Versioning})
		}
	}
	return out, nil
}

func (s layerLifecycle) LifecycleVersions(ctx context.Context, bk LifecycleBucket, keyMarker, versionMarker string, _ LifecycleFacts, now time.Time) (LifecyclePage, error) {
	vm, err := parseVersionID(versionMarker)
	if err != nil {
		return LifecyclePage{}, err
	}
	res, err := s.b.pool.ListObjectVersions(ctx, bk.Name, "", keyMarker, vm, "", LifecyclePageSize)
	if err != nil {
		return LifecyclePage{}, err
	}
	page := LifecyclePage{Truncated: res.IsTruncated, NextKeyMarker: res.NextMarker, NextVersionID: res.NextVersionMarker}
	for _, o := range res.Objects {
		o = plainInfo(o)
		page.Versions = append(page.Versions, LifecycleVersion{Key: o.Name, VersionID: objlayer.FormatVersionID(o.VersionID), ETag: o.ETag,
			IsLatest: o.IsLatest, Facts: versionFacts(o, now)})
	}
	return page, nil
}

func (s layerLifecycle) ExpireCurrent(ctx context.Context, bk LifecycleBucket, v LifecycleVersion) (bool, error) {
	etag, mod := v.ETag, v.Facts.ModTime
	_, err := s.b.deleteOne(ctx, bk.Name, v.Key, "", backend.ObjectDeletePreconditions{IfMatch: &etag, IfMatchLastModTime: &mod})
	return err == nil, ignoreGone(err)
}

func (s layerLifecycle) DeleteVersion(ctx context.Context, bk LifecycleBucket, v LifecycleVersion, now time.Time) (bool, bool, error) {
	vid, err := parseVersionID(v.VersionID)
	if err != nil {
		return false, false, err
	}
	if !v.Facts.DeleteMarker {
		h, err := s.b.pool.OpenObject(ctx, bk.Name, v.Key, vid)
		if err != nil {
			return false, false, ignoreGone(err)
		}
		if versionFacts(h.Info(), now).Locked {
			return false, true, nil
		}
	}
	_, err = s.b.pool.DeleteObject(ctx, bk.Name, v.Key, vid, deleteMode(bk.Versioning))
	return err == nil, false, ignoreGone(err)
}

func (s layerLifecycle) LifecycleUploads(ctx context.Context, bucket, keyMarker, idMarker string) (LifecycleUploadPage, error) {
	var id [16]byte
	if idMarker != "" {
		var err error
		if id, err = parseUploadID(idMarker); err != nil {
			return LifecycleUploadPage{}, err
		}
	}
	res, err := s.b.pool.ListMultipartUploads(ctx, bucket, "", keyMarker, id, "", LifecyclePageSize)
	if err != nil {
		return LifecycleUploadPage{}, err
	}
	page := LifecycleUploadPage{Truncated: res.IsTruncated, NextKeyMarker: res.NextKeyMarker, NextUploadID: uploadIDString(res.NextUploadID)}
	for _, u := range res.Uploads {
		page.Uploads = append(page.Uploads, LifecycleUpload{Key: u.Object, ID: uploadIDString(u.ID), Initiated: u.Initiated})
	}
	return page, nil
}

func (s layerLifecycle) AbortUpload(ctx context.Context, bucket string, u LifecycleUpload) (bool, error) {
	id, err := parseUploadID(u.ID)
	if err != nil {
		return false, err
	}
	err = s.b.pool.AbortMultipartUpload(ctx, bucket, u.Key, id)
	if errors.Is(err, objlayer.ErrUploadNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ignoreGone treats a version or precondition that no longer holds as
// nothing to do.
func ignoreGone(err error) error {
	var apiErr s3err.APIError
	if err == nil || errors.Is(err, objlayer.ErrObjectNotFound) ||
		errors.As(err, &apiErr) && (apiErr.HTTPStatusCode == http.StatusPreconditionFailed || apiErr.Code == "NoSuchKey") {
		return nil
	}
	return err
}
