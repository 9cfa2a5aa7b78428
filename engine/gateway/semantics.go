package gateway

import (
	"context"
	"net/http"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/s3front"
)

// Where the posix backend answers unlike S3 (and unlike `strata server`),
// the gateway corrects it with the rules engine/s3front implements once:
// listings' optional elements and URL encoding, conditional writes, 304
// headers, part numbers and copy ranges past the end, aws-chunked in
// Content-Encoding, DeleteObjects' key limit, keys that are not UTF-8.
// ctx is always the request's own (not detached): these rules read the
// request and set response headers.

// keyReadable refuses a key that is not UTF-8, as S3 does (400 InvalidURI).
func keyReadable(key string) error {
	if !utf8.ValidString(key) {
		return s3front.ErrInvalidURI
	}
	return nil
}

func orEmpty(p *string) *string {
	if p == nil {
		e := ""
		return &e
	}
	return p
}

func noneIfEmpty(p *string) *string {
	if p == nil || *p == "" {
		return nil
	}
	return p
}

func encoded(enc func(string) string, p *string) *string {
	if p == nil {
		return nil
	}
	v := enc(*p)
	return &v
}

func encodePrefixes(enc func(string) string, cps []types.CommonPrefix) {
	for i := range cps {
		cps[i].Prefix = encoded(enc, cps[i].Prefix)
	}
}

func withDisplayName(o *types.Owner) *types.Owner {
	if o != nil && o.DisplayName == nil {
		o.DisplayName = o.ID
	}
	return o
}

// ownedBy is a version's owner: as stored, else its bucket's owner.
func ownedBy(o *types.Owner, bucketOwner string) *types.Owner {
	if o == nil || o.ID == nil {
		return &types.Owner{ID: &bucketOwner, DisplayName: &bucketOwner}
	}
	return withDisplayName(o)
}

// shapeV1 makes a version-1 listing look as S3's: Prefix and Marker always
// there, Delimiter only when set, keys URL-encoded when asked (the Prefix
// of a version-1 listing is answered as sent).
func shapeV1(ctx context.Context, out *s3response.ListObjectsResult) error {
	enc, et, err := s3front.ListingEncoder(ctx)
	if err != nil {
		return err
	}
	out.Prefix, out.Marker, out.Delimiter = orEmpty(out.Prefix), encoded(enc, orEmpty(out.Marker)), encoded(enc, noneIfEmpty(out.Delimiter))
	out.NextMarker, out.EncodingType = encoded(enc, out.NextMarker), types.EncodingType(et)
	for i := range out.Contents {
		out.Contents[i].Key = encoded(enc, out.Contents[i].Key)
		out.Contents[i].Owner = withDisplayName(out.Contents[i].Owner)
	}
	encodePrefixes(enc, out.CommonPrefixes)
	return nil
}

// shapeV2 is shapeV1 for version 2, which also echoes an empty
// continuation token.
func shapeV2(ctx context.Context, token *string, out *s3response.ListObjectsV2Result) error {
	enc, et, err := s3front.ListingEncoder(ctx)
	if err != nil {
		return err
	}
	out.Prefix, out.Delimiter = encoded(enc, orEmpty(out.Prefix)), encoded(enc, noneIfEmpty(out.Delimiter))
	out.StartAfter, out.EncodingType = encoded(enc, noneIfEmpty(out.StartAfter)), types.EncodingType(et)
	if out.ContinuationToken == nil && (token != nil || s3front.QueryHas(ctx, "continuation-token")) {
		out.ContinuationToken = orEmpty(token)
	}
	for i := range out.Contents {
		out.Contents[i].Key = encoded(enc, out.Contents[i].Key)
		out.Contents[i].Owner = withDisplayName(out.Contents[i].Owner)
	}
	encodePrefixes(enc, out.CommonPrefixes)
	return nil
}

