package s3front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/objlayer"
)

// MaxKeyLength is the longest object key S3 accepts, in bytes.
const MaxKeyLength = 1024

// maxDeleteKeys is the most keys one DeleteObjects request may name.
const maxDeleteKeys = 1000

// checkKey refuses keys S3 refuses (too long) and keys this engine cannot
// store faithfully (NUL, which separates parts of metadata keys, and bytes
// that are not UTF-8, which listings could not order or render).
func checkKey(key string) error {
	switch {
	case key == "":
		return s3err.GetAPIError(s3err.ErrInvalidRequest)
	case len(key) > MaxKeyLength:
		return s3err.GetKeyTooLongErr(int64(len(key)), MaxKeyLength)
	case strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key):
		return s3err.APIError{Code: "InvalidArgument", Description: "Object keys must be UTF-8 without NUL characters.", HTTPStatusCode: 400}
	}
	return nil
}

func quote(etag string) *string {
	q := `"` + etag + `"`
	return &q
}

// versionIDOut is the x-amz-version-id of a version: absent for the null
// version of a bucket that never had versioning.
func versionIDOut(id [16]byte, versioning string) *string {
	if id == objlayer.NullVersion && versioning == "" {
		return nil
	}
	s := objlayer.FormatVersionID(id)
	return &s
}

// writtenVersionID is the x-amz-version-id a write answers: the new
// version's ID, and none for a null version (unversioned and suspended
// buckets), as S3 answers.
func writtenVersionID(id [16]byte) *string {
	if id == objlayer.NullVersion {
		return nil
	}
	s := objlayer.FormatVersionID(id)
	return &s
}

// putBody prepares a PUT body: it verifies a checksum the client sent in a
// header (trailing checksums are verified by the front end's reader) and
// records the checksum in meta once the body has been read.
func putBody(body io.Reader, meta map[string]string, alg types.ChecksumAlgorithm, headerSums map[types.ChecksumAlgorithm]*string) (io.Reader, func(map[string]string), error) {
	if cr, ok := body.(middlewares.ChecksumReader); ok && cr.Algorithm() != "" {
		return body, func(m map[string]string) {
			m[checksumKey(types.ChecksumAlgorithm(strings.ToUpper(cr.Algorithm())))] = cr.Checksum()
			m[metaChecksumType] = string(types.ChecksumTypeFullObject)
		}, nil
	}
	for a, v := range headerSums {
		if v == nil || *v == "" {
			continue
		}
		hr, err := utils.NewHashReader(body, *v, utils.HashType(strings.ToLower(string(a))))
		if err != nil {
			return nil, nil, err
		}
		return hr, func(m map[string]string) {
			m[checksumKey(a)] = hr.Sum()
			m[metaChecksumType] = string(types.ChecksumTypeFullObject)
		}, nil
	}
	_ = alg // an algorithm without a value: nothing to verify or store
	return body, nil, nil
}

// neverRefuses is fn as a PutOptions.AfterBody (nil stays nil).
func neverRefuses(fn func(map[string]string)) func(map[string]string) error {
	if fn == nil {
		return nil
	}
	return func(m map[string]string) error { fn(m); return nil }
}

