package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/pkg/xattr"
	"github.com/strata-storage/strata/engine/posix"
)

func md5ETag(b []byte) string {
	s := md5.Sum(b)
	return `"` + hex.EncodeToString(s[:]) + `"`
}

func listKeys(t *testing.T, c *s3.Client, bucket, prefix string) map[string]types.Object {
	t.Helper()
	out := map[string]types.Object{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			out[*o.Key] = o
		}
	}
	return out
}

func onDisk(t *testing.T, root, bucket, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, bucket, key))
	if err != nil {
		t.Fatalf("on disk %s/%s: %v", bucket, key, err)
	}
	return b
}

// TestGatewayThreeReplicasShareOneDirectory: three gateways serve one
// directory; whatever one of them is asked, the others see, including a
// multipart upload whose parts arrive at different gateways, versions,
// and minio-go's own multipart streaming. Bytes are on disk as sent.
func TestGatewayThreeReplicasShareOneDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := []*server{startGateway(t, root), startGateway(t, root), startGateway(t, root)}
	c := []*s3.Client{g[0].aws(), g[1].aws(), g[2].aws()}

	mustCreateBucket(t, c[0], "shared")
	small := randomBytes(4096)
	put(t, c[0], "shared", "dir/small.bin", small)
	if got := get(t, c[1], "shared", "dir/small.bin"); !bytes.Equal(got, small) {
		t.Fatal("replica 2 reads other bytes than replica 1 stored")
	}
	if !bytes.Equal(onDisk(t, root, "shared", "dir/small.bin"), small) {
		t.Fatal("bytes on disk differ from the bytes PUT")
	}
	if keys := listKeys(t, c[2], "shared", ""); len(keys) != 1 || *keys["dir/small.bin"].Size != 4096 ||
		*keys["dir/small.bin"].ETag != md5ETag(small) {
		t.Fatalf("replica 3 lists %+v", keys)
	}

	if _, err := c[2].CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("shared"), Key: aws.String("copies/small.bin"),
		CopySource: aws.String("shared/dir/small.bin")}); err != nil {
		t.Fatalf("copy via replica 3: %v", err)
	}
	if got := get(t, c[0], "shared", "copies/small.bin"); !bytes.Equal(got, small) {
		t.Fatal("copy read back wrong")
	}

	// Multipart: created on 1, parts through 2 and 3, listed on 1, completed on 2.
	key := "big/upload.bin"
	mp, err := c[0].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("shared"), Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{randomBytes(5 << 20), randomBytes(5 << 20), randomBytes(1234)}
	var done []types.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		up, err := c[1+i%2].UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("shared"), Key: &key, UploadId: mp.UploadId,
			PartNumber: &n, Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatalf("part %d via gateway %d: %v", n, 2+i%2, err)
		}
		done = append(done, types.CompletedPart{ETag: up.ETag, PartNumber: &n})
	}
	lp, err := c[0].ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("shared"), Key: &key, UploadId: mp.UploadId})
	if err != nil || len(lp.Parts) != 3 {
		t.Fatalf("parts seen by gateway 1: %v (%v)", lp, err)
	}
	ups, err := c[2].ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("shared")})
	if err != nil || len(ups.Uploads) != 1 || *ups.Uploads[0].UploadId != *mp.UploadId {
		t.Fatalf("uploads seen by gateway 3: %+v (%v)", ups, err)
	}
	if _, err := c[1].CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("shared"), Key: &key,
		UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatalf("complete via gateway 2: %v", err)
	}
	whole := bytes.Join(parts, nil)
	if got := get(t, c[2], "shared", key); !bytes.Equal(got, whole) {
		t.Fatal("gateway 3 reads other bytes than the parts sent")
	}
	if !bytes.Equal(onDisk(t, root, "shared", key), whole) {
		t.Fatal("the completed upload on disk differs from its parts")
	}

	// minio-go streams an upload of unknown size as multipart through gateway 3.
	streamed := randomBytes(11<<20 + 7)
	if _, err := g[2].minio().PutObject(ctx, "shared", "minio/streamed.bin", bytes.NewReader(streamed), -1,
		minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	o, err := g[0].minio().GetObject(ctx, "shared", "minio/streamed.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(got, streamed) || !bytes.Equal(onDisk(t, root, "shared", "minio/streamed.bin"), streamed) {
		t.Fatalf("minio-go upload read back wrong: %v", err)
	}

	// Versioning works out of the box, with the versions on the shared volume.
	if _, err := c[0].PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("shared"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	v1 := put(t, c[1], "shared", "doc.txt", []byte("first"))
	put(t, c[2], "shared", "doc.txt", []byte("second"))
	lv, err := c[0].ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("shared"), Prefix: aws.String("doc.txt")})
	if err != nil || len(lv.Versions) != 2 {
		t.Fatalf("versions seen by gateway 1: %+v (%v)", lv.Versions, err)
	}
	old, err := c[0].GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("shared"), Key: aws.String("doc.txt"), VersionId: v1.VersionId})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(old.Body)
	old.Body.Close()
	if string(b) != "first" || string(get(t, c[1], "shared", "doc.txt")) != "second" {
		t.Fatalf("old version %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, ".strata", "versions", "shared")); len(ents) == 0 {
		t.Fatal("no versions under <root>/.strata/versions")
	}
	// The hidden directory is no bucket.
	lb, err := c[2].ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "shared" {
		t.Fatalf("buckets: %+v (%v)", lb.Buckets, err)
	}
}

