package s3api

import (
	"net"
	"net/http"
	"path"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// operation is one S3 API: its name (metrics, logs), its handler, and what
// authorising it needs.
type operation struct {
	name   string
	handle func(r *request) error
	// actions are the policy actions the request needs on its bucket (and
	// key); versioned are used instead when the request names a versionId.
	actions, versioned []s3rules.Action
	// perm is the ACL permission that grants it; objectACL: the object's
	// own ACL governs it (reads of an object and of its ACL), else the
	// bucket's.
	perm      s3rules.Permission
	objectACL bool
	// access says how the request is authorised when the common rule
	// (actions on the request's bucket) does not fit: ListBuckets and
	// CreateBucket (no bucket policy yet), and requests that authorise in
	// their handler (DeleteObjects per key, POST forms after their fields).
	access accessRule
	// preflight: a CORS preflight (OPTIONS), answered without credentials.
	preflight bool
	// data: the body is object data, streamed to storage; every other
	// operation's body is a document, read whole within MaxDocument.
	data bool
}

// accessRule is how an operation is authorised.
type accessRule uint8

const (
	accessBucket    accessRule = iota // the request's bucket's policy, ACL and the identity
	accessService                     // any authenticated principal (ListBuckets)
	accessCreate                      // CreateBucket
	accessInHandler                   // the handler authorises (DeleteObjects, forms)
)

func op(name string, handle func(*request) error, perm s3rules.Permission, actions ...s3rules.Action) *operation {
	return &operation{name: name, handle: handle, actions: actions, perm: perm}
}

// versions gives an operation the actions it needs when a version is named.
func (o *operation) versions(actions ...s3rules.Action) *operation {
	o.versioned = actions
	return o
}

func (o *operation) ownACL() *operation {
	o.objectACL = true
	return o
}

func (o *operation) carriesData() *operation {
	o.data = true
	return o
}

func (o *operation) rule(a accessRule) *operation {
	o.access = a
	return o
}

func notImplemented(what string) func(*request) error {
	return func(*request) error {
		return s3err.NotImplemented.With(what + " is not implemented.")
	}
}

// Bucket sub-resources Strata does not implement, answered 501 after
// authentication (as S3 answers an API it lacks), by method.
var unimplementedBucket = []string{"analytics", "intelligent-tiering", "inventory", "logging", "requestPayment",
	"metrics", "accelerate", "website"}

const (
	get, put, del, head, post = http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodPost
)

// Operations, built once.
var (
	opListBuckets   = op("ListBuckets", listBuckets, s3rules.PermRead, s3rules.ActListAllMyBuckets).rule(accessService)
	opCreateBucket  = op("CreateBucket", createBucket, s3rules.PermWrite, s3rules.ActCreateBucket).rule(accessCreate)
	opHeadBucket    = op("HeadBucket", headBucket, s3rules.PermRead, s3rules.ActListBucket)
	opDeleteBucket  = op("DeleteBucket", deleteBucket, s3rules.PermWrite, s3rules.ActDeleteBucket)
	opListObjects   = op("ListObjects", listObjectsV1, s3rules.PermRead, s3rules.ActListBucket)
	opListObjectsV2 = op("ListObjectsV2", listObjectsV2, s3rules.PermRead, s3rules.ActListBucket)
	opListVersions  = op("ListObjectVersions", listObjectVersions, s3rules.PermRead, s3rules.ActListBucketVersions)
	opListUploads   = op("ListMultipartUploads", listMultipartUploads, s3rules.PermRead, s3rules.ActListBucketMultipartUploads)
	opLocation      = op("GetBucketLocation", getBucketLocation, s3rules.PermRead, s3rules.ActGetBucketLocation)
	opDeleteObjects = op("DeleteObjects", deleteObjects, s3rules.PermWrite, s3rules.ActDeleteObject).rule(accessInHandler)
	opPostObject    = op("PostObject", postObject, s3rules.PermWrite, s3rules.ActPutObject).rule(accessInHandler).carriesData()
	opPreflight     = &operation{name: "PreflightRequest", preflight: true}

	bucketPuts = map[string]*operation{
		"tagging":           op("PutBucketTagging", putBucketTagging, s3rules.PermWrite, s3rules.ActPutBucketTagging),
		"ownershipControls": op("PutBucketOwnershipControls", putBucketOwnership, s3rules.PermWrite, s3rules.ActPutBucketOwnershipControls),
		"versioning":        op("PutBucketVersioning", putBucketVersioning, s3rules.PermWrite, s3rules.ActPutBucketVersioning),
		"object-lock":       op("PutObjectLockConfiguration", putObjectLockConfiguration, s3rules.PermWrite, s3rules.ActPutBucketObjectLockConfiguration),
		"cors":              op("PutBucketCors", putBucketCors, s3rules.PermWrite, s3rules.ActPutBucketCORS),
		"policy":            op("PutBucketPolicy", putBucketPolicy, s3rules.PermWrite, s3rules.ActPutBucketPolicy),
		"acl":               op("PutBucketAcl", putBucketACL, s3rules.PermWriteACP, s3rules.ActPutBucketAcl),
		"encryption":        op("PutBucketEncryption", putBucketEncryption, s3rules.PermWrite, s3rules.ActPutEncryptionConfiguration),
		"lifecycle":         op("PutBucketLifecycleConfiguration", putBucketLifecycle, s3rules.PermWrite, s3rules.ActPutLifecycleConfiguration),
		"publicAccessBlock": op("PutPublicAccessBlock", putPublicAccessBlock, s3rules.PermWrite, s3rules.ActPutBucketPublicAccessBlock),
		"notification":      op("PutBucketNotificationConfiguration", putBucketNotification, s3rules.PermWrite, s3rules.ActPutBucketNotification),
		"replication":       op("PutBucketReplication", putBucketReplication, s3rules.PermWrite, s3rules.ActPutReplicationConfiguration),
	}
	bucketGets = map[string]*operation{
		"location":          opLocation,
		"tagging":           op("GetBucketTagging", getBucketTagging, s3rules.PermRead, s3rules.ActGetBucketTagging),
		"ownershipControls": op("GetBucketOwnershipControls", getBucketOwnership, s3rules.PermRead, s3rules.ActGetBucketOwnershipControls),
		"versioning":        op("GetBucketVersioning", getBucketVersioning, s3rules.PermRead, s3rules.ActGetBucketVersioning),
		"policy":            op("GetBucketPolicy", getBucketPolicy, s3rules.PermRead, s3rules.ActGetBucketPolicy),
		"cors":              op("GetBucketCors", getBucketCors, s3rules.PermRead, s3rules.ActGetBucketCORS),
		"object-lock":       op("GetObjectLockConfiguration", getObjectLockConfiguration, s3rules.PermRead, s3rules.ActGetBucketObjectLockConfiguration),
		"acl":               op("GetBucketAcl", getBucketACL, s3rules.PermReadACP, s3rules.ActGetBucketAcl),
		"uploads":           opListUploads,
		"versions":          opListVersions,
		"policyStatus":      op("GetBucketPolicyStatus", getBucketPolicyStatus, s3rules.PermRead, s3rules.ActGetBucketPolicyStatus),
		"encryption":        op("GetBucketEncryption", getBucketEncryption, s3rules.PermRead, s3rules.ActGetEncryptionConfiguration),
		"lifecycle":         op("GetBucketLifecycleConfiguration", getBucketLifecycle, s3rules.PermRead, s3rules.ActGetLifecycleConfiguration),
		"publicAccessBlock": op("GetPublicAccessBlock", getPublicAccessBlock, s3rules.PermRead, s3rules.ActGetBucketPublicAccessBlock),
		"notification":      op("GetBucketNotificationConfiguration", getBucketNotification, s3rules.PermRead, s3rules.ActGetBucketNotification),
		"replication":       op("GetBucketReplication", getBucketReplication, s3rules.PermRead, s3rules.ActGetReplicationConfiguration),
	}
	bucketDeletes = map[string]*operation{
		"tagging":           op("DeleteBucketTagging", deleteBucketTagging, s3rules.PermWrite, s3rules.ActPutBucketTagging),
		"ownershipControls": op("DeleteBucketOwnershipControls", deleteBucketOwnership, s3rules.PermWrite, s3rules.ActPutBucketOwnershipControls),
		"policy":            op("DeleteBucketPolicy", deleteBucketPolicy, s3rules.PermWrite, s3rules.ActDeleteBucketPolicy),
		"cors":              op("DeleteBucketCors", deleteBucketCors, s3rules.PermWrite, s3rules.ActPutBucketCORS),
		"encryption":        op("DeleteBucketEncryption", deleteBucketEncryption, s3rules.PermWrite, s3rules.ActPutEncryptionConfiguration),
		"lifecycle":         op("DeleteBucketLifecycle", deleteBucketLifecycle, s3rules.PermWrite, s3rules.ActPutLifecycleConfiguration),
		"publicAccessBlock": op("DeletePublicAccessBlock", deletePublicAccessBlock, s3rules.PermWrite, s3rules.ActPutBucketPublicAccessBlock),
		"replication":       op("DeleteBucketReplication", deleteBucketReplication, s3rules.PermWrite, s3rules.ActPutReplicationConfiguration),
	}

	opHeadObject = op("HeadObject", headObject, s3rules.PermRead, s3rules.ActGetObject).
			versions(s3rules.ActGetObjectVersion).ownACL()
	opGetObject = op("GetObject", getObject, s3rules.PermRead, s3rules.ActGetObject).
			versions(s3rules.ActGetObjectVersion).ownACL()
	objectGets = []struct {
		query string
		op    *operation
	}{
		{"tagging", op("GetObjectTagging", getObjectTagging, s3rules.PermRead, s3rules.ActGetObjectTagging).versions(s3rules.ActGetObjectVersionTagging)},
		{"retention", op("GetObjectRetention", getObjectRetention, s3rules.PermRead, s3rules.ActGetObjectRetention)},
		{"legal-hold", op("GetObjectLegalHold", getObjectLegalHold, s3rules.PermRead, s3rules.ActGetObjectLegalHold)},
		{"acl", op("GetObjectAcl", getObjectACL, s3rules.PermReadACP, s3rules.ActGetObjectAcl).versions(s3rules.ActGetObjectVersionAcl).ownACL()},
		{"attributes", op("GetObjectAttributes", getObjectAttributes, s3rules.PermRead, s3rules.ActGetObjectAttributes).
			versions(s3rules.ActGetObjectVersionAttributes).ownACL()},
		{"uploadId", op("ListParts", listParts, s3rules.PermRead, s3rules.ActListMultipartUploadParts)},
		{"torrent", op("GetObjectTorrent", notImplemented("The ?torrent sub-resource"), s3rules.PermRead, s3rules.ActGetObject)},
	}
	objectPuts = []struct {
		query string
		op    *operation
	}{
		{"tagging", op("PutObjectTagging", putObjectTagging, s3rules.PermWrite, s3rules.ActPutObjectTagging).versions(s3rules.ActPutObjectVersionTagging)},
		{"retention", op("PutObjectRetention", putObjectRetention, s3rules.PermWrite, s3rules.ActPutObjectRetention)},
		{"legal-hold", op("PutObjectLegalHold", putObjectLegalHold, s3rules.PermWrite, s3rules.ActPutObjectLegalHold)},
		{"acl", op("PutObjectAcl", putObjectACL, s3rules.PermWriteACP, s3rules.ActPutObjectAcl).versions(s3rules.ActPutObjectVersionAcl).ownACL()},
	}
	opUploadPartCopy = op("UploadPartCopy", uploadPartCopy, s3rules.PermWrite, s3rules.ActPutObject)
	opUploadPart     = op("UploadPart", uploadPart, s3rules.PermWrite, s3rules.ActPutObject).carriesData()
	opCopyObject     = op("CopyObject", copyObject, s3rules.PermWrite, s3rules.ActPutObject)
	opPutObject      = op("PutObject", putObject, s3rules.PermWrite, s3rules.ActPutObject).carriesData()

	opDeleteObjectTagging = op("DeleteObjectTagging", deleteObjectTagging, s3rules.PermWrite, s3rules.ActDeleteObjectTagging).
				versions(s3rules.ActDeleteObjectVersionTagging)
	opAbortUpload  = op("AbortMultipartUpload", abortMultipartUpload, s3rules.PermWrite, s3rules.ActAbortMultipartUpload)
	opDeleteObject = op("DeleteObject", deleteObject, s3rules.PermWrite, s3rules.ActDeleteObject).versions(s3rules.ActDeleteObjectVersion)

	opRestore       = op("RestoreObject", notImplemented("RestoreObject"), s3rules.PermWrite, s3rules.ActRestoreObject)
	opSelect        = op("SelectObjectContent", selectObjectContent, s3rules.PermRead, s3rules.ActGetObject)
	opCompleteMPU   = op("CompleteMultipartUpload", completeMultipartUpload, s3rules.PermWrite, s3rules.ActPutObject)
	opCreateMPU     = op("CreateMultipartUpload", createMultipartUpload, s3rules.PermWrite, s3rules.ActPutObject)
	unimplementedOp = map[string]map[string]*operation{}
)

func init() {
	verbs := map[string]string{get: "Get", put: "Put", del: "Delete"}
	for _, sub := range unimplementedBucket {
		for m, verb := range verbs {
			if unimplementedOp[m] == nil {
				unimplementedOp[m] = map[string]*operation{}
			}
			name := verb + "Bucket" + strings.ToUpper(sub[:1]) + sub[1:]
			unimplementedOp[m][sub] = op(name, notImplemented("Bucket "+sub), s3rules.PermWrite)
		}
	}
}

// errCopySourceHere refuses x-amz-copy-source on a request that copies
// nothing.
func errCopySourceHere(r *request) error {
	return s3err.InvalidArgumentNamed("You can only specify a copy source header for copy requests.", "x-amz-copy-source", r.h("X-Amz-Copy-Source"))
}

// firstSub returns the operation of the first sub-resource of subs the
// query names (the table's order; maps have none, so names are checked in
// a fixed list).
func (r *request) firstSub(order []string, m map[string]*operation) *operation {
	for _, name := range order {
		if r.has(name) {
			return m[name]
		}
	}
	return nil
}

var (
	bucketPutOrder    = []string{"tagging", "ownershipControls", "versioning", "object-lock", "cors", "policy", "acl", "encryption", "lifecycle", "publicAccessBlock", "notification", "replication"}
	bucketGetOrder    = []string{"location", "tagging", "ownershipControls", "versioning", "policy", "cors", "object-lock", "acl", "uploads", "versions", "policyStatus", "encryption", "lifecycle", "publicAccessBlock", "notification", "replication"}
	bucketDeleteOrder = []string{"tagging", "ownershipControls", "policy", "cors", "encryption", "lifecycle", "publicAccessBlock", "replication"}
)

// route finds a request's operation from its method, path and query, as
// S3's REST API lays them out (path style: /bucket/key).
func route(r *request) (*operation, error) {
	m := r.hr.Method
	if m == http.MethodOptions {
		if r.bucket == "" {
			return nil, s3err.MethodNotAllowed
		}
		return opPreflight, nil
	}
	copySource := r.h("X-Amz-Copy-Source") != ""
	if r.bucket == "" {
		if m == get {
			if copySource {
				return nil, errCopySourceHere(r)
			}
			return opListBuckets, nil
		}
		return nil, s3err.MethodNotAllowed.Withf("The specified method is not allowed against this resource: %s /.", m)
	}
	if !servableBucketName(r.bucket) {
		return nil, s3err.Bucket(s3err.InvalidBucketName, r.bucket)
	}
	if r.key != "" && !localKey(r.key) {
		return nil, s3err.BadRequest.With("The object key is not a name inside its bucket.")
	}
	if r.key == "" {
		return bucketRoute(r, m, copySource)
	}
	return objectRoute(r, m, copySource)
}

func bucketRoute(r *request, m string, copySource bool) (*operation, error) {
	switch m {
	case put:
		if o := r.firstSub(bucketPutOrder, bucketPuts); o != nil {
			return o, nil
		}
		if o := r.firstSub(unimplementedBucket, unimplementedOp[put]); o != nil {
			return o, nil
		}
		return opCreateBucket, nil
	case head:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		return opHeadBucket, nil
	case del:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		if o := r.firstSub(bucketDeleteOrder, bucketDeletes); o != nil {
			return o, nil
		}
		if o := r.firstSub(unimplementedBucket, unimplementedOp[del]); o != nil {
			return o, nil
		}
		return opDeleteBucket, nil
	case get:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		if o := r.firstSub(bucketGetOrder, bucketGets); o != nil {
			return o, nil
		}
		if o := r.firstSub(unimplementedBucket, unimplementedOp[get]); o != nil {
			return o, nil
		}
		if r.q("list-type") == "2" {
			return opListObjectsV2, nil
		}
		return opListObjects, nil
	case post:
		if copySource && r.has("uploadId") {
			return nil, errCopySourceHere(r)
		}
		if r.has("delete") {
			return opDeleteObjects, nil
		}
		return opPostObject, nil
	}
	return nil, s3err.MethodNotAllowed
}

func objectRoute(r *request, m string, copySource bool) (*operation, error) {
	switch m {
	case head:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		return opHeadObject, nil
	case get:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		if r.has("uploads") || r.has("versions") {
			return nil, s3err.MethodNotAllowed
		}
		for _, s := range objectGets {
			if r.has(s.query) {
				return s.op, nil
			}
		}
		return opGetObject, nil
	case del:
		if copySource {
			return nil, errCopySourceHere(r)
		}
		switch {
		case r.has("tagging"):
			return opDeleteObjectTagging, nil
		case r.has("uploadId"):
			return opAbortUpload, nil
		}
		return opDeleteObject, nil
	case post:
		if copySource && r.has("uploadId") {
			return nil, errCopySourceHere(r)
		}
		switch {
		case r.has("restore"):
			return opRestore, nil
		case r.has("select"):
			return opSelect, nil
		case r.has("uploadId"):
			return opCompleteMPU, nil
		case r.has("uploads"):
			return opCreateMPU, nil
		}
		return nil, s3err.MethodNotAllowed
	case put:
		for _, s := range objectPuts {
			if r.has(s.query) {
				return s.op, nil
			}
		}
		switch up, part := r.has("uploadId"), r.has("partNumber"); {
		case up && part && copySource:
			return opUploadPartCopy, nil
		case up && part:
			return opUploadPart, nil
		case up || part:
			return nil, s3err.InvalidRequest.With("An upload part names both its uploadId and its partNumber.")
		case copySource:
			return opCopyObject, nil
		}
		return opPutObject, nil
	}
	return nil, s3err.MethodNotAllowed
}

// servableBucketName applies the naming rules every request's bucket must
// meet (CreateBucket adds S3's later ones: s3rules.ValidBucketName): 3 to
// 63 lower-case letters, digits, periods and hyphens, a letter or digit at
// each end, and not an IP address.
func servableBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(name)-1 || c != '.' && c != '-') {
			return false
		}
	}
	return net.ParseIP(name) == nil
}

// localKey reports whether a key names something inside its bucket: not
// empty once cleaned, not "." or "..", and not climbing out of it.
func localKey(key string) bool {
	switch path.Clean(key) {
	case ".", "..", "/":
		return false
	}
	c := path.Clean("./" + key)
	return c != ".." && !strings.HasPrefix(c, "../")
}
