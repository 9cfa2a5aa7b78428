package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/s3front"
)

// Bucket lifecycle on the gateway. A bucket's rules are kept with the
// bucket directory's own metadata (an xattr, or the sidecar entry on
// filesystems without them), where versitygw keeps its policy and CORS
// rules; the front end serves ?lifecycle from here and the x-amz-expiration
// header of current versions. The pass (s3front.Lifecycle, shared with the
// server) runs over the files through the posix backend, on one replica at
// a time: the one holding the lease file on the shared volume. Every action
// is conditional on what the pass listed (the current version's ETag and
// time, a lock read again just before a version is removed, an upload's
// time), so a replica that runs a pass while another's lease lapses, or a
// POSIX user who rewrites a file meanwhile, loses nothing the rules did not
// mean to remove.

// lifecycleAttr names the bucket attribute holding the rules (stored as
// s3front.CheckLifecycle returns them).
const lifecycleAttr = "strata-lifecycle"

// PutBucketLifecycle checks a lifecycle document as S3 does and keeps it
// with the bucket.
func (b *Backend) PutBucketLifecycle(ctx context.Context, bucket string, doc []byte) error {
	stored, err := s3front.CheckLifecycle(doc)
	if err != nil {
		return err
	}
	if err := b.vol.Contain(bucket, ""); err != nil {
		return err
	}
	return b.meta.StoreAttribute(nil, bucket, "", lifecycleAttr, stored)
}

// GetBucketLifecycle returns a bucket's lifecycle document.
func (b *Backend) GetBucketLifecycle(_ context.Context, bucket string) ([]byte, error) {
	doc, err := b.bucketLifecycle(bucket)
	if err != nil {
		return nil, err
	}
	if len(doc) == 0 {
		return nil, s3front.ErrNoLifecycle
	}
	return doc, nil
}

