package s3api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// Listings: objects (versions 1 and 2), versions and multipart uploads.

// objectOwners names the owners of a bucket's objects in listings: each
// version's own (its ACL's owner), its bucket's owner by default.
func (r *request) objectOwner(bk objlayer.BucketInfo, meta map[string]string) s3rules.Owner {
	if acl := s3rules.DecodeACL([]byte(meta[metaACL])); acl != nil {
		return s3rules.Named(acl.Owner, r.s.ids)
	}
	return s3rules.Named(r.s.ownerOf(bk), r.s.ids)
}

// listParams are a listing's common parameters.
type listParams struct {
	enc       s3rules.KeyEncoder
	prefix    string
	delimiter string
	maxKeys   int
}

func (r *request) listParams() (listParams, error) {
	enc, err := s3rules.ListingEncoder(r.q("encoding-type"))
	if err != nil {
		return listParams{}, err
	}
	p := listParams{enc: enc, prefix: r.q("prefix"), delimiter: r.q("delimiter"), maxKeys: 1000}
	if v := r.q("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return listParams{}, s3err.InvalidArgumentNamed("Provided max-keys not an integer or within integer range", "max-keys", v)
		}
		p.maxKeys = min(n, 1000)
	}
	return p, nil
}

// listedChecksum is what a listing shows of an object's checksum, as S3
// does for objects stored with one: its algorithm and type.
func listedChecksum(meta map[string]string) (string, string) {
	alg, _ := storedChecksum(meta)
	if alg == "" {
		return "", ""
	}
	return alg, checksumType(meta)
}

// appendObjects renders a page's objects and common prefixes.
func (r *request) appendObjects(b []byte, bk objlayer.BucketInfo, p listParams, res objlayer.ListResult, owners bool) []byte {
	for _, o := range res.Objects {
		o = plainInfo(o)
		b = append(b, "<Contents>"...)
		b = appendText(b, "Key", p.enc.Enc(o.Name))
		b = append(b, "<LastModified>"...)
		b = append(b, isoTime(o.ModTime)...)
		b = append(b, "</LastModified>"...)
		b = appendText(b, "ETag", quote(o.ETag))
		if alg, typ := listedChecksum(o.Meta); alg != "" {
			b = appendText(b, "ChecksumAlgorithm", alg)
			b = appendText(b, "ChecksumType", typ)
		}
		b = appendInt(b, "Size", o.Size)
		if owners {
			own := r.objectOwner(bk, o.Meta)
			b = append(b, "<Owner>"...)
			b = appendText(b, "ID", own.ID)
			b = appendText(b, "DisplayName", own.DisplayName)
			b = append(b, "</Owner>"...)
		}
		b = append(b, "<StorageClass>STANDARD</StorageClass></Contents>"...)
	}
	for _, cp := range res.CommonPrefixes {
		b = append(b, "<CommonPrefixes>"...)
		b = appendText(b, "Prefix", p.enc.Enc(cp))
		b = append(b, "</CommonPrefixes>"...)
	}
	return appendNonEmpty(b, "EncodingType", p.enc.Type())
}

const listBucketResultOpen = xmlHeader + `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`

// listObjectsV1 lists a bucket (version 1).
func listObjectsV1(r *request) error {
	p, err := r.listParams()
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	marker := r.q("marker")
	res, err := r.s.layer.ListObjects(r.ctx, r.bucket, p.prefix, marker, p.delimiter, p.maxKeys)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 512+320*len(res.Objects))
	b = append(b, listBucketResultOpen...)
	b = appendText(b, "Name", r.bucket)
	// Version 1 answers its Prefix as sent, encoding-type or not (clients
	// decode every other field but this one).
	b = appendText(b, "Prefix", p.prefix)
	b = appendText(b, "Marker", p.enc.Enc(marker))
	if res.IsTruncated && p.delimiter != "" {
		b = appendText(b, "NextMarker", p.enc.Enc(res.NextMarker))
	}
	b = appendInt(b, "MaxKeys", int64(p.maxKeys))
	if p.delimiter != "" {
		b = appendText(b, "Delimiter", p.enc.Enc(p.delimiter))
	}
	b = appendBool(b, "IsTruncated", res.IsTruncated)
	b = r.appendObjects(b, bk, p, res, true)
	b = append(b, "</ListBucketResult>"...)
	return r.writeDoc(http.StatusOK, "application/xml", b)
}

