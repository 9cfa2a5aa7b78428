package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// A version's sub-resources: tags, ACL, retention, legal hold and
// attributes, kept in its metadata (so they heal and move with it).

// updateVersion changes the metadata of the version the request names.
func (r *request) updateVersion(fn func(m map[string]string)) (objlayer.ObjectInfo, error) {
	vid, err := parseVersionID(r.q("versionId"))
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	info, err := r.s.layer.UpdateObjectMeta(r.ctx, r.bucket, r.key, vid, func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		fn(m)
		return m
	})
	if isNotFound(err) && vid != nil {
		return info, s3err.NoSuchVersion.Field("Key", r.key).Field("VersionId", r.q("versionId"))
	}
	return info, err
}

// replicaTags notes a tagging change a replication remote sends.
func (r *request) replicaTags() error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	_, err = r.replicaRequest(bk, s3rules.ActReplicateTags)
	return err
}

// namedVersion answers x-amz-version-id for a request that named one.
func (r *request) namedVersion(info objlayer.ObjectInfo) {
	if r.q("versionId") != "" {
		r.setHeader("X-Amz-Version-Id", objlayer.FormatVersionID(info.VersionID))
	}
}

func getObjectTagging(r *request) error {
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), false)
	if err != nil {
		return err
	}
	info := h.Info()
	h.Close()
	r.namedVersion(info)
	return r.writeXML(http.StatusOK, s3rules.RenderTagging(s3rules.DecodeTagQuery(info.Meta[objlayer.MetaTagging])))
}

func putObjectTagging(r *request) error {
	tags := r.taggingDoc
	if tags == nil {
		body, err := r.document()
		if err != nil {
			return err
		}
		if tags, err = s3rules.ParseTagging(body, s3rules.MaxObjectTags); err != nil {
			return err
		}
	}
	if err := r.replicaTags(); err != nil {
		return err
	}
	info, err := r.updateVersion(func(m map[string]string) {
		if len(tags) == 0 {
			delete(m, objlayer.MetaTagging)
		} else {
			m[objlayer.MetaTagging] = s3rules.EncodeTagQuery(tags)
		}
	})
	if err != nil {
		return err
	}
	if err := r.notifyVersion(notify.ObjectTaggingPut, info); err != nil {
		return err
	}
	r.namedVersion(info)
	return r.empty(http.StatusOK)
}

func deleteObjectTagging(r *request) error {
	if err := r.replicaTags(); err != nil {
		return err
	}
	info, err := r.updateVersion(func(m map[string]string) { delete(m, objlayer.MetaTagging) })
	if err != nil {
		return err
	}
	if err := r.notifyVersion(notify.ObjectTaggingDelete, info); err != nil {
		return err
	}
	r.namedVersion(info)
	return r.empty(http.StatusNoContent)
}

// getObjectACL answers a version's ACL.
func getObjectACL(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), false)
	if err != nil {
		return err
	}
	info := h.Info()
	h.Close()
	r.namedVersion(info)
	return r.writeXML(http.StatusOK, s3rules.RenderACL(r.s.versionACL(bk, info.Meta), r.s.ids))
}

// putObjectACL replaces a version's ACL (its owner stays).
func putObjectACL(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	req := s3rules.ReadACLRequest(r.h, body)
	if !s3rules.ACLsEnabled(bk.Ownership) {
		return s3err.AccessControlListNotSupported
	}
	if publicAccessBlock(bk).BlockPublicAcls && req.Public() {
		return s3rules.BlockedBy("BlockPublicAcls")
	}
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), false)
	if err != nil {
		return err
	}
	current := r.s.versionACL(bk, h.Info().Meta)
	h.Close()
	bucketOwner := r.s.ownerOf(bk)
	acl, err := req.Build(s3rules.ACLTarget{Object: true, Owner: current.Owner, BucketOwner: bucketOwner}, r.s.ids)
	switch {
	case err != nil:
		return err
	case acl == nil:
		return s3err.MissingSecurityHeader
	}
	info, err := r.updateVersion(func(m map[string]string) {
		if acl.Owner == bucketOwner && acl.OnlyOwnerFullControl() {
			delete(m, metaACL)
		} else {
			m[metaACL] = string(acl.Encode())
		}
	})
	if err != nil {
		return err
	}
	if err := r.notifyVersion(notify.ObjectACLPut, info); err != nil {
		return err
	}
	r.namedVersion(info)
	return r.empty(http.StatusOK)
}