// DeleteBucketLifecycle removes a bucket's rules (a success when there are
// none, as S3 answers).
func (b *Backend) DeleteBucketLifecycle(_ context.Context, bucket string) error {
	if err := b.vol.Contain(bucket, ""); err != nil {
		return err
	}
	err := b.meta.DeleteAttribute(bucket, "", lifecycleAttr)
	if errors.Is(err, meta.ErrNoSuchKey) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// bucketLifecycle reads a bucket's stored rules (nil when it has none).
func (b *Backend) bucketLifecycle(bucket string) ([]byte, error) {
	if err := b.vol.Contain(bucket, ""); err != nil {
		return nil, err
	}
	doc, err := b.meta.RetrieveAttribute(nil, bucket, "", lifecycleAttr)
	if errors.Is(err, meta.ErrNoSuchKey) || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return doc, err
}

// lifecycleDay is a lifecycle day: S3's, unless a test shortened it.
func (b *Backend) lifecycleDay() time.Duration {
	if b.day > 0 {
		return b.day
	}
	return lifecycle.Day
}

// setExpiration sets x-amz-expiration on the answer about key's current
// version when a rule of its bucket expires it.
func (b *Backend) setExpiration(ctx context.Context, bucket, key string, mod *time.Time, size int64) {
	doc, err := b.bucketLifecycle(bucket)
	rules := s3front.ParsedLifecycle(doc)
	if err != nil || rules == nil || mod == nil {
		return
	}
	s3front.SetExpirationHeader(ctx, rules, key, b.lifecycleDay(), func() lifecycle.Version {
		v := lifecycle.Version{ModTime: *mod, Size: size}
		if rules.HasTagFilters() {
			v.Tags, _ = b.Posix.GetObjectTagging(ctx, bucket, key, "")
		}
		return v
	})
}

// lifecycleStore is the gateway's s3front.LifecycleStore.
type lifecycleStore struct{ b *Backend }

func (s lifecycleStore) LifecycleBuckets(ctx context.Context) ([]s3front.LifecycleBucket, error) {
	all, err := s.b.Posix.ListBuckets(ctx, s3response.ListBucketsInput{IsAdmin: true, MaxBuckets: math.MaxInt32})
	if err != nil {
		return nil, err
	}
	var out []s3front.LifecycleBucket
	for _, bk := range all.Buckets.Bucket {
		// A bucket removed meanwhile, or whose rules cannot be read now,
		// waits for the next pass; the others run.
		doc, err := s.b.bucketLifecycle(bk.Name)
		if err != nil {
			s.b.log.Warn("lifecycle rules of a bucket unreadable", "bucket", bk.Name, "err", err)
			continue
		}
		rules := s3front.ParsedLifecycle(doc)
		if rules == nil {
			continue
		}
		v, err := s.b.GetBucketVersioning(ctx, bk.Name)
		if err != nil {
			s.b.log.Warn("versioning of a bucket with lifecycle rules unreadable", "bucket", bk.Name, "err", err)
			continue
		}
		lb := s3front.LifecycleBucket{Name: bk.Name, Rules: rules}
		if v.Status != nil {
			lb.Versioning = string(*v.Status)
		}
		out = append(out, lb)
	}
	return out, nil
}

// LifecycleVersions lists versions through the posix backend, which
// answers each key's versions newest first but in two lists, objects and
// delete markers; they are merged back by time. Pages hold whole keys: the
// backend's version markers list the version at the marker again, and
// after a "null" marker skip the rest of the bucket, so a page that ends
// inside a key is cut before that key (the next page starts after the key
// before it) or, when that key is all the page holds, listed again larger.
func (s lifecycleStore) LifecycleVersions(ctx context.Context, bk s3front.LifecycleBucket, keyMarker, versionMarker string, want s3front.LifecycleFacts, now time.Time) (s3front.LifecyclePage, error) {
	var page s3front.LifecyclePage
	for size := s3front.LifecyclePageSize; ; size *= 4 {
		var err error
		if page, err = s.listVersions(ctx, bk.Name, keyMarker, versionMarker, size); err != nil {
			return page, err
		}
		if !page.Truncated {
			break
		}
		if kept, next, ok := wholeKeys(page.Versions, func(v s3front.LifecycleVersion) string { return v.Key }); ok {
			page.Versions, page.NextKeyMarker, page.NextVersionID = kept, next, ""
			break
		}
		if size >= maxLifecyclePage {
			break // one key with this many versions: the backend's markers
		}
	}
	lock, err := s.b.lockRule(ctx, bk.Name)
	if err != nil {
		return s3front.LifecyclePage{}, err
	}
	for i := range page.Versions {
		v := &page.Versions[i]
		if v.Facts.DeleteMarker {
			continue
		}
		// The current version is read by key: the backend keeps no
		// version ID for a file written through POSIX or while
		// versioning was off, and "null" names the noncurrent one.
		vid := v.VersionID
		if v.IsLatest {
			vid = ""
		}
		if want.Tags {
			if v.Facts.Tags, err = s.b.Posix.GetObjectTagging(ctx, bk.Name, v.Key, vid); err != nil && !gone(err) {
				return s3front.LifecyclePage{}, err
			}
		}
		if v.Facts.Locked, err = s.b.locked(ctx, lock, bk.Name, v.Key, vid, now); err != nil {
			return s3front.LifecyclePage{}, err
		}
	}
	return page, nil
}

// maxLifecyclePage is the most versions a lifecycle listing asks the posix
// backend for at once, to hold all the versions of one key.
const maxLifecyclePage = 64 * s3front.LifecyclePageSize

// listVersions is one ListObjectVersions of the posix backend, merged.
func (s lifecycleStore) listVersions(ctx context.Context, bucket, keyMarker, versionMarker string, size int) (s3front.LifecyclePage, error) {
	empty, max := "", int32(size)
	res, err := s.b.Posix.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &bucket, KeyMarker: &keyMarker,
		VersionIdMarker: &versionMarker, Prefix: &empty, Delimiter: &empty, MaxKeys: &max})
	if err != nil {
		return s3front.LifecyclePage{}, err
	}
	page := s3front.LifecyclePage{Truncated: res.IsTruncated != nil && *res.IsTruncated,
		NextKeyMarker: str(res.NextKeyMarker), NextVersionID: str(res.NextVersionIdMarker)}
	for _, o := range res.Versions {
		v := s3front.LifecycleVersion{Key: str(o.Key), VersionID: str(o.VersionId), ETag: strings.Trim(str(o.ETag), `"`),
			IsLatest: o.IsLatest != nil && *o.IsLatest}
		if o.LastModified != nil {
			v.Facts.ModTime = *o.LastModified
		}
		if o.Size != nil {
			v.Facts.Size = *o.Size
		}
		page.Versions = append(page.Versions, v)
	}
	for _, m := range res.DeleteMarkers {
		v := s3front.LifecycleVersion{Key: str(m.Key), VersionID: str(m.VersionId), IsLatest: m.IsLatest != nil && *m.IsLatest}
		v.Facts.DeleteMarker = true
		if m.LastModified != nil {
			v.Facts.ModTime = *m.LastModified
		}
		page.Versions = append(page.Versions, v)
	}
	slices.SortStableFunc(page.Versions, func(a, b s3front.LifecycleVersion) int {
		switch {
		case a.Key != b.Key:
			return strings.Compare(a.Key, b.Key)
		case a.IsLatest != b.IsLatest:
			if a.IsLatest {
				return -1
			}
			return 1
		}
		return b.Facts.ModTime.Compare(a.Facts.ModTime)
	})
	return page, nil
}

