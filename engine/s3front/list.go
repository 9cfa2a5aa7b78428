package s3front

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3response"
)

// keyEncoder renders keys in listings: as they are, or URL-encoded when
// the request asked for encoding-type=url (the front end does not pass the
// parameter on, so it is read from the request).
type keyEncoder struct{ url bool }

func encoderFor(ctx context.Context) (keyEncoder, types.EncodingType, error) {
	switch et := queryArg(ctx, "encoding-type"); et {
	case "":
		return keyEncoder{}, "", nil
	case "url":
		return keyEncoder{url: true}, types.EncodingTypeUrl, nil
	default:
		return keyEncoder{}, "", invalidArgument("Invalid Encoding Method specified in Request")
	}
}

// enc encodes like S3: every byte but unreserved characters and '/'
// percent-encoded, spaces as %20.
func (e keyEncoder) enc(s string) string {
	if !e.url {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), "%2F", "/")
}

func (e keyEncoder) ptr(s string) *string {
	v := e.enc(s)
	return &v
}

// optional is ptr for elements S3 leaves out when empty (Delimiter).
func (e keyEncoder) optional(s string) *string {
	if s == "" {
		return nil
	}
	return e.ptr(s)
}

func (e keyEncoder) prefixes(cps []string) []types.CommonPrefix {
	out := make([]types.CommonPrefix, len(cps))
	for i, cp := range cps {
		out[i] = types.CommonPrefix{Prefix: e.ptr(cp)}
	}
	return out
}

// objectOwners names the owners of a bucket's objects in listings: each
// version's own (aclstore.go), its bucket's owner by default.
func (b *Backend) objectOwners(ctx context.Context, bucket string) func(meta map[string]string) *types.Owner {
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		bk = objlayer.BucketInfo{Owner: b.rootAccess}
	}
	byDefault := b.owner(b.ownerOf(bk))
	return func(meta map[string]string) *types.Owner {
		if acl := decodeACL([]byte(meta[metaACL])); acl != nil && acl.Owner != *byDefault.ID {
			return b.owner(acl.Owner)
		}
		return byDefault
	}
}

func (b *Backend) listObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int32, fetchOwner bool) (objlayer.ListResult, []s3response.Object, keyEncoder, types.EncodingType, error) {
	e, et, err := encoderFor(ctx)
	if err != nil {
		return objlayer.ListResult{}, nil, e, et, err
	}
	res, err := b.pool.ListObjects(ctx, bucket, prefix, marker, delimiter, int(maxKeys))
	if err != nil {
		return objlayer.ListResult{}, nil, e, et, err
	}
	var ownerOf func(map[string]string) *types.Owner
	if fetchOwner {
		ownerOf = b.objectOwners(ctx, bucket)
	}
	objs := make([]s3response.Object, len(res.Objects))
	for i, o := range res.Objects {
		o = plainInfo(o)
		objs[i] = s3response.Object{
			Key: e.ptr(o.Name), ETag: quote(o.ETag), LastModified: &o.ModTime, Size: &o.Size,
			StorageClass: types.ObjectStorageClassStandard,
		}
		objs[i].ChecksumAlgorithm, objs[i].ChecksumType = listedChecksum(o.Meta)
		if fetchOwner {
			objs[i].Owner = ownerOf(o.Meta)
		}
	}
	return res, objs, e, et, nil
}

// ListObjects lists a bucket (version 1).
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	bucket, prefix, marker, delim := str(in.Bucket), str(in.Prefix), str(in.Marker), str(in.Delimiter)
	maxKeys := maxKeysOf(in.MaxKeys)
	res, objs, e, et, err := b.listObjects(ctx, bucket, prefix, marker, delim, maxKeys, true)
	if err != nil {
		return s3response.ListObjectsResult{}, err
	}
	// Version 1 answers its Prefix as sent, encoding-type or not (clients
	// decode every other field but this one).
	out := s3response.ListObjectsResult{
		Name: &bucket, Prefix: &prefix, Marker: e.ptr(marker), MaxKeys: &maxKeys,
		Delimiter: e.optional(delim), IsTruncated: &res.IsTruncated, Contents: objs,
		CommonPrefixes: e.prefixes(res.CommonPrefixes), EncodingType: et,
	}
	if res.IsTruncated && delim != "" {
		out.NextMarker = e.ptr(res.NextMarker)
	}
	return HandOffListingV1(ctx, out), nil
}

func maxKeysOf(p *int32) int32 {
	if p == nil {
		return 1000
	}
	return *p
}

// continuation tokens are opaque to clients: the marker, base64-encoded.
func encodeToken(marker string) string { return base64.RawURLEncoding.EncodeToString([]byte(marker)) }

func decodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", invalidArgument("The continuation token provided is incorrect")
	}
	return string(b), nil
}

