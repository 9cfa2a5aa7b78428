package engine

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestBuckets(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	for _, name := range []string{"zeta", "alpha", "media-01"} {
		mustCreateBucket(t, c, name)
	}
	// us-east-1 answers its owner's re-creating a bucket with success.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("alpha")}); err != nil {
		t.Fatalf("re-creating one's own bucket: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("alpha")}); err != nil {
		t.Fatalf("head bucket: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("missing")}); err == nil {
		t.Fatal("head of a missing bucket succeeded")
	}
	out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, *b.Name)
	}
	if !slices.Equal(names, []string{"alpha", "media-01", "zeta"}) {
		t.Fatalf("buckets: %v", names)
	}
	loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("alpha")})
	if err != nil {
		t.Fatalf("location: %v", err)
	}
	_ = loc

	// Versioning on, suspended.
	v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("alpha")})
	if err != nil || v.Status != "" {
		t.Fatalf("new bucket versioning: %q %v", v.Status, err)
	}
	for _, st := range []types.BucketVersioningStatus{types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended} {
		if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("alpha"),
			VersioningConfiguration: &types.VersioningConfiguration{Status: st}}); err != nil {
			t.Fatal(err)
		}
		v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("alpha")})
		if err != nil || v.Status != st {
			t.Fatalf("versioning %s: got %q %v", st, v.Status, err)
		}
	}

	// Delete: refused while not empty, then gone.
	put(t, c, "zeta", "k", []byte("x"))
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("zeta")}); errCode(err) != "BucketNotEmpty" {
		t.Fatalf("delete non-empty bucket: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("zeta"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("zeta")}); err != nil {
		t.Fatalf("delete empty bucket: %v", err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("zeta")}); errCode(err) != "NoSuchBucket" {
		t.Fatalf("delete deleted bucket: %v", err)
	}
	// Bucket tagging.
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String("alpha"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("media")}}}}); err != nil {
		t.Fatal(err)
	}
	bt, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String("alpha")})
	if err != nil || len(bt.TagSet) != 1 || *bt.TagSet[0].Value != "media" {
		t.Fatalf("bucket tags: %+v %v", bt, err)
	}
}

func TestObjectsAcrossSizesAndRanges(t *testing.T) {
	t.Parallel()
	for _, drives := range []int{4, 6} {
		t.Run(fmt.Sprintf("%d drives", drives), func(t *testing.T) {
			s := startServer(t, serverOpts{drives: drives})
			c := s.aws()
			mustCreateBucket(t, c, "bkt")
			for _, size := range []int{0, 1, 4096, 128 << 10, 128<<10 + 1, 1 << 20, 5<<20 + 3} {
				data := randomBytes(size)
				key := fmt.Sprintf("obj-%d", size)
				p := put(t, c, "bkt", key, data)
				if got := get(t, c, "bkt", key); !bytes.Equal(got, data) {
					t.Fatalf("size %d: bytes differ", size)
				}
				h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: &key})
				if err != nil || *h.ContentLength != int64(size) || *h.ETag != *p.ETag {
					t.Fatalf("size %d: head %+v %v", size, h, err)
				}
				if size < 10 {
					continue
				}
				for _, r := range [][2]int{{0, 0}, {1, 9}, {size / 3, size/3 + size/4}, {size - 5, size - 1}} {
					out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: &key,
						Range: aws.String(fmt.Sprintf("bytes=%d-%d", r[0], r[1]))})
					if err != nil {
						t.Fatalf("size %d range %v: %v", size, r, err)
					}
					b, _ := io.ReadAll(out.Body)
					out.Body.Close()
					if !bytes.Equal(b, data[r[0]:r[1]+1]) || *out.ContentRange != fmt.Sprintf("bytes %d-%d/%d", r[0], r[1], size) {
						t.Fatalf("size %d range %v: wrong bytes or Content-Range %q", size, r, *out.ContentRange)
					}
				}
				// Suffix range.
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: &key, Range: aws.String("bytes=-7")})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(out.Body)
				out.Body.Close()
				if !bytes.Equal(b, data[size-7:]) {
					t.Fatalf("size %d suffix range: wrong bytes", size)
				}
			}
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("obj-4096"), Range: aws.String("bytes=5000-6000")})
			if errCode(err) != "InvalidRange" {
				t.Fatalf("unsatisfiable range: %v", err)
			}
			if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("nope")}); errCode(err) != "NoSuchKey" {
				t.Fatalf("missing key: %v", err)
			}
			if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nobucket"), Key: aws.String("k")}); errCode(err) != "NoSuchBucket" {
				t.Fatalf("missing bucket: %v", err)
			}
		})
	}
}