// PutObject stores an object.
func (b *Backend) PutObject(ctx context.Context, in s3response.PutObjectInput) (s3response.PutObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := checkKey(key); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if in.Tagging != nil && *in.Tagging != "" {
		if _, err := backend.ParseObjectTags(*in.Tagging); err != nil {
			return s3response.PutObjectOutput{}, err
		}
	}
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if in.IfMatch != nil || in.IfNoneMatch != nil {
		if err := b.putPreconditions(ctx, bucket, key, in.IfMatch, in.IfNoneMatch); err != nil {
			return s3response.PutObjectOutput{}, err
		}
	}
	if err := formAsRequest(ctx, &in); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	meta := buildMeta(systemHeaders{
		ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
		ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
		WebsiteRedirectLocation: in.WebsiteRedirectLocation,
	}, in.Metadata, in.Tagging)
	if err := b.objectACLOnWrite(ctx, bk, meta); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	if err := lockOnWrite(bk, meta, in.ObjectLockMode, in.ObjectLockRetainUntilDate, in.ObjectLockLegalHoldStatus); err != nil {
		return s3response.PutObjectOutput{}, err
	}
	enc, err := b.writeSSE(ctx, bk)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	body, after, err := putBody(in.Body, meta, in.ChecksumAlgorithm, map[types.ChecksumAlgorithm]*string{
		types.ChecksumAlgorithmCrc32: in.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: in.ChecksumCRC32C,
		types.ChecksumAlgorithmSha1: in.ChecksumSHA1, types.ChecksumAlgorithmSha256: in.ChecksumSHA256,
		types.ChecksumAlgorithmCrc64nvme: in.ChecksumCRC64NVME, types.ChecksumAlgorithmSha512: in.ChecksumSHA512,
		types.ChecksumAlgorithmMd5: in.ChecksumMD5, types.ChecksumAlgorithmXxhash64: in.ChecksumXXHASH64,
		types.ChecksumAlgorithmXxhash3: in.ChecksumXXHASH3, types.ChecksumAlgorithmXxhash128: in.ChecksumXXHASH128,
	})
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	size := int64(-1)
	if in.ContentLength != nil {
		size = *in.ContentLength
	}
	opts := objlayer.PutOptions{Meta: meta, AfterBody: neverRefuses(after)}
	if bk.Versioning == string(types.BucketVersioningStatusEnabled) {
		opts.VersionID = uuid.New()
	}
	if enc != nil {
		if body, size, opts.BodyETag, err = enc.sealBody(bucket, key, body, size, meta); err != nil {
			return s3response.PutObjectOutput{}, err
		}
	}
	info, err := b.pool.PutObject(ctx, bucket, key, body, size, opts)
	if err != nil {
		return s3response.PutObjectOutput{}, err
	}
	info = plainInfo(info)
	setSSEHeaders(ctx, info.Meta)
	b.setExpirationHeader(ctx, bk, key, info)
	out := s3response.PutObjectOutput{ETag: *quote(info.ETag), Size: &info.Size}
	if v := writtenVersionID(info.VersionID); v != nil {
		out.VersionID = *v
	}
	cs := checksums(info.Meta)
	out.ChecksumCRC32, out.ChecksumCRC32C, out.ChecksumSHA1, out.ChecksumSHA256 = cs.CRC32, cs.CRC32C, cs.SHA1, cs.SHA256
	out.ChecksumCRC64NVME, out.ChecksumSHA512, out.ChecksumMD5 = cs.CRC64NVME, cs.SHA512, cs.MD5
	out.ChecksumXXHASH64, out.ChecksumXXHASH3, out.ChecksumXXHASH128 = cs.XXHASH64, cs.XXHASH3, cs.XXHASH128
	out.ChecksumType = cs.Type
	return out, nil
}

// putPreconditions evaluates If-Match / If-None-Match of a write against
// the current object. Without locks this is a check, then a write: two
// conditional writers racing may both pass (documented in docs/engine.md).
func (b *Backend) putPreconditions(ctx context.Context, bucket, key string, ifMatch, ifNoneMatch *string) error {
	h, err := b.pool.OpenObject(ctx, bucket, key, nil)
	exists := err == nil && !h.Info().DeleteMarker
	if err != nil && !errors.Is(err, objlayer.ErrObjectNotFound) {
		return err
	}
	etag := ""
	if exists {
		etag = h.Info().ETag
	}
	return putConditions(etag, exists, ifMatch, ifNoneMatch)
}

