package s3front

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

func parseUploadID(s string) ([16]byte, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return [16]byte{}, s3err.GetNoSuchUploadErr(s)
	}
	return id, nil
}

func uploadIDString(id [16]byte) string { return uuid.UUID(id).String() }

// CreateMultipartUpload starts an upload.
func (b *Backend) CreateMultipartUpload(ctx context.Context, in s3response.CreateMultipartUploadInput) (s3response.InitiateMultipartUploadResult, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := checkKey(key); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if in.Tagging != nil && *in.Tagging != "" {
		if _, err := backend.ParseObjectTags(*in.Tagging); err != nil {
			return s3response.InitiateMultipartUploadResult{}, err
		}
	}
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	meta := buildMeta(systemHeaders{
		ContentType: in.ContentType, ContentEncoding: in.ContentEncoding, ContentDisposition: in.ContentDisposition,
		ContentLanguage: in.ContentLanguage, CacheControl: in.CacheControl, Expires: in.Expires,
		WebsiteRedirectLocation: in.WebsiteRedirectLocation,
	}, in.Metadata, in.Tagging)
	if err := b.objectACLOnWrite(ctx, bk, meta); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if err := lockOnWrite(bk, meta, in.ObjectLockMode, in.ObjectLockRetainUntilDate, in.ObjectLockLegalHoldStatus); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	// An encrypted upload's data key is made now; every part is encrypted
	// with it.
	if enc, err := b.writeSSE(ctx, bk); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	} else if enc != nil {
		if _, err := enc.newDataKey(bucket, key, meta); err != nil {
			return s3response.InitiateMultipartUploadResult{}, err
		}
		setSSEHeaders(ctx, meta)
	}
	setUploadChecksum(meta, in.ChecksumAlgorithm, in.ChecksumType)
	u, err := b.pool.NewMultipartUpload(ctx, bucket, key, meta)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	return s3response.InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadId: uploadIDString(u.ID)}, nil
}

// UploadPart stores one part.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	id, err := parseUploadID(str(in.UploadId))
	if err != nil {
		return nil, err
	}
	number := 0
	if in.PartNumber != nil {
		number = int(*in.PartNumber)
	}
	if number < 1 || number > objlayer.MaxParts {
		return nil, s3err.GetInvalidArgumentErr(s3err.InvalidArgPartNumber, strconv.Itoa(number))
	}
	size := int64(-1)
	if in.ContentLength != nil {
		size = *in.ContentLength
	}
	if size > objlayer.MaxPartSize {
		return nil, s3err.GetEntityTooLargeErr(size, objlayer.MaxPartSize)
	}
	meta := map[string]string{}
	sums := map[types.ChecksumAlgorithm]*string{
		types.ChecksumAlgorithmCrc32: in.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: in.ChecksumCRC32C,
		types.ChecksumAlgorithmSha1: in.ChecksumSHA1, types.ChecksumAlgorithmSha256: in.ChecksumSHA256,
		types.ChecksumAlgorithmCrc64nvme: in.ChecksumCRC64NVME,
	}
	body, after, err := putBody(in.Body, meta, in.ChecksumAlgorithm, sums)
	if err != nil {
		return nil, err
	}
	// The part's checksum is known only once its body was read.
	checksum := &lazyChecksum{meta: meta, after: after}
	opts := withPartChecksum(b.partSealing(ctx, bucket, key, number), sentChecksum(in.Body, sums), meta)
	part, err := b.pool.PutObjectPart(ctx, bucket, key, id, number, checksum.reader(body), size, opts)
	if err != nil {
		return nil, err
	}
	out := &s3.UploadPartOutput{ETag: quote(part.ETag)}
	if alg, val := partChecksum(meta); alg != "" {
		switch alg {
		case types.ChecksumAlgorithmCrc32:
			out.ChecksumCRC32 = &val
		case types.ChecksumAlgorithmCrc32c:
			out.ChecksumCRC32C = &val
		case types.ChecksumAlgorithmSha1:
			out.ChecksumSHA1 = &val
		case types.ChecksumAlgorithmSha256:
			out.ChecksumSHA256 = &val
		case types.ChecksumAlgorithmCrc64nvme:
			out.ChecksumCRC64NVME = &val
		}
	}
	return out, nil
}