// shapeVersions is shapeV1 for version listings, which always name owners.
func shapeVersions(ctx context.Context, bucketOwner string, out *s3response.ListVersionsResult) error {
	enc, et, err := s3front.ListingEncoder(ctx)
	if err != nil {
		return err
	}
	out.Prefix, out.KeyMarker, out.Delimiter = encoded(enc, orEmpty(out.Prefix)), encoded(enc, orEmpty(out.KeyMarker)), encoded(enc, noneIfEmpty(out.Delimiter))
	out.NextKeyMarker, out.EncodingType = encoded(enc, out.NextKeyMarker), types.EncodingType(et)
	for i := range out.Versions {
		out.Versions[i].Key = encoded(enc, out.Versions[i].Key)
		out.Versions[i].Owner = ownedBy(out.Versions[i].Owner, bucketOwner)
	}
	for i := range out.DeleteMarkers {
		out.DeleteMarkers[i].Key = encoded(enc, out.DeleteMarkers[i].Key)
		out.DeleteMarkers[i].Owner = ownedBy(out.DeleteMarkers[i].Owner, bucketOwner)
	}
	encodePrefixes(enc, out.CommonPrefixes)
	return nil
}

// current is the latest version's ETag (quoted) and whether it exists.
func (b *Backend) current(ctx context.Context, bucket, key string) (string, bool, error) {
	h, err := b.Posix.HeadObject(detach(ctx), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	switch {
	case err == nil:
		etag := str(h.ETag)
		if etag == "" {
			etag = b.etags.ensure(bucket, key)
		}
		return etag, true, nil
	case s3front.IsStatus(err, http.StatusNotFound):
		return "", false, nil
	}
	return "", false, err
}

// writeConditions evaluates a write's If-Match / If-None-Match as S3 does
// (the posix backend refuses an ETag in If-None-Match and compares
// If-Match: * as an ETag); a check, then the write, as on the server.
func (b *Backend) writeConditions(ctx context.Context, bucket, key string, ifMatch, ifNoneMatch **string) error {
	if *ifMatch == nil && *ifNoneMatch == nil {
		return nil
	}
	etag, exists, err := b.current(ctx, bucket, key)
	if err != nil {
		return err
	}
	if err := s3front.PutConditions(trimQuotes(etag), exists, *ifMatch, *ifNoneMatch); err != nil {
		return err
	}
	*ifMatch, *ifNoneMatch = nil, nil
	return nil
}

func trimQuotes(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// readAnswer adjusts a GET's or HEAD's error as S3 answers it: a 304 with
// the object's ETag and Last-Modified, a part number past the last part
// 400 InvalidPart.
func (b *Backend) readAnswer(ctx context.Context, bucket, key string, partNumber *int32, err error) error {
	switch {
	case err == nil:
		return nil
	case s3front.IsStatus(err, http.StatusNotModified):
		if h, herr := b.Posix.HeadObject(detach(ctx), &s3.HeadObjectInput{Bucket: &bucket, Key: &key}); herr == nil && h.LastModified != nil {
			s3front.NotModifiedHeaders(ctx, str(h.ETag), *h.LastModified)
		}
	case partNumber != nil && s3front.IsStatus(err, http.StatusRequestedRangeNotSatisfiable):
		return s3front.ErrPartNumberBeyond(0, int(*partNumber))
	}
	return err
}

// copySourceAnswer turns a copy source's "not modified" into S3's 412.
func copySourceAnswer(err error) error {
	if s3front.IsStatus(err, http.StatusNotModified) {
		return s3err.GetAPIError(s3err.ErrPreconditionFailed)
	}
	return err
}

// copyRange refuses a part copy's source range that ends past the source.
func (b *Backend) copyRange(ctx context.Context, source, rng *string) error {
	if str(rng) == "" {
		return nil
	}
	bucket, key, err := copySourceKey(source)
	if err != nil {
		return err
	}
	// A source that cannot be read is for the copy itself to answer.
	h, err := b.Posix.HeadObject(detach(ctx), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err == nil && h.ContentLength != nil && s3front.RangeBeyond(str(rng), *h.ContentLength) {
		return s3front.ErrInvalidRange(str(rng), *h.ContentLength)
	}
	return nil
}

// copySourceKey is the bucket and key an x-amz-copy-source names.
func copySourceKey(src *string) (string, string, error) {
	bucket, key, _, err := backend.ParseCopySource(str(src))
	return bucket, key, err
}
