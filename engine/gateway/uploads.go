package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

// abortStaleUploads aborts, in every bucket, the multipart uploads whose
// staging directory has not changed for age (the posix backend reports a
// staging directory's modification time as the upload's initiation, so an
// upload still receiving parts is never stale). Replicas may run it at the
// same time: each abort is conditional on the time it saw, and an upload
// already gone is skipped.
func (b *Backend) abortStaleUploads(ctx context.Context, age time.Duration) (int, error) {
	buckets, err := b.Posix.ListBuckets(ctx, s3response.ListBucketsInput{IsAdmin: true, MaxBuckets: math.MaxInt32})
	if err != nil {
		return 0, err
	}
	aborted := 0
	for _, bk := range buckets.Buckets.Bucket {
		bucket := bk.Name
		keyMarker, idMarker, empty := "", "", ""
		maxUploads := int32(1000)
		for {
			res, err := b.Posix.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, KeyMarker: &keyMarker,
				UploadIdMarker: &idMarker, Prefix: &empty, Delimiter: &empty, MaxUploads: &maxUploads})
			if err != nil {
				return aborted, err
			}
			for _, u := range res.Uploads {
				if time.Since(u.Initiated) < age {
					continue
				}
				key, id, seen := u.Key, u.UploadID, u.Initiated
				err := b.Posix.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: &id,
					IfMatchInitiatedTime: &seen})
				switch {
				case err == nil:
					aborted++
				case errors.Is(err, s3err.GetAPIError(s3err.ErrNoSuchUpload)),
					errors.Is(err, s3err.GetAPIError(s3err.ErrPreconditionFailed)):
					// another replica was first, or a part arrived meanwhile
				default:
					return aborted, err
				}
			}
			if !res.IsTruncated {
				break
			}
			keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
		}
	}
	return aborted, nil
}

// cleanStaleUploads runs abortStaleUploads every min(age/4, 1h) until ctx
// ends.
func (b *Backend) cleanStaleUploads(ctx context.Context, age time.Duration, log *slog.Logger) {
	if age <= 0 {
		return
	}
	t := time.NewTicker(min(age/4, time.Hour))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := b.abortStaleUploads(ctx, age)
		if err != nil {
			log.Warn("stale multipart upload cleanup stopped", "err", err)
		}
		if n > 0 {
			log.Info("aborted stale multipart uploads", "count", n, "unchangedFor", age)
		}
	}
}