// partSealing encrypts the parts of an encrypted upload with its data key
// (an SSE-C upload's parts need the customer's key again); the parts of an
// unencrypted one are stored as sent, and a customer key for them refused.
func (b *Backend) partSealing(ctx context.Context, bucket, key string, number int) objlayer.PartOptions {
	return objlayer.PartOptions{Body: func(meta map[string]string, r io.Reader, size int64) (io.Reader, int64, func() string, error) {
		dek, err := b.dataKey(ctx, bucket, key, meta, false)
		if err != nil || dek == nil {
			return r, size, nil, err
		}
		setSSEHeaders(ctx, meta)
		return sealStream(r, size, sseMode(meta[metaSSE]), dek, number)
	}}
}

// lazyChecksum records a body's checksum once the body reached its end.
type lazyChecksum struct {
	meta  map[string]string
	after func(map[string]string)
	done  bool
}

func (l *lazyChecksum) reader(r io.Reader) io.Reader { return &eofHook{r: r, fn: l.finish} }

func (l *lazyChecksum) finish() {
	if !l.done && l.after != nil {
		l.after(l.meta)
	}
	l.done = true
}

// eofHook calls fn when the reader reports EOF.
type eofHook struct {
	r  io.Reader
	fn func()
}

func (e *eofHook) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.fn()
	}
	return n, err
}

// UploadPartCopy stores a part copied from (a range of) an object.
func (b *Backend) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	id, err := parseUploadID(str(in.UploadId))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	number := 0
	if in.PartNumber != nil {
		number = int(*in.PartNumber)
	}
	if number < 1 || number > objlayer.MaxParts {
		return s3response.CopyPartResult{}, s3err.GetInvalidArgumentErr(s3err.InvalidArgPartNumber, strconv.Itoa(number))
	}
	srcBucket, srcKey, srcVersion, err := backend.ParseCopySource(str(in.CopySource))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	h, markerTime, err := b.openVersion(ctx, srcBucket, srcKey, srcVersion, true)
	if markerTime != nil {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrNoSuchKey)
	}
	if err != nil {
		return s3response.CopyPartResult{}, b.toS3(err, srcBucket) // the source names its own bucket
	}
	if err := copySourcePreconditions(h.Info(), in.CopySourceIfMatch, in.CopySourceIfNoneMatch, in.CopySourceIfModifiedSince, in.CopySourceIfUnmodifiedSince); err != nil {
		return s3response.CopyPartResult{}, err
	}
	srcKey2, err := b.dataKey(ctx, srcBucket, srcKey, h.Info().Meta, true)
	if err != nil {
		return s3response.CopyPartResult{}, b.toS3(err, srcBucket)
	}
	srcSize := plainInfo(h.Info()).Size
	if rangeBeyond(str(in.CopySourceRange), srcSize) {
		return s3response.CopyPartResult{}, s3err.GetInvalidRangeErr(str(in.CopySourceRange), srcSize)
	}
	offset, length, err := backend.ParseCopySourceRange(srcSize, str(in.CopySourceRange))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	if length > objlayer.MaxPartSize {
		return s3response.CopyPartResult{}, s3err.GetEntityTooLargeErr(length, objlayer.MaxPartSize)
	}
	read := reader(ctx, h, srcKey2)
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(read(pw, offset, length))
	}()
	meta := map[string]string{} // the part's checksum, when its upload has an algorithm
	part, err := b.pool.PutObjectPart(ctx, bucket, key, id, number, pr, length,
		withPartChecksum(b.partSealing(ctx, bucket, key, number), "", meta))
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	out := s3response.CopyPartResult{LastModified: part.ModTime, ETag: quote(part.ETag), CopySourceVersionId: srcVersion}
	setChecksums(checksums(meta), &out.ChecksumCRC32, &out.ChecksumCRC32C, &out.ChecksumSHA1, &out.ChecksumSHA256,
		&out.ChecksumCRC64NVME, &out.ChecksumSHA512, &out.ChecksumMD5, &out.ChecksumXXHASH64, &out.ChecksumXXHASH3,
		&out.ChecksumXXHASH128, nil)
	return out, nil
}