// listObjectsV2 lists a bucket (version 2).
func listObjectsV2(r *request) error {
	p, err := r.listParams()
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	startAfter, token := r.q("start-after"), r.q("continuation-token")
	marker := startAfter
	// An empty token is no token (the listing starts over), as the
	// clients that send one expect.
	if token != "" {
		if marker, err = s3rules.DecodeToken(token); err != nil {
			return err
		}
	}
	res, err := r.s.layer.ListObjects(r.ctx, r.bucket, p.prefix, marker, p.delimiter, p.maxKeys)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 512+320*len(res.Objects))
	b = append(b, listBucketResultOpen...)
	b = appendText(b, "Name", r.bucket)
	b = appendText(b, "Prefix", p.enc.Enc(p.prefix))
	if startAfter != "" {
		b = appendText(b, "StartAfter", p.enc.Enc(startAfter))
	}
	if r.has("continuation-token") {
		b = appendText(b, "ContinuationToken", token)
	}
	if res.IsTruncated {
		b = appendText(b, "NextContinuationToken", s3rules.EncodeToken(res.NextMarker))
	}
	b = appendInt(b, "KeyCount", int64(len(res.Objects)+len(res.CommonPrefixes)))
	b = appendInt(b, "MaxKeys", int64(p.maxKeys))
	if p.delimiter != "" {
		b = appendText(b, "Delimiter", p.enc.Enc(p.delimiter))
	}
	b = appendBool(b, "IsTruncated", res.IsTruncated)
	b = r.appendObjects(b, bk, p, res, strings.EqualFold(r.q("fetch-owner"), "true"))
	b = append(b, "</ListBucketResult>"...)
	return r.writeDoc(http.StatusOK, "application/xml", b)
}

// listObjectVersions lists every version and delete marker.
func listObjectVersions(r *request) error {
	p, err := r.listParams()
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	keyMarker, vm := r.q("key-marker"), r.q("version-id-marker")
	var versionMarker *[16]byte
	if vm != "" {
		if keyMarker == "" {
			return s3err.InvalidArgumentNamed("A version-id marker cannot be specified without a key marker.", "version-id-marker", vm)
		}
		if versionMarker, err = parseVersionID(vm); err != nil {
			return err
		}
	}
	res, err := r.s.layer.ListObjectVersions(r.ctx, r.bucket, p.prefix, keyMarker, versionMarker, p.delimiter, p.maxKeys)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 512+400*len(res.Objects))
	b = append(b, xmlHeader+`<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`...)
	b = appendText(b, "Name", r.bucket)
	b = appendText(b, "Prefix", p.enc.Enc(p.prefix))
	b = appendText(b, "KeyMarker", p.enc.Enc(keyMarker))
	b = appendText(b, "VersionIdMarker", vm)
	if res.IsTruncated {
		b = appendText(b, "NextKeyMarker", p.enc.Enc(res.NextMarker))
		b = appendText(b, "NextVersionIdMarker", res.NextVersionMarker)
	}
	b = appendInt(b, "MaxKeys", int64(p.maxKeys))
	if p.delimiter != "" {
		b = appendText(b, "Delimiter", p.enc.Enc(p.delimiter))
	}
	b = appendBool(b, "IsTruncated", res.IsTruncated)
	for _, o := range res.Objects {
		o = plainInfo(o)
		el := "Version"
		if o.DeleteMarker {
			el = "DeleteMarker"
		}
		b = appendOpen(b, el)
		b = appendText(b, "Key", p.enc.Enc(o.Name))
		b = appendText(b, "VersionId", objlayer.FormatVersionID(o.VersionID))
		b = appendBool(b, "IsLatest", o.IsLatest)
		b = appendText(b, "LastModified", isoTime(o.ModTime))
		if !o.DeleteMarker {
			b = appendText(b, "ETag", quote(o.ETag))
			if alg, typ := listedChecksum(o.Meta); alg != "" {
				b = appendText(b, "ChecksumAlgorithm", alg)
				b = appendText(b, "ChecksumType", typ)
			}
			b = appendInt(b, "Size", o.Size)
			b = appendText(b, "StorageClass", "STANDARD")
		}
		own := r.objectOwner(bk, o.Meta)
		b = append(b, "<Owner>"...)
		b = appendText(b, "ID", own.ID)
		b = appendText(b, "DisplayName", own.DisplayName)
		b = append(b, "</Owner>"...)
		b = appendClose(b, el)
	}
	for _, cp := range res.CommonPrefixes {
		b = append(b, "<CommonPrefixes>"...)
		b = appendText(b, "Prefix", p.enc.Enc(cp))
		b = append(b, "</CommonPrefixes>"...)
	}
	b = appendNonEmpty(b, "EncodingType", p.enc.Type())
	b = append(b, "</ListVersionsResult>"...)
	return r.writeDoc(http.StatusOK, "application/xml", b)
}