// lockedVersion resolves the version a retention or legal-hold call names,
// in a bucket with object lock.
func (r *request) lockedVersion() (objlayer.ObjectInfo, error) {
	bk, err := r.bucketInfo()
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if lock, err := s3rules.StoredLock(bk.ObjectLock); err != nil {
		return objlayer.ObjectInfo{}, err
	} else if lock == nil {
		return objlayer.ObjectInfo{}, s3err.InvalidRequest.With("Bucket is missing Object Lock Configuration")
	}
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), false)
	if err != nil {
		var dm *deleteMarkerError
		if errors.As(err, &dm) {
			return objlayer.ObjectInfo{}, s3err.MethodNotAllowed
		}
		return objlayer.ObjectInfo{}, err
	}
	defer h.Close()
	return h.Info(), nil
}

func getObjectRetention(r *request) error {
	info, err := r.lockedVersion()
	if err != nil {
		return err
	}
	ret := s3rules.StoredRetention(info.Meta[objlayer.MetaRetention])
	if ret == nil {
		return s3err.NoSuchObjectLockConfiguration
	}
	return r.writeXML(http.StatusOK, ret.Document())
}

func putObjectRetention(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	next, err := s3rules.ParseRetention(body, r.now)
	if err != nil {
		return err
	}
	info, err := r.lockedVersion()
	if err != nil {
		return err
	}
	bk, _ := r.bucketInfo()
	old := s3rules.StoredRetention(info.Meta[objlayer.MetaRetention])
	if err := s3rules.CheckRetentionChange(old, next, r.bypass(bk, r.key), r.now); err != nil {
		return err
	}
	if _, err := r.updateVersion(func(m map[string]string) { m[objlayer.MetaRetention] = next.Encode() }); err != nil {
		return err
	}
	return r.empty(http.StatusOK)
}

// legalHoldDoc is S3's LegalHold document.
type legalHoldDoc struct {
	XMLName xml.Name `xml:"LegalHold"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:"Status"`
}

func getObjectLegalHold(r *request) error {
	info, err := r.lockedVersion()
	if err != nil {
		return err
	}
	v := info.Meta[objlayer.MetaLegalHold]
	if v == "" {
		return s3err.NoSuchObjectLockConfiguration
	}
	return r.writeXML(http.StatusOK, legalHoldDoc{XMLNS: xmlNS, Status: v})
}

func putObjectLegalHold(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc legalHoldDoc
	if err := xml.Unmarshal(body, &doc); err != nil || doc.Status != "ON" && doc.Status != "OFF" {
		return s3err.MalformedXML
	}
	if _, err := r.lockedVersion(); err != nil {
		return err
	}
	if _, err := r.updateVersion(func(m map[string]string) { m[objlayer.MetaLegalHold] = doc.Status }); err != nil {
		return err
	}
	return r.empty(http.StatusOK)
}

// objectAttributes are the attributes GetObjectAttributes may ask for.
var objectAttributes = map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}

type objectPart struct {
	PartNumber        int    `xml:"PartNumber"`
	Size              int64  `xml:"Size"`
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
}

type objectParts struct {
	PartsCount           int          `xml:"PartsCount"`
	PartNumberMarker     int          `xml:"PartNumberMarker"`
	NextPartNumberMarker int          `xml:"NextPartNumberMarker"`
	MaxParts             int          `xml:"MaxParts"`
	IsTruncated          bool         `xml:"IsTruncated"`
	Parts                []objectPart `xml:"Part"`
}

