package s3api

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// maxDeleteKeys is the most keys one DeleteObjects request may name.
const maxDeleteKeys = 1000

// deleteMode is how a DELETE without version ID behaves in a bucket.
func deleteMode(versioning string) objlayer.DeleteMode {
	switch versioning {
	case "Enabled":
		return objlayer.DeleteVersioned
	case "Suspended":
		return objlayer.DeleteSuspended
	}
	return objlayer.DeleteUnversioned
}

// bypass is whether the request may override a GOVERNANCE retention on
// key: it asked (x-amz-bypass-governance-retention) and may (root, or
// s3:BypassGovernanceRetention granted).
func (r *request) bypass(bk objlayer.BucketInfo, key string) s3rules.Bypass {
	if !strings.EqualFold(r.h("X-Amz-Bypass-Governance-Retention"), "true") {
		return s3rules.NoBypass
	}
	if r.allowed(bk, key, "", []s3rules.Action{s3rules.ActBypassGovernanceRetention}, "", false) == nil {
		return s3rules.BypassGranted
	}
	return s3rules.BypassAsked
}

// deleteConditions are a DELETE's x-amz-if-match-* headers (and If-Match).
func (r *request) deleteConditions() (s3rules.DeleteConditions, error) {
	var c s3rules.DeleteConditions
	c.IfMatch = r.hp("If-Match")
	if v := r.h("X-Amz-If-Match-Last-Modified-Time"); v != "" {
		if t, ok := s3rules.ParseHTTPDate(v); ok {
			c.IfMatchModTime = &t
		}
	}
	if v := r.h("X-Amz-If-Match-Size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return c, s3err.InvalidArgumentNamed("x-amz-if-match-size must be an integer.", "x-amz-if-match-size", v)
		}
		c.IfMatchSize = &n
	}
	return c, nil
}

// deleteResult is what deleting one key did.
type deleteResult struct {
	versionID    string
	deleteMarker bool
}

// deleteOne deletes a key or one of its versions, after its conditions
// and its lock allow it.
func (r *request) deleteOne(bk objlayer.BucketInfo, key, versionID string, cond s3rules.DeleteConditions, bypass s3rules.Bypass) (deleteResult, error) {
	if err := s3rules.CheckKey(key); err != nil {
		return deleteResult{}, err
	}
	vid, err := parseVersionID(versionID)
	if err != nil {
		return deleteResult{}, err
	}
	mode := deleteMode(bk.Versioning)
	if r.replica && vid == nil && r.h(replicate.HeaderVersionID) != "" {
		// A replica of the source's delete marker, with its version ID.
		id, err := r.replicaVersion(bk)
		if err != nil {
			return deleteResult{}, err
		}
		if err := r.checkReplicaVersion(bk, id, true, -1); err != nil {
			if held := (*errReplicaHeld)(nil); errors.As(err, &held) {
				return deleteResult{deleteMarker: true, versionID: versionIDOut(id, bk.Versioning)}, nil
			}
			return deleteResult{}, err
		}
		mctx := r.ctx
		if v := r.h(replicate.HeaderModTime); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return deleteResult{}, s3err.InvalidArgumentNamed("Invalid replica modification time", replicate.HeaderModTime, v)
			}
			mctx = objlayer.WithModTime(r.ctx, t)
		}
		res, err := r.s.layer.DeleteObject(mctx, bk.Name, key, &id, objlayer.DeleteMarkerAs)
		if err != nil {
			return deleteResult{}, err
		}
		if err := r.notify(bk, notify.ObjectRemovedDeleteMarker, key, objlayer.ObjectInfo{VersionID: res.VersionID}); err != nil {
			return deleteResult{}, err
		}
		return deleteResult{deleteMarker: true, versionID: versionIDOut(res.VersionID, bk.Versioning)}, nil
	}
	// A delete that removes a version (one named, or the null version an
	// unversioned or suspended bucket replaces) must pass its conditions
	// and its lock; one that adds a delete marker removes nothing.
	if cond.Any() || vid != nil || mode != objlayer.DeleteVersioned {
		h, err := r.s.layer.OpenObjectMeta(r.ctx, bk.Name, key, vid)
		switch {
		case isNotFound(err) && cond.Any():
			return deleteResult{}, s3err.Key(s3err.NoSuchKey, key)
		case err == nil:
			info := h.Info()
			h.Close()
			if cond.Any() {
				if err := s3rules.EvaluateDelete(cond, info.ETag, info.ModTime, info.Size); err != nil {
					return deleteResult{}, err
				}
			}
			removes := vid != nil || mode == objlayer.DeleteUnversioned ||
				mode == objlayer.DeleteSuspended && info.VersionID == objlayer.NullVersion
			if removes && !info.DeleteMarker {
				ret := s3rules.StoredRetention(info.Meta[objlayer.MetaRetention])
				if err := s3rules.CheckRemoval(ret, info.Meta[objlayer.MetaLegalHold] == "ON", bypass, r.now); err != nil {
					return deleteResult{}, err
				}
			}
		case !isNotFound(err):
			return deleteResult{}, err
		}
	}
	res, err := r.s.layer.DeleteObject(r.ctx, bk.Name, key, vid, mode)
	if err != nil {
		return deleteResult{}, err
	}
	out := deleteResult{deleteMarker: res.DeleteMarker}
	if vid != nil || res.DeleteMarker && bk.Versioning != "" {
		out.versionID = versionIDOut(res.VersionID, bk.Versioning)
	}
	event := notify.ObjectRemovedDelete
	if res.DeleteMarker && vid == nil {
		event = notify.ObjectRemovedDeleteMarker
	}
	if err := r.notify(bk, event, key, objlayer.ObjectInfo{VersionID: res.VersionID}); err != nil {
		return deleteResult{}, err
	}
	return out, nil
}