func TestMetadataHeadersAndTags(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	_, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("bkt"), Key: aws.String("doc.txt"), Body: strings.NewReader("hello"),
		ContentType: aws.String("text/plain"), CacheControl: aws.String("max-age=60"), ContentDisposition: aws.String("inline"),
		ContentEncoding: aws.String("identity"), ContentLanguage: aws.String("en"),
		Metadata: map[string]string{"Owner": "alice", "project": "strata"}, Tagging: aws.String("a=1&b=two"),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt")})
	if err != nil {
		t.Fatal(err)
	}
	if *h.ContentType != "text/plain" || *h.CacheControl != "max-age=60" || *h.ContentDisposition != "inline" ||
		*h.ContentLanguage != "en" || h.Metadata["owner"] != "alice" || h.Metadata["project"] != "strata" {
		t.Fatalf("headers not kept: %+v", h)
	}
	tags, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt")})
	if err != nil || len(tags.TagSet) != 2 {
		t.Fatalf("tags from PUT: %+v %v", tags, err)
	}
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatal(err)
	}
	tags, _ = c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt")})
	if len(tags.TagSet) != 1 || *tags.TagSet[0].Key != "k" {
		t.Fatalf("replaced tags: %+v", tags.TagSet)
	}
	if got := get(t, c, "bkt", "doc.txt"); string(got) != "hello" {
		t.Fatalf("tagging changed the data: %q", got)
	}
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt")}); err != nil {
		t.Fatal(err)
	}
	tags, _ = c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("doc.txt")})
	if len(tags.TagSet) != 0 {
		t.Fatalf("tags after delete: %+v", tags.TagSet)
	}
}

func TestCopyObject(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "src")
	mustCreateBucket(t, c, "dst")
	for _, size := range []int{100, 300 << 10} {
		data := randomBytes(size)
		key := fmt.Sprintf("o%d", size)
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: &key, Body: bytes.NewReader(data),
			ContentType: aws.String("application/x-test"), Metadata: map[string]string{"color": "blue"}})
		if err != nil {
			t.Fatal(err)
		}
		// COPY keeps the metadata.
		if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: &key, CopySource: aws.String("src/" + key)}); err != nil {
			t.Fatal(err)
		}
		h, _ := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("dst"), Key: &key})
		if h.Metadata["color"] != "blue" || *h.ContentType != "application/x-test" {
			t.Fatalf("COPY directive lost metadata: %+v", h.Metadata)
		}
		if got := get(t, c, "dst", key); !bytes.Equal(got, data) {
			t.Fatal("copied bytes differ")
		}
		// REPLACE onto itself changes metadata only.
		if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("src"), Key: &key, CopySource: aws.String("src/" + key),
			MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"color": "red"}, ContentType: aws.String("text/x-new")}); err != nil {
			t.Fatal(err)
		}
		h, _ = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("src"), Key: &key})
		if h.Metadata["color"] != "red" || *h.ContentType != "text/x-new" {
			t.Fatalf("REPLACE directive: %+v %s", h.Metadata, *h.ContentType)
		}
		if got := get(t, c, "src", key); !bytes.Equal(got, data) {
			t.Fatal("bytes changed by a metadata REPLACE")
		}
	}
	// Copy onto itself without changes is refused.
	_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("src"), Key: aws.String("o100"), CopySource: aws.String("src/o100")})
	if errCode(err) != "InvalidRequest" {
		t.Fatalf("self copy without changes: %v", err)
	}
	_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("x"), CopySource: aws.String("src/missing")})
	if errCode(err) != "NoSuchKey" {
		t.Fatalf("copy of a missing source: %v", err)
	}
}

