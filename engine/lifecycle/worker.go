package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Worker carries out the lifecycle rules of every bucket that has some,
// over an object layer (the server's erasure pools or the gateway's
// files). A pass decides from a listing, then acts on each version only if
// it is still what was listed: a write, a new lock or another pass since
// the listing wins.
type Worker struct {
	layer   objlayer.Layer
	facts   FactsFunc
	day     time.Duration
	log     *slog.Logger
	limiter *rate.Limiter

	runs, versions atomic.Int64
	lastRunEnd     atomic.Int64
	expired        atomic.Pointer[ExpiredFunc]
	mu             sync.Mutex
	actions        map[string]int64
}

// ExpiredFunc is told of each expiration the pass made (the front end
// stores its notification events): the version removed, or the delete
// marker made (marker).
type ExpiredFunc func(ctx context.Context, bk objlayer.BucketInfo, key string, res objlayer.DeleteResult, marker bool) error

// OnExpired makes fn hear of the expirations from now on.
func (l *Worker) OnExpired(fn ExpiredFunc) { l.expired.Store(&fn) }

// tell passes an expiration to the ExpiredFunc, trying three times: the
// version is gone, so a pass will not make its event again.
func (l *Worker) tell(ctx context.Context, bk objlayer.BucketInfo, key string, res objlayer.DeleteResult, marker bool) {
	fn := l.expired.Load()
	if fn == nil {
		return
	}
	var err error
	for try := range 3 {
		if err = (*fn)(ctx, bk, key, res, marker); err == nil || ctx.Err() != nil {
			return
		}
		time.Sleep(time.Duration(try+1) * time.Second)
	}
	l.log.Warn("lifecycle: the event of an expiration was not stored", "bucket", bk.Name, "key", key, "error", err)
}

// FactsFunc is what the rules look at in a version as the layer lists it
// (the front end knows its plaintext size and its locks).
type FactsFunc func(info objlayer.ObjectInfo, now time.Time) Version

// WorkerOptions tune the lifecycle pass.
type WorkerOptions struct {
	// ActionsPerSecond bounds the deletes and aborts a pass issues (and so
	// its I/O); default 200.
	ActionsPerSecond float64
	// Day, for tests only, shortens a lifecycle day; 0 is S3's.
	Day time.Duration
	Log *slog.Logger
}

// PageSize is how many versions or uploads a pass lists at once.
const PageSize = 1000

