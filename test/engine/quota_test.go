package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/strata-storage/strata/engine/adminapi"
)

// TestBucketQuotaAcrossNodes: a quota set with `strata admin` through one
// node of four binds writers on every node at once. Writers racing for
// the last room, on four nodes, pass the quota by at most one object
// each; the refusal is S3's 403 QuotaExceeded as the AWS SDK reports it;
// the usage the admin API and the metrics give is what was stored; a
// delete makes room again; a byte quota refuses a write that would pass
// it and takes one that fits.
func TestBucketQuotaAcrossNodes(t *testing.T) {
	t.Parallel()
	n1, n2, n3, n4 := iamCluster(t)
	nodes := []*server{n1, n2, n3, n4}
	ctx := t.Context()
	if _, err := n1.aws().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("capped")}); err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) string {
		t.Helper()
		code, out, errOut := strataAdmin(t, append([]string{"STRATA_ENDPOINT=" + n2.url()}, rootEnv...), args...)
		if code != 0 {
			t.Fatalf("strata admin %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	if out := admin("bucket", "capped", "quota", "0", "30"); !strings.Contains(out, "capped") || !strings.Contains(out, "30") {
		t.Fatalf("setting the quota printed:\n%s", out)
	}

	const writers = 8
	var stored atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		c := nodes[w%len(nodes)].aws()
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("capped"), Key: aws.String(fmt.Sprintf("w%d/%d", w, i)),
					Body: bytes.NewReader(make([]byte, 1024))})
				if err == nil {
					stored.Add(1)
					continue
				}
				if code, status := s3Code(err); code != "QuotaExceeded" || status != http.StatusForbidden {
					t.Errorf("writer %d: %v (want 403 QuotaExceeded)", w, err)
				}
				return
			}
		})
	}
	wg.Wait()
	var usage adminapi.BucketUsage
	if err := json.Unmarshal([]byte(admin("--json", "bucket", "capped")), &usage); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writers on 4 nodes stored %d objects under a quota of 30", writers, stored.Load())
	if usage.Objects != stored.Load() || usage.Objects < 30 || usage.Objects > 30+writers-1 || usage.Bytes != usage.Objects*1024 {
		t.Fatalf("usage %+v after %d acknowledged writes: want 30 to %d objects of 1 KiB", usage, stored.Load(), 30+writers-1)
	}
	if usage.Quota == nil || usage.Quota.Objects != 30 {
		t.Fatalf("quota reported as %+v", usage.Quota)
	}

	// Every node reports it in its metrics.
	_, families := scrapeMetrics(t, http.DefaultClient, n3.url(), "")
	if f := families["strata_bucket_usage_objects"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != float64(usage.Objects) {
		t.Errorf("strata_bucket_usage_objects on node 3: %v", f)
	}

	// Deletes that take the bucket one under its quota make room for one
	// write, not two.
	for i := range usage.Objects - 29 {
		if _, err := n4.aws().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("capped"), Key: aws.String(fmt.Sprintf("w%d/%d", i%writers, i/writers))}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"", "QuotaExceeded"} {
		_, err := n3.aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("capped"), Key: aws.String(fmt.Sprintf("again/%d", i)), Body: bytes.NewReader([]byte("x"))})
		if code, _ := s3Code(err); code != want {
			t.Errorf("write %d after the deletes: %v (want %q)", i, err, want)
		}
	}
	if err := json.Unmarshal([]byte(admin("--json", "bucket", "capped")), &usage); err != nil || usage.Objects != 30 {
		t.Fatalf("usage after the deletes and the write: %+v %v", usage, err)
	}

	// A byte quota: 100 bytes of room.
	admin("bucket", "capped", "quota", fmt.Sprint(usage.Bytes+100), "0")
	if _, err := n1.aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("capped"), Key: aws.String("big"), Body: bytes.NewReader(make([]byte, 200))}); err == nil {
		t.Error("a 200-byte write into 100 bytes of room succeeded")
	} else if code, _ := s3Code(err); code != "QuotaExceeded" {
		t.Errorf("the 200-byte write: %v", err)
	}
	if _, err := n2.aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("capped"), Key: aws.String("small"), Body: bytes.NewReader(make([]byte, 100))}); err != nil {
		t.Errorf("a write that fills the room: %v", err)
	}
	// No quota: writes go through again.
	admin("bucket", "capped", "quota", "0", "0")
	if _, err := n4.aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("capped"), Key: aws.String("free"), Body: bytes.NewReader(make([]byte, 4096))}); err != nil {
		t.Errorf("after the quota was removed: %v", err)
	}
	if code, _, errOut := strataAdmin(t, append([]string{"STRATA_ENDPOINT=" + n1.url()}, rootEnv...), "bucket", "nosuch"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("usage of a missing bucket: exit %d %s", code, errOut)
	}
}

// s3Code is the S3 error code and HTTP status of an SDK error.
func s3Code(err error) (string, int) {
	var api smithy.APIError
	var resp *smithyhttp.ResponseError
	code, status := "", 0
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	return code, status
}
