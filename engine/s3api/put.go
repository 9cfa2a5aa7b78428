package s3api

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// newVersionID is the ID of a new version in a bucket whose versioning is
// enabled (time-ordered: objlayer.PutOptions), the null version otherwise.
func newVersionID(bk objlayer.BucketInfo) [16]byte {
	if bk.Versioning == "Enabled" {
		return uuid.Must(uuid.NewV7())
	}
	return objlayer.NullVersion
}

// checkRedirect checks x-amz-website-redirect-location as S3 does.
func checkRedirect(v string) error {
	if v == "" || strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "/") {
		return nil
	}
	return s3err.InvalidRedirectLocation
}

// writeTags reads a write's x-amz-tagging (or a form's tagging field) in
// its stored form ("" for none).
func (r *request) writeTags(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	tags, err := s3rules.ParseTagQuery(v)
	if err != nil {
		return "", err
	}
	return s3rules.EncodeTagQuery(tags), nil
}

// putConditions evaluates a write's If-Match / If-None-Match against the
// current object. Without locks this is a check, then a write: two
// conditional writers racing may both pass (docs/engine.md).
func (r *request) putConditions(bucket, key string) error {
	cond := r.writeCondition()
	if cond == nil {
		return nil
	}
	h, err := r.s.layer.OpenObjectMeta(r.ctx, bucket, key, nil)
	switch {
	case err == nil:
		info := h.Info()
		h.Close()
		return cond(&info)
	case !isNotFound(err):
		return err
	}
	return cond(nil)
}

// writeCondition is the request's If-Match / If-None-Match as a condition
// on the key's current version (nil without them): checked when the
// request arrives (putConditions, before its body is read) and again by
// the layer as it commits (objlayer.PutOptions.Condition), so a write
// that lands meanwhile is seen.
func (r *request) writeCondition() func(*objlayer.ObjectInfo) error {
	ifMatch, ifNoneMatch := r.hp("If-Match"), r.hp("If-None-Match")
	if ifMatch == nil && ifNoneMatch == nil {
		return nil
	}
	return func(cur *objlayer.ObjectInfo) error {
		if cur == nil || cur.DeleteMarker {
			return s3rules.EvaluateWrite(ifMatch, ifNoneMatch, "", false)
		}
		return s3rules.EvaluateWrite(ifMatch, ifNoneMatch, cur.ETag, true)
	}
}

