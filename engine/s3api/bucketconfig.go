package s3api

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strings"

	"github.com/strata-storage/strata/engine/lifecycle"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// A bucket's configuration documents live in its record (objlayer's
// BucketInfo); each is checked here when it is set and enforced where it
// applies.

// setBucket changes the request's bucket's record.
func (r *request) setBucket(fn func(bk *objlayer.BucketInfo)) error {
	defer r.forgetBucket()
	return r.s.layer.UpdateBucket(r.ctx, r.bucket, fn)
}

type versioningDoc struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	XMLNS     string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:"Status,omitempty"`
	MFADelete string   `xml:"MfaDelete,omitempty"`
}

func putBucketVersioning(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc versioningDoc
	if err := xml.Unmarshal(body, &doc); err != nil {
		return s3err.MalformedXML
	}
	if doc.Status != "Enabled" && doc.Status != "Suspended" {
		return s3err.MalformedXML
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if doc.Status == "Suspended" && len(bk.ObjectLock) > 0 {
		// Object lock keeps versions; once on, versioning stays enabled.
		return s3err.InvalidBucketState.With("An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.")
	}
	if doc.Status == "Suspended" && len(bk.Replication) > 0 {
		// Replication copies versions by their IDs.
		return s3err.InvalidBucketState.With("A replication configuration is present on this bucket, so you cannot change the versioning state. Delete it first.")
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Versioning = doc.Status }), http.StatusOK)
}

// finishSet answers a configuration change.
func (r *request) finishSet(err error, status int) error {
	if err != nil {
		return err
	}
	return r.empty(status)
}

func getBucketVersioning(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	return r.writeXML(http.StatusOK, versioningDoc{XMLNS: xmlNS, Status: bk.Versioning})
}

func putBucketTagging(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	tags, err := s3rules.ParseTagging(body, s3rules.MaxBucketTags)
	if err != nil {
		return err
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Tags = tags }), http.StatusNoContent)
}

func getBucketTagging(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if len(bk.Tags) == 0 {
		return s3err.Bucket(s3err.NoSuchTagSet, r.bucket)
	}
	return r.writeXML(http.StatusOK, s3rules.RenderTagging(bk.Tags))
}

func deleteBucketTagging(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Tags = nil }), http.StatusNoContent)
}

type ownershipDoc struct {
	XMLName xml.Name `xml:"OwnershipControls"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	} `xml:"Rule"`
}

func putBucketOwnership(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc ownershipDoc
	if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Rules) != 1 {
		return s3err.MalformedXML
	}
	o := doc.Rules[0].ObjectOwnership
	switch o {
	case "BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter":
	default:
		return s3err.MalformedXML
	}
	if o == "BucketOwnerEnforced" {
		// ACLs go off: one that grants others than the owner would be
		// ignored silently; S3 refuses the change instead.
		bk, err := r.bucketInfo()
		if err != nil {
			return err
		}
		if !r.s.bucketACL(bk).OnlyOwnerFullControl() {
			return s3err.InvalidBucketAclWithOwnership
		}
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Ownership = o }), http.StatusOK)
}

func getBucketOwnership(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if bk.Ownership == "" {
		return s3err.Bucket(s3err.OwnershipControlsNotFound, r.bucket)
	}
	doc := ownershipDoc{XMLNS: xmlNS}
	doc.Rules = append(doc.Rules, struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	}{bk.Ownership})
	return r.writeXML(http.StatusOK, doc)
}

func deleteBucketOwnership(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Ownership = "" }), http.StatusNoContent)
}

// putBucketPolicy checks a policy with the front end's own parser and
// stores it as sent; BlockPublicPolicy refuses a public one.
func putBucketPolicy(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	p, err := s3rules.ParseBucketPolicy(body, r.bucket, r.s.ids)
	if err != nil {
		return err
	}
	if publicAccessBlock(bk).BlockPublicPolicy && p.Public() {
		return s3rules.BlockedBy("BlockPublicPolicy")
	}
	doc := append([]byte(nil), body...)
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Policy = doc }), http.StatusNoContent)
}

func getBucketPolicy(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if len(bk.Policy) == 0 {
		return s3err.Bucket(s3err.NoSuchBucketPolicy, r.bucket)
	}
	return r.writeDoc(http.StatusOK, "application/json", bk.Policy)
}

func deleteBucketPolicy(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Policy = nil }), http.StatusNoContent)
}

type policyStatusDoc struct {
	XMLName  xml.Name `xml:"PolicyStatus"`
	XMLNS    string   `xml:"xmlns,attr"`
	IsPublic bool     `xml:"IsPublic"`
}

// getBucketPolicyStatus answers whether the bucket's policy is public.
func getBucketPolicyStatus(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if len(bk.Policy) == 0 {
		return s3err.Bucket(s3err.NoSuchBucketPolicy, r.bucket)
	}
	p, _ := r.s.bucketPolicy(bk)
	return r.writeXML(http.StatusOK, policyStatusDoc{XMLNS: xmlNS, IsPublic: p != nil && p.Public()})
}

func getBucketACL(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	return r.writeXML(http.StatusOK, s3rules.RenderACL(r.s.bucketACL(bk), r.s.ids))
}

