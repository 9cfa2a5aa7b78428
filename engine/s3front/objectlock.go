package s3front

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

// Object lock. A bucket's lock configuration is in its record
// (bucketconfig.go); a version's retention and legal hold are in the
// version's metadata, so they are on every drive that holds the version,
// heal and move (decommission) with it, and a copy does not take them
// along (S3's rule: a copy gets the destination's defaults). The front end
// enforces them: deletes of locked versions, shortening retention, and the
// governance bypass go through its checks, which read them back from here.
// The retention clock is the server's, never the client's.
const (
	metaRetention = objlayer.InternalMetaPrefix + "Object-Lock-Retention"  // JSON: {"Mode", "RetainUntilDate"}
	metaLegalHold = objlayer.InternalMetaPrefix + "Object-Lock-Legal-Hold" // "ON" or "OFF"
)

// bucketLock is a bucket's parsed lock configuration (nil when off).
func bucketLock(bk objlayer.BucketInfo) (*auth.BucketLockConfig, error) {
	if len(bk.ObjectLock) == 0 {
		return nil, nil
	}
	var c auth.BucketLockConfig
	if err := json.Unmarshal(bk.ObjectLock, &c); err != nil {
		return nil, err
	}
	if !c.Enabled {
		return nil, nil
	}
	return &c, nil
}

// lockOnWrite adds a new version's retention and legal hold to its
// metadata: those the request asked for, else the bucket's default
// retention. Asking for any of them in a bucket without object lock is
// refused, as S3 refuses it.
func lockOnWrite(bk objlayer.BucketInfo, meta map[string]string, mode types.ObjectLockMode, until *time.Time, hold types.ObjectLockLegalHoldStatus) error {
	asked := mode != "" || hold != "" || until != nil && !until.IsZero()
	lock, err := bucketLock(bk)
	if err != nil {
		return err
	}
	if lock == nil {
		if asked {
			return s3err.GetAPIError(s3err.ErrMissingObjectLockConfiguration)
		}
		return nil
	}
	if hold != "" {
		meta[metaLegalHold] = string(hold)
	}
	var r types.ObjectLockRetention
	switch {
	case mode != "":
		r = types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(mode), RetainUntilDate: until}
	case lock.DefaultRetention != nil:
		d := lock.DefaultRetention
		t := time.Now().UTC()
		if d.Days != nil {
			t = t.AddDate(0, 0, int(*d.Days))
		}
		if d.Years != nil {
			t = t.AddDate(int(*d.Years), 0, 0)
		}
		r = types.ObjectLockRetention{Mode: d.Mode, RetainUntilDate: &t}
	default:
		return nil
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	meta[metaRetention] = string(doc)
	return nil
}

// lockHeaders are a version's lock state as GET and HEAD answer it.
func lockHeaders(meta map[string]string) (types.ObjectLockMode, *time.Time, types.ObjectLockLegalHoldStatus) {
	var mode types.ObjectLockMode
	var until *time.Time
	if doc, ok := meta[metaRetention]; ok {
		if r, err := auth.ParseObjectLockRetentionOutput([]byte(doc)); err == nil {
			mode, until = types.ObjectLockMode(r.Mode), r.RetainUntilDate
		}
	}
	return mode, until, types.ObjectLockLegalHoldStatus(meta[metaLegalHold])
}

// lockedVersion resolves the version a retention or legal-hold call names,
// in a bucket with object lock.
func (b *Backend) lockedVersion(ctx context.Context, bucket, object, versionID string) (*[16]byte, error) {
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if lock, err := bucketLock(bk); err != nil {
		return nil, err
	} else if lock == nil {
		return nil, s3err.GetAPIError(s3err.ErrMissingObjectLockConfiguration)
	}
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil, err
	}
	if _, markerTime, err := b.openVersion(ctx, bucket, object, versionID, false); markerTime != nil {
		return nil, s3err.GetAPIError(s3err.ErrMethodNotAllowed)
	} else if err != nil {
		return nil, err
	}
	return vid, nil
}

// setVersionMeta sets (or, with an empty value, removes) one metadata key
// of a version.
func (b *Backend) setVersionMeta(ctx context.Context, bucket, object, versionID string, vid *[16]byte, key, value string) error {
	_, err := b.pool.UpdateObjectMeta(ctx, bucket, object, vid, func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		if value == "" {
			delete(m, key)
		} else {
			m[key] = value
		}
		return m
	})
	if errors.Is(err, objlayer.ErrObjectNotFound) && vid != nil {
		return s3err.GetNoSuchVersionErr(object, versionID)
	}
	return err
}

