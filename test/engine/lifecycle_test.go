package engine

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// lifecycleDay is the length of a lifecycle day in TestLifecycle: the
// server runs with STRATA_TEST_LIFECYCLE_DAY (the injected clock of its
// rules) and a pass every 300 ms.
const lifecycleDay = 2 * time.Second

// TestLifecycle runs bucket lifecycle rules on a TLS `strata server` and
// a TLS `strata gateway` with the aws CLI (configuration), boto3
// (configuration, x-amz-expiration, refusals;
// testdata/clients/boto3_lifecycle.py) and aws-sdk-go-v2 (what the passes
// did): expiry of current versions by prefix, tag and date, in a versioned
// and an unversioned bucket; noncurrent versions after their days, the
// newest kept; delete markers left alone removed; stale multipart uploads
// aborted; versions under a legal hold kept until it is lifted; the
// passes' metrics.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	venv := pyClients(t)
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			tg := startTLSTargetWith(t, kind, []string{"STRATA_TEST_LIFECYCLE_DAY=" + lifecycleDay.String()}, "--lifecycle-interval", "300ms")
			testLifecycle(t, venv, tg)
		})
	}
}

func testLifecycle(t *testing.T, venv string, tg *tlsTarget) {
	env := tg.clientEnv(t, venv)
	work := t.TempDir()
	sdk := tg.sdkClient(nil)
	awsCLI := func(args ...string) clientRun {
		t.Helper()
		return runClient(t, env, work, filepath.Join(venv, "aws"), append(args, "--endpoint-url", tg.endpoint())...)
	}

	t.Run("boto3", func(t *testing.T) {
		runChecks(t, env, work, venv, "boto3_lifecycle.py", "--endpoint", tg.endpoint(), "--bucket", "lc-boto3")
	})

	const versioned, plain, locked = "lc-versioned", "lc-plain", "lc-locked"
	awsCLI("s3api", "create-bucket", "--bucket", versioned)
	awsCLI("s3api", "put-bucket-versioning", "--bucket", versioned, "--versioning-configuration", "Status=Enabled")
	awsCLI("s3api", "create-bucket", "--bucket", plain)
	awsCLI("s3api", "create-bucket", "--bucket", locked, "--object-lock-enabled-for-bucket")
	rules := map[string]string{
		versioned: `{"Rules": [
			{"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled", "Expiration": {"Days": 3}},
			{"ID": "tagged", "Filter": {"And": {"Prefix": "tag/", "Tags": [{"Key": "expire", "Value": "yes"}]}}, "Status": "Enabled", "Expiration": {"Days": 3}},
			{"ID": "past", "Filter": {"Prefix": "past/"}, "Status": "Enabled", "Expiration": {"Date": "2020-01-01T00:00:00Z"}},
			{"ID": "history", "Filter": {"Prefix": "ver/"}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 2, "NewerNoncurrentVersions": 1}},
			{"ID": "gone", "Filter": {"Prefix": "gone/"}, "Status": "Enabled", "Expiration": {"ExpiredObjectDeleteMarker": true}, "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
			{"ID": "uploads", "Filter": {"Prefix": "up/"}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
			{"ID": "off", "Filter": {"Prefix": "keep/"}, "Status": "Disabled", "Expiration": {"Days": 1}}]}`,
		plain:  `{"Rules": [{"ID": "tmp", "Filter": {"Prefix": "tmp/"}, "Status": "Enabled", "Expiration": {"Days": 3}}]}`,
		locked: `{"Rules": [{"ID": "history", "Filter": {}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}]}`,
	}
	for bucket, doc := range rules {
		f := filepath.Join(work, bucket+".json")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		awsCLI("s3api", "put-bucket-lifecycle-configuration", "--bucket", bucket, "--lifecycle-configuration", "file://"+f)
		got := awsCLI("s3api", "get-bucket-lifecycle-configuration", "--bucket", bucket)
		var back struct{ Rules []map[string]any }
		if err := json.Unmarshal([]byte(got.stdout), &back); err != nil || len(back.Rules) != strings.Count(doc, `"ID"`) {
			t.Fatalf("aws s3api get-bucket-lifecycle-configuration of %s: %v\n%s", bucket, err, got.stdout)
		}
	}

	start := time.Now()
	for _, k := range []string{"tmp/a", "tag/yes", "tag/no", "past/a", "keep/a", "other/a", "ver/k", "ver/k", "ver/k", "gone/k"} {
		put(t, sdk, versioned, k, []byte(k))
	}
	if _, err := sdk.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(versioned), Key: aws.String("tag/yes"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("expire"), Value: aws.String("yes")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(versioned), Key: aws.String("gone/k")}); err != nil {
		t.Fatal(err)
	}
	put(t, sdk, plain, "tmp/a", []byte("a"))
	put(t, sdk, plain, "keep/a", []byte("a"))
	for _, k := range []string{"up/a", "other/up"} {
		if _, err := sdk.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(versioned), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(locked), Key: aws.String("k"), Body: strings.NewReader("v1"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn}); err != nil {
		t.Fatal(err)
	}
	put(t, sdk, locked, "k", []byte("v2"))

	// The header names the rule and the day: 3 lifecycle days after the
	// write.
	h, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(versioned), Key: aws.String("tmp/a")})
	if err != nil {
		t.Fatal(err)
	}
	if exp := aws.ToString(h.Expiration); !strings.Contains(exp, `rule-id="tmp"`) {
		t.Errorf("HEAD tmp/a: x-amz-expiration %q, want rule tmp", exp)
	}

	versions := func(bucket, key string) (objects, markers int) {
		t.Helper()
		out, err := sdk.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			if aws.ToString(v.Key) == key {
				objects++
			}
		}
		for _, m := range out.DeleteMarkers {
			if aws.ToString(m.Key) == key {
				markers++
			}
		}
		return objects, markers
	}
	type want struct {
		bucket, key      string
		objects, markers int
		why              string
	}
	wants := []want{
		{versioned, "tmp/a", 1, 1, "expired: hidden behind a delete marker"},
		{versioned, "tag/yes", 1, 1, "tagged: expired"},
		{versioned, "tag/no", 1, 0, "untagged: kept"},
		{versioned, "past/a", 1, 1, "past date: expired"},
		{versioned, "keep/a", 1, 0, "disabled rule: kept"},
		{versioned, "other/a", 1, 0, "no rule: kept"},
		{versioned, "ver/k", 2, 0, "current and the newest noncurrent kept"},
		{versioned, "gone/k", 0, 0, "its version and then its lone delete marker removed"},
		{plain, "tmp/a", 0, 0, "unversioned: deleted"},
		{plain, "keep/a", 1, 0, "no rule: kept"},
		{locked, "k", 2, 0, "the noncurrent version under a legal hold kept"},
	}
	settled := func() string {
		for _, w := range wants {
			if o, m := versions(w.bucket, w.key); o != w.objects || m != w.markers {
				return w.bucket + "/" + w.key + ": " + strconv.Itoa(o) + " versions, " + strconv.Itoa(m) + " delete markers; want " + w.why
			}
		}
		return ""
	}
	deadline := start.Add(10 * lifecycleDay)
	for msg := settled(); msg != ""; msg = settled() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s (%d lifecycle days): %s", time.Since(start).Round(time.Second), int(time.Since(start)/lifecycleDay), msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("every rule carried out %s after the writes", time.Since(start).Round(100*time.Millisecond))
	if took := time.Since(start); took < 3*lifecycleDay {
		t.Errorf("the 3-day rules ran after %s, under 3 lifecycle days", took)
	}
	if got := string(get(t, sdk, versioned, "tag/no")); got != "tag/no" {
		t.Errorf("tag/no reads %q", got)
	}

	list, err := sdk.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(versioned)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Uploads) != 1 || aws.ToString(list.Uploads[0].Key) != "other/up" {
		t.Errorf("uploads left: %d (want only other/up's): %+v", len(list.Uploads), list.Uploads)
	}

	// The hold lifted, the next passes remove the version.
	out, err := sdk.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(locked)})
	if err != nil {
		t.Fatal(err)
	}
	var held string
	for _, v := range out.Versions {
		if !aws.ToBool(v.IsLatest) {
			held = aws.ToString(v.VersionId)
		}
	}
	var apiErr interface{ ErrorCode() string }
	if _, err := sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(locked), Key: aws.String("k"), VersionId: &held}); err == nil || !errors.As(err, &apiErr) {
		t.Errorf("DELETE of the held version: %v, want refused", err)
	}
	if _, err := sdk.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String(locked), Key: aws.String("k"), VersionId: &held,
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the version released from its hold removed", 5*lifecycleDay, func() bool {
		o, _ := versions(locked, "k")
		return o == 1
	})

	// A pass counts an action once the delete has returned, so the last
	// one may show a moment after the version is gone.
	least := map[string]float64{"expire-current": 4, "delete-noncurrent": 3, "remove-delete-marker": 1, "abort-upload": 1, "kept-locked": 1, "runs": 3}
	var m map[string]float64
	short := func() string {
		m = lifecycleMetrics(t, tg)
		for name, n := range least {
			if m[name] < n {
				return name
			}
		}
		return ""
	}
	deadline = time.Now().Add(2 * lifecycleDay)
	for name := short(); name != ""; name = short() {
		if time.Now().After(deadline) {
			t.Fatalf("strata_lifecycle metric %q = %v, want at least %v (all: %v)", name, m[name], least[name], m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var lifecycleMetric = regexp.MustCompile(`^strata_lifecycle_(actions_total\{action="([^"]+)"\}|runs_total) (\S+)$`)

// lifecycleMetrics reads the lifecycle counters: by action, and "runs".
func lifecycleMetrics(t *testing.T, tg *tlsTarget) map[string]float64 {
	t.Helper()
	resp, err := tg.httpClient().Get(tg.endpoint() + "/strata/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := new(strings.Builder)
	if _, err := io.Copy(body, resp.Body); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(body.String(), "\n") {
		f := lifecycleMetric.FindStringSubmatch(l)
		if f == nil {
			continue
		}
		v, _ := strconv.ParseFloat(f[3], 64)
		if f[2] != "" {
			out[f[2]] = v
		} else {
			out["runs"] = v
		}
	}
	return out
}
