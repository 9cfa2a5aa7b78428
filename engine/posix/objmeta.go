package posix

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// A version's metadata map (the front end's, objlayer/meta.go) is kept in
// the attributes versitygw's posix backend defined, so that its readers
// (earlier gateway releases, replicas not yet upgraded) see the same
// object; what it had no place for goes to one attribute of ours.

// Attribute names of the layout (versitygw's unless said otherwise).
const (
	attrETag         = "etag"
	attrChecksums    = "checksums"
	attrMetadata     = "metadata"
	attrLegacyMeta   = "X-Amz-Meta" // then "." and the name: versitygw before the metadata attribute
	attrTagging      = "X-Amz-Tagging"
	attrRetention    = "object-retention"
	attrLegalHold    = "object-legal-hold"
	attrVersionID    = "version-id"
	attrDeleteMarker = "delete-marker"
	attrMPMeta       = "mp-metadata"
	attrObjName      = "objname"
	attrPartCRC      = "part-crc64nvme"

	// attrStrataMeta (ours) holds, as a JSON object, every metadata key
	// the attributes above have no place for: the front end's internal
	// keys (object ACL, SSE key material, part checksums, ...) and values
	// versitygw's encodings cannot hold. Earlier releases ignore it.
	attrStrataMeta = "strata-meta"
	// attrPartChecksum (ours) is a part's checksum as the front end gave
	// it ("ALGORITHM:value").
	attrPartChecksum = "strata-checksum"
)

// headerAttrs are the stored headers, each in an attribute of its own.
var headerAttrs = [...]struct{ key, attr string }{
	{objlayer.MetaContentType, "content-type"},
	{objlayer.MetaContentEncoding, "content-encoding"},
	{objlayer.MetaContentDisposition, "content-disposition"},
	{objlayer.MetaContentLanguage, "content-language"},
	{objlayer.MetaCacheControl, "cache-control"},
	{objlayer.MetaExpires, "expires"},
	{objlayer.MetaWebsiteRedirect, "website-redirect-location"},
}

// metaAttr reports whether an attribute holds part of a version's metadata
// map: what encodeMeta writes, and versitygw's legacy user metadata.
// UpdateObjectMeta rewrites exactly these.
func metaAttr(name string) bool {
	switch name {
	case attrChecksums, attrMetadata, attrTagging, attrRetention, attrLegalHold, attrStrataMeta:
		return true
	}
	for _, h := range headerAttrs {
		if name == h.attr {
			return true
		}
	}
	return strings.HasPrefix(name, attrLegacyMeta)
}

// mpRecord is a completed multipart object's mp-metadata: its upload and
// where each part ends (cumulative sizes), gzip'd JSON on the volume.
type mpRecord struct {
	UploadID string  `json:"uploadId"`
	Parts    []int64 `json:"parts"`
}

func encodeMP(r *mpRecord) []byte {
	js, _ := json.Marshal(r)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return b.Bytes()
}

// decodeMP reads mp-metadata, gzip'd or (as versitygw wrote it once) raw.
func decodeMP(raw []byte) (*mpRecord, bool) {
	js := raw
	if zr, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
		if b, err := io.ReadAll(io.LimitReader(zr, 4<<20)); err == nil {
			js = b
		}
	}
	var r mpRecord
	if json.Unmarshal(js, &r) != nil {
		return nil, false
	}
	return &r, true
}

// parts are the parts of a completed multipart object, numbered from 1 in
// order (the record keeps their ends, not their numbers).
func (r *mpRecord) parts() []objlayer.Part {
	if r == nil || len(r.Parts) == 0 {
		return nil
	}
	out := make([]objlayer.Part, len(r.Parts))
	prev := int64(0)
	for i, end := range r.Parts {
		if end < prev {
			return nil
		}
		out[i] = objlayer.Part{Number: i + 1, Size: end - prev}
		prev = end
	}
	return out
}

// vgwChecksum is versitygw's checksums attribute: its field names and
// order make the JSON byte for byte what versitygw writes and reads.
type vgwChecksum struct {
	Algorithm string
	Type      string

	CRC32, CRC32C, SHA1, SHA256, CRC64NVME, SHA512, MD5, XXHASH64, XXHASH3, XXHASH128 *string
}