// putConditions is S3's answer to a conditional write: If-Match needs the
// object to exist (404 otherwise) and to match ("*" or its ETag);
// If-None-Match fails when the object exists and matches.
func putConditions(etag string, exists bool, ifMatch, ifNoneMatch *string) error {
	matches := func(cond string) bool {
		cond = strings.Trim(strings.TrimSpace(cond), `"`)
		return cond == "*" || cond == etag
	}
	if ifMatch != nil {
		if !exists {
			return s3err.GetAPIError(s3err.ErrNoSuchKey)
		}
		if !matches(*ifMatch) {
			return s3err.GetPreconditionFailedErr(s3err.ConditionIfMatch)
		}
	}
	if ifNoneMatch != nil && exists && matches(*ifNoneMatch) {
		return s3err.GetPreconditionFailedErr(s3err.ConditionIfNoneMatch)
	}
	return nil
}

// openVersion resolves the version a GET/HEAD names, answering delete
// markers the way S3 does; its data is read only from a handle opened
// withData.
func (b *Backend) openVersion(ctx context.Context, bucket, key, versionID string, withData bool) (objlayer.Handle, *time.Time, error) {
	if !utf8.ValidString(key) {
		return nil, nil, s3err.APIError{Code: "InvalidURI", Description: "Couldn't parse the specified URI.", HTTPStatusCode: http.StatusBadRequest}
	}
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil, nil, err
	}
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return nil, nil, err
	}
	open := b.pool.OpenObjectMeta
	if withData {
		open = b.pool.OpenObject
	}
	h, err := open(ctx, bucket, key, vid)
	if errors.Is(err, objlayer.ErrObjectNotFound) && vid != nil {
		return nil, nil, s3err.GetNoSuchVersionErr(key, versionID)
	}
	if err != nil {
		return nil, nil, err
	}
	if h.Info().DeleteMarker {
		t := h.Info().ModTime
		if vid != nil {
			return nil, &t, s3err.GetAPIError(s3err.ErrMethodNotAllowed)
		}
		return nil, &t, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	return h, nil, nil
}

// partNumberBeyond is S3's answer to a partNumber past an object's last
// part: 400 InvalidPart (not a range error).
func partNumberBeyond(parts, asked int) error {
	return s3err.APIError{Code: "InvalidPart", HTTPStatusCode: http.StatusBadRequest,
		Description: fmt.Sprintf("The requested partnumber %d is not satisfiable: the object has %d parts.", asked, parts)}
}

// span is the byte range a GET or HEAD serves.
type span struct {
	offset, length int64
	contentRange   *string
	partsCount     *int32
}

// requestedSpan resolves Range or partNumber against a version.
func requestedSpan(info objlayer.ObjectInfo, rangeHdr string, partNumber *int32) (span, error) {
	size := info.Size
	if partNumber != nil {
		n := int(*partNumber)
		parts := info.Parts
		if len(parts) == 0 {
			if n > 1 {
				return span{}, partNumberBeyond(1, n)
			}
			sp := span{offset: 0, length: size}
			if size > 0 {
				cr := fmt.Sprintf("bytes 0-%d/%d", size-1, size)
				sp.contentRange = &cr
			}
			return sp, nil
		}
		count := int32(len(parts))
		if n > len(parts) {
			return span{}, partNumberBeyond(len(parts), n)
		}
		var off int64
		for _, p := range parts[:n-1] {
			off += p.Size
		}
		length := parts[n-1].Size
		cr := fmt.Sprintf("bytes %d-%d/%d", off, off+length-1, size)
		return span{offset: off, length: length, contentRange: &cr, partsCount: &count}, nil
	}
	start, length, valid, err := backend.ParseObjectRange(size, rangeHdr)
	if err != nil {
		return span{}, err
	}
	sp := span{offset: start, length: length}
	if valid {
		cr := fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size)
		sp.contentRange = &cr
	}
	if len(info.Parts) > 0 {
		count := int32(len(info.Parts))
		sp.partsCount = &count
	}
	return sp, nil
}