// ListObjectsV2 lists a bucket (version 2).
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	bucket, prefix, delim, startAfter := str(in.Bucket), str(in.Prefix), str(in.Delimiter), str(in.StartAfter)
	token := str(in.ContinuationToken)
	marker := startAfter
	if token != "" {
		m, err := decodeToken(token)
		if err != nil {
			return s3response.ListObjectsV2Result{}, err
		}
		marker = m
	}
	maxKeys := maxKeysOf(in.MaxKeys)
	fetchOwner := in.FetchOwner != nil && *in.FetchOwner
	res, objs, e, et, err := b.listObjects(ctx, bucket, prefix, marker, delim, maxKeys, fetchOwner)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	keyCount := int32(len(objs) + len(res.CommonPrefixes))
	out := s3response.ListObjectsV2Result{
		Name: &bucket, Prefix: e.ptr(prefix), MaxKeys: &maxKeys, KeyCount: &keyCount,
		Delimiter: e.optional(delim), IsTruncated: &res.IsTruncated, Contents: objs,
		CommonPrefixes: e.prefixes(res.CommonPrefixes), EncodingType: et,
	}
	if startAfter != "" {
		out.StartAfter = e.ptr(startAfter)
	}
	if in.ContinuationToken != nil || queryHas(ctx, "continuation-token") {
		out.ContinuationToken = &token
	}
	if res.IsTruncated {
		next := encodeToken(res.NextMarker)
		out.NextContinuationToken = &next
	}
	return HandOffListing(ctx, out), nil
}

// ListObjectVersions lists every version and delete marker.
func (b *Backend) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput) (s3response.ListVersionsResult, error) {
	bucket, prefix, delim, keyMarker := str(in.Bucket), str(in.Prefix), str(in.Delimiter), str(in.KeyMarker)
	e, et, err := encoderFor(ctx)
	if err != nil {
		return s3response.ListVersionsResult{}, err
	}
	vm := str(in.VersionIdMarker)
	var versionMarker *[16]byte
	if vm != "" {
		if keyMarker == "" {
			return s3response.ListVersionsResult{}, invalidArgument("A version-id marker cannot be specified without a key marker.")
		}
		if versionMarker, err = parseVersionID(vm); err != nil {
			return s3response.ListVersionsResult{}, err
		}
	}
	maxKeys := maxKeysOf(in.MaxKeys)
	res, err := b.pool.ListObjectVersions(ctx, bucket, prefix, keyMarker, versionMarker, delim, int(maxKeys))
	if err != nil {
		return s3response.ListVersionsResult{}, err
	}
	out := s3response.ListVersionsResult{
		Name: &bucket, Prefix: e.ptr(prefix), KeyMarker: e.ptr(keyMarker), VersionIdMarker: &vm,
		MaxKeys: &maxKeys, Delimiter: e.optional(delim), IsTruncated: &res.IsTruncated,
		CommonPrefixes: e.prefixes(res.CommonPrefixes), EncodingType: et,
	}
	ownerOf := b.objectOwners(ctx, bucket)
	for _, o := range res.Objects {
		o = plainInfo(o)
		vid := objlayer.FormatVersionID(o.VersionID)
		owner := ownerOf(o.Meta)
		if o.DeleteMarker {
			out.DeleteMarkers = append(out.DeleteMarkers, types.DeleteMarkerEntry{
				IsLatest: &o.IsLatest, Key: e.ptr(o.Name), LastModified: &o.ModTime, Owner: owner, VersionId: &vid,
			})
			continue
		}
		v := s3response.ObjectVersion{
			ETag: quote(o.ETag), IsLatest: &o.IsLatest, Key: e.ptr(o.Name), LastModified: &o.ModTime,
			Owner: owner, Size: &o.Size, StorageClass: types.ObjectVersionStorageClassStandard, VersionId: &vid,
		}
		v.ChecksumAlgorithm, v.ChecksumType = listedChecksum(o.Meta)
		out.Versions = append(out.Versions, v)
	}
	if res.IsTruncated {
		out.NextKeyMarker = e.ptr(res.NextMarker)
		out.NextVersionIdMarker = &res.NextVersionMarker
	}
	return out, nil
}

// listedChecksum is what a listing shows of an object's checksum, as S3
// does for objects stored with one: its algorithm and type (none for an
// object without: the element is then left out, fixResponses).
func listedChecksum(meta map[string]string) ([]types.ChecksumAlgorithm, types.ChecksumType) {
	alg, _ := partChecksum(meta)
	if alg == "" {
		return nil, ""
	}
	typ := types.ChecksumType(meta[metaChecksumType])
	if typ == "" {
		typ = types.ChecksumTypeFullObject
	}
	return []types.ChecksumAlgorithm{alg}, typ
}
