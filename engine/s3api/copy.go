package s3api

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// maxCopySource is the largest object CopyObject copies, S3's 5 GiB.
const maxCopySource = 5 << 30

// parseCopySource reads x-amz-copy-source: a URL-encoded bucket/key with
// an optional ?versionId=.
func parseCopySource(v string) (bucket, key, versionID string, err error) {
	bad := func(msg string) error { return s3err.InvalidArgumentNamed(msg, "x-amz-copy-source", v) }
	if v == "" {
		return "", "", "", bad("Copy Source must mention the source bucket and key: sourcebucket/sourcekey.")
	}
	src := strings.TrimPrefix(v, "/")
	src, query, _ := strings.Cut(src, "?")
	decoded, err := url.PathUnescape(src)
	if err != nil {
		return "", "", "", bad("Copy Source is not URL-encoded correctly.")
	}
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return "", "", "", bad("Copy Source is not URL-encoded correctly.")
		}
		versionID = vals.Get("versionId")
	}
	bucket, key, ok := strings.Cut(decoded, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", "", bad("Copy Source must mention the source bucket and key: sourcebucket/sourcekey.")
	}
	return bucket, key, versionID, nil
}

// copySource is a resolved copy source: its handle, its info as clients
// see it, and how to read its bytes.
type copySource struct {
	bucket, key, versionID string
	h                      objlayer.Handle
	info                   objlayer.ObjectInfo
	dek                    []byte
}

// read writes length bytes of the source's plaintext from offset.
func (c *copySource) read(r *request, w io.Writer, offset, length int64) error {
	if c.dek != nil {
		return decryptRange(r, c.h, c.dek, w, offset, length)
	}
	return c.h.WriteRange(r.ctx, w, offset, length)
}

// openCopySource resolves and authorises the request's copy source, and
// checks its x-amz-copy-source-if-* conditions.
func (r *request) openCopySource() (*copySource, error) {
	bucket, key, versionID, err := parseCopySource(r.h("X-Amz-Copy-Source"))
	if err != nil {
		return nil, err
	}
	srcBk, err := r.s.layer.StatBucket(r.ctx, bucket)
	if err != nil {
		return nil, r.s.errFor(err, bucket, key)
	}
	actions := []s3rules.Action{s3rules.ActGetObject}
	if versionID != "" {
		actions = []s3rules.Action{s3rules.ActGetObjectVersion}
	}
	if err := r.allowed(srcBk, key, versionID, actions, s3rules.PermRead, true); err != nil {
		return nil, err
	}
	h, err := r.openVersion(bucket, key, versionID, true)
	var dm *deleteMarkerError
	switch {
	case errors.As(err, &dm) && dm.named:
		return nil, s3err.InvalidRequest.With("The source of a copy request may not specifically refer to a delete marker by version id.")
	case errors.As(err, &dm):
		return nil, s3err.Key(s3err.NoSuchKey, key)
	case err != nil:
		return nil, r.s.errFor(err, bucket, key)
	}
	c := &copySource{bucket: bucket, key: key, versionID: versionID, h: h, info: plainInfo(h.Info())}
	if c.dek, err = r.dataKey(bucket, key, h.Info().Meta, true); err != nil {
		h.Close()
		return nil, err
	}
	if err := s3rules.EvaluateCopySource(r.readConditions("X-Amz-Copy-Source-"), c.info.ETag, c.info.ModTime); err != nil {
		h.Close()
		return nil, err
	}
	return c, nil
}

// errFor maps an object-layer error of another bucket than the request's
// (a copy's source names its own).
func (s *Server) errFor(err error, bucket, key string) error {
	if e := s3err.FromObject(err, bucket, key); e != nil {
		return e
	}
	return err
}

// copyResult is CopyObject's document.
type copyResult struct {
	XMLName           xml.Name `xml:"CopyObjectResult"`
	XMLNS             string   `xml:"xmlns,attr"`
	LastModified      string   `xml:"LastModified"`
	ETag              string   `xml:"ETag"`
	ChecksumType      string   `xml:"ChecksumType,omitempty"`
	ChecksumCRC32     string   `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string   `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string   `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string   `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string   `xml:"ChecksumSHA256,omitempty"`
}

// setChecksum fills a document's checksum field of alg.
func setDocChecksum(alg, v string, crc32, crc32c, crc64, sha1, sha256 *string) {
	switch alg {
	case "CRC32":
		*crc32 = v
	case "CRC32C":
		*crc32c = v
	case "CRC64NVME":
		*crc64 = v
	case "SHA1":
		*sha1 = v
	case "SHA256":
		*sha256 = v
	}
}