// preconditions evaluates a GET's or HEAD's conditional headers. A 304
// answer carries the object's ETag and Last-Modified, as S3's does.
func preconditions(ctx context.Context, info objlayer.ObjectInfo, ifMatch, ifNoneMatch *string, ifModSince, ifUnmodSince *time.Time) error {
	err := backend.EvaluatePreconditions(info.ETag, info.ModTime.Truncate(time.Second), backend.PreConditions{
		IfMatch: ifMatch, IfNoneMatch: ifNoneMatch, IfModSince: ifModSince, IfUnmodeSince: ifUnmodSince,
	})
	var s3e s3err.S3Error
	if errors.As(err, &s3e) && s3e.StatusCode() == http.StatusNotModified {
		setResponseHeader(ctx, "ETag", *quote(info.ETag))
		setResponseHeader(ctx, "Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	}
	return err
}

// copySourcePreconditions evaluates a copy's x-amz-copy-source-if-*
// headers: where a GET would answer 304, a copy fails with 412.
func copySourcePreconditions(info objlayer.ObjectInfo, ifMatch, ifNoneMatch *string, ifModSince, ifUnmodSince *time.Time) error {
	err := backend.EvaluatePreconditions(info.ETag, info.ModTime.Truncate(time.Second), backend.PreConditions{
		IfMatch: ifMatch, IfNoneMatch: ifNoneMatch, IfModSince: ifModSince, IfUnmodeSince: ifUnmodSince,
	})
	var s3e s3err.S3Error
	if errors.As(err, &s3e) && s3e.StatusCode() == http.StatusNotModified {
		return s3err.GetAPIError(s3err.ErrPreconditionFailed)
	}
	return err
}

// objectHead resolves what a GET or HEAD answers: the version, its
// conditional headers, the span asked for, and the response headers, built
// here once for both.
func (b *Backend) objectHead(ctx context.Context, bucket, key, versionID string, withData bool, cond backend.PreConditions,
	rangeHdr string, partNumber *int32, checksumMode types.ChecksumMode) (objlayer.Handle, rangeWriter, span, *s3.HeadObjectOutput, error) {
	h, markerTime, err := b.openVersion(ctx, bucket, key, versionID, withData)
	if markerTime != nil {
		return nil, nil, span{}, &s3.HeadObjectOutput{DeleteMarker: aws.Bool(true), LastModified: markerTime}, err
	}
	if err != nil {
		return nil, nil, span{}, nil, err
	}
	info := plainInfo(h.Info())
	if err := preconditions(ctx, info, cond.IfMatch, cond.IfNoneMatch, cond.IfModSince, cond.IfUnmodeSince); err != nil {
		return nil, nil, span{}, nil, err
	}
	sp, err := requestedSpan(info, rangeHdr, partNumber)
	if err != nil {
		return nil, nil, span{}, nil, err
	}
	dek, err := b.dataKey(ctx, bucket, key, h.Info().Meta, false)
	if err != nil {
		return nil, nil, span{}, nil, err
	}
	setSSEHeaders(ctx, info.Meta)
	bk, _ := b.pool.StatBucket(ctx, bucket) // gone since: no versioning, no rules
	if versionID == "" {
		b.setExpirationHeader(ctx, bk, key, info)
	}
	mode, until, hold := lockHeaders(info.Meta)
	out := &s3.HeadObjectOutput{
		ContentLength: &sp.length, ContentRange: sp.contentRange, PartsCount: sp.partsCount,
		AcceptRanges: aws.String("bytes"), ETag: quote(info.ETag), LastModified: &info.ModTime,
		Metadata: userMeta(info.Meta), ContentType: metaPtr(info.Meta, metaContentType),
		ContentEncoding: metaPtr(info.Meta, metaContentEncoding), ContentDisposition: metaPtr(info.Meta, metaContentDisposition),
		ContentLanguage: metaPtr(info.Meta, metaContentLanguage), CacheControl: metaPtr(info.Meta, metaCacheControl),
		ExpiresString: metaPtr(info.Meta, metaExpires), WebsiteRedirectLocation: metaPtr(info.Meta, metaRedirect),
		TagCount: tagCount(info.Meta), StorageClass: types.StorageClassStandard,
		VersionId:      versionIDOut(info.VersionID, bk.Versioning),
		ObjectLockMode: mode, ObjectLockRetainUntilDate: until, ObjectLockLegalHoldStatus: hold,
	}
	// Checksums describe the whole object; a part answers its own, which
	// a completed upload with a checksum algorithm keeps.
	sums, ofPart := info.Meta, partNumber != nil && partChecksums(info.Meta) != nil
	if ofPart {
		sums = partChecksumOf(info.Meta, int(*partNumber))
	}
	if checksumMode == types.ChecksumModeEnabled && (sp.length == info.Size || ofPart) {
		setChecksums(checksums(sums), &out.ChecksumCRC32, &out.ChecksumCRC32C, &out.ChecksumSHA1, &out.ChecksumSHA256,
			&out.ChecksumCRC64NVME, &out.ChecksumSHA512, &out.ChecksumMD5, &out.ChecksumXXHASH64, &out.ChecksumXXHASH3,
			&out.ChecksumXXHASH128, &out.ChecksumType)
	}
	return h, reader(ctx, h, dek), sp, out, nil
}

// GetObject streams an object (or a range, or a part). Small objects are
// decoded before answering; large ones stream, block by block, after the
// headers went out.
func (b *Backend) GetObject(ctx context.Context, in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	h, read, sp, hd, err := b.objectHead(ctx, bucket, key, str(in.VersionId), true, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince,
	}, str(in.Range), in.PartNumber, in.ChecksumMode)
	if hd != nil && hd.DeleteMarker != nil {
		return &s3.GetObjectOutput{DeleteMarker: hd.DeleteMarker, LastModified: hd.LastModified}, err
	}
	if err != nil {
		return nil, err
	}
	out := &s3.GetObjectOutput{
		ContentLength: hd.ContentLength, ContentRange: hd.ContentRange, PartsCount: hd.PartsCount,
		AcceptRanges: hd.AcceptRanges, ETag: hd.ETag, LastModified: hd.LastModified, Metadata: hd.Metadata,
		ContentType: hd.ContentType, ContentEncoding: hd.ContentEncoding, ContentDisposition: hd.ContentDisposition,
		ContentLanguage: hd.ContentLanguage, CacheControl: hd.CacheControl, ExpiresString: hd.ExpiresString,
		WebsiteRedirectLocation: hd.WebsiteRedirectLocation, TagCount: hd.TagCount, StorageClass: hd.StorageClass,
		VersionId: hd.VersionId, ObjectLockMode: hd.ObjectLockMode, ObjectLockRetainUntilDate: hd.ObjectLockRetainUntilDate,
		ObjectLockLegalHoldStatus: hd.ObjectLockLegalHoldStatus,
		ChecksumCRC32:             hd.ChecksumCRC32, ChecksumCRC32C: hd.ChecksumCRC32C, ChecksumSHA1: hd.ChecksumSHA1,
		ChecksumSHA256: hd.ChecksumSHA256, ChecksumCRC64NVME: hd.ChecksumCRC64NVME, ChecksumSHA512: hd.ChecksumSHA512,
		ChecksumMD5: hd.ChecksumMD5, ChecksumXXHASH64: hd.ChecksumXXHASH64, ChecksumXXHASH3: hd.ChecksumXXHASH3,
		ChecksumXXHASH128: hd.ChecksumXXHASH128, ChecksumType: hd.ChecksumType,
	}
	body, err := b.newObjectBody(h, read, sp.offset, sp.length, requestStart(ctx))
	if err != nil {
		return nil, err
	}
	// The rest of the body is read from the drives after this returns,
	// under the request's context: the body's Close ends the request.
	body.end = hold(ctx)
	out.Body = body
	return out, nil
}

func (b *Backend) firstByte(start time.Time) {
	if b.hooks.FirstByte != nil {
		b.hooks.FirstByte(time.Since(start))
	}
}

func setChecksums(c s3response.Checksum, crc32, crc32c, sha1, sha256, crc64, sha512, md5, xx64, xx3, xx128 **string, typ *types.ChecksumType) {
	*crc32, *crc32c, *sha1, *sha256, *crc64, *sha512 = c.CRC32, c.CRC32C, c.SHA1, c.SHA256, c.CRC64NVME, c.SHA512
	*md5, *xx64, *xx3, *xx128 = c.MD5, c.XXHASH64, c.XXHASH3, c.XXHASH128
	if typ != nil {
		*typ = c.Type
	}
}

// versioning is a bucket's versioning state ("" when unknown).
func (b *Backend) versioning(ctx context.Context, bucket string) string {
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return ""
	}
	return bk.Versioning
}

