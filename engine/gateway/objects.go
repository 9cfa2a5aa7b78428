package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/oklog/ulid/v2"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/s3front"
)

// Every operation naming a key checks it first (CheckKey, then the
// resolution below its bucket), including keys that reach the backend
// without passing the front end's URL checks: DeleteObjects' XML body and
// copy sources.

// PutObject stores an object and tells the directory watch.
func (b *Backend) PutObject(ctx context.Context, in s3response.PutObjectInput) (s3response.PutObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if err := b.checkObjectACL(ctx, bucket, false); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if err := s3front.RefuseFormFields(ctx); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if err := b.writeConditions(ctx, bucket, key, &in.IfMatch, &in.IfNoneMatch); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	in.ContentEncoding = s3front.StoredEncoding(in.ContentEncoding)
	req := ctx // the front end's: the answer's headers are set through it
	ctx = detach(ctx)
	out, err := b.Posix.PutObject(ctx, in)
	if err != nil {
		return out, err
	}
	b.dirs.wrote(parentDir(bucket, key))
	if b.fsync {
		if err := b.syncObject(bucket, key); err != nil {
			return s3response.PutObjectOutput{}, err
		}
	}
	now := time.Now()
	b.setExpiration(req, bucket, key, &now, objectSize(in.ContentLength, nil))
	return out, nil
}

// HeadObject answers an object's metadata; a file created on the
// filesystem gets its ETag computed and stored first.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.checkRead(bucket, key); err != nil {
		return nil, err
	}
	out, err := b.headObject(detach(ctx), in)
	if err != nil && str(in.VersionId) == "" && s3front.IsStatus(err, http.StatusNotFound) {
		out = b.deleteMarker(ctx, bucket, key)
	}
	if err == nil && str(in.VersionId) == "" {
		b.setExpiration(ctx, bucket, key, out.LastModified, objectSize(out.ContentLength, out.ContentRange))
	}
	return out, b.readAnswer(ctx, bucket, key, in.PartNumber, err)
}

// deleteMarker answers a HEAD of a key whose latest version is a delete
// marker as S3 does (x-amz-delete-marker, Last-Modified); nil for any other
// key. The posix backend answers it so to a GET only.
func (b *Backend) deleteMarker(ctx context.Context, bucket, key string) *s3.HeadObjectOutput {
	out, _ := b.Posix.GetObject(detach(ctx), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if out == nil {
		return nil
	}
	if out.Body != nil {
		out.Body.Close()
	}
	if out.DeleteMarker == nil || !*out.DeleteMarker || out.LastModified == nil {
		return nil
	}
	return &s3.HeadObjectOutput{DeleteMarker: out.DeleteMarker, LastModified: out.LastModified}
}

func (b *Backend) headObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	latest := str(in.VersionId) == ""
	if latest && (str(in.IfMatch) != "" || str(in.IfNoneMatch) != "") {
		b.etags.ensure(bucket, key) // the conditions compare against it
	}
	out, err := b.Posix.HeadObject(ctx, in)
	if err == nil && latest && str(out.ETag) == "" {
		if etag := b.etags.ensure(bucket, key); etag != "" {
			out.ETag = &etag
		}
	}
	return out, err
}

// GetObject streams an object, reporting its time to first byte; a file
// created on the filesystem gets its ETag computed and stored first.
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	start := time.Now()
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.checkRead(bucket, key); err != nil {
		return nil, err
	}
	latest := str(in.VersionId) == ""
	if latest && (str(in.IfMatch) != "" || str(in.IfNoneMatch) != "") {
		b.etags.ensure(bucket, key)
	}
	out, err := b.Posix.GetObject(detach(ctx), in)
	if err != nil || out == nil {
		return out, b.readAnswer(ctx, bucket, key, in.PartNumber, err)
	}
	if latest && str(out.ETag) == "" {
		if etag := b.etags.ensure(bucket, key); etag != "" {
			out.ETag = &etag
		}
	}
	if latest {
		b.setExpiration(ctx, bucket, key, out.LastModified, objectSize(out.ContentLength, out.ContentRange))
	}
	switch body := out.Body.(type) {
	case nil:
	case *os.File:
		// A whole file goes out with sendfile, which a wrapper would
		// defeat; its first byte is ready now.
		b.observeFirstByte(start)
	default:
		if b.firstByte != nil {
			out.Body = &firstByteReader{ReadCloser: body, start: start, observe: b.firstByte}
		}
	}
	return out, nil
}

// objectSize is an object's whole size from an answer's Content-Length and
// Content-Range ("bytes a-b/size" for a part of it).
func objectSize(length *int64, contentRange *string) int64 {
	if r := str(contentRange); r != "" {
		if i := strings.LastIndexByte(r, '/'); i >= 0 {
			if n, err := strconv.ParseInt(r[i+1:], 10, 64); err == nil {
				return n
			}
		}
	}
	if length == nil {
		return 0
	}
	return *length
}