// copyObject copies an object (or one version) to another key, or onto
// itself to change its metadata, reading and rewriting its data.
func copyObject(r *request) error {
	if err := s3rules.CheckKey(r.key); err != nil {
		return err
	}
	if r.hr.ContentLength > 0 {
		return s3err.InvalidRequest.With("CopyObject does not take a request body.")
	}
	metaDirective, tagDirective := r.h("X-Amz-Metadata-Directive"), r.h("X-Amz-Tagging-Directive")
	if metaDirective != "" && metaDirective != "COPY" && metaDirective != "REPLACE" {
		return s3err.InvalidArgumentNamed("Unknown metadata directive.", "x-amz-metadata-directive", metaDirective)
	}
	if tagDirective != "" && tagDirective != "COPY" && tagDirective != "REPLACE" {
		return s3err.InvalidArgumentNamed("Unknown tagging directive.", "x-amz-tagging-directive", tagDirective)
	}
	if err := checkRedirect(r.h(objlayer.MetaWebsiteRedirect)); err != nil {
		return err
	}
	wantAlg := strings.ToUpper(r.h("X-Amz-Checksum-Algorithm"))
	if wantAlg != "" {
		if _, ok := s3sig.ChecksumHash(wantAlg); !ok {
			return s3err.InvalidRequest.With("Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]")
		}
	}
	src, err := r.openCopySource()
	if err != nil {
		return err
	}
	defer src.h.Close()
	if src.info.Size > maxCopySource {
		return s3err.InvalidRequest.With("The specified copy source is larger than the maximum allowable size for a copy source: 5368709120")
	}
	dst, err := r.bucketInfo()
	if err != nil {
		return err
	}
	var meta map[string]string
	if metaDirective == "REPLACE" {
		if meta, err = metaFrom(r.header, ""); err != nil {
			return err
		}
		if _, ok := meta[objlayer.MetaContentType]; !ok {
			meta[objlayer.MetaContentType] = "binary/octet-stream"
		}
	} else {
		meta = copyMeta(src.info.Meta)
		for k := range meta {
			if strings.HasPrefix(k, objlayer.MetaChecksumPrefix) {
				delete(meta, k) // recomputed below, over the bytes copied
			}
		}
	}
	if tagDirective == "REPLACE" {
		tags, err := r.writeTags(r.h("X-Amz-Tagging"))
		if err != nil {
			return err
		}
		if tags != "" {
			meta[objlayer.MetaTagging] = tags
		}
	} else if t := src.info.Meta[objlayer.MetaTagging]; t != "" {
		meta[objlayer.MetaTagging] = t
	}
	if err := r.objectACLOnWrite(dst, meta); err != nil {
		return err
	}
	if err := r.lockOnWrite(dst, meta); err != nil {
		return err
	}
	enc, err := r.writeSSE(dst)
	if err != nil {
		return err
	}
	// Copying an object onto itself must change something: its metadata,
	// its tags or its encryption.
	if src.bucket == dst.Name && src.key == r.key && src.versionID == "" && metaDirective != "REPLACE" &&
		tagDirective != "REPLACE" && sameEncryption(src.h.Info().Meta, enc) {
		return s3err.InvalidRequest.With("This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
	}
	// The copy's checksum: the algorithm asked for, else the source's, over
	// the bytes copied (a multipart source's COMPOSITE one describes parts
	// the copy does not have).
	alg := wantAlg
	if alg == "" {
		alg, _ = storedChecksum(src.info.Meta)
	}
	info, err := r.copyData(src, dst, r.key, meta, enc, alg)
	if err != nil {
		return err
	}
	if err := r.notify(dst, notify.ObjectCreatedCopy, r.key, plainInfo(info)); err != nil {
		return err
	}
	r.setHeader("X-Amz-Version-Id", writtenVersionID(info.VersionID))
	if src.versionID != "" {
		r.setHeader("X-Amz-Copy-Source-Version-Id", src.versionID)
	}
	r.setSSEHeaders(info.Meta)
	doc := copyResult{XMLNS: xmlNS, LastModified: isoTime(info.ModTime), ETag: quote(info.ETag)}
	if a, v := storedChecksum(info.Meta); a != "" {
		doc.ChecksumType = checksumType(info.Meta)
		setDocChecksum(a, v, &doc.ChecksumCRC32, &doc.ChecksumCRC32C, &doc.ChecksumCRC64NVME, &doc.ChecksumSHA1, &doc.ChecksumSHA256)
	}
	return r.writeXML(http.StatusOK, doc)
}

// sameEncryption reports whether a version encrypted as meta says would be
// stored the same way by a write encrypting with enc (nil: none).
func sameEncryption(meta map[string]string, enc *sseKey) bool {
	mode := sseMode(meta[metaSSE])
	if enc == nil {
		return mode == ""
	}
	switch {
	case enc.mode != mode:
		return false
	case mode == sseCustomer:
		return enc.keyMD5 == meta[metaSSECMD5]
	case mode == sseKMS:
		return enc.keyID == meta[metaSSEKeyID]
	}
	return true
}

// copyData streams a source's plaintext into a new version of key in dst,
// encrypted with enc when set, with a checksum of alg ("" none) computed
// over it.
func (r *request) copyData(src *copySource, dst objlayer.BucketInfo, key string, meta map[string]string, enc *sseKey, alg string) (objlayer.ObjectInfo, error) {
	plainSize := src.info.Size
	release, err := r.dataSlot(plainSize)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	defer release()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(src.read(r, pw, 0, plainSize)) }()
	defer pr.CloseWithError(io.ErrClosedPipe)
	var body io.Reader = pr
	var sum *hashReader
	if alg != "" {
		h, _ := s3sig.ChecksumHash(alg)
		sum = &hashReader{r: body, h: h}
		body = sum
	}
	opts := objlayer.PutOptions{Meta: meta, VersionID: newVersionID(dst)}
	if sum != nil {
		opts.AfterBody = func(m map[string]string) error {
			m[objlayer.MetaChecksumPrefix+alg] = base64Digest(sum.h.Sum(nil))
			m[objlayer.MetaChecksumType] = s3rules.ChecksumFullObject
			return nil
		}
	}
	storedSize := plainSize
	if enc != nil {
		var err error
		if body, storedSize, opts.BodyETag, err = enc.sealBody(dst.Name, key, body, plainSize, meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	info, err := r.s.layer.PutObject(r.ctx, dst.Name, key, body, storedSize, opts)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	return plainInfo(info), nil
}