// checksumAlgorithms are the algorithms the attribute has a field for, in
// its order.
var checksumAlgorithms = [...]string{"CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME", "SHA512", "MD5", "XXHASH64", "XXHASH3", "XXHASH128"}

// field is the attribute's field of an algorithm (nil: none).
func (c *vgwChecksum) field(alg string) **string {
	switch alg {
	case "CRC32":
		return &c.CRC32
	case "CRC32C":
		return &c.CRC32C
	case "SHA1":
		return &c.SHA1
	case "SHA256":
		return &c.SHA256
	case "CRC64NVME":
		return &c.CRC64NVME
	case "SHA512":
		return &c.SHA512
	case "MD5":
		return &c.MD5
	case "XXHASH64":
		return &c.XXHASH64
	case "XXHASH3":
		return &c.XXHASH3
	case "XXHASH128":
		return &c.XXHASH128
	}
	return nil
}

// encodeMeta turns a version's metadata map into the attributes holding
// it. mp, for a completed multipart object, adds its mp-metadata (which
// also holds objlayer.MetaUploadID). bind names the version the metadata
// belongs to (bindOf), "" for an upload.
func encodeMeta(meta map[string]string, mp *mpRecord, bind string) map[string][]byte {
	out := map[string][]byte{}
	rest := maps.Clone(meta)
	if rest == nil {
		rest = map[string]string{}
	}
	for _, h := range headerAttrs {
		// versitygw stores no empty header; an empty one stays in ours.
		if v, ok := rest[h.key]; ok && v != "" {
			out[h.attr] = []byte(v)
			delete(rest, h.key)
		}
	}
	user := map[string]string{}
	for k, v := range rest {
		if name, ok := strings.CutPrefix(k, objlayer.MetaUserPrefix); ok && name != "" {
			user[name] = v
			delete(rest, k)
		}
	}
	if len(user) > 0 {
		out[attrMetadata], _ = json.Marshal(user)
	}
	if q, ok := rest[objlayer.MetaTagging]; ok {
		if tags, exact := tagsFromQuery(q); tags != nil {
			out[attrTagging], _ = json.Marshal(tags)
			if exact {
				delete(rest, objlayer.MetaTagging)
			}
			// Otherwise the query as given stays in ours too: returned
			// while it still says what the attribute says.
		}
	}
	encodeChecksums(rest, out)
	if v, ok := rest[objlayer.MetaRetention]; ok && retentionReadable(v) {
		out[attrRetention] = []byte(v)
		delete(rest, objlayer.MetaRetention)
	}
	switch rest[objlayer.MetaLegalHold] {
	case "ON":
		out[attrLegalHold] = []byte{1}
		delete(rest, objlayer.MetaLegalHold)
	case "OFF":
		out[attrLegalHold] = []byte{0}
		delete(rest, objlayer.MetaLegalHold)
	}
	if mp != nil {
		r := *mp
		if id, ok := rest[objlayer.MetaUploadID]; ok {
			r.UploadID = id
			delete(rest, objlayer.MetaUploadID)
		}
		out[attrMPMeta] = encodeMP(&r)
	}
	if len(rest) > 0 {
		if bind != "" {
			rest[bindKey] = bind
		}
		out[attrStrataMeta], _ = json.Marshal(rest)
	}
	return out
}

// bindKey, in attrStrataMeta, names the version the attribute was written
// for. In sidecar mode attributes are files beside the data, and
// versitygw (a replica not yet upgraded) overwriting an object leaves the
// attributes it does not know in place: strata-meta (SSE key material
// among them) would then describe another object. A strata-meta bound to
// another ETag and size is ignored. (The size tells an encrypted object
// from its plaintext written over it, which has the same ETag.)
const bindKey = ".bind"

// bindOf is what binds metadata to a version ("" binds nothing: a file
// made through POSIX has no ETag until it is first read).
func bindOf(etag string, size int64) string {
	if etag == "" {
		return ""
	}
	return etag + "/" + strconv.FormatInt(size, 10)
}