func (b *Backend) observeFirstByte(start time.Time) {
	if b.firstByte != nil {
		b.firstByte(time.Since(start).Seconds())
	}
}

// firstByteReader reports when the first body byte is read.
type firstByteReader struct {
	io.ReadCloser
	start   time.Time
	observe func(float64)
	seen    bool
}

func (r *firstByteReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 && !r.seen {
		r.seen = true
		r.observe(time.Since(r.start).Seconds())
	}
	return n, err
}

// checkRead is check for reads, which also refuse a key that is not UTF-8
// (no such key can have been written).
func (b *Backend) checkRead(bucket, key string) error {
	if err := keyReadable(key); err != nil {
		return err
	}
	return b.check(bucket, key)
}

// checkObjectACL refuses object ACLs other than the owner's full control,
// as `strata server` does: no object ACLs are kept. ctx must be the
// request's own (not detached).
func (b *Backend) checkObjectACL(ctx context.Context, bucket string, withBody bool) error {
	ownership, _ := b.GetBucketOwnershipControls(detach(ctx), bucket)
	return s3front.CheckObjectACL(ctx, string(ownership), b.owner(ctx, bucket), withBody)
}

// GetObjectAcl answers an existing object's ACL: its bucket owner's full
// control.
func (b *Backend) GetObjectAcl(ctx context.Context, in *s3.GetObjectAclInput) (*s3.GetObjectAclOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return nil, err
	}
	if _, err := b.Posix.HeadObject(detach(ctx), &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); err != nil {
		return nil, err
	}
	return s3front.ObjectACL(b.owner(ctx, bucket)), nil
}

// PutObjectAcl accepts an ACL that leaves an existing object its owner's
// alone and refuses any other.
func (b *Backend) PutObjectAcl(ctx context.Context, in *s3.PutObjectAclInput) error {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return err
	}
	if _, err := b.Posix.HeadObject(detach(ctx), &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); err != nil {
		return err
	}
	return b.checkObjectACL(ctx, bucket, true)
}

// checkCopySource checks the source of a copy like any other key.
func (b *Backend) checkCopySource(src *string) error {
	bucket, key, _, err := backend.ParseCopySource(str(src))
	if err != nil {
		return err
	}
	return b.check(bucket, key)
}

// CopyObject checks both keys and tells the directory watch.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if err := b.checkObjectACL(ctx, bucket, false); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	ctx = detach(ctx)
	if err := b.checkCopySource(in.CopySource); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	in.ContentEncoding = s3front.StoredEncoding(in.ContentEncoding)
	out, err := b.Posix.CopyObject(ctx, in)
	if err != nil {
		return out, copySourceAnswer(err)
	}
	b.dirs.wrote(parentDir(bucket, key))
	if b.fsync {
		if err := b.syncObject(bucket, key); err != nil {
			return s3response.CopyObjectOutput{}, err
		}
	}
	return out, nil
}

// DeleteObject checks the key first and deletes under the key's publish
// lock (keylock.go).
func (b *Backend) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return nil, err
	}
	return b.deleteLocked(ctx, in)
}

func (b *Backend) deleteLocked(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	unlock, err := b.lockKey(ctx, str(in.Bucket), str(in.Key))
	if err != nil {
		return nil, err
	}
	defer unlock()
	out, err := b.Posix.DeleteObject(ctx, in)
	if err != nil && versionAlreadyGone(err, str(in.VersionId)) {
		// S3 answers a delete of a version that does not exist (the id well
		// formed) as done: two clients deleting one listed version both
		// succeed. The backend answers InvalidArgument when the key has
		// other versions.
		return &s3.DeleteObjectOutput{VersionId: in.VersionId}, nil
	}
	return out, err
}

// versionAlreadyGone reports whether err is the backend's answer to a delete
// of a well-formed version id it does not have (its answer to a malformed
// one is the same error).
func versionAlreadyGone(err error, versionID string) bool {
	var bad s3err.InvalidArgumentError
	if !errors.As(err, &bad) || bad.ArgumentName != "versionId" || versionID == "" {
		return false
	}
	if versionID == "null" {
		return true
	}
	_, perr := ulid.Parse(versionID)
	return perr == nil
}