// rangeBeyond reports a well-formed "bytes=a-b" copy range that ends past
// the source: S3 answers InvalidRange for it.
func rangeBeyond(r string, size int64) bool {
	a, b, ok := strings.Cut(strings.TrimPrefix(r, "bytes="), "-")
	if !ok || !strings.HasPrefix(r, "bytes=") {
		return false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && start <= end && end >= size
}

// ListParts lists an upload's parts.
func (b *Backend) ListParts(ctx context.Context, in *s3.ListPartsInput) (s3response.ListPartsResult, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	id, err := parseUploadID(str(in.UploadId))
	if err != nil {
		return s3response.ListPartsResult{}, err
	}
	marker := 0
	if m := str(in.PartNumberMarker); m != "" {
		var err error
		if marker, err = strconv.Atoi(m); err != nil || marker < 0 {
			return s3response.ListPartsResult{}, invalidArgument("Argument part-number-marker must be an integer.")
		}
	}
	maxParts := 1000
	if in.MaxParts != nil && *in.MaxParts >= 0 {
		maxParts = min(int(*in.MaxParts), 1000)
	}
	u, parts, truncated, err := b.pool.ListParts(ctx, bucket, key, id, marker, maxParts)
	if err != nil {
		return s3response.ListPartsResult{}, err
	}
	if encrypted(u.Meta) {
		for i := range parts {
			parts[i].Size = plainSize(parts[i].Size)
		}
	}
	owner := b.objectOwners(ctx, bucket)(u.Meta)
	out := s3response.ListPartsResult{
		Bucket: bucket, Key: key, UploadID: str(in.UploadId), StorageClass: types.StorageClassStandard,
		Initiator: s3response.Initiator{ID: *owner.ID, DisplayName: *owner.DisplayName}, Owner: s3response.Owner{ID: *owner.ID, DisplayName: *owner.DisplayName},
		PartNumberMarker: marker, MaxParts: maxParts, IsTruncated: truncated,
	}
	for _, p := range parts {
		part := s3response.Part{PartNumber: p.Number, LastModified: p.ModTime, ETag: *quote(p.ETag), Size: p.Size}
		if alg, v, ok := strings.Cut(p.Checksum, ":"); ok {
			setChecksums(checksums(map[string]string{checksumKey(types.ChecksumAlgorithm(alg)): v}), &part.ChecksumCRC32,
				&part.ChecksumCRC32C, &part.ChecksumSHA1, &part.ChecksumSHA256, &part.ChecksumCRC64NVME, &part.ChecksumSHA512,
				&part.ChecksumMD5, &part.ChecksumXXHASH64, &part.ChecksumXXHASH3, &part.ChecksumXXHASH128, nil)
		}
		out.Parts = append(out.Parts, part)
		out.NextPartNumberMarker = p.Number
	}
	return out, nil
}

// ListMultipartUploads lists a bucket's uploads in progress.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	bucket, prefix, delim, keyMarker := str(in.Bucket), str(in.Prefix), str(in.Delimiter), str(in.KeyMarker)
	e, et, err := encoderFor(ctx)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	var idMarker [16]byte
	if m := str(in.UploadIdMarker); m != "" {
		if idMarker, err = parseUploadID(m); err != nil {
			return s3response.ListMultipartUploadsResult{}, s3err.GetInvalidArgumentErr(s3err.InvalidArgUploadIdMarker, m)
		}
	}
	maxUploads := 1000
	if in.MaxUploads != nil && *in.MaxUploads >= 0 {
		maxUploads = min(int(*in.MaxUploads), 1000)
	}
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	res, err := b.pool.ListMultipartUploads(ctx, bucket, prefix, keyMarker, idMarker, delim, maxUploads)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	ownerOf := b.objectOwners(ctx, bucket)
	out := s3response.ListMultipartUploadsResult{
		Bucket: bucket, KeyMarker: e.enc(keyMarker), UploadIDMarker: str(in.UploadIdMarker), Delimiter: e.enc(delim),
		Prefix: e.enc(prefix), EncodingType: string(et), MaxUploads: maxUploads, IsTruncated: res.IsTruncated,
	}
	if res.IsTruncated {
		out.NextKeyMarker = e.enc(res.NextKeyMarker)
		if res.NextUploadID != objlayer.NullVersion {
			out.NextUploadIDMarker = uploadIDString(res.NextUploadID)
		}
	}
	for _, u := range res.Uploads {
		owner := ownerOf(u.Meta)
		out.Uploads = append(out.Uploads, s3response.Upload{
			Key: e.enc(u.Object), UploadID: uploadIDString(u.ID), Initiated: u.Initiated, StorageClass: types.StorageClassStandard,
			Initiator: s3response.Initiator{ID: *owner.ID, DisplayName: *owner.DisplayName}, Owner: s3response.Owner{ID: *owner.ID, DisplayName: *owner.DisplayName},
		})
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, s3response.CommonPrefix{Prefix: e.enc(cp)})
	}
	return out, nil
}