// HeadObject answers an object's headers.
func (b *Backend) HeadObject(ctx context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	_, _, _, out, err := b.objectHead(ctx, str(in.Bucket), str(in.Key), str(in.VersionId), false, backend.PreConditions{
		IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch, IfModSince: in.IfModifiedSince, IfUnmodeSince: in.IfUnmodifiedSince,
	}, str(in.Range), in.PartNumber, in.ChecksumMode)
	return out, err
}

// GetObjectAttributes answers the attributes S3 defines for an object.
func (b *Backend) GetObjectAttributes(ctx context.Context, in *s3.GetObjectAttributesInput) (s3response.GetObjectAttributesResponse, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	h, markerTime, err := b.openVersion(ctx, bucket, key, str(in.VersionId), false)
	if markerTime != nil {
		return s3response.GetObjectAttributesResponse{DeleteMarker: &[]bool{true}[0], LastModified: markerTime}, err
	}
	if err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	if _, err := b.dataKey(ctx, bucket, key, h.Info().Meta, false); err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	info := plainInfo(h.Info())
	out := s3response.GetObjectAttributesResponse{
		ETag: &info.ETag, ObjectSize: &info.Size, StorageClass: types.StorageClassStandard,
		LastModified: &info.ModTime, VersionId: versionIDOut(info.VersionID, b.versioning(ctx, bucket)),
	}
	if len(info.Parts) > 0 {
		sizes := make([]int64, len(info.Parts))
		for i, p := range info.Parts {
			sizes[i] = p.Size
		}
		out.ObjectParts = ObjectPartsPage(ctx, sizes, in.PartNumberMarker, in.MaxParts)
		for i := range out.ObjectParts.Parts {
			p := &out.ObjectParts.Parts[i]
			if sums := partChecksumOf(info.Meta, int(*p.PartNumber)); sums != nil {
				c := checksums(sums)
				p.ChecksumCRC32, p.ChecksumCRC32C, p.ChecksumSHA1, p.ChecksumSHA256 = c.CRC32, c.CRC32C, c.SHA1, c.SHA256
				p.ChecksumCRC64NVME = c.CRC64NVME
			}
		}
	}
	if cs := checksums(info.Meta); cs.Algorithm != "" {
		out.Checksum = &types.Checksum{
			ChecksumCRC32: cs.CRC32, ChecksumCRC32C: cs.CRC32C, ChecksumSHA1: cs.SHA1, ChecksumSHA256: cs.SHA256,
			ChecksumCRC64NVME: cs.CRC64NVME, ChecksumType: cs.Type,
		}
	}
	return out, nil
}