// DeleteObjects deletes the keys that pass the checks and reports the
// others as failed: these keys come from the request body, which the front
// end does not check the way it checks a URL.
func (b *Backend) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput) (s3response.DeleteResult, error) {
	ctx = detach(ctx)
	bucket := str(in.Bucket)
	if in.Delete == nil {
		return s3response.DeleteResult{}, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	if err := s3front.ErrTooManyKeys(len(in.Delete.Objects)); err != nil {
		return s3response.DeleteResult{}, err
	}
	// One key at a time, as the backend's DeleteObjects does, each under its
	// publish lock.
	res := s3response.DeleteResult{Deleted: []types.DeletedObject{}, Error: []types.Error{}}
	var refused []types.Error
	for _, o := range in.Delete.Objects {
		if err := b.check(bucket, str(o.Key)); err != nil {
			refused = append(refused, s3err.ObjectDeleteError(o.Key, o.VersionId, err))
			continue
		}
		out, err := b.deleteLocked(ctx, &s3.DeleteObjectInput{Bucket: in.Bucket, Key: o.Key, VersionId: o.VersionId})
		if err != nil {
			res.Error = append(res.Error, s3err.ObjectDeleteError(o.Key, o.VersionId, err))
			continue
		}
		deleted := types.DeletedObject{Key: o.Key, VersionId: o.VersionId, DeleteMarker: out.DeleteMarker}
		if out.DeleteMarker != nil && *out.DeleteMarker {
			deleted.DeleteMarkerVersionId = out.VersionId
		}
		res.Deleted = append(res.Deleted, deleted)
	}
	res.Error = append(res.Error, refused...)
	return res, nil
}

// CreateMultipartUpload checks the key first.
func (b *Backend) CreateMultipartUpload(ctx context.Context, in s3response.CreateMultipartUploadInput) (s3response.InitiateMultipartUploadResult, error) {
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if err := b.checkObjectACL(ctx, str(in.Bucket), false); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	in.ContentEncoding = s3front.StoredEncoding(in.ContentEncoding)
	return b.Posix.CreateMultipartUpload(detach(ctx), in)
}

// CompleteMultipartUpload checks the key and tells the directory watch.
func (b *Backend) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	if err := b.writeConditions(ctx, bucket, key, &in.IfMatch, &in.IfNoneMatch); err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	ctx = detach(ctx)
	out, v, err := b.completeMultipart(ctx, in)
	if err != nil {
		return out, v, err
	}
	b.dirs.wrote(parentDir(bucket, key))
	if b.fsync {
		if err := b.syncObject(bucket, key); err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
	}
	return out, v, nil
}

// AbortMultipartUpload checks the key first.
func (b *Backend) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput) error {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return err
	}
	return b.Posix.AbortMultipartUpload(ctx, in)
}

// ListParts checks the key first.
func (b *Backend) ListParts(ctx context.Context, in *s3.ListPartsInput) (s3response.ListPartsResult, error) {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return s3response.ListPartsResult{}, err
	}
	return b.Posix.ListParts(ctx, in)
}

// UploadPart checks the key first.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return nil, err
	}
	return b.Posix.UploadPart(ctx, in)
}

// UploadPartCopy checks both keys first.
func (b *Backend) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return s3response.CopyPartResult{}, err
	}
	if err := b.checkCopySource(in.CopySource); err != nil {
		return s3response.CopyPartResult{}, err
	}
	if err := b.copyRange(ctx, in.CopySource, in.CopySourceRange); err != nil {
		return s3response.CopyPartResult{}, err
	}
	out, err := b.Posix.UploadPartCopy(ctx, in)
	return out, copySourceAnswer(err)
}

// GetObjectTagging checks the key first.
func (b *Backend) GetObjectTagging(ctx context.Context, bucket, object, versionID string) (map[string]string, error) {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return nil, err
	}
	return b.Posix.GetObjectTagging(ctx, bucket, object, versionID)
}

// PutObjectTagging checks the key first.
func (b *Backend) PutObjectTagging(ctx context.Context, bucket, object, versionID string, tags map[string]string) error {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return err
	}
	return b.Posix.PutObjectTagging(ctx, bucket, object, versionID, tags)
}

// DeleteObjectTagging checks the key first.
func (b *Backend) DeleteObjectTagging(ctx context.Context, bucket, object, versionID string) error {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return err
	}
	return b.Posix.DeleteObjectTagging(ctx, bucket, object, versionID)
}

// PutObjectRetention checks the key first.
func (b *Backend) PutObjectRetention(ctx context.Context, bucket, object, versionID string, retention []byte) error {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return err
	}
	return b.Posix.PutObjectRetention(ctx, bucket, object, versionID, retention)
}

// GetObjectRetention checks the key first.
func (b *Backend) GetObjectRetention(ctx context.Context, bucket, object, versionID string) ([]byte, error) {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return nil, err
	}
	return b.Posix.GetObjectRetention(ctx, bucket, object, versionID)
}

// PutObjectLegalHold checks the key first.
func (b *Backend) PutObjectLegalHold(ctx context.Context, bucket, object, versionID string, status bool) error {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return err
	}
	return b.Posix.PutObjectLegalHold(ctx, bucket, object, versionID, status)
}

// GetObjectLegalHold checks the key first.
func (b *Backend) GetObjectLegalHold(ctx context.Context, bucket, object, versionID string) (*bool, error) {
	ctx = detach(ctx)
	if err := b.check(bucket, object); err != nil {
		return nil, err
	}
	return b.Posix.GetObjectLegalHold(ctx, bucket, object, versionID)
}

// RestoreObject checks the key first.
func (b *Backend) RestoreObject(ctx context.Context, in *s3.RestoreObjectInput) error {
	ctx = detach(ctx)
	if err := b.check(str(in.Bucket), str(in.Key)); err != nil {
		return err
	}
	return b.Posix.RestoreObject(ctx, in)
}