// encodeChecksums moves the checksums of meta the attribute can hold into
// it: every value of a known algorithm, the first of them (in the
// attribute's order) as its Algorithm, and the type.
func encodeChecksums(rest map[string]string, out map[string][]byte) {
	var c vgwChecksum
	for _, alg := range checksumAlgorithms {
		v, ok := rest[objlayer.MetaChecksumPrefix+alg]
		if !ok {
			continue
		}
		*c.field(alg) = &v
		if c.Algorithm == "" {
			c.Algorithm = alg
		}
		delete(rest, objlayer.MetaChecksumPrefix+alg)
	}
	if c.Algorithm == "" {
		// An upload's algorithm and type, without a value: versitygw keeps
		// them so, and checks its parts against them.
		alg := rest[objlayer.MetaChecksumAlgorithm]
		if c.field(alg) == nil {
			return // a type without a value stays in ours
		}
		c.Algorithm, c.Type = alg, rest[objlayer.MetaChecksumType]
		delete(rest, objlayer.MetaChecksumAlgorithm)
		delete(rest, objlayer.MetaChecksumType)
		out[attrChecksums], _ = json.Marshal(&c)
		return
	}
	if t, ok := rest[objlayer.MetaChecksumType]; ok {
		c.Type = t
		delete(rest, objlayer.MetaChecksumType)
	}
	out[attrChecksums], _ = json.Marshal(&c)
}

// tagsFromQuery parses tags in URL query form into the attribute's map;
// exact reports whether the map renders back to the same string. nil when
// the query cannot be a map (malformed, a key twice, no tags).
func tagsFromQuery(q string) (map[string]string, bool) {
	vals, err := url.ParseQuery(q)
	if err != nil || len(vals) == 0 {
		return nil, false
	}
	tags := make(map[string]string, len(vals))
	for k, v := range vals {
		if len(v) != 1 {
			return nil, false
		}
		tags[k] = v[0]
	}
	return tags, tagsQuery(tags) == q
}

// tagsQuery renders tags as the front end does: URL query, keys in order.
func tagsQuery(tags map[string]string) string {
	vals := make(url.Values, len(tags))
	for k, v := range tags {
		vals.Set(k, v)
	}
	return vals.Encode()
}

// retentionReadable reports whether versitygw reads a retention document:
// a JSON object whose RetainUntilDate (if any) is an RFC 3339 time.
func retentionReadable(v string) bool {
	var r struct {
		Mode            string
		RetainUntilDate *time.Time
	}
	return json.Unmarshal([]byte(v), &r) == nil
}

