package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/s3response"

	"github.com/strata-storage/strata/engine/s3front"
)

// The posix backend keeps where each part of a completed multipart upload
// ends (to serve ?partNumber reads) but does not answer the parts in
// GetObjectAttributes; the gateway reads that record and answers them as
// `strata server` does.

// mpMetaKey is the posix backend's attribute of a completed upload: gzip'd
// JSON {"uploadId": ..., "parts": [end offset of each part]}
// (versitygw v1.8.0, backend/posix).
const mpMetaKey = "mp-metadata"

// partSizes are the part sizes of a completed multipart object, or nil.
func (b *Backend) partSizes(bucket, key string) []int64 {
	raw, err := b.etags.meta.RetrieveAttribute(nil, bucket, key, mpMetaKey)
	if err != nil {
		return nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(zr, 1<<20))
	if err != nil {
		return nil
	}
	var rec struct {
		Parts []int64 `json:"parts"`
	}
	if json.Unmarshal(data, &rec) != nil || len(rec.Parts) == 0 {
		return nil
	}
	sizes, prev := make([]int64, len(rec.Parts)), int64(0)
	for i, end := range rec.Parts {
		if end < prev {
			return nil
		}
		sizes[i], prev = end-prev, end
	}
	return sizes
}

// GetObjectAttributes checks the key first, and answers a multipart
// object's parts.
func (b *Backend) GetObjectAttributes(ctx context.Context, in *s3.GetObjectAttributesInput) (s3response.GetObjectAttributesResponse, error) {
	bucket, key := str(in.Bucket), str(in.Key)
	if err := b.check(bucket, key); err != nil {
		return s3response.GetObjectAttributesResponse{}, err
	}
	out, err := b.Posix.GetObjectAttributes(detach(ctx), in)
	if err != nil || str(in.VersionId) != "" {
		return out, err
	}
	if sizes := b.partSizes(bucket, key); sizes != nil {
		out.ObjectParts = s3front.ObjectPartsPage(ctx, sizes, in.PartNumberMarker, in.MaxParts)
	}
	return out, nil
}