// TestGatewaySidecarMetadataOnTwoReplicas: with --metadata sidecar (what a
// filesystem without user xattrs gets), metadata lives under
// <root>/.strata/meta, never in xattrs, and both replicas see it.
func TestGatewaySidecarMetadataOnTwoReplicas(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := startGateway(t, root, "--metadata", "sidecar")
	b := startGateway(t, root) // auto: follows the volume's marker
	if !strings.Contains(a.logs(), "sidecar") || !strings.Contains(b.logs(), "object metadata in sidecar files") {
		t.Fatalf("metadata mode not logged:\n%s\n%s", a.logs(), b.logs())
	}
	ca, cb := a.aws(), b.aws()
	mustCreateBucket(t, ca, "side")
	body := randomBytes(10000)
	if _, err := ca.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("side"), Key: aws.String("a/b.bin"), Body: bytes.NewReader(body),
		ContentType: aws.String("application/x-test"), Metadata: map[string]string{"owner": "hpc"}}); err != nil {
		t.Fatal(err)
	}
	h, err := cb.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("side"), Key: aws.String("a/b.bin")})
	if err != nil || *h.ETag != md5ETag(body) || *h.ContentType != "application/x-test" || h.Metadata["owner"] != "hpc" {
		t.Fatalf("head via replica 2: %+v %v", h, err)
	}
	if _, err := cb.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("side"), Key: aws.String("a/b.bin"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatal(err)
	}
	tg, err := ca.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("side"), Key: aws.String("a/b.bin")})
	if err != nil || len(tg.TagSet) != 1 {
		t.Fatalf("tags via replica 1: %+v %v", tg, err)
	}
	names, err := xattr.List(filepath.Join(root, "side", "a", "b.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "user.") {
			t.Fatalf("sidecar mode wrote xattr %s", n)
		}
	}
	if _, err := os.Stat(filepath.Join(root, ".strata", "meta", "side", "a", "b.bin", "meta", "etag")); err != nil {
		t.Fatalf("no sidecar ETag: %v", err)
	}
	// A replica asked for xattrs on this volume refuses to start.
	c := &server{t: t, addr: freeAddr(t)}
	c.args = []string{"gateway", "--address", c.addr, "--root", root, "--metadata", "xattr"}
	c.startProcess()
	<-c.done
	if !strings.Contains(c.logs(), "keeps its metadata as sidecar") {
		t.Fatalf("conflicting --metadata not refused:\n%s", c.logs())
	}
}

// TestGatewayFilesCreatedOnTheFilesystem: files and directories made by
// POSIX users are objects and buckets; a HEAD gives a file its ETag, which
// listings then show, on every replica.
func TestGatewayFilesCreatedOnTheFilesystem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b := startGateway(t, root), startGateway(t, root)
	ca, cb := a.aws(), b.aws()
	if err := os.MkdirAll(filepath.Join(root, "nas", "results", "run1"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(70000)
	if err := os.WriteFile(filepath.Join(root, "nas", "results", "run1", "out.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	lb, err := ca.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "nas" {
		t.Fatalf("a directory made with mkdir is not a bucket: %+v %v", lb.Buckets, err)
	}
	// A directory made with mkdir is root's bucket: re-creating it is
	// success for root in us-east-1, as for any bucket one owns.
	if _, err := cb.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("nas")}); err != nil {
		t.Fatalf("CreateBucket over a directory made with mkdir: %v", err)
	}
	keys := listKeys(t, ca, "nas", "")
	o, ok := keys["results/run1/out.dat"]
	if !ok || *o.Size != int64(len(data)) {
		t.Fatalf("listing before HEAD: %+v", keys)
	}
	h, err := cb.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("nas"), Key: aws.String("results/run1/out.dat")})
	if err != nil || *h.ContentLength != int64(len(data)) || aws.ToString(h.ETag) != md5ETag(data) {
		t.Fatalf("HEAD of a POSIX file: %+v %v", h, err)
	}
	for _, c := range []*s3.Client{ca, cb} {
		if o := listKeys(t, c, "nas", "results/")["results/run1/out.dat"]; aws.ToString(o.ETag) != md5ETag(data) || *o.Size != int64(len(data)) {
			t.Fatalf("listing after HEAD: etag %s size %d", aws.ToString(o.ETag), *o.Size)
		}
	}
	if got := get(t, ca, "nas", "results/run1/out.dat"); !bytes.Equal(got, data) {
		t.Fatal("GET of a POSIX file")
	}
	// A conditional GET of a file nobody has read yet compares against its real ETag.
	other := randomBytes(100)
	if err := os.WriteFile(filepath.Join(root, "nas", "fresh.txt"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nas"), Key: aws.String("fresh.txt"),
		IfMatch: aws.String(md5ETag(other))}); err != nil {
		t.Fatalf("If-Match with the content's MD5: %v", err)
	}
	// A file removed through POSIX is gone for S3.
	if err := os.Remove(filepath.Join(root, "nas", "fresh.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("nas"), Key: aws.String("fresh.txt")}); err == nil {
		t.Fatal("removed file still answers HEAD")
	}
}