func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	p := put(t, c, "bkt", "k", []byte("v1"))
	etag := *p.ETag
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), IfMatch: aws.String(etag)}); err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), IfMatch: aws.String(`"nope"`)}); errCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with another ETag: %v", err)
	}
	_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), IfNoneMatch: aws.String(etag)})
	if errCode(err) != "NotModified" && !strings.Contains(fmt.Sprint(err), "304") {
		t.Fatalf("If-None-Match with the current ETag: %v", err)
	}
	past := time.Now().Add(-time.Hour)
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), IfModifiedSince: &past}); err != nil {
		t.Fatalf("If-Modified-Since before the write: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), IfUnmodifiedSince: &past}); errCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Unmodified-Since before the write: %v", err)
	}
	// Conditional writes: create-only, and compare-and-swap.
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v2"), IfNoneMatch: aws.String("*")})
	if errCode(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match: * over an existing object: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("new"), Body: strings.NewReader("n"), IfNoneMatch: aws.String("*")}); err != nil {
		t.Fatalf("If-None-Match: * on a new key: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v2"), IfMatch: aws.String(etag)}); err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if got := get(t, c, "bkt", "k"); string(got) != "v2" {
		t.Fatalf("after a conditional overwrite: %q", got)
	}
}

func TestDeleteObjectsAndVersions(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	for i := 0; i < 5; i++ {
		put(t, c, "bkt", fmt.Sprintf("k%d", i), []byte("x"))
	}
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("k0")}, {Key: aws.String("k1")}, {Key: aws.String("never")},
	}}})
	if err != nil || len(out.Deleted) != 3 || len(out.Errors) != 0 {
		t.Fatalf("delete objects: %+v %v", out, err)
	}
	l, _ := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt")})
	if len(l.Contents) != 3 {
		t.Fatalf("after deleting 2 of 5: %d objects", len(l.Contents))
	}

	mustCreateBucket(t, c, "ver")
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("ver"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	v1 := put(t, c, "ver", "doc", []byte("one"))
	v2 := put(t, c, "ver", "doc", []byte("two"))
	if v1.VersionId == nil || v2.VersionId == nil || *v1.VersionId == *v2.VersionId {
		t.Fatalf("version IDs: %v %v", v1.VersionId, v2.VersionId)
	}
	del, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc")})
	if err != nil || del.DeleteMarker == nil || !*del.DeleteMarker || del.VersionId == nil {
		t.Fatalf("versioned delete: %+v %v", del, err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("GET behind a delete marker: %v", err)
	}
	old, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc"), VersionId: v1.VersionId})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(old.Body)
	old.Body.Close()
	if string(b) != "one" || *old.VersionId != *v1.VersionId {
		t.Fatalf("old version: %q", b)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc"), VersionId: del.VersionId}); errCode(err) != "MethodNotAllowed" {
		t.Fatalf("GET of a delete marker version: %v", err)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc"), VersionId: aws.String("not-a-version")}); err == nil {
		t.Fatal("GET with a malformed version ID succeeded")
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("ver")})
	if err != nil || len(vs.Versions) != 2 || len(vs.DeleteMarkers) != 1 || !*vs.DeleteMarkers[0].IsLatest || *vs.Versions[0].IsLatest {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	// Page through versions one at a time.
	var seen []string
	keyMarker, vMarker := (*string)(nil), (*string)(nil)
	for {
		page, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("ver"), MaxKeys: aws.Int32(1), KeyMarker: keyMarker, VersionIdMarker: vMarker})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			seen = append(seen, *v.VersionId)
		}
		for _, m := range page.DeleteMarkers {
			seen = append(seen, *m.VersionId)
		}
		if page.IsTruncated == nil || !*page.IsTruncated {
			break
		}
		keyMarker, vMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
	if !slices.Equal(seen, []string{*del.VersionId, *v2.VersionId, *v1.VersionId}) {
		t.Fatalf("paged versions %v, want newest first", seen)
	}
	// Removing the delete marker brings the object back.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc"), VersionId: del.VersionId}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "ver", "doc"); string(got) != "two" {
		t.Fatalf("after removing the marker: %q", got)
	}
	// Suspended: writes replace the null version.
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("ver"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}}); err != nil {
		t.Fatal(err)
	}
	n1 := put(t, c, "ver", "doc", []byte("null-1"))
	put(t, c, "ver", "doc", []byte("null-2"))
	// S3 names no version for a write that made the null version.
	if n1.VersionId != nil {
		t.Fatalf("suspended PUT answered version %q, want none", *n1.VersionId)
	}
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("ver"), Key: aws.String("doc"), VersionId: aws.String("null")}); err != nil || h.VersionId == nil || *h.VersionId != "null" {
		t.Fatalf("HEAD of the null version: %v %v", h, err)
	}
	vs, _ = c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("ver")})
	if len(vs.Versions) != 3 {
		t.Fatalf("suspended versioning keeps one null version: %d versions", len(vs.Versions))
	}
}

