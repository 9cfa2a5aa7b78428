package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7/pkg/replication"
)

// replicationRemote writes a targets file naming dst as the replication
// remote "dr" (root's keys) and returns the server's environment.
func replicationRemote(t *testing.T, dst *server) []string {
	t.Helper()
	return replicationRemoteAt(t, dst.url())
}

// replicationRemoteAt is replicationRemote with dst's root credentials at
// endpoint.
func replicationRemoteAt(t *testing.T, endpoint string) []string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"targets": []map[string]string{
		{"id": "dr", "type": "s3", "endpoint": endpoint, "username": rootUser, "password": rootPassword}}})
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"STRATA_NOTIFY_TARGETS_FILE=" + path}
}

const drRole = "arn:strata:replication:us-east-1:dr:s3"

// replicationDrained reports whether s's one remote has no changes
// waiting.
func replicationDrained(s *server) bool {
	code, body := s.adminGet("replication")
	var st struct{ Remotes []struct{ Backlog int64 } }
	return code == http.StatusOK && json.Unmarshal(body, &st) == nil && len(st.Remotes) == 1 && st.Remotes[0].Backlog == 0
}

// resyncCompletes resyncs bucket at src (one version to queue) and waits
// for it at dest (on dst, client dc) and for key's COMPLETED at src.
func resyncCompletes(t *testing.T, src *server, dc *s3.Client, bucket, dest, key string) {
	t.Helper()
	code, body := src.admin(http.MethodPost, "buckets/"+bucket+"/replication/resync")
	if code != http.StatusOK || !strings.Contains(string(body), `"queued": 1`) {
		t.Fatalf("resync: %d %s", code, body)
	}
	sc := src.aws()
	sameVersions(t, sc, dc, bucket, dest, 30*time.Second)
	waitFor(t, "COMPLETED after the resync", 10*time.Second, func() bool {
		return headVersion(t, sc, bucket, key, "").ReplicationStatus == types.ReplicationStatusCompleted
	})
}

func versionedBucket(t *testing.T, c *s3.Client, name string) {
	t.Helper()
	mustCreateBucket(t, c, name)
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(name),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
}

// replicateAll sets a rule replicating every key of bucket on s to dest
// at the remote dr, delete markers and version deletes included
// (minio-go's form, which carries DeleteReplication).
func replicateAll(t *testing.T, s *server, bucket, dest string) {
	t.Helper()
	cfg := replication.Config{Role: drRole, Rules: []replication.Rule{{ID: "all", Status: replication.Enabled, Priority: 1,
		DeleteMarkerReplication: replication.DeleteMarkerReplication{Status: replication.Enabled},
		DeleteReplication:       replication.DeleteReplication{Status: replication.Enabled},
		Destination:             replication.Destination{Bucket: "arn:aws:s3:::" + dest}}}}
	if err := s.minio().SetBucketReplication(ctx, bucket, cfg); err != nil {
		t.Fatal(err)
	}
}

// versionView is what the test compares of a version on both sides.
type versionView struct {
	key, id, etag string
	size          int64
	marker        bool
}

func listVersions(t *testing.T, c *s3.Client, bucket string) []versionView {
	t.Helper()
	var out []versionView
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			out = append(out, versionView{key: aws.ToString(v.Key), id: aws.ToString(v.VersionId), etag: aws.ToString(v.ETag), size: aws.ToInt64(v.Size)})
		}
		for _, m := range page.DeleteMarkers {
			out = append(out, versionView{key: aws.ToString(m.Key), id: aws.ToString(m.VersionId), marker: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return out[i].id < out[j].id
	})
	return out
}