// listMultipartUploads lists a bucket's uploads in progress.
func listMultipartUploads(r *request) error {
	p, err := r.listParams()
	if err != nil {
		return err
	}
	if p.maxKeys, err = r.maxOf("max-uploads"); err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	keyMarker, idMarker := r.q("key-marker"), r.q("upload-id-marker")
	var after [16]byte
	if idMarker != "" {
		if after, err = objlayer.ParseUploadID(idMarker); err != nil {
			return s3err.InvalidArgumentNamed("Invalid uploadId marker", "upload-id-marker", idMarker)
		}
	}
	res, err := r.s.layer.ListMultipartUploads(r.ctx, r.bucket, p.prefix, keyMarker, after, p.delimiter, p.maxKeys)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 512+400*len(res.Uploads))
	b = append(b, xmlHeader+`<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`...)
	b = appendText(b, "Bucket", r.bucket)
	b = appendText(b, "KeyMarker", p.enc.Enc(keyMarker))
	b = appendText(b, "UploadIdMarker", idMarker)
	if res.IsTruncated {
		b = appendText(b, "NextKeyMarker", p.enc.Enc(res.NextKeyMarker))
		if res.NextUploadID != objlayer.NullVersion {
			b = appendText(b, "NextUploadIdMarker", objlayer.FormatUploadID(res.NextUploadID))
		}
	}
	if p.delimiter != "" {
		b = appendText(b, "Delimiter", p.enc.Enc(p.delimiter))
	}
	if p.prefix != "" {
		b = appendText(b, "Prefix", p.enc.Enc(p.prefix))
	}
	b = appendInt(b, "MaxUploads", int64(p.maxKeys))
	b = appendBool(b, "IsTruncated", res.IsTruncated)
	for _, u := range res.Uploads {
		own := r.objectOwner(bk, u.Meta)
		b = append(b, "<Upload>"...)
		b = appendText(b, "Key", p.enc.Enc(u.Object))
		b = appendText(b, "UploadId", objlayer.FormatUploadID(u.ID))
		for _, el := range []string{"Initiator", "Owner"} {
			b = appendOpen(b, el)
			b = appendText(b, "ID", own.ID)
			b = appendText(b, "DisplayName", own.DisplayName)
			b = appendClose(b, el)
		}
		b = appendText(b, "StorageClass", "STANDARD")
		b = appendText(b, "Initiated", isoTime(u.Initiated))
		if alg := u.Meta[metaUploadChecksum]; alg != "" {
			b = appendText(b, "ChecksumAlgorithm", alg)
			b = appendText(b, "ChecksumType", u.Meta[objlayer.MetaChecksumType])
		}
		b = append(b, "</Upload>"...)
	}
	for _, cp := range res.CommonPrefixes {
		b = append(b, "<CommonPrefixes>"...)
		b = appendText(b, "Prefix", p.enc.Enc(cp))
		b = append(b, "</CommonPrefixes>"...)
	}
	b = appendNonEmpty(b, "EncodingType", p.enc.Type())
	b = append(b, "</ListMultipartUploadsResult>"...)
	return r.writeDoc(http.StatusOK, "application/xml", b)
}