type checksumDoc struct {
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type attributesDoc struct {
	XMLName      xml.Name     `xml:"GetObjectAttributesResponse"`
	XMLNS        string       `xml:"xmlns,attr"`
	ETag         string       `xml:"ETag,omitempty"`
	Checksum     *checksumDoc `xml:"Checksum,omitempty"`
	ObjectParts  *objectParts `xml:"ObjectParts,omitempty"`
	StorageClass string       `xml:"StorageClass,omitempty"`
	ObjectSize   *int64       `xml:"ObjectSize,omitempty"`
}

// getObjectAttributes answers the attributes S3 defines for an object:
// those x-amz-object-attributes lists (comma-separated, spaces allowed:
// the AWS SDK for JavaScript sends "ETag, Checksum, ObjectSize").
func getObjectAttributes(r *request) error {
	asked := map[string]bool{}
	for _, v := range r.header.Values("X-Amz-Object-Attributes") {
		for _, a := range strings.Split(v, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			if !objectAttributes[a] {
				return s3err.InvalidArgumentNamed("Invalid attribute name specified.", "x-amz-object-attributes", v)
			}
			asked[a] = true
		}
	}
	if len(asked) == 0 {
		return s3err.InvalidArgument.With("The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	h, err := r.openVersion(r.bucket, r.key, r.q("versionId"), false)
	if err != nil {
		r.markerHeaders(err)
		return err
	}
	raw := h.Info()
	h.Close()
	if _, err := r.dataKey(r.bucket, r.key, raw.Meta, false); err != nil {
		return err
	}
	info := plainInfo(raw)
	bk, _ := r.bucketInfo()
	r.setHeader("X-Amz-Version-Id", versionIDOut(info.VersionID, bk.Versioning))
	r.setHeader("Last-Modified", httpTime(info.ModTime))
	doc := attributesDoc{XMLNS: xmlNS}
	if asked["ETag"] {
		doc.ETag = info.ETag
	}
	if asked["StorageClass"] {
		doc.StorageClass = "STANDARD"
	}
	if asked["ObjectSize"] {
		doc.ObjectSize = &info.Size
	}
	if alg, v := storedChecksum(info.Meta); asked["Checksum"] && alg != "" {
		doc.Checksum = &checksumDoc{ChecksumType: checksumType(info.Meta)}
		setDocChecksum(alg, v, &doc.Checksum.ChecksumCRC32, &doc.Checksum.ChecksumCRC32C, &doc.Checksum.ChecksumCRC64NVME,
			&doc.Checksum.ChecksumSHA1, &doc.Checksum.ChecksumSHA256)
	}
	if asked["ObjectParts"] && len(info.Parts) > 0 {
		doc.ObjectParts = r.partsPage(info)
	}
	return r.writeXML(http.StatusOK, doc)
}

// partsPage is GetObjectAttributes' page of a multipart object's parts
// after x-amz-part-number-marker, at most x-amz-max-parts (default 1,000).
func (r *request) partsPage(info objlayer.ObjectInfo) *objectParts {
	limit := 1000
	if n, err := strconv.Atoi(r.h("X-Amz-Max-Parts")); err == nil && n > 0 {
		limit = min(n, 1000)
	}
	after, _ := strconv.Atoi(r.h("X-Amz-Part-Number-Marker"))
	page := &objectParts{PartsCount: len(info.Parts), PartNumberMarker: after, MaxParts: limit}
	for i := max(after, 0); i < len(info.Parts); i++ {
		if len(page.Parts) == limit {
			page.IsTruncated = true
			break
		}
		p := objectPart{PartNumber: i + 1, Size: info.Parts[i].Size}
		if sums := partChecksumOf(info.Meta, i+1); sums != nil {
			alg, v := storedChecksum(sums)
			setDocChecksum(alg, v, &p.ChecksumCRC32, &p.ChecksumCRC32C, &p.ChecksumCRC64NVME, &p.ChecksumSHA1, &p.ChecksumSHA256)
		}
		page.Parts = append(page.Parts, p)
		page.NextPartNumberMarker = i + 1
	}
	return page
}