// sameVersions waits until dst's bucket holds exactly src's versions
// (keys, version IDs, ETags, sizes, delete markers).
func sameVersions(t *testing.T, src, dst *s3.Client, sb, db string, within time.Duration) []versionView {
	t.Helper()
	var a, b []versionView
	deadline := time.Now().Add(within)
	for {
		a, b = listVersions(t, src, sb), listVersions(t, dst, db)
		if fmt.Sprint(a) == fmt.Sprint(b) {
			return a
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	missing, extra := diffVersions(a, b)
	t.Fatalf("after %s the destination differs: %d versions missing (first %v), %d extra (first %v); source has %d",
		within, len(missing), first(missing), len(extra), first(extra), len(a))
	return nil
}

func diffVersions(a, b []versionView) (missing, extra []versionView) {
	in := func(list []versionView) map[versionView]bool {
		m := map[versionView]bool{}
		for _, v := range list {
			m[v] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	for _, v := range a {
		if !ib[v] {
			missing = append(missing, v)
		}
	}
	for _, v := range b {
		if !ia[v] {
			extra = append(extra, v)
		}
	}
	return missing, extra
}

func first(v []versionView) any {
	if len(v) == 0 {
		return nil
	}
	return v[0]
}

func headVersion(t *testing.T, c *s3.Client, bucket, key, id string) *s3.HeadObjectOutput {
	t.Helper()
	in := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := c.HeadObject(ctx, in)
	if err != nil {
		t.Fatalf("HEAD %s/%s?versionId=%s: %v", bucket, key, id, err)
	}
	return out
}

func bodySum(t *testing.T, c *s3.Client, bucket, key, id string) [32]byte {
	t.Helper()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(id)})
	if err != nil {
		t.Fatalf("GET %s/%s?versionId=%s: %v", bucket, key, id, err)
	}
	defer out.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(out.Body); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(buf.Bytes())
}

// TestBucketReplication: a bucket replicated to a bucket of another
// server (another tenant) through S3's replication API, end to end:
// configurations checked as S3 checks them; new objects and versions with
// their metadata, tags, SSE (re-encrypted by the destination) and
// multipart ETags, delete markers, version deletes and tag changes arrive
// with the source's version IDs; x-amz-replication-status says PENDING,
// COMPLETED and REPLICA; a destination killed for a while (with writes
// acknowledged meanwhile) gets every version once back, 0 missing, equal
// checksums; the admin API and the metrics show backlog and counters;
// a resync copies versions written before the configuration; and the two
// buckets replicating to each other do not loop. STRATA_TEST_REPLICATION_OUTAGE
// sets the outage (default 5s; the target is 60s:
// `make replication-long`).
func TestBucketReplication(t *testing.T) {
	t.Parallel()
	keys := "STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-key")
	// Single PUTs of at most 5 MiB on both sides (S3's limit is 5 GiB): a
	// multipart version larger than that is copied in parts.
	maxPut := fmt.Sprintf("STRATA_TEST_MAX_PUT_SIZE=%d", 5<<20)
	dst := startServer(t, serverOpts{drives: 4, env: []string{keys, maxPut}})
	src := startServer(t, serverOpts{drives: 4, env: append(replicationRemote(t, dst), keys, maxPut)})
	sc, dc := src.aws(), dst.aws()
	mustCreateBucket(t, sc, "plain")
	versionedBucket(t, sc, "src")
	versionedBucket(t, dc, "dst")

	t.Run("configuration is checked", func(t *testing.T) {
		_, err := sc.GetBucketReplication(ctx, &s3.GetBucketReplicationInput{Bucket: aws.String("src")})
		if errCode(err) != "ReplicationConfigurationNotFoundError" || errStatus(err) != http.StatusNotFound {
			t.Fatalf("GetBucketReplication of a bucket without one: %v", err)
		}
		rule := types.ReplicationRule{ID: aws.String("r"), Status: types.ReplicationRuleStatusEnabled, Priority: aws.Int32(1),
			Filter:                  &types.ReplicationRuleFilter{Prefix: aws.String("")},
			DeleteMarkerReplication: &types.DeleteMarkerReplication{Status: types.DeleteMarkerReplicationStatusEnabled},
			Destination:             &types.Destination{Bucket: aws.String("arn:aws:s3:::dst")}}
		setConfig := func(bucket, role string) error {
			_, err := sc.PutBucketReplication(ctx, &s3.PutBucketReplicationInput{Bucket: aws.String(bucket),
				ReplicationConfiguration: &types.ReplicationConfiguration{Role: aws.String(role), Rules: []types.ReplicationRule{rule}}})
			return err
		}
		if err := setConfig("plain", drRole); errCode(err) != "InvalidRequest" || !strings.Contains(err.Error(), "Versioning must be 'Enabled'") {
			t.Fatalf("replication of an unversioned bucket: %v", err)
		}
		if err := setConfig("src", "arn:strata:replication:us-east-1:nowhere:s3"); errCode(err) != "InvalidArgument" {
			t.Fatalf("an unknown remote: %v", err)
		}
		if err := setConfig("src", "arn:strata:sqs:us-east-1:dr:s3"); errCode(err) != "InvalidArgument" {
			t.Fatalf("a notification ARN as the role: %v", err)
		}
		if err := setConfig("src", drRole); err != nil {
			t.Fatalf("the SDK's configuration: %v", err)
		}
		_, err = sc.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("src"),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
		if errCode(err) != "InvalidBucketState" {
			t.Fatalf("suspending versioning under a replication configuration: %v", err)
		}
		got, err := sc.GetBucketReplication(ctx, &s3.GetBucketReplicationInput{Bucket: aws.String("src")})
		if err != nil || aws.ToString(got.ReplicationConfiguration.Role) != drRole || len(got.ReplicationConfiguration.Rules) != 1 ||
			aws.ToString(got.ReplicationConfiguration.Rules[0].Destination.Bucket) != "arn:aws:s3:::dst" {
			t.Fatalf("GetBucketReplication: %+v %v", got, err)
		}
		if _, err := sc.DeleteBucketReplication(ctx, &s3.DeleteBucketReplicationInput{Bucket: aws.String("src")}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a resync copies the versions written before the configuration", func(t *testing.T) {
		for i := range 5 {
			put(t, sc, "src", fmt.Sprintf("before/%d", i), randomBytes(1000+i))
		}
		// A key whose newest version came after a delete marker: at the
		// destination too, the newest is current.
		put(t, sc, "src", "before/seq", []byte("v1"))
		if _, err := sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("src"), Key: aws.String("before/seq")}); err != nil {
			t.Fatal(err)
		}
		put(t, sc, "src", "before/seq", []byte("v3"))
		put(t, sc, "src", "before/empty", nil)
		replicateAll(t, src, "src", "dst")
		time.Sleep(time.Second)
		if n := len(listVersions(t, dc, "dst")); n != 0 {
			t.Fatalf("%d versions written before the configuration were copied without a resync", n)
		}
		code, body := src.admin(http.MethodPost, "buckets/src/replication/resync")
		var res struct{ Queued, Versions int }
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Queued != 9 || res.Versions != 9 {
			t.Fatalf("resync: %d %s", code, body)
		}
		sameVersions(t, sc, dc, "src", "dst", 30*time.Second)
		if got := get(t, dc, "dst", "before/seq"); string(got) != "v3" {
			t.Fatalf("the destination's current version of before/seq is %q, want v3", got)
		}
		if got := get(t, dc, "dst", "before/empty"); len(got) != 0 {
			t.Fatalf("the empty object's replica holds %d bytes", len(got))
		}
	})

	t.Run("new versions, metadata, tags, SSE, multipart", func(t *testing.T) {
		for i := range 20 {
			key := fmt.Sprintf("obj/%02d", i)
			_, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String(key), Body: bytes.NewReader(randomBytes(4096 + i)),
				ContentType: aws.String("text/x-test"), Metadata: map[string]string{"origin": "src"}, Tagging: aws.String("team=storage&n=" + fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
		}
		put(t, sc, "src", "obj/00", []byte("a second version"))
		put(t, sc, "src", "odd keys/ä b+c?d=%20&e#f", []byte("a key to escape"))
		if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("secret"), Body: bytes.NewReader(randomBytes(70_000)),
			ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String("too-big"), Body: bytes.NewReader(randomBytes(5<<20 + 1))}); errCode(err) != "EntityTooLarge" {
			t.Fatalf("a PUT beyond the servers' limit: %v, want EntityTooLarge", err)
		}
		// 6 MiB in two parts: larger than a PUT may be, copied in the same
		// parts (so any S3 destination derives the same ETag); and one
		// encrypted, decrypted for its copy.
		bigParts := [][]byte{randomBytes(5 << 20), randomBytes(1 << 20)}
		if err := uploadParts(sc, "src", "big", bigParts); err != nil {
			t.Fatal(err)
		}
		if err := uploadParts(sc, "src", "big-secret", [][]byte{randomBytes(5<<20 + 3), randomBytes(1<<20 + 5)}, func(in *s3.CreateMultipartUploadInput) {
			in.ServerSideEncryption, in.ContentType = types.ServerSideEncryptionAes256, aws.String("video/x-test")
			in.Metadata = map[string]string{"origin": "src"}
		}); err != nil {
			t.Fatal(err)
		}
		versions := sameVersions(t, sc, dc, "src", "dst", 30*time.Second)
		if n := len(versions); n != 34 {
			t.Fatalf("%d versions replicated, want 34", n)
		}
		for _, key := range []string{"big", "big-secret"} {
			h, err := dc.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("dst"), Key: aws.String(key), PartNumber: aws.Int32(1)})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToInt32(h.PartsCount) != 2 {
				t.Fatalf("%s at the destination: %d parts, want the source's 2", key, aws.ToInt32(h.PartsCount))
			}
		}
		t.Run("a version copied in parts sent again", func(t *testing.T) {
			// A remote whose completion's answer was lost sends the copy
			// again: answered as written, nothing new stored, the upload
			// gone; the same version ID with other content is refused.
			sh := headVersion(t, sc, "src", "big", "")
			replica := func(etag string) func(*s3.Options) {
				return func(o *s3.Options) {
					o.APIOptions = append(o.APIOptions,
						smithyhttp.AddHeaderValue("X-Strata-Replica-Version-Id", aws.ToString(sh.VersionId)),
						smithyhttp.AddHeaderValue("X-Strata-Replica-Mtime", sh.LastModified.UTC().Format(time.RFC3339Nano)),
						smithyhttp.AddHeaderValue("X-Strata-Replica-Etag", etag))
				}
			}
			before := len(listVersions(t, dc, "dst"))
			for _, c := range []struct {
				etag, wantCode string
			}{{strings.Trim(aws.ToString(sh.ETag), `"`), ""}, {"0123456789abcdef0123456789abcdef-2", "InvalidRequest"}} {
				up, err := dc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("big")})
				if err != nil {
					t.Fatal(err)
				}
				var done []types.CompletedPart
				for i, p := range bigParts {
					out, err := dc.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("dst"), Key: aws.String("big"), UploadId: up.UploadId,
						PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
					if err != nil {
						t.Fatal(err)
					}
					done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
				}
				out, err := dc.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("big"), UploadId: up.UploadId,
					MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}, replica(c.etag))
				if c.wantCode != "" {
					if errCode(err) != c.wantCode {
						t.Fatalf("a replica completion with other content: %v, want %s", err, c.wantCode)
					}
					if _, err := dc.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("big"), UploadId: up.UploadId}); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err != nil || aws.ToString(out.VersionId) != aws.ToString(sh.VersionId) || aws.ToString(out.ETag) != aws.ToString(sh.ETag) {
					t.Fatalf("the completion sent again: %v %v, want version %s, ETag %s", out, err, aws.ToString(sh.VersionId), aws.ToString(sh.ETag))
				}
			}
			if n := len(listVersions(t, dc, "dst")); n != before {
				t.Fatalf("%d versions at the destination after the copy was sent again, want %d", n, before)
			}
			ups, err := dc.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("dst")})
			if err != nil || len(ups.Uploads) != 0 {
				t.Fatalf("uploads left at the destination: %+v %v", ups, err)
			}
		})
		for _, v := range versions {
			if v.marker {
				continue
			}
			if bodySum(t, sc, "src", v.key, v.id) != bodySum(t, dc, "dst", v.key, v.id) {
				t.Fatalf("%s version %s: the bodies differ", v.key, v.id)
			}
			sh, dh := headVersion(t, sc, "src", v.key, v.id), headVersion(t, dc, "dst", v.key, v.id)
			waitFor(t, "COMPLETED at the source", 10*time.Second, func() bool {
				sh = headVersion(t, sc, "src", v.key, v.id)
				return sh.ReplicationStatus == types.ReplicationStatusCompleted
			})
			if dh.ReplicationStatus != types.ReplicationStatusReplica {
				t.Fatalf("%s at the destination: replication status %q, want REPLICA", v.key, dh.ReplicationStatus)
			}
			if aws.ToString(sh.ContentType) != aws.ToString(dh.ContentType) || fmt.Sprint(sh.Metadata) != fmt.Sprint(dh.Metadata) ||
				!sh.LastModified.Equal(*dh.LastModified) {
				t.Fatalf("%s: headers differ: %v %v %v / %v %v %v", v.key, aws.ToString(sh.ContentType), sh.Metadata, sh.LastModified,
					aws.ToString(dh.ContentType), dh.Metadata, dh.LastModified)
			}
		}
		tags, err := dc.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("dst"), Key: aws.String("obj/05")})
		if err != nil || len(tags.TagSet) != 2 {
			t.Fatalf("tags at the destination: %+v %v", tags, err)
		}
		if h := headVersion(t, dc, "dst", "secret", ""); h.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Fatalf("the SSE object at the destination: encryption %q, want AES256 (encrypted again with its key)", h.ServerSideEncryption)
		}
	})

	t.Run("delete markers, version deletes, tag changes", func(t *testing.T) {
		if _, err := sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("src"), Key: aws.String("obj/01")}); err != nil {
			t.Fatal(err)
		}
		old := listVersions(t, sc, "src")
		var victim versionView
		for _, v := range old {
			if v.key == "obj/00" && !v.marker {
				victim = v
				break
			}
		}
		if _, err := sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("src"), Key: aws.String("obj/00"), VersionId: aws.String(victim.id)}); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("src"), Key: aws.String("obj/02"),
			Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("state"), Value: aws.String("changed")}}}}); err != nil {
			t.Fatal(err)
		}
		versions := sameVersions(t, sc, dc, "src", "dst", 30*time.Second)
		markers := 0
		for _, v := range versions {
			if v.marker {
				markers++
			}
		}
		if markers != 2 { // before/seq's and obj/01's
			t.Fatalf("%d delete markers, want 2", markers)
		}
		waitFor(t, "the tag change at the destination", 10*time.Second, func() bool {
			tags, err := dc.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("dst"), Key: aws.String("obj/02")})
			return err == nil && len(tags.TagSet) == 1 && aws.ToString(tags.TagSet[0].Value) == "changed"
		})
	})

	t.Run("a destination bucket missing: FAILED, then a resync", func(t *testing.T) {
		versionedBucket(t, sc, "lost")
		replicateAll(t, src, "lost", "nowhere")
		put(t, sc, "lost", "orphan", []byte("no bucket at the destination"))
		waitFor(t, "FAILED at the source", 20*time.Second, func() bool {
			return headVersion(t, sc, "lost", "orphan", "").ReplicationStatus == types.ReplicationStatusFailed
		})
		code, body := src.adminGet("replication")
		var st struct {
			Buckets []struct {
				Bucket string
				Failed int64
			}
		}
		if code != http.StatusOK || json.Unmarshal(body, &st) != nil || len(st.Buckets) != 2 || st.Buckets[0].Bucket != "lost" || st.Buckets[0].Failed != 1 {
			t.Fatalf("admin replication status after a failure: %d %s", code, body)
		}
		versionedBucket(t, dc, "nowhere")
		resyncCompletes(t, src, dc, "lost", "nowhere", "orphan")
	})

	t.Run("a destination down for a while misses nothing", func(t *testing.T) {
		outage := 5 * time.Second
		if v := os.Getenv("STRATA_TEST_REPLICATION_OUTAGE"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			outage = d
		}
		dst.kill()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		acked := 0
		for w := range 4 {
			wg.Go(func() {
				for i := 0; time.Since(start) < outage; i++ {
					key := fmt.Sprintf("outage/%d/%d", w, i)
					if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String(key), Body: bytes.NewReader(randomBytes(4096))}); err != nil {
						t.Errorf("PUT while the destination is down: %v", err)
						return
					}
					mu.Lock()
					acked++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		if h := headVersion(t, sc, "src", "outage/0/0", ""); h.ReplicationStatus != types.ReplicationStatusPending {
			t.Fatalf("a version not yet replicated: status %q, want PENDING", h.ReplicationStatus)
		}
		code, body := src.adminGet("replication")
		var st struct {
			Remotes []struct{ Backlog int64 }
		}
		if code != http.StatusOK || json.Unmarshal(body, &st) != nil || len(st.Remotes) != 1 || st.Remotes[0].Backlog == 0 {
			t.Fatalf("admin replication status during the outage: %d %s", code, body)
		}
		t.Logf("%d PUTs acknowledged during a %s outage; backlog %d", acked, outage, st.Remotes[0].Backlog)
		dst.restart()
		versions := sameVersions(t, sc, dc, "src", "dst", 60*time.Second+outage)
		waitFor(t, "a version written during the outage COMPLETED", 10*time.Second, func() bool {
			return headVersion(t, sc, "src", "outage/0/0", "").ReplicationStatus == types.ReplicationStatusCompleted
		})
		for _, v := range versions {
			if strings.HasPrefix(v.key, "outage/0/") && bodySum(t, sc, "src", v.key, v.id) != bodySum(t, dc, "dst", v.key, v.id) {
				t.Fatalf("%s: the bodies differ", v.key)
			}
		}
		code, body = src.adminGet("replication")
		var after struct {
			Remotes []struct{ Backlog int64 }
			Buckets []struct {
				Bucket             string
				Replicated, Failed int64
			}
		}
		if code != http.StatusOK || json.Unmarshal(body, &after) != nil || len(after.Buckets) != 2 || after.Buckets[1].Bucket != "src" ||
			after.Buckets[1].Replicated < int64(acked) || after.Buckets[1].Failed != 0 || after.Remotes[0].Backlog != 0 {
			t.Fatalf("admin replication status: %d %s", code, body)
		}
		code, families := scrapeMetrics(t, http.DefaultClient, src.url(), "")
		for _, m := range []string{"strata_replication_backlog_changes", "strata_replication_lag_seconds", "strata_replication_changes_total"} {
			if code != http.StatusOK || families[m] == nil {
				t.Fatalf("metrics (%d) without %s", code, m)
			}
		}
	})

	t.Run("the source killed during writes loses nothing", func(t *testing.T) {
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var acked []string
		for w := range 4 {
			wg.Go(func() {
				for i := 0; time.Since(start) < 3*time.Second; i++ {
					key := fmt.Sprintf("crash/%d/%d", w, i)
					if _, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("src"), Key: aws.String(key), Body: bytes.NewReader(randomBytes(4096))}); err != nil {
						return // the server is gone
					}
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				}
			})
		}
		time.Sleep(1500 * time.Millisecond)
		src.kill()
		wg.Wait()
		src.restart()
		versions := sameVersions(t, sc, dc, "src", "dst", 60*time.Second)
		have := map[string]bool{}
		for _, v := range versions {
			have[v.key] = true
		}
		for _, k := range acked {
			if !have[k] {
				t.Fatalf("%s was acknowledged and is not on either side", k)
			}
		}
		t.Logf("%d PUTs acknowledged before the source was killed, all replicated", len(acked))
	})

	// A copied version's COMPLETED is read from its event being gone (no
	// second write), so an event dropped without a copy must say so.
	t.Run("a rule replaced while its versions wait: PENDING, then a resync", func(t *testing.T) {
		versionedBucket(t, sc, "renamed")
		versionedBucket(t, dc, "renamed-dr")
		replicateAll(t, src, "renamed", "renamed-dr")
		dst.kill()
		put(t, sc, "renamed", "waiting", []byte("written while the destination is down"))
		cfg := replication.Config{Role: drRole, Rules: []replication.Rule{{ID: "another", Status: replication.Enabled, Priority: 1,
			Destination: replication.Destination{Bucket: "arn:aws:s3:::renamed-dr"}}}}
		if err := src.minio().SetBucketReplication(ctx, "renamed", cfg); err != nil {
			t.Fatal(err)
		}
		dst.restart()
		waitFor(t, "the backlog drained", 30*time.Second, func() bool { return replicationDrained(src) })
		time.Sleep(300 * time.Millisecond) // delivered events are forgotten within 100 ms
		if h := headVersion(t, sc, "renamed", "waiting", ""); h.ReplicationStatus != types.ReplicationStatusPending {
			t.Fatalf("a version whose rule was replaced before its copy: status %q, want PENDING", h.ReplicationStatus)
		}
		if n := len(listVersions(t, dc, "renamed-dr")); n != 0 {
			t.Fatalf("%d versions at the destination, want none", n)
		}
		resyncCompletes(t, src, dc, "renamed", "renamed-dr", "waiting")
	})

	t.Run("a remote removed while versions wait: PENDING", func(t *testing.T) {
		versionedBucket(t, sc, "orphaned")
		versionedBucket(t, dc, "orphaned-dr")
		replicateAll(t, src, "orphaned", "orphaned-dr")
		dst.kill()
		put(t, sc, "orphaned", "waiting", []byte("written while the destination is down"))
		withRemote := src.env
		defer func() { // as the subtests after this one expect them, pass or fail
			src.kill()
			src.env = withRemote
			src.restart()
			dst.restart()
		}()
		src.kill()
		// A targets file without remote dr (the operator's, once a Tenant's
		// remote is removed).
		noRemote := filepath.Join(t.TempDir(), "targets.json")
		if err := os.WriteFile(noRemote, []byte(`{"targets":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		// Its events are dropped once older than a second, not the two
		// minutes a pod of a tenant waits for its targets file to catch up.
		src.env = []string{"STRATA_NOTIFY_TARGETS_FILE=" + noRemote, keys, maxPut, "STRATA_TEST_NOTIFY_UNKNOWN_GRACE=1s"}
		src.restart()
		waitFor(t, "the event for the removed remote dropped", 30*time.Second, func() bool { return notifyDrained(t, src) })
		if h := headVersion(t, sc, "orphaned", "waiting", ""); h.ReplicationStatus != types.ReplicationStatusPending {
			t.Fatalf("a version whose remote was removed before its copy: status %q, want PENDING", h.ReplicationStatus)
		}
	})

	t.Run("two-way replication does not loop", func(t *testing.T) {
		// The destination replicates back: its remote is the source.
		dst.kill()
		dst.env = append(replicationRemote(t, src), keys)
		dst.restart()
		replicateAll(t, dst, "dst", "src")
		put(t, dc, "dst", "from-dst", []byte("written at the destination"))
		put(t, sc, "src", "from-src", []byte("written at the source"))
		versions := sameVersions(t, sc, dc, "src", "dst", 30*time.Second)
		time.Sleep(2 * time.Second) // a loop would add versions now
		again := sameVersions(t, sc, dc, "src", "dst", 10*time.Second)
		if len(again) != len(versions) {
			t.Fatalf("versions went from %d to %d: replication loops", len(versions), len(again))
		}
		if h := headVersion(t, sc, "src", "from-dst", ""); h.ReplicationStatus != types.ReplicationStatusReplica {
			t.Fatalf("from-dst at the source: %q, want REPLICA", h.ReplicationStatus)
		}
		waitFor(t, "from-dst COMPLETED at the destination", 10*time.Second, func() bool {
			return headVersion(t, dc, "dst", "from-dst", "").ReplicationStatus == types.ReplicationStatusCompleted
		})
	})
}

// TestGatewayReplication: a gateway replicates a bucket to a server and
// takes a server's replicas: versions with their IDs, a delete marker, and
// the gateway's own replicas not sent back.
func TestGatewayReplication(t *testing.T) {
	t.Parallel()
	dst := startServer(t, serverOpts{drives: 4})
	g := startGateway(t, t.TempDir())
	g.kill()
	// Single PUTs of at most 5 MiB: larger versions are copied in parts.
	maxPut := fmt.Sprintf("STRATA_TEST_MAX_PUT_SIZE=%d", 5<<20)
	g.env = append(replicationRemote(t, dst), maxPut)
	g.restart()
	gc, dc := g.aws(), dst.aws()
	versionedBucket(t, gc, "docs")
	versionedBucket(t, dc, "docs-dr")
	replicateAll(t, g, "docs", "docs-dr")
	for i := range 10 {
		put(t, gc, "docs", fmt.Sprintf("d/%d", i), randomBytes(3000+i))
	}
	put(t, gc, "docs", "d/0", []byte("again"))
	if _, err := gc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("docs"), Key: aws.String("d/1")}); err != nil {
		t.Fatal(err)
	}
	if err := uploadParts(gc, "docs", "d/big", [][]byte{randomBytes(5 << 20), randomBytes(1<<20 + 1)}); err != nil {
		t.Fatal(err)
	}
	versions := sameVersions(t, gc, dc, "docs", "docs-dr", 30*time.Second)
	if len(versions) != 13 {
		t.Fatalf("%d versions on both sides, want 13 (12 versions and a delete marker)", len(versions))
	}
	for _, v := range versions {
		if !v.marker && bodySum(t, gc, "docs", v.key, v.id) != bodySum(t, dc, "docs-dr", v.key, v.id) {
			t.Fatalf("%s version %s: the bodies differ", v.key, v.id)
		}
	}

	t.Run("the gateway as the destination", func(t *testing.T) {
		dst.kill()
		dst.env = append(replicationRemote(t, g), maxPut)
		dst.restart()
		versionedBucket(t, dc, "back")
		versionedBucket(t, gc, "back-dr")
		replicateAll(t, dst, "back", "back-dr")
		put(t, dc, "back", "x", []byte("to the gateway"))
		if _, err := dc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("back"), Key: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
		if err := uploadParts(dc, "back", "big", [][]byte{randomBytes(5<<20 + 7), randomBytes(1 << 20)}); err != nil {
			t.Fatal(err)
		}
		back := sameVersions(t, dc, gc, "back", "back-dr", 30*time.Second)
		if len(back) != 3 {
			t.Fatalf("%d versions on both sides, want two versions and a delete marker", len(back))
		}
		for _, v := range back {
			if v.marker {
				continue
			}
			if headVersion(t, gc, "back-dr", v.key, v.id).ReplicationStatus != types.ReplicationStatusReplica {
				t.Fatalf("the gateway's replica of %s is not REPLICA", v.key)
			}
			if bodySum(t, dc, "back", v.key, v.id) != bodySum(t, gc, "back-dr", v.key, v.id) {
				t.Fatalf("%s version %s: the bodies differ", v.key, v.id)
			}
		}
	})
}