// deleteObject deletes an object or one version.
func deleteObject(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	cond, err := r.deleteConditions()
	if err != nil {
		return err
	}
	if _, err := r.replicaRequest(bk, s3rules.ActReplicateDelete); err != nil {
		return err
	}
	res, err := r.deleteOne(bk, r.key, r.q("versionId"), cond, r.bypass(bk, r.key))
	if err != nil {
		return err
	}
	r.setHeader("X-Amz-Version-Id", res.versionID)
	if res.deleteMarker {
		r.setHeader("X-Amz-Delete-Marker", "true")
	}
	return r.empty(http.StatusNoContent)
}

// deleteRequest is DeleteObjects' document.
type deleteRequest struct {
	Quiet   bool `xml:"Quiet"`
	Objects []struct {
		Key              string `xml:"Key"`
		VersionID        string `xml:"VersionId"`
		ETag             string `xml:"ETag"`
		LastModifiedTime string `xml:"LastModifiedTime"`
		Size             *int64 `xml:"Size"`
	} `xml:"Object"`
}

type deletedEntry struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

type deleteResultDoc struct {
	XMLName xml.Name       `xml:"DeleteResult"`
	XMLNS   string         `xml:"xmlns,attr"`
	Deleted []deletedEntry `xml:"Deleted"`
	Errors  []deleteError  `xml:"Error"`
}

// deleteObjects deletes up to 1,000 keys, each authorised, checked and
// answered on its own.
func deleteObjects(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc deleteRequest
	if err := xml.Unmarshal(body, &doc); err != nil || len(doc.Objects) == 0 {
		return s3err.MalformedXML
	}
	if len(doc.Objects) > maxDeleteKeys {
		return s3err.MalformedXML.Withf("A DeleteObjects request names at most %d keys.", maxDeleteKeys)
	}
	out := deleteResultDoc{XMLNS: xmlNS}
	for _, o := range doc.Objects {
		action := s3rules.ActDeleteObject
		if o.VersionID != "" {
			action = s3rules.ActDeleteObjectVersion
		}
		fail := func(err error) {
			e := r.toS3(err)
			out.Errors = append(out.Errors, deleteError{Key: o.Key, VersionID: o.VersionID, Code: e.Code, Message: e.Message})
		}
		if err := r.allowed(bk, o.Key, o.VersionID, []s3rules.Action{action}, s3rules.PermWrite, false); err != nil {
			fail(err)
			continue
		}
		cond := s3rules.DeleteConditions{IfMatchSize: o.Size}
		if o.ETag != "" {
			etag := o.ETag
			cond.IfMatch = &etag
		}
		if o.LastModifiedTime != "" {
			if t, ok := s3rules.ParseHTTPDate(o.LastModifiedTime); ok {
				cond.IfMatchModTime = &t
			}
		}
		res, err := r.deleteOne(bk, o.Key, o.VersionID, cond, r.bypass(bk, o.Key))
		if err != nil {
			if errors.Is(err, errStopped) {
				return err
			}
			fail(err)
			continue
		}
		if doc.Quiet {
			continue
		}
		d := deletedEntry{Key: o.Key, VersionID: o.VersionID}
		if res.deleteMarker {
			d.DeleteMarker = true
			d.DeleteMarkerVersionID = res.versionID
			if o.VersionID != "" {
				d.DeleteMarkerVersionID = o.VersionID
			}
		}
		out.Deleted = append(out.Deleted, d)
	}
	return r.writeXML(http.StatusOK, out)
}