// TestGatewayKeysCannotEscapeTheRoot tries every way out of a bucket:
// '..', absolute keys, NUL bytes, encoded separators, keys in request
// bodies and copy sources, symbolic links out of the bucket and out of the
// root, a bucket that is a link. Each is refused or contained, and nothing
// outside is read, written or removed.
func TestGatewayKeysCannotEscapeTheRoot(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(outside, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := []byte("outside secret")
	for _, f := range []string{filepath.Join(outside, "secret"), filepath.Join(outside, "dir", "secret"), filepath.Join(base, "secret")} {
		if err := os.WriteFile(f, secret, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, root)
	c := g.aws()
	mustCreateBucket(t, c, "jail")
	mustCreateBucket(t, c, "other")
	put(t, c, "other", "private", []byte("other bucket"))
	put(t, c, "jail", "inside/file", []byte("inside"))
	links := map[string]string{
		"jail/abs":        filepath.Join(outside, "dir"),    // absolute, out of the root
		"jail/rel":        "../../outside/dir",              // relative, out of the root
		"jail/abs-file":   filepath.Join(outside, "secret"), // a file link
		"jail/cross":      "../other",                       // into another bucket
		"jail/inner":      "inside",                         // stays in the bucket: fine
		"jail/inside/up":  "..",                             // stays in the bucket: fine
		"linked-bucket":   outside,                          // a bucket that is a link
		"jail/loop":       "loop",                           // a loop
		"jail/inside/esc": "../../../secret",                // out via a subdirectory
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	denied := func(what string, err error, codes ...string) {
		t.Helper()
		if err == nil || !slices.Contains(codes, errCode(err)) {
			t.Errorf("%s: got %v (code %q), want one of %v", what, err, errCode(err), codes)
		}
	}
	getKey := func(bucket, key string) error {
		o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err == nil {
			b, _ := io.ReadAll(o.Body)
			o.Body.Close()
			if bytes.Equal(b, secret) {
				t.Errorf("GET %s/%s read a file outside the root", bucket, key)
			}
		}
		return err
	}
	putKey := func(bucket, key string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("pwned")})
		return err
	}

	// Keys that do not name one file inside the bucket.
	for _, key := range []string{"../secret", "../../secret", "a/../../secret", "a/../b", "./a", "/abs", "a//b", "nul\x00byte", ".sgwtmp/x", ".."} {
		denied("PUT "+fmt.Sprintf("%q", key), putKey("jail", key), "InvalidArgument", "400", "BadRequest", "InvalidRequest", "AccessDenied")
		denied("GET "+fmt.Sprintf("%q", key), getKey("jail", key), "InvalidArgument", "400", "BadRequest", "InvalidRequest", "AccessDenied", "NoSuchKey")
	}
	// Symbolic links out of the bucket or the root.
	for _, key := range []string{"abs/secret", "rel/secret", "abs-file", "cross/private", "loop", "inside/esc"} {
		denied("GET "+key, getKey("jail", key), "AccessDenied")
		denied("HEAD "+key, func() error {
			_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("jail"), Key: &key})
			return err
		}(), "AccessDenied", "Forbidden")
	}
	for _, key := range []string{"abs/new", "rel/new", "cross/new", "abs-file"} {
		denied("PUT "+key, putKey("jail", key), "AccessDenied")
	}
	mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("jail"), Key: aws.String("abs/mp")})
	denied("multipart through a link", err, "AccessDenied")
	_ = mp
	// Links that stay inside the bucket work.
	if b := get(t, c, "jail", "inner/file"); string(b) != "inside" {
		t.Fatalf("contained link: %q", b)
	}
	if b := get(t, c, "jail", "inside/up/inside/file"); string(b) != "inside" {
		t.Fatalf("contained '..' link: %q", b)
	}
	// A bucket that is a link.
	denied("GET in a linked bucket", getKey("linked-bucket", "secret"), "AccessDenied")
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("linked-bucket")})
	denied("list a linked bucket", err, "AccessDenied")
	denied("PUT in a linked bucket", putKey("linked-bucket", "new"), "AccessDenied")

	// Keys in a DeleteObjects body, which no URL check sees.
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	put(t, c, "jail", "deletable", []byte("x"))
	del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("jail"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("../../victim")}, {Key: aws.String("abs/secret")}, {Key: aws.String("deletable")}, {Key: aws.String("/" + victim)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Deleted) != 1 || *del.Deleted[0].Key != "deletable" || len(del.Errors) != 3 {
		t.Fatalf("DeleteObjects: deleted %+v, errors %+v", del.Deleted, del.Errors)
	}
	// Copy sources.
	for _, src := range []string{"jail/../../secret", "jail/abs/secret", "jail/cross/private", "jail/%2e%2e/%2e%2e/secret"} {
		_, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("jail"), Key: aws.String("copied"), CopySource: aws.String(src)})
		denied("copy from "+src, err, "AccessDenied", "InvalidArgument", "InvalidRequest", "400", "NoSuchKey", "NoSuchBucket")
	}
	// Encoded separators and dots in the raw URL. An encoded '/' is a '/'
	// (as in S3): a legitimate key reached that way reads fine, which
	// also shows the raw requests are signed right.
	if code, body := rawRequest(t, g, "GET", "/jail/inside%2Ffile"); code != http.StatusOK || string(body) != "inside" {
		t.Fatalf("GET /jail/inside%%2Ffile: %d %s", code, body)
	}
	for _, p := range []string{"/jail/..%2F..%2Fsecret", "/jail/%2E%2E/%2E%2E/secret", "/jail/..%2f..%2foutside%2fsecret", "/jail/abs%2Fsecret", "/jail/nul%00"} {
		code, body := rawRequest(t, g, "GET", p)
		if code == http.StatusOK || bytes.Contains(body, secret) {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
		code, _ = rawRequest(t, g, "PUT", p)
		if code == http.StatusOK {
			t.Errorf("PUT %s: %d", p, code)
		}
	}
	// Listing prefixes that cannot match list nothing (no 500, nothing outside).
	for _, prefix := range []string{"../", "../../", "/", "a//", "inside/../../"} {
		l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("jail"), Prefix: aws.String(prefix)})
		if err != nil || len(l.Contents) != 0 {
			t.Errorf("list prefix %q: %d objects, %v", prefix, len(l.Contents), err)
		}
	}
	// Nothing outside the root changed.
	for _, f := range []string{filepath.Join(outside, "secret"), filepath.Join(outside, "dir", "secret"), filepath.Join(base, "secret")} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, secret) {
			t.Errorf("%s changed: %q %v", f, b, err)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me" {
		t.Errorf("victim file: %q %v", b, err)
	}
	for _, d := range []string{outside, filepath.Join(outside, "dir"), base} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			switch e.Name() {
			case "secret", "dir", "root", "outside", "victim":
			default:
				t.Errorf("new file outside the root: %s", filepath.Join(d, e.Name()))
			}
		}
	}
	if b := get(t, c, "other", "private"); string(b) != "other bucket" {
		t.Fatal("other bucket changed")
	}
}