// wholeKeys cuts a truncated page, in key order, before its last key,
// whose entries may go on in the next page: it returns the entries of the
// other keys and the key to list after. ok is false when the page holds
// one key only.
func wholeKeys[T any](items []T, key func(T) string) (kept []T, after string, ok bool) {
	if len(items) == 0 {
		return nil, "", false
	}
	last := key(items[len(items)-1])
	i := len(items)
	for i > 0 && key(items[i-1]) == last {
		i--
	}
	if i == 0 {
		return nil, "", false
	}
	return items[:i], key(items[i-1]), true
}

func (s lifecycleStore) ExpireCurrent(ctx context.Context, bk s3front.LifecycleBucket, v s3front.LifecycleVersion) (bool, error) {
	bucket, key, mod := bk.Name, v.Key, v.Facts.ModTime
	in := &s3.DeleteObjectInput{Bucket: &bucket, Key: &key, IfMatchLastModifiedTime: &mod}
	if v.ETag != "" {
		in.IfMatch = &v.ETag
	}
	if bk.Versioning != string(types.BucketVersioningStatusEnabled) {
		// The delete removes the file: not while a lock keeps it.
		lock, err := s.b.lockRule(ctx, bucket)
		if err != nil {
			return false, err
		}
		if locked, err := s.b.locked(ctx, lock, bucket, key, "", time.Now()); err != nil || locked {
			return false, err
		}
	}
	_, err := s.b.DeleteObject(ctx, in)
	return err == nil, ignoreGone(err)
}

func (s lifecycleStore) DeleteVersion(ctx context.Context, bk s3front.LifecycleBucket, v s3front.LifecycleVersion, now time.Time) (bool, bool, error) {
	bucket, key, vid, mod := bk.Name, v.Key, v.VersionID, v.Facts.ModTime
	if !v.Facts.DeleteMarker {
		lock, err := s.b.lockRule(ctx, bucket)
		if err != nil {
			return false, false, err
		}
		read := vid
		if v.IsLatest {
			read = ""
		}
		locked, err := s.b.locked(ctx, lock, bucket, key, read, now)
		if err != nil || locked {
			return false, locked, ignoreGone(err)
		}
	}
	// Conditional on what was listed: the backend takes "null" for the
	// current file when that has no version ID of its own (written
	// through POSIX since), which the condition then keeps.
	in := &s3.DeleteObjectInput{Bucket: &bucket, Key: &key, VersionId: &vid, IfMatchLastModifiedTime: &mod}
	if v.ETag != "" {
		in.IfMatch = &v.ETag
	}
	_, err := s.b.DeleteObject(ctx, in)
	if errors.Is(err, s3err.GetInvalidArgumentErr(s3err.InvalidArgVersionId, vid)) {
		return false, false, nil // removed since it was listed
	}
	return err == nil, false, ignoreGone(err)
}

