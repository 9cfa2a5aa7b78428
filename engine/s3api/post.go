package s3api

import (
	"encoding/xml"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
	"github.com/strata-storage/strata/engine/s3sig"
)

// Browser form uploads (POST object). The form's fields are read up to
// its file, never past it: its policy and signature are checked, and the
// upload authorised, before a byte of the file is read, and the file then
// streams to storage through the policy's size range and the form's
// checksums, never held whole.

// postResult is the document of a form upload answered 201. S3 sends it
// without a namespace.
type postResult struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

// postObject stores a browser form's file.
func postObject(r *request) error {
	mt, params, err := mime.ParseMediaType(r.h("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return s3err.MalformedPOSTRequest
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	form, err := s3sig.ReadForm(r.hr.Body, params["boundary"], s3sig.FormLimits{})
	if err != nil {
		return err
	}
	r.form = form
	keys, err := r.withSession(form.Fields.Get("x-amz-security-token"))
	if err != nil {
		return err
	}
	a, policy, err := s3sig.VerifyPost(form, r.bucket, keys, r.s.sigOptions())
	if err != nil {
		return err
	}
	r.setIdentity(a, keys.session)
	fields := form.Fields
	key := fields.Get("key")
	if strings.Contains(key, "${filename}") {
		key = strings.ReplaceAll(key, "${filename}", form.FileName)
	}
	if err := s3rules.CheckKey(key); err != nil {
		return err
	}
	if err := r.allowed(bk, key, "", []s3rules.Action{s3rules.ActPutObject}, s3rules.PermWrite, false); err != nil {
		return err
	}
	var tags string
	if doc := fields.Get("tagging"); doc != "" {
		t, err := s3rules.ParseTagging([]byte(doc), s3rules.MaxObjectTags)
		if err != nil {
			return err
		}
		tags = s3rules.EncodeTagQuery(t)
	}
	if err := checkRedirect(fields.Get(objlayer.MetaWebsiteRedirect)); err != nil {
		return err
	}
	meta, err := metaFrom(formHeaders(form), tags)
	if err != nil {
		return err
	}
	if _, ok := meta[objlayer.MetaContentType]; !ok {
		meta[objlayer.MetaContentType] = "binary/octet-stream"
	}
	body, err := form.Payload(policy)
	if err != nil {
		return err
	}
	info, err := r.storeObject(bk, key, meta, body, notify.ObjectCreatedPost)
	if err != nil {
		return err
	}
	r.answerWrite(bk, info)
	location := r.location(key)
	if redirect := fields.Get("success_action_redirect"); redirect != "" {
		if u, err := url.Parse(redirect); err == nil {
			q := u.Query()
			q.Set("bucket", r.bucket)
			q.Set("key", key)
			q.Set("etag", quote(info.ETag))
			u.RawQuery = q.Encode()
			r.setHeader("Location", u.String())
			return r.empty(http.StatusSeeOther)
		}
	}
	r.setHeader("Location", location)
	switch fields.Get("success_action_status") {
	case "200":
		return r.empty(http.StatusOK)
	case "201":
		return r.writeXML(http.StatusCreated, postResult{Location: location, Bucket: r.bucket, Key: key, ETag: quote(info.ETag)})
	}
	return r.empty(http.StatusNoContent)
}

// formHeaders are a form's fields as the headers they stand for.
func formHeaders(form *s3sig.Form) http.Header {
	h := http.Header{}
	for name, v := range form.Fields {
		h[http.CanonicalHeaderKey(name)] = []string{v}
	}
	return h
}

// location is the URL of an object as a form upload's answer names it.
func (r *request) location(key string) string {
	scheme := "http"
	if r.secure() {
		scheme = "https"
	}
	return scheme + "://" + r.hr.Host + "/" + r.bucket + "/" + (&url.URL{Path: key}).EscapedPath()
}