// rawRequest sends a request with a path exactly as given (no client-side
// cleaning or encoding), SigV4-signed with the root credentials over that
// path the way the front end canonicalises it (decoded, then escaped), and
// over its query, if any.
func rawRequest(t *testing.T, s *server, method, rawPath string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url()+"/", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = "//" + s.addr + rawPath
	now := time.Now().UTC()
	amzDate, day := now.Format("20060102T150405Z"), now.Format("20060102")
	payload := sha256hex(nil)
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payload)
	path, query, _ := strings.Cut(rawPath, "?")
	decoded, err := url.PathUnescape(path)
	if err != nil {
		decoded = path
	}
	// The query's parameters, each "name=value" (a bare name has an empty
	// value), in order: the tests' queries need no escaping.
	params := strings.Split(query, "&")
	for i, p := range params {
		if !strings.Contains(p, "=") {
			params[i] = p + "="
		}
	}
	slices.Sort(params)
	canonQuery := strings.Join(params, "&")
	if query == "" {
		canonQuery = ""
	}
	var canonURI strings.Builder
	for i := 0; i < len(decoded); i++ {
		c := decoded[i]
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			canonURI.WriteByte(c)
		} else {
			fmt.Fprintf(&canonURI, "%%%02X", c)
		}
	}
	signed := "host;x-amz-content-sha256;x-amz-date"
	canon := strings.Join([]string{method, canonURI.String(), canonQuery,
		"host:" + s.addr, "x-amz-content-sha256:" + payload, "x-amz-date:" + amzDate, "", signed, payload}, "\n")
	scope := day + "/us-east-1/s3/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256hex([]byte(canon))
	key := []byte("AWS4" + rootPassword)
	for _, part := range []string{day, "us-east-1", "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+rootUser+"/"+scope+", SignedHeaders="+signed+
		", Signature="+hex.EncodeToString(hmacSHA256(key, toSign)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func sha256hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// scrape returns the gateway's metrics text.
func scrape(t *testing.T, s *server) string {
	t.Helper()
	resp, err := http.Get(s.url() + "/strata/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestGatewayUsersHealthMetricsAdmin: the gateway answers users, health,
// metrics and the admin API like the server does (shared code).
func TestGatewayUsersHealthMetricsAdmin(t *testing.T) {
	t.Parallel()
	usersFile := filepath.Join(t.TempDir(), "users.json")
	writeUsers := func(content string) {
		if err := os.WriteFile(usersFile+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(usersFile+".tmp", usersFile); err != nil {
			t.Fatal(err)
		}
	}
	writeUsers(`{"users":[{"accessKey":"reader","secretKey":"reader-secret","policy":"readonly","buckets":["photos"]},
		{"accessKey":"writer","secretKey":"writer-secret","policy":"readwrite"}]}`)
	g := &server{t: t, addr: freeAddr(t), env: []string{"STRATA_IAM_FILE=" + usersFile}}
	g.args = []string{"gateway", "--address", g.addr, "--root", t.TempDir(), "--shutdown-delay", "0s", "--admin-over-http"}
	g.start()
	t.Cleanup(g.kill)
	root := g.aws()
	mustCreateBucket(t, root, "photos")
	mustCreateBucket(t, root, "private")
	put(t, root, "photos", "p.jpg", []byte("pic"))
	put(t, root, "private", "s.txt", []byte("no"))

	reader := g.s3Client("reader", "reader-secret")
	if string(get(t, reader, "photos", "p.jpg")) != "pic" {
		t.Fatal("reader cannot read its bucket")
	}
	if _, err := reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
		t.Fatalf("read-only PUT: %v", err)
	}
	if _, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("private"), Key: aws.String("s.txt")}); errCode(err) != "AccessDenied" {
		t.Fatalf("reader on another bucket: %v", err)
	}
	lb, err := reader.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "photos" {
		t.Fatalf("reader sees %+v (%v)", lb.Buckets, err)
	}
	writer := g.s3Client("writer", "writer-secret")
	put(t, writer, "private", "w.txt", []byte("w"))
	mustCreateBucket(t, writer, "writers")
	checkPoliciesWithUsers(t, root, reader, writer)
	writeUsers(`{"users":[{"accessKey":"writer","secretKey":"writer-secret","policy":"readwrite"}]}`)
	waitFor(t, "removed user refused", 30*time.Second, func() bool {
		_, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("p.jpg")})
		return errCode(err) == "InvalidAccessKeyId"
	})

	for _, p := range []string{"/strata/health/live", "/strata/health/ready", "/strata/health/cluster", "/strata/health/cluster?maintenance=true"} {
		resp, err := http.Get(g.url() + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	m := scrape(t, g)
	for _, want := range []string{`strata_s3_requests_total{api="PutObject",status="200"}`, `strata_s3_requests_total{api="GetObject",status="403"}`,
		`strata_gateway_info{deployment="`, `metadata="xattr"`, "strata_gateway_volume_free_bytes",
		"strata_gateway_large_directory_threshold 100000"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "strata_s3_ttfb_seconds_count 0") || !strings.Contains(m, "strata_s3_ttfb_seconds_count") {
		t.Error("GETs did not report their time to first byte")
	}
	code, body := g.adminGet("info")
	if code != http.StatusOK || !strings.Contains(string(body), `"mode": "gateway"`) || !strings.Contains(string(body), `"totalBytes"`) {
		t.Fatalf("admin info: %d %s", code, body)
	}
	if code, _ := g.adminGet("heal"); code != http.StatusNotFound {
		t.Fatalf("admin heal on a gateway: %d", code)
	}
	resp, err := http.Get(g.url() + "/strata/admin/v1/info")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("admin without credentials: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestGatewayTLS: --certs-dir serves S3 over TLS, as the server does.
func TestGatewayTLS(t *testing.T) {
	t.Parallel()
	certs := t.TempDir()
	cert := writeCert(t, certs, 7)
	g := &server{t: t, addr: freeAddr(t)}
	g.args = []string{"gateway", "--address", g.addr, "--root", t.TempDir(), "--certs-dir", certs}
	g.startProcess()
	t.Cleanup(g.kill)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	mc, err := minio.New(g.addr, &minio.Options{Creds: miniocreds.NewStaticV4(rootUser, rootPassword, ""), Secure: true, Transport: tr, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "TLS listener up", 30*time.Second, func() bool {
		_, err := mc.ListBuckets(ctx)
		return err == nil
	})
	if err := mc.MakeBucket(ctx, "secure", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(5000)
	if _, err := mc.PutObject(ctx, "secure", "k", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := mc.GetObject(ctx, "secure", "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(o)
	o.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("TLS read back wrong")
	}
}

// TestGatewayLargeDirectoryWarning: a directory past --large-dir-threshold
// shows in the metrics and the log, whether it grew through S3 or POSIX.
func TestGatewayLargeDirectoryWarning(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := startGateway(t, root, "--large-dir-threshold", "50", "--large-dir-scan-interval", "1s")
	c := g.aws()
	mustCreateBucket(t, c, "big")
	for i := range 55 {
		put(t, c, "big", fmt.Sprintf("flat/%03d", i), []byte("x"))
	}
	for i := range 10 {
		put(t, c, "big", fmt.Sprintf("tree/%d/x", i), []byte("x"))
	}
	if err := os.MkdirAll(filepath.Join(root, "big", "posix"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if err := os.WriteFile(filepath.Join(root, "big", "posix", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "large directories reported", 30*time.Second, func() bool {
		m := scrape(t, g)
		return strings.Contains(m, `strata_gateway_large_directory_entries{directory="big/flat"} 55`) &&
			strings.Contains(m, `strata_gateway_large_directory_entries{directory="big/posix"} 60`) &&
			strings.Contains(m, "strata_gateway_large_directories 2")
	})
	if !strings.Contains(g.logs(), "large directory") {
		t.Fatal("no log warning for a large directory")
	}
}

// TestGatewayGracefulShutdown: on SIGTERM readiness drops first while an
// upload in flight continues, and the upload completes before the process
// exits cleanly.
func TestGatewayGracefulShutdown(t *testing.T) {
	root := t.TempDir()
	g := startGateway(t, root, "--shutdown-delay", "2s")
	mc := g.minio()
	if err := mc.MakeBucket(ctx, "drain", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	const chunks = 8
	data := randomBytes(chunks << 20)
	pr, pw := io.Pipe()
	started := make(chan struct{})
	go func() {
		for i := range chunks {
			if i == 1 {
				close(started)
			}
			if _, err := pw.Write(data[i<<20 : (i+1)<<20]); err != nil {
				return
			}
			time.Sleep(400 * time.Millisecond)
		}
		pw.Close()
	}()
	result := make(chan error, 1)
	go func() {
		_, err := mc.PutObject(ctx, "drain", "slow.bin", pr, int64(len(data)), minio.PutObjectOptions{PartSize: 64 << 20})
		result <- err
	}()
	<-started
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "readiness down after SIGTERM", 10*time.Second, func() bool {
		resp, err := http.Get(g.url() + "/strata/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	select {
	case err := <-result:
		t.Fatalf("upload ended before the drain: %v", err)
	default:
	}
	if err := <-result; err != nil {
		t.Fatalf("upload in flight during shutdown failed: %v", err)
	}
	if !bytes.Equal(onDisk(t, root, "drain", "slow.bin"), data) {
		t.Fatal("drained upload stored wrong bytes")
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not exit after draining")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, g.logs())
	}
}

// TestGatewayReadinessFollowsTheVolume: a gateway whose volume goes away
// (here: its marker disappears, as when the volume is unmounted under the
// mount point) reports not ready, and ready again when it is back.
func TestGatewayReadinessFollowsTheVolume(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := startGateway(t, root)
	status := func(path string) int {
		resp, err := http.Get(g.url() + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	marker := filepath.Join(root, ".strata", "gateway.json")
	if err := os.Rename(marker, marker+".away"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "not ready without its volume", 30*time.Second, func() bool { return status("/strata/health/ready") == http.StatusServiceUnavailable })
	if status("/strata/health/live") != http.StatusOK {
		t.Fatal("liveness failed with the volume away: kubelet would restart a replica that only waits for its volume")
	}
	if err := os.Rename(marker+".away", marker); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready again", 30*time.Second, func() bool { return status("/strata/health/ready") == http.StatusOK })
	if !strings.Contains(g.logs(), "volume unavailable") || !strings.Contains(g.logs(), "volume available again") {
		t.Fatalf("volume state changes not logged:\n%s", g.logs())
	}
}

// TestGatewayAbortsStaleUploads: uploads that receive no part for
// --stale-uploads-expiry are aborted and their staged parts removed, by any
// replica; an upload still receiving parts is left alone.
func TestGatewayAbortsStaleUploads(t *testing.T) {
	root := t.TempDir()
	a := startGateway(t, root, "--stale-uploads-expiry", "2s")
	startGateway(t, root, "--stale-uploads-expiry", "2s")
	c := a.aws()
	mustCreateBucket(t, c, "uploads")
	part := func(key string, id *string, n int32) *string {
		t.Helper()
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("uploads"), Key: &key, UploadId: id, PartNumber: &n,
			Body: bytes.NewReader(randomBytes(5 << 20))})
		if err != nil {
			t.Fatal(err)
		}
		return out.ETag
	}
	stale, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("uploads"), Key: aws.String("abandoned")})
	if err != nil {
		t.Fatal(err)
	}
	part("abandoned", stale.UploadId, 1)
	active, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("uploads"), Key: aws.String("active")})
	if err != nil {
		t.Fatal(err)
	}
	uploads := func() map[string]bool {
		out, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("uploads")})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, u := range out.Uploads {
			m[*u.Key] = true
		}
		return m
	}
	var done []types.CompletedPart
	deadline := time.Now().Add(30 * time.Second)
	for n := int32(1); uploads()["abandoned"]; n++ {
		if time.Now().After(deadline) {
			t.Fatal("stale upload not aborted")
		}
		done = append(done, types.CompletedPart{ETag: part("active", active.UploadId, n), PartNumber: aws.Int32(n)})
		time.Sleep(500 * time.Millisecond)
	}
	if !uploads()["active"] {
		t.Fatal("an upload still receiving parts was aborted")
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("uploads"), Key: aws.String("active"),
		UploadId: active.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatalf("completing the active upload: %v", err)
	}
	if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("uploads"), Key: aws.String("abandoned"), UploadId: stale.UploadId,
		PartNumber: aws.Int32(2), Body: strings.NewReader("x")}); errCode(err) != "NoSuchUpload" {
		t.Fatalf("part for an aborted upload: %v", err)
	}
	waitFor(t, "staged parts removed", 10*time.Second, func() bool {
		ents, _ := os.ReadDir(filepath.Join(root, "uploads", ".sgwtmp", "multipart"))
		return len(ents) == 0
	})
}

// TestGatewayFsyncMode: with --fsync every kind of write still succeeds
// and stores the right bytes (new deep prefixes, directory objects,
// multipart completion, copies).
func TestGatewayFsyncMode(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := startGateway(t, root, "--fsync")
	c := g.aws()
	mustCreateBucket(t, c, "durable")
	data := randomBytes(100000)
	put(t, c, "durable", "a/b/c/new-prefix.bin", data)
	put(t, c, "durable", "folder/", nil)
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("durable"), Key: aws.String("x/copy.bin"),
		CopySource: aws.String("durable/a/b/c/new-prefix.bin")}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.minio().PutObject(ctx, "durable", "m/multi.bin", bytes.NewReader(append(data, randomBytes(11<<20)...)), -1,
		minio.PutObjectOptions{PartSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a/b/c/new-prefix.bin", "x/copy.bin"} {
		if !bytes.Equal(onDisk(t, root, "durable", key), data) {
			t.Fatalf("%s on disk", key)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "durable", "m", "multi.bin")); err != nil || fi.Size() != int64(len(data)+11<<20) {
		t.Fatalf("multipart object on disk: %v %v", fi, err)
	}
	if !strings.Contains(g.logs(), `"fsync":true`) {
		t.Fatal("fsync mode not logged")
	}
}

// A completion whose first attempt died with its replica, after it had
// claimed the upload (versitygw renames the upload's directory to
// <uploadId>.<ETag>.inprogress), is retried on another replica. That
// replica found the claim and answered success at once, and the object
// never appeared (the day-2 test lost an object so). Now it waits for the
// claim and takes over one older than --multipart-claim-timeout.
func TestGatewayTakesOverACompletionClaimedByADeadReplica(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := startGateway(t, root, "--multipart-claim-timeout", "1s")
	c := g.aws()
	mustCreateBucket(t, c, "claims")
	key := "big/object"
	mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("claims"), Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{randomBytes(5 << 20), []byte("tail")}
	var parts []types.CompletedPart
	sums := md5.New()
	for i, body := range bodies {
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("claims"), Key: &key, UploadId: mp.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
		sum := md5.Sum(body)
		sums.Write(sum[:])
	}
	// The dead replica's claim, as versitygw names it.
	dir := filepath.Join(root, "claims", ".sgwtmp", "multipart", fmt.Sprintf("%x", sha256.Sum256([]byte(key))))
	upload := filepath.Join(dir, *mp.UploadId)
	claim := fmt.Sprintf("%s.%x-%d.inprogress", upload, sums.Sum(nil), len(bodies))
	if err := os.Rename(upload, claim); err != nil {
		t.Fatalf("claiming the upload as a completion does (has versitygw's layout changed?): %v", err)
	}
	start := time.Now()
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("claims"), Key: &key,
		UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got := get(t, c, "claims", key); !bytes.Equal(got, slices.Concat(bodies...)) {
		t.Fatalf("the completed object has %d bytes, want %d", len(got), 5<<20+4)
	}
	if _, err := os.Stat(claim); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dead replica's claim is still there: %v", err)
	}
	if took < time.Second {
		t.Fatalf("completed in %v: the claim was not waited for", took)
	}
	t.Logf("a completion claimed by a dead replica taken over and finished in %v", took.Round(time.Millisecond))
}

// TestGatewayConcurrentVersionDeletes runs ceph/s3-tests'
// test_versioned_concurrent_object_create_and_remove pattern on two
// replicas of one directory: PUTs of one key and deletes of its listed
// versions at once, then a last round deleting every version left, each
// version through either replica. Before deletes took the key's publish
// lock, a delete of the newest version beside a delete of the one before it
// brought that one back (both answered 204) about one round in eight, and a
// delete beside a PUT left a "null" version without an ETag.
func TestGatewayConcurrentVersionDeletes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := []*server{startGateway(t, root), startGateway(t, root)}
	c := []*s3.Client{g[0].aws(), g[1].aws()}
	const key = "myobj"
	for round := range 12 {
		bucket := fmt.Sprintf("versions-%d", round)
		mustCreateBucket(t, c[0], bucket)
		if _, err := c[0].PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &bucket,
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed []string
		note := func(what string, err error) {
			// Two deletes of one listed version may race: the second finds
			// nothing to delete. Anything else is a failure.
			if err != nil && errCode(err) != "NoSuchVersion" && errCode(err) != "NoSuchKey" {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %v", what, err))
				mu.Unlock()
			}
		}
		clear := func(n int) {
			out, err := c[n%2].ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &bucket})
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range out.Versions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c[(n+i)%2].DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: v.Key, VersionId: v.VersionId})
					note("delete "+*v.VersionId, err)
				}()
			}
		}
		for i := range 3 {
			for j := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c[(i+j)%2].PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key),
						Body: strings.NewReader(fmt.Sprintf("data %d", j))})
					note("put", err)
				}()
			}
			clear(i)
		}
		wg.Wait()
		clear(round)
		wg.Wait()
		if len(failed) > 0 {
			t.Fatalf("round %d: %s", round, strings.Join(failed, "; "))
		}
		out, err := c[0].ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			t.Errorf("round %d: version %s (latest %v, ETag %s) left after every listed version was deleted",
				round, *v.VersionId, *v.IsLatest, aws.ToString(v.ETag))
		}
	}
}

// TestGatewayDeleteTakesThePublishLock holds the lock file the gateway names
// for a key (posix.PublishLockPath, the file versitygw's posix backend
// locks, so replicas of an earlier release exclude ours) from this
// process: a PUT of the key and a DELETE of it both wait for it.
func TestGatewayDeleteTakesThePublishLock(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	c := startGateway(t, root).aws()
	mustCreateBucket(t, c, "locked")
	put(t, c, "locked", "k", []byte("first"))
	path := posix.PublishLockPath(root, "locked", "k")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("the backend's lock file for the key: %v", err)
	}
	defer f.Close()
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"PUT", func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locked"), Key: aws.String("k"), Body: strings.NewReader("second")})
			return err
		}},
		{"DELETE", func() error {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locked"), Key: aws.String("k")})
			return err
		}},
	} {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- op.do() }()
		select {
		case err := <-done:
			t.Fatalf("%s finished (%v) while the key's publish lock was held", op.name, err)
		case <-time.After(time.Second):
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s after the lock was released: %v", op.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waiting 30 s after the lock was released", op.name)
		}
	}
}