func int32ptr(v int) *int32 { n := int32(v); return &n }

// ObjectPartsPage is GetObjectAttributes' page of a multipart object's
// parts (of the sizes given, part 1 first) after marker, at most maxParts
// (default 1,000); the front end's answer also gets the parts count.
func ObjectPartsPage(ctx context.Context, sizes []int64, marker *string, maxParts *int32) *s3response.ObjectParts {
	limit := 1000
	if maxParts != nil && *maxParts > 0 {
		limit = int(*maxParts)
	}
	after := 0
	if marker != nil {
		after, _ = strconv.Atoi(*marker)
	}
	if rc, ok := frontCtx(ctx); ok {
		rc.SetUserValue(partsCountKey, len(sizes))
	}
	page := &s3response.ObjectParts{PartNumberMarker: after, MaxParts: limit}
	for i := max(after, 0); i < len(sizes); i++ {
		if len(page.Parts) == limit {
			page.IsTruncated = true
			break
		}
		page.Parts = append(page.Parts, types.ObjectPart{PartNumber: int32ptr(i + 1), Size: &sizes[i]})
		page.NextPartNumberMarker = i + 1
	}
	return page
}

// deleteMode is how a DELETE without version ID behaves in a bucket.
func deleteMode(versioning string) objlayer.DeleteMode {
	switch versioning {
	case string(types.BucketVersioningStatusEnabled):
		return objlayer.DeleteVersioned
	case string(types.BucketVersioningStatusSuspended):
		return objlayer.DeleteSuspended
	}
	return objlayer.DeleteUnversioned
}