// NewWorker returns the lifecycle pass over layer.
func NewWorker(layer objlayer.Layer, facts FactsFunc, o WorkerOptions) *Worker {
	if o.ActionsPerSecond <= 0 {
		o.ActionsPerSecond = 200
	}
	if o.Day <= 0 {
		o.Day = Day
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Worker{layer: layer, facts: facts, day: o.Day, log: o.Log,
		limiter: rate.NewLimiter(rate.Limit(o.ActionsPerSecond), 1), actions: map[string]int64{}}
}

// Metrics snapshots the pass's counters.
func (l *Worker) Metrics() metrics.Lifecycle {
	if l == nil {
		return metrics.Lifecycle{} // scraped before the process built it
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

func (l *Worker) count(action string) {
	l.mu.Lock()
	l.actions[action]++
	l.mu.Unlock()
}

// Run is one pass at now over every bucket that has lifecycle rules. A
// bucket whose pass fails is logged and the others still run.
func (l *Worker) Run(ctx context.Context, now time.Time) error {
	buckets, err := l.layer.ListBuckets(ctx)
	if err != nil {
		return err
	}
	var firstErr error
	for _, bk := range buckets {
		rules := Cached(bk.Lifecycle)
		if rules == nil {
			continue
		}
		if err := l.runBucket(ctx, bk, rules, now); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.log.Warn("lifecycle pass of a bucket stopped", "bucket", bk.Name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	l.runs.Add(1)
	l.lastRunEnd.Store(time.Now().UnixNano())
	return firstErr
}

func (l *Worker) runBucket(ctx context.Context, bk objlayer.BucketInfo, rules *Configuration, now time.Time) error {
	keyMarker := ""
	var versionMarker *[16]byte
	var group []objlayer.ObjectInfo // the versions of one key, newest first
	seen := map[[16]byte]bool{}     // their IDs
	for {
		page, err := l.layer.ListObjectVersions(ctx, bk.Name, "", keyMarker, versionMarker, "", PageSize)
		if err != nil {
			return err
		}
		for _, v := range page.Objects {
			if len(group) > 0 && v.Name != group[0].Name {
				if err := l.applyKey(ctx, bk, rules, group, now); err != nil {
					return err
				}
				group = group[:0]
				clear(seen)
			}
			// A layer that lists the version at its marker again must not
			// make it count twice (as a noncurrent copy of itself).
			if seen[v.VersionID] {
				continue
			}
			seen[v.VersionID] = true
			group = append(group, v)
		}
		if !page.IsTruncated {
			break
		}
		var next *[16]byte
		if page.NextVersionMarker != "" {
			id, err := objlayer.ParseVersionID(page.NextVersionMarker)
			if err != nil {
				return err
			}
			next = &id
		}
		if page.NextMarker == keyMarker && sameVersion(next, versionMarker) {
			break // a layer that does not advance must not loop forever
		}
		keyMarker, versionMarker = page.NextMarker, next
	}
	if len(group) > 0 {
		if err := l.applyKey(ctx, bk, rules, group, now); err != nil {
			return err
		}
	}
	return l.abortUploads(ctx, bk.Name, rules, now)
}

func sameVersion(a, b *[16]byte) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// applyKey carries out what the rules say of one key's versions.
func (l *Worker) applyKey(ctx context.Context, bk objlayer.BucketInfo, rules *Configuration, versions []objlayer.ObjectInfo, now time.Time) error {
	l.versions.Add(int64(len(versions)))
	facts := make([]Version, len(versions))
	for i, v := range versions {
		facts[i] = l.facts(v, now)
		if i > 0 && facts[i].Locked {
			l.count("kept-locked")
		}
	}
	for _, a := range rules.Decide(versions[0].Name, facts, now, l.day) {
		if err := l.limiter.Wait(ctx); err != nil {
			return err
		}
		v := versions[a.Index]
		var done, locked bool
		var err error
		if a.Kind == ExpireCurrent {
			done, err = l.expireCurrent(ctx, bk, v)
		} else {
			done, locked, err = l.deleteVersion(ctx, bk, v, now)
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

// expireCurrent deletes v's key without a version ID (a delete marker
// where the bucket is versioned) if v is still its current version.
func (l *Worker) expireCurrent(ctx context.Context, bk objlayer.BucketInfo, v objlayer.ObjectInfo) (bool, error) {
	h, err := l.layer.OpenObjectMeta(ctx, bk.Name, v.Name, nil)
	if err != nil {
		return false, ignoreGone(err)
	}
	cur := h.Info()
	h.Close()
	if cur.VersionID != v.VersionID || cur.ETag != v.ETag || !cur.ModTime.Equal(v.ModTime) || cur.DeleteMarker {
		return false, nil // written or removed since the listing
	}
	mode := objlayer.DeleteUnversioned
	switch bk.Versioning {
	case "Enabled":
		mode = objlayer.DeleteVersioned
	case "Suspended":
		mode = objlayer.DeleteSuspended
	}
	if mode != objlayer.DeleteVersioned && l.facts(cur, time.Now()).Locked {
		// It would remove the version, which a lock keeps.
		l.count("kept-locked")
		return false, nil
	}
	res, err := l.layer.DeleteObject(ctx, bk.Name, v.Name, nil, mode)
	if err == nil {
		l.tell(ctx, bk, v.Name, res, res.DeleteMarker)
	}
	return err == nil, ignoreGone(err)
}

// deleteVersion removes version v (or delete marker) unless a retention or
// legal hold keeps it now (locked).
func (l *Worker) deleteVersion(ctx context.Context, bk objlayer.BucketInfo, v objlayer.ObjectInfo, now time.Time) (done, locked bool, err error) {
	vid := v.VersionID
	if !v.DeleteMarker {
		h, err := l.layer.OpenObjectMeta(ctx, bk.Name, v.Name, &vid)
		if err != nil {
			return false, false, ignoreGone(err)
		}
		info := h.Info()
		h.Close()
		if l.facts(info, now).Locked {
			return false, true, nil
		}
	}
	res, err := l.layer.DeleteObject(ctx, bk.Name, v.Name, &vid, objlayer.DeleteVersioned)
	if err == nil {
		l.tell(ctx, bk, v.Name, res, false)
	}
	return err == nil, false, ignoreGone(err)
}

func (l *Worker) abortUploads(ctx context.Context, bucket string, rules *Configuration, now time.Time) error {
	keyMarker, idMarker := "", [16]byte{}
	for {
		page, err := l.layer.ListMultipartUploads(ctx, bucket, "", keyMarker, idMarker, "", PageSize)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if _, ok := rules.AbortUpload(u.Object, u.Initiated, now, l.day); !ok {
				continue
			}
			if err := l.limiter.Wait(ctx); err != nil {
				return err
			}
			err := l.layer.AbortMultipartUpload(ctx, bucket, u.Object, u.ID)
			switch {
			case errors.Is(err, objlayer.ErrUploadNotFound):
			case err != nil:
				return err
			default:
				l.count("abort-upload")
			}
		}
		if !page.IsTruncated || page.NextKeyMarker == keyMarker && page.NextUploadID == idMarker {
			return nil
		}
		keyMarker, idMarker = page.NextKeyMarker, page.NextUploadID
	}
}

// Cached is a stored lifecycle document parsed (nil for none or one that
// does not parse), cached by its bytes: the x-amz-expiration header of
// every GET and HEAD in a bucket with rules needs it.
func Cached(doc []byte) *Configuration {
	if len(doc) == 0 {
		return nil
	}
	if c, ok := parsed.Load(string(doc)); ok {
		return c.(*Configuration)
	}
	c, err := Parse(doc)
	if err != nil {
		return nil // stored only after Parse accepted it
	}
	parsed.Store(string(doc), c)
	return c
}

var parsed sync.Map // string -> *Configuration

// ignoreGone treats a version that no longer exists as nothing to do.
func ignoreGone(err error) error {
	if errors.Is(err, objlayer.ErrObjectNotFound) {
		return nil
	}
	return err
}
