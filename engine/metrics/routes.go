package metrics

import (
	"github.com/valyala/fasthttp"
)

// A route names the S3 API of the requests it matches: the method, whether
// the path names an object (else a bucket; the service has its own case),
// query arguments that must be present, one that must have a value, and
// whether X-Amz-Copy-Source must be present.
type route struct {
	method     string
	object     bool
	query      []string
	queryValue [2]string
	copySource bool
	name       string
}

// unknown is the name of requests the front end routes to no API.
const unknown = "Unknown"

func r(method string, object bool, name string, query ...string) route {
	return route{method: method, object: object, query: query, name: name}
}

// routes mirrors the front end's router (versitygw's s3api/router.go) in
// its order: the first route that matches names the request. The table
// test (routes_test.go) sends a request for every route to that router and
// checks the API it reports, and that every S3 API it knows has a route.
var routes = []route{
	// Buckets.
	r("PUT", false, "PutBucketTagging", "tagging"),
	r("PUT", false, "PutBucketOwnershipControls", "ownershipControls"),
	r("PUT", false, "PutBucketVersioning", "versioning"),
	r("PUT", false, "PutObjectLockConfiguration", "object-lock"),
	r("PUT", false, "PutBucketCors", "cors"),
	r("PUT", false, "PutBucketPolicy", "policy"),
	r("PUT", false, "PutBucketAcl", "acl"),
	r("PUT", false, "PutBucketAnalyticsConfiguration", "analytics"),
	r("PUT", false, "PutBucketEncryption", "encryption"),
	r("PUT", false, "PutBucketIntelligentTieringConfiguration", "intelligent-tiering"),
	r("PUT", false, "PutBucketInventoryConfiguration", "inventory"),
	r("PUT", false, "PutBucketLifecycleConfiguration", "lifecycle"),
	r("PUT", false, "PutBucketLogging", "logging"),
	r("PUT", false, "PutBucketRequestPayment", "requestPayment"),
	r("PUT", false, "PutBucketMetricsConfiguration", "metrics"),
	r("PUT", false, "PutBucketReplication", "replication"),
	r("PUT", false, "PutPublicAccessBlock", "publicAccessBlock"),
	r("PUT", false, "PutBucketNotificationConfiguration", "notification"),
	r("PUT", false, "PutBucketAccelerateConfiguration", "accelerate"),
	r("PUT", false, "PutBucketWebsite", "website"),
	r("PUT", false, "CreateBucket"),
	{method: "HEAD", copySource: true, name: unknown},
	r("HEAD", false, "HeadBucket"),
	{method: "DELETE", copySource: true, name: unknown},
	r("DELETE", false, "DeleteBucketTagging", "tagging"),
	r("DELETE", false, "DeleteBucketOwnershipControls", "ownershipControls"),
	r("DELETE", false, "DeleteBucketPolicy", "policy"),
	r("DELETE", false, "DeleteBucketCors", "cors"),
	r("DELETE", false, "DeleteBucketAnalyticsConfiguration", "analytics"),
	r("DELETE", false, "DeleteBucketEncryption", "encryption"),
	r("DELETE", false, "DeleteBucketIntelligentTieringConfiguration", "intelligent-tiering"),
	r("DELETE", false, "DeleteBucketInventoryConfiguration", "inventory"),
	r("DELETE", false, "DeleteBucketLifecycle", "lifecycle"),
	r("DELETE", false, "DeleteBucketMetricsConfiguration", "metrics"),
	r("DELETE", false, "DeleteBucketReplication", "replication"),
	r("DELETE", false, "DeletePublicAccessBlock", "publicAccessBlock"),
	r("DELETE", false, "DeleteBucketWebsite", "website"),
	r("DELETE", false, "DeleteBucket"),
	{method: "GET", copySource: true, name: unknown},
	r("GET", false, "GetBucketLocation", "location"),
	r("GET", false, "GetBucketTagging", "tagging"),
	r("GET", false, "GetBucketOwnershipControls", "ownershipControls"),
	r("GET", false, "GetBucketVersioning", "versioning"),
	r("GET", false, "GetBucketPolicy", "policy"),
	r("GET", false, "GetBucketCors", "cors"),
	r("GET", false, "GetObjectLockConfiguration", "object-lock"),
	r("GET", false, "GetBucketAcl", "acl"),
	r("GET", false, "ListMultipartUploads", "uploads"),
	r("GET", false, "ListObjectVersions", "versions"),
	r("GET", false, "GetBucketPolicyStatus", "policyStatus"),
	r("GET", false, "GetBucketAnalyticsConfiguration", "analytics", "id"),
	r("GET", false, "ListBucketAnalyticsConfigurations", "analytics"),
	r("GET", false, "GetBucketEncryption", "encryption"),
	r("GET", false, "GetBucketIntelligentTieringConfiguration", "intelligent-tiering", "id"),
	r("GET", false, "ListBucketIntelligentTieringConfigurations", "intelligent-tiering"),
	r("GET", false, "GetBucketInventoryConfiguration", "inventory", "id"),
	r("GET", false, "ListBucketInventoryConfigurations", "inventory"),
	r("GET", false, "GetBucketLifecycleConfiguration", "lifecycle"),
	r("GET", false, "GetBucketLogging", "logging"),
	r("GET", false, "GetBucketRequestPayment", "requestPayment"),
	r("GET", false, "GetBucketMetricsConfiguration", "metrics", "id"),
	r("GET", false, "ListBucketMetricsConfigurations", "metrics"),
	r("GET", false, "GetBucketReplication", "replication"),
	r("GET", false, "GetPublicAccessBlock", "publicAccessBlock"),
	r("GET", false, "GetBucketNotificationConfiguration", "notification"),
	r("GET", false, "GetBucketAccelerateConfiguration", "accelerate"),
	r("GET", false, "GetBucketWebsite", "website"),
	{method: "GET", queryValue: [2]string{"list-type", "2"}, name: "ListObjectsV2"},
	r("GET", false, "ListObjects"),
	{method: "POST", query: []string{"uploadId"}, copySource: true, name: unknown},
	r("POST", false, "DeleteObjects", "delete"),
	r("POST", false, "PostObject"),
	// Objects.
	{method: "HEAD", object: true, copySource: true, name: unknown},
	r("HEAD", true, "HeadObject"),
	r("GET", true, unknown, "uploads"),
	r("GET", true, unknown, "versions"),
	{method: "GET", object: true, copySource: true, name: unknown},
	r("GET", true, "GetObjectTagging", "tagging"),
	r("GET", true, "GetObjectRetention", "retention"),
	r("GET", true, "GetObjectLegalHold", "legal-hold"),
	r("GET", true, "GetObjectAcl", "acl"),
	r("GET", true, "GetObjectAttributes", "attributes"),
	r("GET", true, "ListParts", "uploadId"),
	r("GET", true, "GetObject"),
	{method: "DELETE", object: true, copySource: true, name: unknown},
	r("DELETE", true, "DeleteObjectTagging", "tagging"),
	r("DELETE", true, "AbortMultipartUpload", "uploadId"),
	r("DELETE", true, "DeleteObject"),
	{method: "POST", object: true, query: []string{"uploadId"}, copySource: true, name: unknown},
	r("POST", true, "RestoreObject", "restore"),
	{method: "POST", object: true, query: []string{"select"}, queryValue: [2]string{"select-type", "2"}, name: "SelectObjectContent"},
	r("POST", true, "CompleteMultipartUpload", "uploadId"),
	r("POST", true, "CreateMultipartUpload", "uploads"),
	r("PUT", true, "PutObjectTagging", "tagging"),
	r("PUT", true, "PutObjectRetention", "retention"),
	r("PUT", true, "PutObjectLegalHold", "legal-hold"),
	r("PUT", true, "PutObjectAcl", "acl"),
	{method: "PUT", object: true, query: []string{"uploadId", "partNumber"}, copySource: true, name: "UploadPartCopy"},
	r("PUT", true, "UploadPart", "uploadId", "partNumber"),
	r("PUT", true, unknown, "partNumber"),
	r("PUT", true, unknown, "uploadId"),
	{method: "PUT", object: true, copySource: true, name: "CopyObject"},
	r("PUT", true, "PutObject"),
}

func (rt *route) matches(method string, object bool, q *fasthttp.Args, copySource bool) bool {
	if rt.method != method || rt.object != object || (rt.copySource && !copySource) {
		return false
	}
	for _, k := range rt.query {
		if !q.Has(k) {
			return false
		}
	}
	return rt.queryValue[0] == "" || string(q.Peek(rt.queryValue[0])) == rt.queryValue[1]
}

// APIName names the S3 API a request calls, from its method, path and
// query (and whether it names a copy source), as the front end routes it.
func APIName(method, path string, q *fasthttp.Args, copySource bool) string {
	bucket, object := splitPath(path)
	if bucket == "" {
		if method == "GET" {
			return "ListBuckets"
		}
		return unknown
	}
	if method == "OPTIONS" {
		return "Options"
	}
	for i := range routes {
		if routes[i].matches(method, object != "", q, copySource) {
			return routes[i].name
		}
	}
	return unknown
}