// DeleteObject deletes an object or one version.
func (b *Backend) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	out, err := b.deleteOne(ctx, bucket, key, str(in.VersionId), backend.ObjectDeletePreconditions{
		IfMatch: in.IfMatch, IfMatchLastModTime: in.IfMatchLastModifiedTime, IfMatchSize: in.IfMatchSize,
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (b *Backend) deleteOne(ctx context.Context, bucket, key, versionID string, pre backend.ObjectDeletePreconditions) (*s3.DeleteObjectOutput, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil, err
	}
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, b.toS3(err, bucket)
	}
	if pre.IfMatch != nil || pre.IfMatchLastModTime != nil || pre.IfMatchSize != nil {
		h, err := b.pool.OpenObject(ctx, bucket, key, vid)
		if errors.Is(err, objlayer.ErrObjectNotFound) {
			return nil, s3err.GetAPIError(s3err.ErrNoSuchKey)
		}
		if err != nil {
			return nil, b.toS3(err, bucket)
		}
		if err := backend.EvaluateObjectDeletePreconditions(h.Info().ETag, h.Info().ModTime, h.Info().Size, pre); err != nil {
			return nil, err
		}
	}
	res, err := b.pool.DeleteObject(ctx, bucket, key, vid, deleteMode(bk.Versioning))
	if err != nil {
		return nil, b.toS3(err, bucket)
	}
	out := &s3.DeleteObjectOutput{}
	if res.DeleteMarker {
		out.DeleteMarker = &res.DeleteMarker
	}
	if vid != nil || res.DeleteMarker && bk.Versioning != "" {
		out.VersionId = versionIDOut(res.VersionID, bk.Versioning)
	}
	return out, nil
}

// DeleteObjects deletes several objects, reporting each key's outcome.
func (b *Backend) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput) (s3response.DeleteResult, error) {
	bucket := str(in.Bucket)
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return s3response.DeleteResult{}, err
	}
	var res s3response.DeleteResult
	// S3 takes at most 1,000 keys per request and refuses more as
	// malformed, deleting none of them.
	if in.Delete == nil || len(in.Delete.Objects) > maxDeleteKeys {
		return res, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	quiet := in.Delete.Quiet != nil && *in.Delete.Quiet
	for _, obj := range in.Delete.Objects {
		key := str(obj.Key)
		out, err := b.deleteOne(ctx, bucket, key, str(obj.VersionId), backend.ObjectDeletePreconditions{
			IfMatch: obj.ETag, IfMatchLastModTime: obj.LastModifiedTime, IfMatchSize: obj.Size,
		})
		if err != nil {
			res.Error = append(res.Error, s3err.ObjectDeleteError(obj.Key, obj.VersionId, err))
			continue
		}
		if quiet {
			continue
		}
		d := types.DeletedObject{Key: obj.Key, VersionId: obj.VersionId}
		if out.DeleteMarker != nil && *out.DeleteMarker {
			d.DeleteMarker = out.DeleteMarker
			if obj.VersionId == nil || *obj.VersionId == "" {
				d.DeleteMarkerVersionId = out.VersionId
			} else {
				d.DeleteMarkerVersionId = obj.VersionId
			}
		}
		res.Deleted = append(res.Deleted, d)
	}
	return res, nil
}