// putBucketACL replaces a bucket's ACL, where its ownership allows ACLs
// and BlockPublicAcls does not refuse it.
func putBucketACL(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	req := s3rules.ReadACLRequest(r.h, body)
	acl, err := req.Build(s3rules.ACLTarget{Owner: r.s.ownerOf(bk)}, r.s.ids)
	switch {
	case err != nil:
		return err
	case acl == nil:
		return s3err.MissingSecurityHeader
	case !s3rules.ACLsEnabled(bk.Ownership) && (!acl.OnlyOwnerFullControl() || req.Canned != "" && req.Canned != "bucket-owner-full-control"):
		// ACLs are off: only the owner's full control, granted as S3
		// allows it then, is accepted.
		return s3err.AccessControlListNotSupported
	case publicAccessBlock(bk).BlockPublicAcls && acl.GrantsPublic():
		return s3rules.BlockedBy("BlockPublicAcls")
	}
	doc := acl.Encode()
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.ACL = doc }), http.StatusOK)
}

func putBucketCors(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	if _, err := s3rules.ParseCORS(body); err != nil {
		return err
	}
	doc := append([]byte(nil), body...)
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.CORS = doc }), http.StatusOK)
}

// getBucketCors answers the bucket's CORS configuration, in S3's namespace
// (the document is rendered again from the stored one).
func getBucketCors(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	c := s3rules.StoredCORS(bk.CORS)
	if c == nil {
		return s3err.Bucket(s3err.NoSuchCORSConfiguration, r.bucket)
	}
	c.XMLNS = xmlNS
	return r.writeXML(http.StatusOK, c)
}

func deleteBucketCors(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.CORS = nil }), http.StatusNoContent)
}

// putObjectLockConfiguration turns object lock on for a bucket whose
// versioning is enabled, or changes its default retention.
func putObjectLockConfiguration(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	doc, err := s3rules.ParseLockConfiguration(body, r.now)
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if bk.Versioning != "Enabled" {
		return s3err.InvalidBucketState.With("Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration")
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.ObjectLock = doc }), http.StatusOK)
}

func getObjectLockConfiguration(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	lock, err := s3rules.StoredLock(bk.ObjectLock)
	if err != nil {
		return err
	}
	if lock == nil {
		return s3err.Bucket(s3err.ObjectLockConfigNotFound, r.bucket)
	}
	return r.writeXML(http.StatusOK, lock.Document())
}

// putBucketEncryption sets a bucket's default encryption; its master key
// must exist.
func putBucketEncryption(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	cfg, err := parseEncryption(body)
	if err != nil {
		return err
	}
	if _, err := r.s.managedKey(cfg.Mode, cfg.KeyID); err != nil {
		return err
	}
	doc, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Encryption = doc }), http.StatusOK)
}

func getBucketEncryption(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	cfg := defaultEncryption(bk)
	if cfg == nil {
		return s3err.Bucket(s3err.ServerSideEncryptionNotFound, r.bucket)
	}
	doc := sseConfiguration{XMLNS: xmlNS, Rules: make([]sseRule, 1)}
	doc.Rules[0].Default.Algorithm, doc.Rules[0].Default.KeyID = string(cfg.Mode), cfg.KeyID
	return r.writeXML(http.StatusOK, doc)
}

func deleteBucketEncryption(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Encryption = nil }), http.StatusNoContent)
}

// lifecycleErrors are the answers to the lifecycle parser's error codes.
var lifecycleErrors = map[string]*s3err.Error{"MalformedXML": s3err.MalformedXML, "InvalidArgument": s3err.InvalidArgument,
	"InvalidRequest": s3err.InvalidRequest, "InvalidStorageClass": s3err.InvalidStorageClass}

// putBucketLifecycle checks a lifecycle document as S3 does and stores it
// in the form engine/lifecycle reads (every rule with an ID).

func putBucketLifecycle(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	cfg, err := lifecycle.Parse(body)
	if err != nil {
		if le := (*lifecycle.Error)(nil); errors.As(err, &le) {
			if e := lifecycleErrors[le.Code]; e != nil {
				return e.With(le.Message)
			}
		}
		return s3err.MalformedXML.Because(err)
	}
	doc := cfg.Marshal()
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Lifecycle = doc }), http.StatusOK)
}

func getBucketLifecycle(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if len(bk.Lifecycle) == 0 {
		return s3err.Bucket(s3err.NoSuchLifecycleConfiguration, r.bucket)
	}
	doc := bk.Lifecycle
	if !strings.HasPrefix(string(doc), "<?xml") {
		doc = append([]byte(xmlHeader), doc...)
	}
	return r.writeDoc(http.StatusOK, "application/xml", doc)
}

func deleteBucketLifecycle(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Lifecycle = nil }), http.StatusNoContent)
}

func putPublicAccessBlock(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	doc, err := s3rules.ParsePublicAccessBlock(body)
	if err != nil {
		return err
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.PublicAccessBlock = doc }), http.StatusOK)
}

func getPublicAccessBlock(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	p := s3rules.StoredPublicAccessBlock(bk.PublicAccessBlock)
	if p == nil {
		return s3err.Bucket(s3err.NoSuchPublicAccessBlock, r.bucket)
	}
	p.XMLNS = xmlNS
	return r.writeXML(http.StatusOK, p)
}

func deletePublicAccessBlock(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.PublicAccessBlock = nil }), http.StatusNoContent)
}