func TestListings(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	keys := []string{"a", "b/1", "b/2", "b/c/3", "d", "e f", "e+g", "ü/x"}
	for _, k := range keys {
		put(t, c, "bkt", k, []byte(k))
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range l.Contents {
		got = append(got, *o.Key)
	}
	var prefixes []string
	for _, p := range l.CommonPrefixes {
		prefixes = append(prefixes, *p.Prefix)
	}
	if !slices.Equal(got, []string{"a", "d", "e f", "e+g"}) || !slices.Equal(prefixes, []string{"b/", "ü/"}) {
		t.Fatalf("delimiter listing: %v %v", got, prefixes)
	}
	l, _ = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String("b/"), Delimiter: aws.String("/")})
	if len(l.Contents) != 2 || len(l.CommonPrefixes) != 1 || *l.CommonPrefixes[0].Prefix != "b/c/" {
		t.Fatalf("prefix listing: %+v", l)
	}
	l, _ = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), StartAfter: aws.String("b/2")})
	if len(l.Contents) != 5 || *l.Contents[0].Key != "b/c/3" {
		t.Fatalf("start-after: %d, first %s", len(l.Contents), *l.Contents[0].Key)
	}
	// Continuation, two keys a page.
	var all []string
	var token *string
	for {
		page, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(2), ContinuationToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if *page.KeyCount > 2 {
			t.Fatalf("page of %d keys with max-keys 2", *page.KeyCount)
		}
		for _, o := range page.Contents {
			all = append(all, *o.Key)
		}
		if !*page.IsTruncated {
			break
		}
		token = page.NextContinuationToken
	}
	if !slices.Equal(all, keys) {
		t.Fatalf("paged listing %v, want %v", all, keys)
	}
	// Version 1 with a marker.
	l1, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("bkt"), Marker: aws.String("d"), MaxKeys: aws.Int32(2)})
	if err != nil || len(l1.Contents) != 2 || *l1.Contents[0].Key != "e f" || !*l1.IsTruncated {
		t.Fatalf("v1 listing: %+v %v", l1, err)
	}
	// encoding-type=url encodes keys.
	l, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), EncodingType: types.EncodingTypeUrl, Prefix: aws.String("e")})
	if err != nil || len(l.Contents) != 2 || *l.Contents[0].Key != "e%20f" || *l.Contents[1].Key != "e%2Bg" {
		t.Fatalf("url-encoded listing: %+v %v", l.Contents, err)
	}
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("nope")}); errCode(err) != "NoSuchBucket" {
		t.Fatalf("listing a missing bucket: %v", err)
	}
}