// LifecycleUploads lists uploads a page of whole keys at a time: the
// posix backend cannot continue from an upload ID marker (it drops the
// marker's key before looking for the ID), so each page is cut before its
// last key and the next starts after the key before it.
func (s lifecycleStore) LifecycleUploads(ctx context.Context, bucket, keyMarker, idMarker string) (s3front.LifecycleUploadPage, error) {
	for size := s3front.LifecyclePageSize; ; size *= 4 {
		empty, max := "", int32(size)
		res, err := s.b.Posix.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, KeyMarker: &keyMarker,
			UploadIdMarker: &idMarker, Prefix: &empty, Delimiter: &empty, MaxUploads: &max})
		if err != nil {
			return s3front.LifecycleUploadPage{}, err
		}
		page := s3front.LifecycleUploadPage{Truncated: res.IsTruncated, NextKeyMarker: res.NextKeyMarker, NextUploadID: res.NextUploadIDMarker}
		for _, u := range res.Uploads {
			page.Uploads = append(page.Uploads, s3front.LifecycleUpload{Key: u.Key, ID: u.UploadID, Initiated: u.Initiated})
		}
		slices.SortStableFunc(page.Uploads, func(a, b s3front.LifecycleUpload) int { return strings.Compare(a.Key, b.Key) })
		if !page.Truncated || len(page.Uploads) == 0 {
			page.Truncated = false
			return page, nil
		}
		if kept, after, ok := wholeKeys(page.Uploads, func(u s3front.LifecycleUpload) string { return u.Key }); ok {
			page.Uploads, page.NextKeyMarker, page.NextUploadID = kept, after, ""
			return page, nil
		}
		if size >= maxLifecyclePage {
			// One key with this many uploads: the rest of its uploads wait
			// for the next pass; the listing goes on after the key.
			page.NextKeyMarker, page.NextUploadID = page.Uploads[0].Key, ""
			return page, nil
		}
	}
}

func (s lifecycleStore) AbortUpload(ctx context.Context, bucket string, u s3front.LifecycleUpload) (bool, error) {
	// Conditional on the time listed: the posix backend reports the
	// staging directory's modification time, so a part that arrived since
	// keeps the upload.
	err := s.b.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &u.Key, UploadId: &u.ID,
		IfMatchInitiatedTime: &u.Initiated})
	if errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchUpload)) || errors.Is(err, s3err.GetAPIError(s3err.ErrPreconditionFailed)) {
		return false, nil
	}
	return err == nil, err
}

// lockRule is a bucket's object lock configuration, nil when it has none.
func (b *Backend) lockRule(ctx context.Context, bucket string) (*auth.BucketLockConfig, error) {
	doc, err := b.GetObjectLockConfiguration(ctx, bucket)
	if errors.Is(err, s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotFound)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c auth.BucketLockConfig
	if err := json.Unmarshal(doc, &c); err != nil {
		return nil, fmt.Errorf("object lock configuration of bucket %s: %w", bucket, err)
	}
	if !c.Enabled {
		return nil, nil
	}
	return &c, nil
}

// locked reports whether a DELETE of the version without the governance
// bypass would be refused at now: a legal hold, a retention of its own in
// force, or else a default retention of the bucket in force (as the front
// end decides for the gateway: from the bucket's lock configuration's
// time).
func (b *Backend) locked(ctx context.Context, lock *auth.BucketLockConfig, bucket, key, versionID string, now time.Time) (bool, error) {
	if lock == nil {
		return false, nil
	}
	hold, err := b.Posix.GetObjectLegalHold(ctx, bucket, key, versionID)
	switch {
	case err == nil && hold != nil && *hold:
		return true, nil
	case err != nil && !errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)) && !gone(err):
		return false, err
	}
	doc, err := b.Posix.GetObjectRetention(ctx, bucket, key, versionID)
	switch {
	case err == nil:
		r, err := auth.ParseObjectLockRetentionOutput(doc)
		if err != nil {
			return false, err
		}
		if r.Mode != "" && r.RetainUntilDate != nil {
			return r.RetainUntilDate.After(now), nil
		}
	case !errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)) && !gone(err):
		return false, err
	}
	if d := lock.DefaultRetention; d != nil && lock.CreatedAt != nil {
		until := *lock.CreatedAt
		if d.Days != nil {
			until = until.AddDate(0, 0, int(*d.Days))
		}
		if d.Years != nil {
			until = until.AddDate(int(*d.Years), 0, 0)
		}
		return until.After(now), nil
	}
	return false, nil
}

