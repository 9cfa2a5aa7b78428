package s3front

import (
	"context"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
)

// What a request asks of a bucket's policy: the actions it needs on which
// resources, and its condition keys.

// actionOn is one action a request needs on a bucket or an object.
type actionOn struct {
	action      auth.Action
	bucket, key string
	versionID   string
}

func (a actionOn) resource() string {
	if a.key == "" {
		return auth.ResourceArnPrefix + a.bucket
	}
	return auth.ResourceArnPrefix + a.bucket + "/" + a.key
}

// Sub-resources of a bucket request and the actions they need, by method.
var (
	bucketGets = map[string]auth.Action{
		"location": auth.GetBucketLocationAction, "tagging": auth.GetBucketTaggingAction,
		"ownershipControls": auth.GetBucketOwnershipControlsAction, "versioning": auth.GetBucketVersioningAction,
		"policy": auth.GetBucketPolicyAction, "cors": auth.GetBucketCorsAction,
		"object-lock": auth.GetBucketObjectLockConfigurationAction, "acl": auth.GetBucketAclAction,
		"uploads": auth.ListBucketMultipartUploadsAction, "versions": auth.ListBucketVersionsAction,
		"policyStatus": auth.GetBucketPolicyStatusAction, "encryption": auth.GetEncryptionConfigurationAction,
		"lifecycle": auth.GetLifecycleConfigurationAction, "publicAccessBlock": auth.GetBucketPublicAccessBlockAction,
		"logging": auth.GetBucketLoggingAction, "website": auth.GetBucketWebsiteAction,
		"notification": auth.GetBucketNotificationAction, "replication": auth.GetReplicationConfigurationAction,
	}
	bucketPuts = map[string]auth.Action{
		"acl": auth.PutBucketAclAction, "policy": auth.PutBucketPolicyAction, "tagging": auth.PutBucketTaggingAction,
		"ownershipControls": auth.PutBucketOwnershipControlsAction, "versioning": auth.PutBucketVersioningAction,
		"object-lock": auth.PutBucketObjectLockConfigurationAction, "cors": auth.PutBucketCorsAction,
		"encryption": auth.PutEncryptionConfigurationAction, "lifecycle": auth.PutLifecycleConfigurationAction,
		"publicAccessBlock": auth.PutBucketPublicAccessBlockAction, "logging": auth.PutBucketLoggingAction,
		"website": auth.PutBucketWebsiteAction, "notification": auth.PutBucketNotificationAction,
		"replication": auth.PutReplicationConfigurationAction,
	}
	bucketDeletes = map[string]auth.Action{
		"tagging": auth.PutBucketTaggingAction, "ownershipControls": auth.PutBucketOwnershipControlsAction,
		"policy": auth.DeleteBucketPolicyAction, "cors": auth.PutBucketCorsAction,
		"encryption": auth.PutEncryptionConfigurationAction, "lifecycle": auth.PutLifecycleConfigurationAction,
		"publicAccessBlock": auth.PutBucketPublicAccessBlockAction, "website": auth.DeleteBucketWebsiteAction,
	}
	objectGets = map[string][]auth.Action{
		"tagging":    {auth.GetObjectTaggingAction, auth.GetObjectVersionTaggingAction},
		"retention":  {auth.GetObjectRetentionAction},
		"legal-hold": {auth.GetObjectLegalHoldAction},
		"acl":        {auth.GetObjectAclAction},
		"attributes": {auth.GetObjectAttributesAction, auth.GetObjectVersionAttributesAction},
		"uploadId":   {auth.ListMultipartUploadPartsAction},
	}
	objectPuts = map[string][]auth.Action{
		"tagging":    {auth.PutObjectTaggingAction, auth.PutObjectVersionTaggingAction},
		"retention":  {auth.PutObjectRetentionAction},
		"legal-hold": {auth.PutObjectLegalHoldAction},
		"acl":        {auth.PutObjectAclAction},
	}
	objectDeletes = map[string][]auth.Action{
		"tagging":  {auth.DeleteObjectTaggingAction, auth.DeleteObjectVersionTaggingAction},
		"uploadId": {auth.AbortMultipartUploadAction},
	}
)