func TestMultipart(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	partSize := 5 << 20
	parts := [][]byte{randomBytes(partSize), randomBytes(partSize), randomBytes(1234)}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		ContentType: aws.String("video/mp4"), Metadata: map[string]string{"m": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	var completed []types.CompletedPart
	for i, p := range parts {
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag})
	}
	// Re-uploading part 2 replaces it.
	parts[1] = randomBytes(partSize)
	out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: up.UploadId,
		PartNumber: aws.Int32(2), Body: bytes.NewReader(parts[1])})
	if err != nil {
		t.Fatal(err)
	}
	completed[1].ETag = out.ETag
	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("big"), UploadId: up.UploadId})
	if err != nil || len(lp.Parts) != 3 || *lp.Parts[1].ETag != *out.ETag {
		t.Fatalf("list parts: %+v %v", lp, err)
	}
	lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	if err != nil || len(lu.Uploads) != 1 || *lu.Uploads[0].UploadId != *up.UploadId {
		t.Fatalf("list uploads: %+v %v", lu, err)
	}
	// Wrong ETag: InvalidPart, nothing completed.
	bad := slices.Clone(completed)
	bad[0].ETag = aws.String(`"00000000000000000000000000000000"`)
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: bad}}); errCode(err) != "InvalidPart" {
		t.Fatalf("complete with a wrong ETag: %v", err)
	}
	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.Trim(*done.ETag, `"`), "-3") {
		t.Fatalf("multipart ETag %s", *done.ETag)
	}
	// A completion retried after it succeeded (the answer was lost) answers
	// as the first did.
	again, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("big"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
	if err != nil || *again.ETag != *done.ETag {
		t.Fatalf("completion retried: %v %v", again, err)
	}
	whole := bytes.Join(parts, nil)
	if got := get(t, c, "bkt", "big"); !bytes.Equal(got, whole) {
		t.Fatal("completed object differs from its parts")
	}
	// A range across the part boundary, and a part by number.
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Range: aws.String(fmt.Sprintf("bytes=%d-%d", partSize-10, partSize+10))})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(b, whole[partSize-10:partSize+11]) {
		t.Fatal("range across parts")
	}
	g, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(b, parts[2]) || *g.PartsCount != 3 {
		t.Fatalf("part 3 by number: %d bytes, parts count %v", len(b), g.PartsCount)
	}
	h, _ := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big")})
	if *h.ContentType != "video/mp4" || h.Metadata["m"] != "1" {
		t.Fatalf("metadata from CreateMultipartUpload: %+v", h)
	}
	lu, _ = c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	if len(lu.Uploads) != 0 {
		t.Fatal("upload still listed after completion")
	}

	// Too small a part (not last) is refused; upload part copy; abort.
	up2, _ := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("small")})
	small1, _ := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("small"), UploadId: up2.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("tiny")})
	small2, _ := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("small"), UploadId: up2.UploadId, PartNumber: aws.Int32(2), Body: strings.NewReader("tiny")})
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("small"), UploadId: up2.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: small1.ETag}, {PartNumber: aws.Int32(2), ETag: small2.ETag}}}}); errCode(err) != "EntityTooSmall" {
		t.Fatalf("complete with a small first part: %v", err)
	}
	cp, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("bkt"), Key: aws.String("small"), UploadId: up2.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String("bkt/big"), CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", partSize-1))})
	if err != nil {
		t.Fatalf("upload part copy: %v", err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("small"), UploadId: up2.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: cp.CopyPartResult.ETag}, {PartNumber: aws.Int32(2), ETag: small2.ETag}}}}); err != nil {
		t.Fatalf("complete with a copied part: %v", err)
	}
	if got := get(t, c, "bkt", "small"); !bytes.Equal(got, append(slices.Clone(parts[0]), "tiny"...)) {
		t.Fatal("object from a copied part differs")
	}
	up3, _ := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("gone")})
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: up3.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: up3.UploadId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: up3.UploadId}); errCode(err) != "NoSuchUpload" {
		t.Fatalf("list parts of an aborted upload: %v", err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("gone"), UploadId: aws.String("not-an-upload"), PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); errCode(err) != "NoSuchUpload" {
		t.Fatalf("upload part to a bogus upload: %v", err)
	}
	// A bucket holding only unfinished uploads is deleted with them, as S3
	// deletes it.
	mustCreateBucket(t, c, "pending")
	up4, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("pending"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("pending"), Key: aws.String("k"), UploadId: up4.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("pending")}); err != nil {
		t.Fatalf("delete a bucket holding only an unfinished upload: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("pending")}); err == nil {
		t.Fatal("the bucket is still there")
	}
}