// gone reports an error saying the object or version is not there (any
// more), or is a delete marker.
func gone(err error) bool {
	return errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchKey)) || errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchVersion)) ||
		errors.Is(err, s3err.GetAPIError(s3err.ErrMethodNotAllowed))
}

// ignoreGone treats a version or a precondition that no longer holds as
// nothing to do.
func ignoreGone(err error) error {
	if err == nil || gone(err) || errors.Is(err, s3err.GetPreconditionFailedErr(s3err.ConditionIfMatch)) ||
		errors.Is(err, s3err.GetPreconditionFailedErr(s3err.ConditionIfMatchLastModTime)) {
		return nil
	}
	return err
}

// The lease: one replica at a time runs the lifecycle pass. The file
// <root>/.strata/lifecycle.lease names its holder and when its hold ends;
// a replica takes a lapsed lease by writing its own (a new file renamed
// over the old, so readers see one or the other), then reads it back after
// a moment and runs only if it still names it. Two replicas that take it
// together both see the last writer's name.
const (
	leaseFile   = "lifecycle.lease"
	leaseSettle = time.Second
)

type lease struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// takeLease reports whether holder holds the lease in dir for hold from
// now (taking or renewing it).
func takeLease(dir, holder string, hold time.Duration, now time.Time) (bool, error) {
	path := filepath.Join(dir, leaseFile)
	if cur, err := readLease(path); err != nil {
		return false, err
	} else if cur.Holder != holder && cur.Until.After(now) {
		return false, nil
	}
	doc, err := json.Marshal(lease{Holder: holder, Until: now.Add(hold)})
	if err != nil {
		return false, err
	}
	tmp := fmt.Sprintf("%s.%s.tmp", path, strings.NewReplacer("/", "_").Replace(holder))
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, err
	}
	time.Sleep(leaseSettle)
	cur, err := readLease(path)
	return err == nil && cur.Holder == holder, err
}

func readLease(path string) (lease, error) {
	var l lease
	doc, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	if !json.Valid(doc) {
		return lease{}, nil // torn or foreign: lapsed
	}
	return l, json.Unmarshal(doc, &l)
}

// runLifecycle runs a pass every interval, on the replica holding the
// lease, until ctx ends. The lease outlasts an interval, so the replica
// that ran the last pass runs the next while it lives; a pass renews it as
// it goes and stops if another replica took it meanwhile.
func runLifecycle(ctx context.Context, pass interface {
	Run(context.Context, time.Time) error
}, leaseDir, holder string, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	hold := max(3*every, leaseMinHold)
	// Replicas started together try at different moments.
	wait := every + time.Duration(rand.Int64N(int64(every/4)+1))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = every
		held, err := takeLease(leaseDir, holder, hold, time.Now())
		if err != nil {
			log.Warn("lifecycle lease", "err", err)
			continue
		}
		if !held {
			continue
		}
		passCtx, stop := context.WithCancel(ctx)
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			for {
				select {
				case <-passCtx.Done():
					return
				case <-time.After(hold / 3):
				}
				if held, err := takeLease(leaseDir, holder, hold, time.Now()); err == nil && !held {
					log.Warn("lifecycle lease taken by another replica: this pass stops")
					stop()
					return
				}
			}
		}()
		if err := pass.Run(passCtx, time.Now()); err != nil && passCtx.Err() == nil {
			log.Warn("lifecycle pass", "err", err)
		}
		stop()
		<-renewed
	}
}

// leaseMinHold is the shortest hold of the lease: well past the second a
// replica waits before reading its lease back.
const leaseMinHold = 30 * time.Second
