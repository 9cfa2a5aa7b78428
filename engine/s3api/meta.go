package s3api

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
)

// Keys of a version's metadata map that are the front end's alone
// (objlayer/meta.go names the ones a layer may need).
const (
	metaACL = objlayer.InternalMetaPrefix + "Acl"
	// metaUploadChecksum is an upload's checksum algorithm.
	metaUploadChecksum = objlayer.MetaChecksumAlgorithm
	// metaPartChecksums is a completed object's part checksums, part 1
	// first, separated by spaces.
	metaPartChecksums = objlayer.InternalMetaPrefix + "Part-Checksums"
)

// storedHeaders are the request headers a version keeps and answers.
var storedHeaders = []string{objlayer.MetaContentType, objlayer.MetaContentEncoding, objlayer.MetaContentDisposition,
	objlayer.MetaContentLanguage, objlayer.MetaCacheControl, objlayer.MetaExpires, objlayer.MetaWebsiteRedirect}

// maxUserMeta bounds user metadata (names and values), S3's 2 KiB.
const maxUserMeta = 2 << 10

// metaFrom builds a version's metadata from a request's headers (get
// returns a header's value, "" when absent): the stored headers, user
// metadata (x-amz-meta-*, names in lower case) and the tags (already
// checked, in their stored form).
func metaFrom(h http.Header, tagging string) (map[string]string, error) {
	m := make(map[string]string, 8)
	for _, k := range storedHeaders {
		if v := h.Get(k); v != "" {
			if k == objlayer.MetaContentEncoding {
				v = storedEncoding(v)
				if v == "" {
					continue
				}
			}
			m[k] = v
		}
	}
	size := 0
	for k, vs := range h {
		name, ok := cutPrefixFold(k, objlayer.MetaUserPrefix)
		if !ok || len(vs) == 0 {
			continue
		}
		v := strings.Join(vs, ",")
		if !utf8.ValidString(v) {
			return nil, s3err.InvalidArgument.With("User metadata values must be UTF-8.")
		}
		size += len(name) + len(v)
		m[objlayer.MetaUserPrefix+strings.ToLower(name)] = v
	}
	if size > maxUserMeta {
		return nil, s3err.MetadataTooLarge.Withf("Your metadata headers exceed the maximum allowed metadata size of %d bytes.", maxUserMeta)
	}
	if tagging != "" {
		m[objlayer.MetaTagging] = tagging
	}
	return m, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// storedEncoding is the Content-Encoding an object keeps: the one sent,
// without aws-chunked, which only framed the upload (S3 drops it too).
func storedEncoding(v string) string {
	if !strings.Contains(strings.ToLower(v), "aws-chunked") {
		return v // kept as sent
	}
	var kept []string
	for _, e := range strings.Split(v, ",") {
		if t := strings.TrimSpace(e); t != "" && !strings.EqualFold(t, "aws-chunked") {
			kept = append(kept, t)
		}
	}
	return strings.Join(kept, ", ")
}

// userMeta yields a version's user metadata as headers.
func setUserMeta(h http.Header, meta map[string]string) {
	for k, v := range meta {
		if name, ok := strings.CutPrefix(k, objlayer.MetaUserPrefix); ok {
			h["X-Amz-Meta-"+name] = []string{v}
		}
	}
}

// copyMeta is the metadata a copy starts from: the source's, without what
// the front end and layers keep to themselves and without tags (the
// tagging directive decides those).
func copyMeta(src map[string]string) map[string]string {
	out := make(map[string]string, len(src))
	for k, v := range src {
		if k != objlayer.MetaTagging && !strings.HasPrefix(k, objlayer.InternalMetaPrefix) {
			out[k] = v
		}
	}
	return out
}