func TestStaleUploadsAreAborted(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4, extra: []string{"--stale-uploads-expiry", "2s"}})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("abandoned")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("abandoned"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stale upload aborted", 30*time.Second, func() bool {
		lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
		return err == nil && len(lu.Uploads) == 0
	})
}

// TestUnsupportedIsRefusedAndStoresNothing: what is not implemented is
// refused (NotImplemented, or the error S3 gives a malformed request), and
// a refused write stores nothing.
func TestUnsupportedIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	_, err := c.PutBucketWebsite(ctx, &s3.PutBucketWebsiteInput{Bucket: aws.String("bkt"), WebsiteConfiguration: &types.WebsiteConfiguration{
		IndexDocument: &types.IndexDocument{Suffix: aws.String("index.html")}}})
	if errCode(err) != "NotImplemented" {
		t.Fatalf("bucket website: %v", err)
	}
	const key = "pO3upElrwuEXSoFwCfnZPdSsmt/xWeFa0N9KgDijwVs="
	const keyMD5 = "DWygnHRtgiJ77HCm+1rvHw=="
	for _, c2 := range []struct {
		what string
		in   s3.PutObjectInput
		code string
	}{
		// Without a keys file, managed keys are not offered; customer keys
		// only over HTTPS (TestServerSideEncryption covers what works).
		{"SSE-S3 without keys", s3.PutObjectInput{ServerSideEncryption: types.ServerSideEncryptionAes256}, "NotImplemented"},
		{"SSE-KMS without keys", s3.PutObjectInput{ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("k1")}, "NotImplemented"},
		{"SSE-C over HTTP", s3.PutObjectInput{SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String(keyMD5)}, "InvalidRequest"},
		{"SSE-C wrong key MD5", s3.PutObjectInput{SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String("AAAAAAAAAAAAAAAAAAAAAA==")}, "InvalidArgument"},
		{"SSE-C with SSE-S3", s3.PutObjectInput{ServerSideEncryption: types.ServerSideEncryptionAes256, SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String(keyMD5)}, "InvalidArgument"},
		{"KMS key without aws:kms", s3.PutObjectInput{SSEKMSKeyId: aws.String("k1")}, "InvalidArgument"},
		{"storage class GLACIER", s3.PutObjectInput{StorageClass: types.StorageClassGlacier}, "InvalidStorageClass"},
	} {
		in := c2.in
		in.Bucket, in.Key, in.Body = aws.String("bkt"), aws.String("refused"), strings.NewReader("secret")
		if _, err := c.PutObject(ctx, &in); errCode(err) != c2.code {
			t.Errorf("%s: %v, want %s", c2.what, err, c2.code)
		}
	}
	notStored(t, c, "bkt", "refused")
	put(t, c, "bkt", "plain", []byte("x"))
	// A customer key is refused over plain HTTP.
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("plain"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String(keyMD5)}); errCode(err) != "InvalidRequest" {
		t.Fatalf("GET with a customer key: %v", err)
	}
	if _, err := c.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String("bkt"), ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}}); errCode(err) != "NotImplemented" {
		t.Fatalf("bucket default encryption without keys: %v", err)
	}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("bkt"), LifecycleConfiguration: &types.BucketLifecycleConfiguration{
		Rules: []types.LifecycleRule{{ID: aws.String("r"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassGlacier}}}}}}); errCode(err) != "InvalidStorageClass" {
		t.Fatalf("lifecycle transition: %v", err)
	}
	if _, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("bkt")}); errCode(err) != "NoSuchLifecycleConfiguration" {
		t.Fatalf("a refused lifecycle document was stored: %v", err)
	}
	// An object ACL granting more than the owner's full control, in a
	// bucket whose ownership setting turns ACLs off (TestACLs covers the
	// buckets that have them).
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("enforced"), ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("enforced"), Key: aws.String("public"), Body: strings.NewReader("x"),
		ACL: types.ObjectCannedACLPublicRead}); errCode(err) != "AccessControlListNotSupported" {
		t.Fatalf("public-read object ACL under BucketOwnerEnforced: %v", err)
	}
	notStored(t, c, "enforced", "public")
	if code, _ := rawRequest(t, s, http.MethodGet, "/bkt/plain?torrent"); code != http.StatusNotImplemented {
		t.Fatalf("torrent: %d", code)
	}
}