// lockOnWrite adds a new version's retention and legal hold to its
// metadata: those the request asks for (headers, or a form's fields),
// else the bucket's default retention. Asking for any of them in a bucket
// without object lock is refused, as S3 refuses it.
func (r *request) lockOnWrite(bk objlayer.BucketInfo, meta map[string]string) error {
	get := r.sseParam // headers, or a form's fields
	mode, until, hold := get("X-Amz-Object-Lock-Mode"), get("X-Amz-Object-Lock-Retain-Until-Date"), get("X-Amz-Object-Lock-Legal-Hold")
	switch {
	case until != "" && mode == "":
		return s3err.InvalidArgument.With("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	case until == "" && mode != "":
		return s3err.InvalidArgument.With("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	case mode != "" && mode != s3rules.ModeGovernance && mode != s3rules.ModeCompliance:
		return s3err.InvalidArgumentNamed("Unknown wormMode directive.", "x-amz-object-lock-mode", mode)
	case hold != "" && hold != "ON" && hold != "OFF":
		return s3err.InvalidArgumentNamed("Legal Hold must be either of 'ON' or 'OFF'", "x-amz-object-lock-legal-hold", hold)
	}
	var untilTime time.Time
	if until != "" {
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return s3err.InvalidArgumentNamed("The retain until date must be provided in ISO 8601 format", "x-amz-object-lock-retain-until-date", until)
		}
		if !t.After(r.now) {
			return s3err.InvalidArgumentNamed("The retain until date must be in the future!", "x-amz-object-lock-retain-until-date", until)
		}
		untilTime = t.UTC()
	}
	lock, err := s3rules.StoredLock(bk.ObjectLock)
	if err != nil {
		return err
	}
	if lock == nil {
		if mode != "" || hold != "" {
			return s3err.InvalidRequest.With("Bucket is missing Object Lock Configuration")
		}
		return nil
	}
	if hold != "" {
		meta[objlayer.MetaLegalHold] = hold
	}
	switch {
	case mode != "":
		meta[objlayer.MetaRetention] = s3rules.Retention{Mode: mode, RetainUntilDate: &untilTime}.Encode()
	default:
		if ret := lock.NewVersionRetention(r.now); ret != nil {
			meta[objlayer.MetaRetention] = ret.Encode()
		}
	}
	return nil
}

// objectACLOnWrite sets, in the metadata of a version the request writes
// (PUT, copy, multipart upload, form), the ACL and owner the request and
// the bucket's object ownership give it:
//
//   - BucketOwnerEnforced: the bucket's owner owns it and ACLs are off; a
//     request asking for any ACL but bucket-owner-full-control is refused
//     with AccessControlListNotSupported;
//   - BucketOwnerPreferred: the bucket's owner owns it when the request
//     says bucket-owner-full-control, else its writer;
//   - ObjectWriter, or no ownership controls: its writer owns it.
//
// A version owned by its bucket's owner with an owner-only ACL keeps
// nothing (what a version without metaACL means).
func (r *request) objectACLOnWrite(bk objlayer.BucketInfo, meta map[string]string) error {
	delete(meta, metaACL) // never carried over from a copy's source
	bucketOwner := r.s.ownerOf(bk)
	req := s3rules.ReadACLRequest(r.sseParam, nil)
	if !s3rules.ACLsEnabled(bk.Ownership) {
		acl, err := req.Build(s3rules.ACLTarget{Object: true, Owner: bucketOwner, BucketOwner: bucketOwner}, r.s.ids)
		ok := err == nil && (acl == nil || acl.OnlyOwnerFullControl() && (req.Canned == "" || req.Canned == "bucket-owner-full-control"))
		if !ok {
			return s3err.AccessControlListNotSupported
		}
		return nil
	}
	if pab := publicAccessBlock(bk); pab.BlockPublicAcls && req.Public() {
		return s3rules.BlockedBy("BlockPublicAcls")
	}
	owner := r.access
	if owner == "" || r.root && r.access == r.s.cfg.RootAccess && bk.Owner == "" ||
		bk.Ownership == "BucketOwnerPreferred" && req.Canned == "bucket-owner-full-control" {
		owner = bucketOwner
	}
	acl, err := req.Build(s3rules.ACLTarget{Object: true, Owner: owner, BucketOwner: bucketOwner}, r.s.ids)
	if err != nil {
		return err
	}
	if acl == nil {
		a := s3rules.OwnerOnly(owner)
		acl = &a
	}
	if owner != bucketOwner || !acl.OnlyOwnerFullControl() {
		meta[metaACL] = string(acl.Encode())
	}
	return nil
}

// afterBody records, once the body was read to its end, the checksum the
// payload verified or computed.
func afterBody(p *s3sig.Payload) func(map[string]string) error {
	return func(m map[string]string) error {
		if alg, v := p.Checksum(); alg != "" {
			m[objlayer.MetaChecksumPrefix+alg] = v
			m[objlayer.MetaChecksumType] = s3rules.ChecksumFullObject
		}
		return nil
	}
}

// maxPutSize is the largest object a single PUT writes.
func (s *Server) maxPutSize() int64 {
	if s.cfg.MaxPutSize > 0 && s.cfg.MaxPutSize < objlayer.MaxPutSize {
		return s.cfg.MaxPutSize
	}
	return objlayer.MaxPutSize
}

func (s *Server) entityTooLarge() error {
	return s3err.EntityTooLarge.Withf("Your proposed upload exceeds the maximum allowed object size of %d bytes: upload it in parts.", s.maxPutSize())
}

// putObject stores an object.
func putObject(r *request) error {
	if err := s3rules.CheckKey(r.key); err != nil {
		return err
	}
	if r.h("Content-Length") == "" && r.hr.ContentLength < 0 && r.h("X-Amz-Decoded-Content-Length") == "" {
		return s3err.MissingContentLength
	}
	tooLarge := r.contentLength() > r.s.maxPutSize()
	// A replication remote copies a multipart version of any size in one
	// PUT: its replica headers are checked once the bucket is known.
	if tooLarge && r.h(replicate.HeaderVersionID) == "" {
		return r.s.entityTooLarge()
	}
	tags, err := r.writeTags(r.h("X-Amz-Tagging"))
	if err != nil {
		return err
	}
	if err := checkRedirect(r.h(objlayer.MetaWebsiteRedirect)); err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if tooLarge {
		if is, err := r.replicaRequest(bk, s3rules.ActReplicateObject); err != nil {
			return err
		} else if !is || r.contentLength() > objlayer.MaxObjectSize {
			return r.s.entityTooLarge()
		}
	}
	if err := r.putConditions(r.bucket, r.key); err != nil {
		return err
	}
	meta, err := metaFrom(r.header, tags)
	if err != nil {
		return err
	}
	if _, ok := meta[objlayer.MetaContentType]; !ok {
		meta[objlayer.MetaContentType] = "binary/octet-stream"
	}
	info, err := r.storeObject(bk, r.key, meta, nil, notify.ObjectCreatedPut)
	if err != nil {
		return err
	}
	r.answerWrite(bk, info)
	return r.empty(http.StatusOK)
}

// storeObject writes the request's body as a new version of key: its ACL,
// lock and encryption as the request and bucket give them, and its event
// (a notification) stored before it answers. body is nil for the
// request's own payload (a form passes its file).
func (r *request) storeObject(bk objlayer.BucketInfo, key string, meta map[string]string, body *s3sig.Payload, event string) (objlayer.ObjectInfo, error) {
	if err := r.objectACLOnWrite(bk, meta); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if err := r.lockOnWrite(bk, meta); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	enc, err := r.writeSSE(bk)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if body == nil {
		if body, err = r.payload(); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	src := r.tracked(body)
	size := body.Size()
	opts := objlayer.PutOptions{Meta: meta, AfterBody: afterBody(body), VersionID: newVersionID(bk), Condition: r.writeCondition()}
	if err := r.replicaWrite(bk, &opts, r.contentLength()); err != nil {
		if held := (*errReplicaHeld)(nil); errors.As(err, &held) {
			return held.info, nil // a replica sent again
		}
		return objlayer.ObjectInfo{}, err
	}
	events := r.withEvents(bk, event, key, &opts)
	if enc != nil {
		if src, size, opts.BodyETag, err = enc.sealBody(bk.Name, key, src, size, meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	} else if body.HashesMD5() {
		// The payload checks a Content-MD5 with the body's MD5: that is
		// the ETag, and the layer need not hash the body a second time.
		opts.BodyETag = func() string { return hex.EncodeToString(body.MD5()) }
	}
	r.keepReplicaETag(&opts)
	release, err := r.dataSlot(size)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	defer release()
	if enc == nil {
		src = events.keepBody(src, size)
	}
	info, err := r.s.layer.PutObject(r.ctx, bk.Name, key, src, size, opts)
	if err != nil {
		events.snapshot(r.s, bk.Name, key, nil)
		return objlayer.ObjectInfo{}, r.writeError(err)
	}
	plain := plainInfo(info)
	return plain, r.notified(bk, events, key, plain)
}

// writeError is the answer to a failed write: the payload's own answer (a
// mismatched checksum, a slow or short body) wins over what the layer
// made of it.
func (r *request) writeError(err error) error {
	if e, ok := s3err.As(err); ok {
		return e
	}
	if isBodyError(err) {
		return r.readError(err)
	}
	return err
}

// answerWrite sets a write's answer headers: ETag, version, checksum,
// encryption and expiration.
func (r *request) answerWrite(bk objlayer.BucketInfo, info objlayer.ObjectInfo) {
	r.setHeader("Etag", quote(info.ETag))
	r.setHeader("X-Amz-Version-Id", writtenVersionID(info.VersionID))
	setChecksumHeaders(r.w.Header(), info.Meta)
	r.setSSEHeaders(info.Meta)
	r.setExpiration(bk, info)
}

// setChecksumHeaders answers a version's checksum.
func setChecksumHeaders(h http.Header, meta map[string]string) {
	for k, v := range meta {
		if k == objlayer.MetaChecksumType {
			continue
		}
		if alg, ok := strings.CutPrefix(k, objlayer.MetaChecksumPrefix); ok {
			h[http.CanonicalHeaderKey("x-amz-checksum-"+strings.ToLower(alg))] = []string{v}
			h["X-Amz-Checksum-Type"] = []string{checksumType(meta)}
		}
	}
}

// checksumType is a version's checksum type (FULL_OBJECT unless stored).
func checksumType(meta map[string]string) string {
	if t := meta[objlayer.MetaChecksumType]; t != "" {
		return t
	}
	return s3rules.ChecksumFullObject
}

// storedChecksum is a version's checksum: its algorithm and value ("" for
// none).
func storedChecksum(meta map[string]string) (string, string) {
	for k, v := range meta {
		if k == objlayer.MetaChecksumType {
			continue
		}
		if alg, ok := strings.CutPrefix(k, objlayer.MetaChecksumPrefix); ok {
			return alg, v
		}
	}
	return "", ""
}

// base64Digest renders a digest as checksums carry it.
func base64Digest(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