// versionMeta reads one metadata key of a version in a lock-enabled bucket.
func (b *Backend) versionMeta(ctx context.Context, bucket, object, versionID, key string) (string, error) {
	if _, err := b.lockedVersion(ctx, bucket, object, versionID); err != nil {
		return "", err
	}
	h, _, err := b.openVersion(ctx, bucket, object, versionID, false)
	if err != nil {
		return "", err
	}
	return h.Info().Meta[key], nil
}

// PutObjectRetention sets a version's retention (the front end checked
// that the change is allowed: lengthening, or shortening with the
// governance bypass).
func (b *Backend) PutObjectRetention(ctx context.Context, bucket, object, versionID string, retention []byte) error {
	own(&bucket, &object, &versionID)
	vid, err := b.lockedVersion(ctx, bucket, object, versionID)
	if err != nil {
		return err
	}
	return b.setVersionMeta(ctx, bucket, object, versionID, vid, metaRetention, string(retention))
}

// GetObjectRetention returns a version's retention.
func (b *Backend) GetObjectRetention(ctx context.Context, bucket, object, versionID string) ([]byte, error) {
	own(&bucket, &object, &versionID)
	doc, err := b.versionMeta(ctx, bucket, object, versionID, metaRetention)
	if err != nil {
		return nil, err
	}
	if doc == "" {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)
	}
	return []byte(doc), nil
}

// PutObjectLegalHold turns a version's legal hold on or off.
func (b *Backend) PutObjectLegalHold(ctx context.Context, bucket, object, versionID string, on bool) error {
	own(&bucket, &object, &versionID)
	vid, err := b.lockedVersion(ctx, bucket, object, versionID)
	if err != nil {
		return err
	}
	status := types.ObjectLockLegalHoldStatusOff
	if on {
		status = types.ObjectLockLegalHoldStatusOn
	}
	return b.setVersionMeta(ctx, bucket, object, versionID, vid, metaLegalHold, string(status))
}

// GetObjectLegalHold returns a version's legal hold.
func (b *Backend) GetObjectLegalHold(ctx context.Context, bucket, object, versionID string) (*bool, error) {
	own(&bucket, &object, &versionID)
	v, err := b.versionMeta(ctx, bucket, object, versionID, metaLegalHold)
	if err != nil {
		return nil, err
	}
	if v == "" {
		return nil, s3err.GetAPIError(s3err.ErrNoSuchObjectLockConfiguration)
	}
	on := v == string(types.ObjectLockLegalHoldStatusOn)
	return &on, nil
}

// formAsRequest takes what a form upload asks for in its fields and the
// front end does not hand on from a form (it does from headers): object
// lock (x-amz-object-lock-mode, -retain-until-date, -legal-hold) and the
// object's ACL (acl, x-amz-grant-*), checked as their headers are. Without
// it a form asking for retention stored an object anyone could delete.
func formAsRequest(ctx context.Context, in *s3response.PutObjectInput) error {
	rc, ok := frontCtx(ctx)
	if !ok {
		return nil
	}
	f := postFields(rc)
	if f == nil {
		return nil
	}
	bad := invalidArgument
	mode, until, hold := f["x-amz-object-lock-mode"], f["x-amz-object-lock-retain-until-date"], f["x-amz-object-lock-legal-hold"]
	switch {
	case (mode == "") != (until == ""):
		return bad("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	case mode != "" && mode != string(types.ObjectLockModeGovernance) && mode != string(types.ObjectLockModeCompliance):
		return bad("Unknown wormMode directive.")
	case hold != "" && hold != string(types.ObjectLockLegalHoldStatusOn) && hold != string(types.ObjectLockLegalHoldStatusOff):
		return bad("Legal Hold must be either of 'ON' or 'OFF'")
	}
	if mode != "" {
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return bad("The retain until date must be provided in ISO 8601 format")
		}
		if !t.After(time.Now()) {
			return bad("The retain until date must be in the future!")
		}
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockMode(mode), &t
	}
	if hold != "" {
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatus(hold)
	}
	h := &rc.Request.Header
	if v := f["acl"]; v != "" && len(h.Peek("X-Amz-Acl")) == 0 {
		h.Set("X-Amz-Acl", v)
	}
	for _, name := range grantHeaders {
		if v := f[strings.ToLower(name)]; v != "" && len(h.Peek(name)) == 0 {
			h.Set(name, v)
		}
	}
	return nil
}