// TestObjectLock: a bucket created with object lock keeps versions its
// retention or legal hold protects; the front end enforces it on deletes.
func TestObjectLock(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("vault"), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("vault")})
	if err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("object lock turns versioning on: %+v %v", v, err)
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("vault"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}}); errCode(err) != "InvalidBucketState" || errStatus(err) != 409 {
		t.Fatalf("suspending versioning under object lock: %v", err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("backup"), Body: strings.NewReader("data"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: &until})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("backup"), VersionId: out.VersionId}); errCode(err) != "AccessDenied" {
		t.Fatalf("deleting a version under COMPLIANCE retention: %v", err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("vault"), Key: aws.String("backup")})
	if err != nil || h.ObjectLockMode != types.ObjectLockModeCompliance || !aws.ToTime(h.ObjectLockRetainUntilDate).Equal(until) {
		t.Fatalf("retention on HEAD: %+v %v", h, err)
	}
	// Legal hold without retention, then lifted.
	held, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("evidence"), Body: strings.NewReader("e"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("evidence"), VersionId: held.VersionId}); errCode(err) != "AccessDenied" {
		t.Fatalf("deleting a version under legal hold: %v", err)
	}
	if _, err := c.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String("vault"), Key: aws.String("evidence"), VersionId: held.VersionId,
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("evidence"), VersionId: held.VersionId}); err != nil {
		t.Fatalf("deleting after the hold was lifted: %v", err)
	}
	// A bucket without object lock refuses retention.
	mustCreateBucket(t, c, "plain")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("x"), Body: strings.NewReader("x"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: &until}); errCode(err) != "InvalidRequest" {
		t.Fatalf("retention in a bucket without object lock: %v", err)
	}
	notStored(t, c, "plain", "x")
}

func TestHealthMetricsAndAdmin(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 4})
	c := s.aws()
	mustCreateBucket(t, c, "bkt")
	put(t, c, "bkt", "k", []byte("x"))
	get(t, c, "bkt", "k")
	for path, want := range map[string]int{
		"/strata/health/live": 200, "/strata/health/ready": 200, "/strata/health/cluster": 200,
		"/strata/health/cluster?maintenance=true": 412, "/strata/admin/v1/info": 401,
	} {
		resp, err := http.Get(s.url() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	// The root secret as HTTP Basic over plain HTTP is refused (the
	// admin API takes SigV4; Basic only over TLS).
	basic, _ := http.NewRequest(http.MethodGet, s.url()+"/strata/admin/v1/info", nil)
	basic.SetBasicAuth(rootUser, rootPassword)
	if resp, err := http.DefaultClient.Do(basic); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("root Basic over plain HTTP: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	code, body := s.adminGet("info")
	if code != 200 || !contains(string(body), `"setSize": 4`) || !contains(string(body), `"state": "online"`) {
		t.Fatalf("admin info: %d %s", code, body)
	}
	if code, body := s.adminGet("heal"); code != 200 || !contains(string(body), "queueLength") {
		t.Fatalf("admin heal: %d %s", code, body)
	}
	resp, err := http.Get(s.url() + "/strata/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`strata_s3_requests_total{api="PutObject",status="200"} 1`,
		`strata_s3_requests_total{api="GetObject",status="200"} 1`,
		`strata_s3_ttfb_seconds_count 1`, `strata_drive_state{`, `strata_heal_queue_length`,
	} {
		if !contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if contains(string(m), rootPassword) || contains(s.logs(), rootPassword) {
		t.Fatal("the root secret appears in metrics or logs")
	}
	// The metrics are unauthenticated: they name no drive's path or host.
	for _, d := range s.drives {
		if contains(string(m), d) {
			t.Errorf("the unauthenticated metrics name the drive %s", d)
		}
	}
}
