package s3front

import (
	"net/url"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/s3response"
)

// Keys of a version record's metadata map. System headers keep their HTTP
// names; user metadata is stored under its x-amz-meta- header name; tags as
// their URL-encoded query string; checksums under their x-amz-checksum-
// header names.
const (
	metaContentType        = "Content-Type"
	metaContentEncoding    = "Content-Encoding"
	metaContentDisposition = "Content-Disposition"
	metaContentLanguage    = "Content-Language"
	metaCacheControl       = "Cache-Control"
	metaExpires            = "Expires"
	metaRedirect           = "X-Amz-Website-Redirect-Location"
	metaTagging            = "X-Amz-Tagging"
	metaChecksumType       = "X-Amz-Checksum-Type"
	userMetaPrefix         = "X-Amz-Meta-"
	checksumPrefix         = "X-Amz-Checksum-"
)

// systemHeaders are the stored headers a CopyObject with REPLACE replaces.
type systemHeaders struct {
	ContentType, ContentEncoding, ContentDisposition, ContentLanguage *string
	CacheControl, Expires, WebsiteRedirectLocation                    *string
}

// buildMeta assembles a record's metadata from request headers, user
// metadata and a tagging query string.
func buildMeta(h systemHeaders, user map[string]string, tagging *string) map[string]string {
	m := make(map[string]string, len(user)+4)
	set := func(k string, v *string) {
		if v != nil && *v != "" {
			m[k] = strings.Clone(*v) // request strings are reused (see str)
		}
	}
	set(metaContentType, h.ContentType)
	set(metaContentEncoding, storedEncoding(h.ContentEncoding))
	set(metaContentDisposition, h.ContentDisposition)
	set(metaContentLanguage, h.ContentLanguage)
	set(metaCacheControl, h.CacheControl)
	set(metaExpires, h.Expires)
	set(metaRedirect, h.WebsiteRedirectLocation)
	set(metaTagging, tagging)
	for k, v := range user {
		m[userMetaPrefix+strings.ToLower(k)] = strings.Clone(v)
	}
	return m
}

// storedEncoding is the Content-Encoding an object keeps: the one sent,
// without aws-chunked, which only framed the upload (S3 drops it too).
func storedEncoding(v *string) *string {
	if v == nil {
		return nil
	}
	var kept []string
	dropped := false
	for _, e := range strings.Split(*v, ",") {
		if t := strings.TrimSpace(e); strings.EqualFold(t, "aws-chunked") {
			dropped = true
		} else if t != "" {
			kept = append(kept, t)
		}
	}
	if !dropped {
		return v
	}
	s := strings.Join(kept, ", ")
	return &s
}

// userMeta extracts user metadata (without the prefix) from a record's map.
func userMeta(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, userMetaPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k[len(userMetaPrefix):]] = v
		}
	}
	return out
}

// copyMeta is the metadata of a CopyObject destination: the source's, with
// headers and user metadata replaced when the directive says REPLACE, and
// tags replaced when the tagging directive does.
func copyMeta(src map[string]string, in s3response.CopyObjectInput) map[string]string {
	out := map[string]string{}
	if in.MetadataDirective == types.MetadataDirectiveReplace {
		out = buildMeta(systemHeaders{
			ContentType: in.ContentType, ContentEncoding: in.ContentEncoding,
			ContentDisposition: in.ContentDisposition, ContentLanguage: in.ContentLanguage,
			CacheControl: in.CacheControl, Expires: in.Expires, WebsiteRedirectLocation: in.WebsiteRedirectLocation,
		}, in.Metadata, nil)
	} else {
		for k, v := range src {
			if k != metaTagging && !strings.HasPrefix(k, objlayer.InternalMetaPrefix) {
				out[k] = v
			}
		}
	}
	if in.TaggingDirective == types.TaggingDirectiveReplace {
		if in.Tagging != nil && *in.Tagging != "" {
			out[metaTagging] = *in.Tagging
		}
	} else if t, ok := src[metaTagging]; ok {
		out[metaTagging] = t
	}
	// Checksums describe the bytes, which a copy keeps; not a composite
	// one, which describes parts a copy does not have.
	for k, v := range src {
		if strings.HasPrefix(k, checksumPrefix) && src[metaChecksumType] != string(types.ChecksumTypeComposite) {
			out[k] = v
		}
	}
	return out
}

func metaPtr(m map[string]string, k string) *string {
	if v, ok := m[k]; ok {
		return &v
	}
	return nil
}

// tags decodes a record's tags.
func tags(m map[string]string) (map[string]string, error) {
	q, ok := m[metaTagging]
	if !ok || q == "" {
		return map[string]string{}, nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out, nil
}

// encodeTags renders tags as a query string in key order.
func encodeTags(t map[string]string) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := url.Values{}
	for _, k := range keys {
		vals.Set(k, t[k])
	}
	return vals.Encode()
}

func tagCount(m map[string]string) *int32 {
	t, err := tags(m)
	if err != nil || len(t) == 0 {
		return nil
	}
	n := int32(len(t))
	return &n
}

// checksums returns the stored checksums of a record.
func checksums(m map[string]string) s3response.Checksum {
	var c s3response.Checksum
	c.Type = types.ChecksumType(m[metaChecksumType])
	for alg, dst := range map[types.ChecksumAlgorithm]**string{
		types.ChecksumAlgorithmCrc32: &c.CRC32, types.ChecksumAlgorithmCrc32c: &c.CRC32C,
		types.ChecksumAlgorithmSha1: &c.SHA1, types.ChecksumAlgorithmSha256: &c.SHA256,
		types.ChecksumAlgorithmCrc64nvme: &c.CRC64NVME, types.ChecksumAlgorithmSha512: &c.SHA512,
		types.ChecksumAlgorithmMd5: &c.MD5, types.ChecksumAlgorithmXxhash64: &c.XXHASH64,
		types.ChecksumAlgorithmXxhash3: &c.XXHASH3, types.ChecksumAlgorithmXxhash128: &c.XXHASH128,
	} {
		if v, ok := m[checksumKey(alg)]; ok {
			*dst = &v
			c.Algorithm = alg
		}
	}
	return c
}

func checksumKey(alg types.ChecksumAlgorithm) string {
	return checksumPrefix + strings.ToUpper(string(alg))
}