// CompleteMultipartUpload assembles an object from uploaded parts.
func (b *Backend) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	id, err := parseUploadID(str(in.UploadId))
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	if in.IfMatch != nil || in.IfNoneMatch != nil {
		if err := b.putPreconditions(ctx, bucket, key, in.IfMatch, in.IfNoneMatch); err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
	}
	if in.MultipartUpload == nil || len(in.MultipartUpload.Parts) == 0 {
		return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	var parts []objlayer.CompletePart
	for _, p := range in.MultipartUpload.Parts {
		if p.PartNumber == nil {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		parts = append(parts, objlayer.CompletePart{Number: int(*p.PartNumber), ETag: str(p.ETag)})
	}
	opts := objlayer.PutOptions{CompleteParts: completedChecksum(in)}
	if bk.Versioning == string(types.BucketVersioningStatusEnabled) {
		opts.VersionID = uuid.New()
	}
	// Completing an upload encrypted with a customer key takes the key
	// again, as S3 requires.
	if u, err := b.pool.StatUpload(ctx, bucket, key, id); err == nil {
		if _, err := b.dataKey(ctx, bucket, key, u.Meta, false); err != nil {
			return s3response.CompleteMultipartUploadResult{}, "", err
		}
	}
	info, err := b.pool.CompleteMultipartUpload(ctx, bucket, key, id, parts, opts)
	if errors.Is(err, objlayer.ErrUploadNotFound) {
		// A completion retried after it succeeded (its answer was lost)
		// answers as the first one did, while the version it made is the
		// object's current one.
		if h, oerr := b.pool.OpenObject(ctx, bucket, key, nil); oerr == nil && h.Info().Meta[objlayer.MetaUploadID] == uploadIDString(id) {
			info, err = h.Info(), nil
		}
	}
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	if in.MpuObjectSize != nil && *in.MpuObjectSize != info.Size {
		b.log.Warn("completed upload size differs from x-amz-mp-object-size", "bucket", bucket, "key", key, "size", info.Size, "declared", *in.MpuObjectSize)
	}
	setSSEHeaders(ctx, info.Meta)
	location := "/" + bucket + "/" + key
	out := s3response.CompleteMultipartUploadResult{Location: &location, Bucket: &bucket, Key: &key, ETag: quote(info.ETag)}
	setChecksums(checksums(info.Meta), &out.ChecksumCRC32, &out.ChecksumCRC32C, &out.ChecksumSHA1, &out.ChecksumSHA256,
		&out.ChecksumCRC64NVME, &out.ChecksumSHA512, &out.ChecksumMD5, &out.ChecksumXXHASH64, &out.ChecksumXXHASH3,
		&out.ChecksumXXHASH128, nil)
	if cs := checksums(info.Meta); cs.Algorithm != "" && cs.Type != "" {
		out.ChecksumType = &cs.Type
	}
	vid := ""
	if v := writtenVersionID(info.VersionID); v != nil {
		vid = *v
	}
	return out, vid, nil
}

// AbortMultipartUpload discards an upload and its parts.
func (b *Backend) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput) error {
	bucket, key := str(in.Bucket), str(in.Key)
	id, err := parseUploadID(str(in.UploadId))
	if err != nil {
		return err
	}
	if _, err := b.pool.StatBucket(ctx, bucket); err != nil {
		return err
	}
	return b.pool.AbortMultipartUpload(ctx, bucket, key, id)
}