// decodeMeta is encodeMeta's inverse over what a volume may hold: ours,
// versitygw's, and versitygw's older forms (user metadata in one
// attribute per key, mp-metadata as raw JSON, retention with XMLName).
// bind is the version's (bindOf; "" for an upload).
func decodeMeta(attrs map[string][]byte, bind string) (map[string]string, *mpRecord) {
	meta := map[string]string{}
	for _, h := range headerAttrs {
		if v, ok := attrs[h.attr]; ok {
			meta[h.key] = string(v)
		}
	}
	if raw, ok := attrs[attrMetadata]; ok {
		var user map[string]string
		if json.Unmarshal(raw, &user) == nil {
			for k, v := range user {
				meta[objlayer.MetaUserPrefix+k] = v
			}
		}
	} else {
		for name, v := range attrs {
			if k, ok := strings.CutPrefix(name, attrLegacyMeta+"."); ok && k != "" {
				meta[objlayer.MetaUserPrefix+k] = string(v)
			}
		}
	}
	var tags map[string]string
	if raw, ok := attrs[attrTagging]; ok && json.Unmarshal(raw, &tags) == nil && len(tags) > 0 {
		meta[objlayer.MetaTagging] = tagsQuery(tags)
	}
	// Every value the checksums attribute holds is reported, with its
	// type. Objects versitygw wrote carry a CRC-64/NVME (FULL_OBJECT) it
	// computed when the client sent no checksum; it is shown like one a
	// client sent, since S3 itself now stores a CRC-64/NVME for every
	// object uploaded without one and answers it (x-amz-checksum-mode),
	// and the value is right for the bytes (a client can verify with it).
	if raw, ok := attrs[attrChecksums]; ok {
		var c vgwChecksum
		if json.Unmarshal(raw, &c) == nil {
			values := false
			for _, alg := range checksumAlgorithms {
				if v := *c.field(alg); v != nil {
					meta[objlayer.MetaChecksumPrefix+alg] = *v
					values = true
				}
			}
			if c.Type != "" {
				meta[objlayer.MetaChecksumType] = c.Type
			}
			if !values && c.field(c.Algorithm) != nil {
				meta[objlayer.MetaChecksumAlgorithm] = c.Algorithm // an upload's
			}
		}
	}
	if raw, ok := attrs[attrRetention]; ok {
		if v, ok := retentionDoc(raw); ok {
			meta[objlayer.MetaRetention] = v
		}
	}
	if raw, ok := attrs[attrLegalHold]; ok && len(raw) == 1 {
		meta[objlayer.MetaLegalHold] = map[bool]string{true: "ON", false: "OFF"}[raw[0] == 1]
	}
	var mp *mpRecord
	if raw, ok := attrs[attrMPMeta]; ok {
		if r, ok := decodeMP(raw); ok {
			mp = r
			if r.UploadID != "" {
				meta[objlayer.MetaUploadID] = r.UploadID
			}
		}
	}
	if raw, ok := attrs[attrStrataMeta]; ok {
		var rest map[string]string
		if json.Unmarshal(raw, &rest) == nil && (rest[bindKey] == "" || rest[bindKey] == bind) {
			delete(rest, bindKey)
			for k, v := range rest {
				if k == objlayer.MetaTagging {
					// Tags the attribute holds are kept here as given
					// while the attribute says the same; tags it cannot
					// hold only here.
					if t, _ := tagsFromQuery(v); (t == nil && tags == nil) || (t != nil && maps.Equal(t, tags)) {
						meta[k] = v
					}
					continue
				}
				if _, named := meta[k]; !named {
					meta[k] = v
				}
			}
		}
	}
	return meta, mp
}

// retentionDoc is a retention attribute as the front end's document
// ({"Mode":...,"RetainUntilDate":...}): as stored, without the XMLName
// versitygw's retention API added.
func retentionDoc(raw []byte) (string, bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(raw, &doc) != nil {
		return "", false
	}
	if _, ok := doc["XMLName"]; !ok {
		return string(raw), true
	}
	delete(doc, "XMLName")
	b, err := json.Marshal(doc)
	return string(b), err == nil
}

// stored is what a version's attributes say about it.
type stored struct {
	meta map[string]string
	// etag is unquoted; "" when the file has none (made through POSIX).
	etag string
	// versionID is all zero for the null version (no version-id).
	versionID [16]byte
	// badID: a version-id that is no version ID (not served by ID).
	badID        bool
	deleteMarker bool
	mp           *mpRecord
}

// decodeObject reads a version's attributes; size is its file's.
func decodeObject(attrs map[string][]byte, size int64) stored {
	var s stored
	s.etag = unquote(string(attrs[attrETag]))
	s.meta, s.mp = decodeMeta(attrs, bindOf(s.etag, size))
	if raw, ok := attrs[attrVersionID]; ok {
		id, err := objlayer.ParseVersionID(string(raw))
		s.versionID, s.badID = id, err != nil
	}
	_, s.deleteMarker = attrs[attrDeleteMarker]
	return s
}

// quote and unquote convert between the ETag the contract carries (hex,
// or hex-N) and the one the volume keeps (in double quotes).
func quote(etag string) []byte { return []byte(`"` + etag + `"`) }

func unquote(etag string) string { return strings.Trim(etag, `"`) }

// versionName is the name a version ID has on the volume: in the
// version-id attribute and as a file in the versions directory. Versions
// are named by ULID strings (the 16 bytes in Crockford base32), the null
// version "null".
func versionName(id [16]byte) string {
	if id == objlayer.NullVersion {
		return "null"
	}
	return objlayer.FormatULID(id)
}
