package engine

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestWritesThroughASkewedNodeAreNeverLost: node 12's clock runs 40 s
// ahead and node 14's 30 s behind (STRATA_TEST_CLOCK_SKEW, the injected
// clock versions are stamped with). A write through node 14 right after
// one through node 12 is the one every node then serves, in an unversioned
// bucket (where the older stamp used to be dropped by every drive although
// the PUT answered 200), in a versioned one (where it used to sort below
// the older version) and as a delete marker. Each node reports the skew it
// sees (strata_internode_clock_offset_seconds).
func TestWritesThroughASkewedNodeAreNeverLost(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.env = map[int][]string{12: {"STRATA_TEST_CLOCK_SKEW=40s"}, 14: {"STRATA_TEST_CLOCK_SKEW=-30s"}}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)

	// The nodes learn each other's clocks from their pings (every second).
	offset := func(n int) float64 {
		resp, err := http.Get(c.nodes[n].url() + "/strata/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "strata_internode_clock_offset_seconds "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		t.Fatalf("node %d exports no strata_internode_clock_offset_seconds", n)
		return 0
	}
	deadline := time.Now().Add(15 * time.Second)
	for offset(14) < 69 || offset(11) < 39 {
		if time.Now().After(deadline) {
			t.Fatalf("clock offsets seen: node 14 %.1f s (want about 70), node 11 %.1f s (want about 40)", offset(14), offset(11))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("clock offsets: node 11 sees %.1f s, node 14 %.1f s", offset(11), offset(14))

	ctx := context.Background()
	ahead, behind, reader := c.nodes[12].aws(), c.nodes[14].aws(), c.nodes[11].aws()
	put := func(cl *s3.Client, bucket, key, body string) {
		t.Helper()
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(bucket, key string) string {
		t.Helper()
		out, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return "error: " + err.Error()
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return string(b)
	}

	mustCreateBucket(t, ahead, "plain")
	mustCreateBucket(t, ahead, "versioned")
	if _, err := ahead.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("versioned"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	big := string(bytes.Repeat([]byte("x"), 300<<10)) // striped into shard files, not inline
	for i := range 20 {
		body := ""
		if i%4 == 3 {
			body = big
		}
		for _, bucket := range []string{"plain", "versioned"} {
			key := fmt.Sprintf("k%d", i)
			put(ahead, bucket, key, "first "+strconv.Itoa(i)+body)
			put(behind, bucket, key, "second "+strconv.Itoa(i)+body)
			if got := get(bucket, key); got != "second "+strconv.Itoa(i)+body {
				t.Fatalf("%s/%s: written through the node 40 s ahead, then through the one 30 s behind: read %.40q, want the second write", bucket, key, got)
			}
		}
	}

	// In the versioned bucket the later write is the latest version.
	vs, err := reader.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("versioned"), Prefix: aws.String("k0")})
	second := fmt.Sprintf(`"%x"`, md5.Sum([]byte("second 0")))
	if err != nil || len(vs.Versions) != 2 || !aws.ToBool(vs.Versions[0].IsLatest) || aws.ToString(vs.Versions[0].ETag) != second ||
		vs.Versions[0].LastModified.Before(*vs.Versions[1].LastModified) {
		t.Fatalf("versions of k0 (want the second write latest, ETag %s): %v", second, err)
	}

	// A delete through the node behind hides what the node ahead wrote.
	put(ahead, "versioned", "gone", "written ahead")
	if _, err := behind.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("versioned"), Key: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	if got := get("versioned", "gone"); !strings.Contains(got, "NoSuchKey") {
		t.Fatalf("after a delete through the node behind: %.60q, want NoSuchKey", got)
	}
}