// CopyObject copies an object (or one version) to another key, or onto
// itself to change its metadata, reading and re-encoding its data.
func (b *Backend) CopyObject(ctx context.Context, in s3response.CopyObjectInput) (s3response.CopyObjectOutput, error) {
	srcBucket, srcKey, srcVersion, err := backend.ParseCopySource(str(in.CopySource))
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	dstBucket, dstKey := str(in.Bucket), str(in.Key)
	if err := checkKey(dstKey); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	h, markerTime, err := b.openVersion(ctx, srcBucket, srcKey, srcVersion, true)
	if markerTime != nil {
		if srcVersion != "" {
			return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidRequest)
		}
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	if err != nil {
		return s3response.CopyObjectOutput{}, b.toS3(err, srcBucket) // the source names its own bucket
	}
	srcDEK, err := b.dataKey(ctx, srcBucket, srcKey, h.Info().Meta, true)
	if err != nil {
		return s3response.CopyObjectOutput{}, b.toS3(err, srcBucket)
	}
	src := plainInfo(h.Info())
	if err := copySourcePreconditions(src, in.CopySourceIfMatch, in.CopySourceIfNoneMatch, in.CopySourceIfModifiedSince, in.CopySourceIfUnmodifiedSince); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	// Copying an object onto itself must change something: metadata, tags
	// or its encryption.
	if srcBucket == dstBucket && srcKey == dstKey && srcVersion == "" &&
		in.MetadataDirective != types.MetadataDirectiveReplace && in.TaggingDirective != types.TaggingDirectiveReplace &&
		headerOf(ctx, hdrSSE) == "" && headerOf(ctx, hdrSSECKey) == "" {
		return s3response.CopyObjectOutput{}, s3err.GetAPIError(s3err.ErrInvalidCopyDest)
	}
	if in.TaggingDirective == types.TaggingDirectiveReplace && in.Tagging != nil && *in.Tagging != "" {
		if _, err := backend.ParseObjectTags(*in.Tagging); err != nil {
			return s3response.CopyObjectOutput{}, err
		}
	}
	dst, err := b.pool.StatBucket(ctx, dstBucket)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	opts := objlayer.PutOptions{Meta: copyMeta(src.Meta, in)}
	if err := b.objectACLOnWrite(ctx, dst, opts.Meta); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if err := lockOnWrite(dst, opts.Meta, in.ObjectLockMode, in.ObjectLockRetainUntilDate, in.ObjectLockLegalHoldStatus); err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	if dst.Versioning == string(types.BucketVersioningStatusEnabled) {
		opts.VersionID = uuid.New()
	}
	enc, err := b.writeSSE(ctx, dst)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	info, err := b.copyData(ctx, h, reader(ctx, h, srcDEK), src.Size, dstBucket, dstKey, opts, enc)
	if err != nil {
		return s3response.CopyObjectOutput{}, err
	}
	setSSEHeaders(ctx, info.Meta)
	out := s3response.CopyObjectOutput{
		CopyObjectResult: &s3response.CopyObjectResult{ETag: quote(info.ETag), LastModified: &info.ModTime},
		VersionId:        writtenVersionID(info.VersionID),
	}
	if srcVersion != "" {
		out.CopySourceVersionId = &srcVersion
	}
	return out, nil
}

// copyData streams a resolved source version (size bytes, as read) into
// a new object, encrypted with enc when set.
func (b *Backend) copyData(ctx context.Context, h objlayer.Handle, read rangeWriter, size int64, bucket, key string, opts objlayer.PutOptions, enc *sseKey) (objlayer.ObjectInfo, error) {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(read(pw, 0, size))
	}()
	defer pr.CloseWithError(io.ErrClosedPipe)
	var body io.Reader = pr
	if enc != nil {
		var err error
		if body, size, opts.BodyETag, err = enc.sealBody(bucket, key, body, size, opts.Meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	info, err := b.pool.PutObject(ctx, bucket, key, body, size, opts)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	return plainInfo(info), nil
}