// firstOf returns the value for the first query argument of m the request
// names.
func firstOf[V any](q *fasthttp.Args, m map[string]V) (V, bool) {
	for name, v := range m {
		if q.Has(name) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// requestActions are the actions a request needs, on any bucket (a copy
// needs its source's too).
func requestActions(rc *fasthttp.RequestCtx) []actionOn {
	bucket, key := splitBucketPath(decodedPath(rc))
	if bucket == "" {
		return nil
	}
	q := rc.QueryArgs()
	version := string(q.Peek("versionId"))
	on := func(actions ...auth.Action) []actionOn {
		out := make([]actionOn, len(actions))
		for i, a := range actions {
			out[i] = actionOn{action: a, bucket: bucket, key: key, versionID: version}
		}
		return out
	}
	bypass := strings.EqualFold(string(rc.Request.Header.Peek("X-Amz-Bypass-Governance-Retention")), "true")
	m := string(rc.Method())
	if key == "" {
		switch m {
		case http.MethodGet:
			if a, ok := firstOf(q, bucketGets); ok {
				return on(a)
			}
			return on(auth.ListBucketAction)
		case http.MethodHead:
			return on(auth.ListBucketAction)
		case http.MethodPut:
			if a, ok := firstOf(q, bucketPuts); ok {
				return on(a)
			}
			return on(auth.CreateBucketAction)
		case http.MethodDelete:
			if a, ok := firstOf(q, bucketDeletes); ok {
				return on(a)
			}
			return on(auth.DeleteBucketAction)
		case http.MethodPost:
			if q.Has("delete") {
				return deletedObjects(rc, bucket, bypass)
			}
			if k := formKey(rc); k != "" {
				return []actionOn{{action: auth.PutObjectAction, bucket: bucket, key: k}}
			}
		}
		return nil
	}
	var out []actionOn
	switch m {
	case http.MethodGet, http.MethodHead:
		if as, ok := firstOf(q, objectGets); ok {
			return on(as...)
		}
		return on(auth.GetObjectAction, auth.GetObjectVersionAction)
	case http.MethodPut:
		if as, ok := firstOf(q, objectPuts); ok {
			out = on(as...)
			if q.Has("retention") && bypass {
				out = append(out, on(auth.BypassGovernanceRetentionAction)...)
			}
			return out
		}
		out = on(auth.PutObjectAction)
		if src, srcKey, srcVersion, ok := copySource(rc); ok {
			out = append(out, actionOn{action: auth.GetObjectAction, bucket: src, key: srcKey, versionID: srcVersion},
				actionOn{action: auth.GetObjectVersionAction, bucket: src, key: srcKey, versionID: srcVersion})
		}
		return out
	case http.MethodDelete:
		if as, ok := firstOf(q, objectDeletes); ok {
			return on(as...)
		}
		out = on(auth.DeleteObjectAction, auth.DeleteObjectVersionAction)
		if bypass {
			out = append(out, on(auth.BypassGovernanceRetentionAction)...)
		}
		return out
	case http.MethodPost:
		switch {
		case q.Has("restore"):
			return on(auth.RestoreObjectAction)
		case q.Has("select"):
			return on(auth.GetObjectAction)
		}
		return on(auth.PutObjectAction) // create and complete a multipart upload
	}
	return nil
}

// copySource reads x-amz-copy-source: bucket, key and version.
func copySource(rc *fasthttp.RequestCtx) (bucket, key, version string, ok bool) {
	v := string(rc.Request.Header.Peek("X-Amz-Copy-Source"))
	if v == "" {
		return "", "", "", false
	}
	path, query, _ := strings.Cut(v, "?")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	bucket, key = splitBucketPath("/" + strings.TrimPrefix(path, "/"))
	if vals, err := url.ParseQuery(query); err == nil {
		version = vals.Get("versionId")
	}
	return bucket, key, version, bucket != "" && key != ""
}

// deletedObjects are the keys of a DeleteObjects request.
func deletedObjects(rc *fasthttp.RequestCtx, bucket string, bypass bool) []actionOn {
	var doc struct {
		Objects []struct {
			Key       string `xml:"Key"`
			VersionID string `xml:"VersionId"`
		} `xml:"Object"`
	}
	if xml.Unmarshal(rc.Request.Body(), &doc) != nil {
		return nil
	}
	var out []actionOn
	for _, o := range doc.Objects {
		out = append(out, actionOn{action: auth.DeleteObjectAction, bucket: bucket, key: o.Key, versionID: o.VersionID},
			actionOn{action: auth.DeleteObjectVersionAction, bucket: bucket, key: o.Key, versionID: o.VersionID})
		if bypass {
			out = append(out, actionOn{action: auth.BypassGovernanceRetentionAction, bucket: bucket, key: o.Key, versionID: o.VersionID})
		}
	}
	return out
}

// formKey is the key a form upload (POST object) names, once parsed.
func formKey(rc *fasthttp.RequestCtx) string {
	f, err := rc.MultipartForm()
	if err != nil || len(f.Value["key"]) == 0 {
		return ""
	}
	return f.Value["key"][0]
}

// requestConditions is the condition context of a request made by
// principal ("" anonymous), for an action on a: its own keys, and the
// tags of the object it acts on, read only when a condition asks.
func (b *Backend) requestConditions(ctx context.Context, rc *fasthttp.RequestCtx, principal string, root bool, a actionOn) conditionContext {
	h := &rc.Request.Header
	q := rc.QueryArgs()
	now := time.Now().UTC()
	header := func(name string) ([]string, bool) {
		if v := h.Peek(name); len(v) > 0 {
			return []string{string(v)}, true
		}
		return nil, false
	}
	query := func(name string) ([]string, bool) {
		if q.Has(name) {
			return []string{string(q.Peek(name))}, true
		}
		return nil, false
	}
	var tagsRead bool
	var existing map[string]string
	return func(key string) ([]string, bool) {
		switch key {
		case "aws:sourceip":
			return []string{rc.RemoteIP().String()}, true
		case "aws:securetransport":
			return []string{strconv.FormatBool(rc.IsTLS())}, true
		case "aws:currenttime":
			return []string{now.Format(time.RFC3339)}, true
		case "aws:epochtime":
			return []string{strconv.FormatInt(now.Unix(), 10)}, true
		case "aws:useragent":
			return header("User-Agent")
		case "aws:referer":
			return header("Referer")
		case "aws:username", "aws:userid":
			if principal == "" {
				return nil, false
			}
			return []string{principal}, true
		case "aws:principalarn":
			if principal == "" {
				return nil, false
			}
			return []string{"arn:aws:iam:::user/" + principal}, true
		case "aws:principaltype":
			switch {
			case principal == "":
				return []string{"Anonymous"}, true
			case root:
				return []string{"Account"}, true
			}
			return []string{"User"}, true
		case "s3:prefix", "s3:delimiter", "s3:max-keys":
			if v, ok := query(key[len("s3:"):]); ok && v[0] != "" {
				return v, true
			}
			return nil, false
		case "s3:versionid":
			if a.versionID == "" {
				return nil, false
			}
			return []string{a.versionID}, true
		case "s3:x-amz-copy-source":
			if src, srcKey, _, ok := copySource(rc); ok {
				return []string{src + "/" + srcKey}, true
			}
			return nil, false
		case "s3:signatureversion":
			if principal == "" {
				return nil, false
			}
			return []string{"AWS4-HMAC-SHA256"}, true
		case "s3:authtype":
			switch {
			case principal == "":
				return nil, false
			case q.Has("X-Amz-Signature"):
				return []string{"REST-QUERY-STRING"}, true
			}
			return []string{"REST-HEADER"}, true
		case "s3:locationconstraint":
			return nil, false
		case "s3:requestobjecttagkeys":
			t := requestTags(rc)
			if t == nil {
				return nil, false
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			return keys, true
		}
		if name, ok := strings.CutPrefix(key, "s3:"); ok && strings.HasPrefix(name, "x-amz-") {
			return header(name)
		}
		if name, ok := strings.CutPrefix(key, "s3:object-lock-"); ok {
			return header("X-Amz-Object-Lock-" + name)
		}
		if tag, ok := strings.CutPrefix(key, "s3:requestobjecttag/"); ok {
			v, ok := requestTags(rc)[tag]
			return []string{v}, ok
		}
		if tag, ok := strings.CutPrefix(key, "s3:existingobjecttag/"); ok {
			if !tagsRead {
				tagsRead, existing = true, b.objectTags(ctx, a)
			}
			v, ok := existing[tag]
			return []string{v}, ok
		}
		return nil, false
	}
}

// requestTags are the tags a request sets: x-amz-tagging, or the Tagging
// document of a PutObjectTagging (nil when it sets none).
func requestTags(rc *fasthttp.RequestCtx) map[string]string {
	if v := rc.Request.Header.Peek("X-Amz-Tagging"); len(v) > 0 {
		vals, err := url.ParseQuery(string(v))
		if err != nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range vals {
			out[k] = v[0]
		}
		return out
	}
	if !rc.QueryArgs().Has("tagging") || string(rc.Method()) != http.MethodPut {
		return nil
	}
	var doc tagging
	if xml.Unmarshal(rc.Request.Body(), &doc) != nil {
		return nil
	}
	out := map[string]string{}
	for _, t := range doc.Tags {
		out[t.Key] = t.Value
	}
	return out
}

// objectTags are the tags of the version an action acts on (none when it
// cannot be read).
func (b *Backend) objectTags(ctx context.Context, a actionOn) map[string]string {
	if a.key == "" {
		return nil
	}
	h, _, err := b.openVersion(ctx, a.bucket, a.key, a.versionID, false)
	if err != nil {
		return nil
	}
	t, _ := tags(h.Info().Meta)
	return t
}
