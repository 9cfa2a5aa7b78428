package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// replicationPair: a second Tenant, "vault", and the demo's "media" name
// each other as replication remotes (testdata/replication-pair.yaml and
// the patch its comment gives, as docs/replication.md has them); a
// versioned bucket of media is replicated to vault's declared bucket.
// Under 200 PUTs of 4 KiB a second every sampled version is COMPLETED
// within a minute of its PUT's answer, and the lag is reported (the
// issue's target is a p99 under 5 s; on this machine it depends on how
// busy the shared cores are, so it is a figure for docs/benchmarks.md,
// not a pass mark: speed is measured by benchmarks); then every server of
// vault is deleted while the writes (and deletes, which make delete
// markers) go on, and once vault's servers are back every version and
// delete marker is on both sides with the same ETag: 0 missing.
func replicationPair(ctx context.Context, t *testing.T, c *cluster, cs kubernetes.Interface) {
	kubectl, run := kubectlOf(ctx, t, c)
	start := time.Now()
	// vault sends bucket notifications to a NATS server in the cluster
	// (bucketNotifications): the broker first, since the target takes its
	// credentials from the broker's Secret.
	run("apply", "-f", filepath.Join(repoRoot(), "test", "localcluster", "testdata", "notifications-broker.yaml"))
	run("apply", "-f", filepath.Join(repoRoot(), "test", "localcluster", "testdata", "replication-pair.yaml"))
	before := podUIDs(ctx, t, cs, "media-nvme")
	run("patch", "tenant", "media", "--type", "merge", "-p",
		`{"spec":{"replication":{"remotes":[{"name":"dr","tenantRef":{"namespace":"default","name":"vault"}}]}}}`)

	src := s3Client(t, c.in)
	const bucket, role = "dr-src", "arn:strata:replication:us-east-1:dr:s3"
	if _, err := src.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	config := &s3.PutBucketReplicationInput{Bucket: aws.String(bucket), ReplicationConfiguration: &s3types.ReplicationConfiguration{
		Role: aws.String(role), Rules: []s3types.ReplicationRule{{ID: aws.String("all"), Status: s3types.ReplicationRuleStatusEnabled, Priority: aws.Int32(1),
			Filter:                  &s3types.ReplicationRuleFilter{Prefix: aws.String("")},
			DeleteMarkerReplication: &s3types.DeleteMarkerReplication{Status: s3types.DeleteMarkerReplicationStatusEnabled},
			Destination:             &s3types.Destination{Bucket: aws.String("arn:aws:s3:::photos-dr")}}}}}

	// The servers of both read the remotes from their targets Secret as
	// the kubelet updates it in their pods (no pod rolls): until a server
	// has, the remote is unknown to it (the configuration refused) or it
	// takes a write it cannot copy (its version stays PENDING). A fresh
	// probe each time.
	probes := 0
	waitFor(ctx, t, 8*time.Minute, func() error {
		if _, err := src.PutBucketReplication(ctx, config); err != nil {
			return fmt.Errorf("the replication configuration: %w", err)
		}
		probes++
		w, err := putSample(ctx, src, bucket, fmt.Sprintf("probe/%d", probes))
		if err != nil {
			return err
		}
		if _, err := completedWithin(ctx, src, bucket, w, 15*time.Second); err != nil {
			return fmt.Errorf("probe %d: %w", probes, err)
		}
		return nil
	})
	waitFor(ctx, t, 5*time.Minute, func() error {
		return errors.Join(rolledOut(ctx, cs, "media-nvme"), rolledOut(ctx, cs, "vault-dr"))
	})
	t.Logf("the pair replicates %s after it was declared (%d probes)", time.Since(start).Round(time.Second), probes)
	// Declaring the remote rolled none of media's servers: they read it
	// from the mounted Secret as the kubelet updated it.
	if after := podUIDs(ctx, t, cs, "media-nvme"); !maps.Equal(before, after) {
		t.Errorf("media's server pods changed when the pair was declared: %v before, %v after", before, after)
	}

	// Lag under 200 PUT/s.
	steady := steadyWrites(ctx, t, src, bucket, "load/", 15*time.Second, true, nil)
	slices.Sort(steady.lags)
	if len(steady.lags) < 50 {
		t.Fatalf("%d lag samples of %d PUTs", len(steady.lags), len(steady.writes))
	}
	p50, p99 := steady.lags[len(steady.lags)/2], steady.lags[len(steady.lags)*99/100]
	t.Logf("200 PUT/s for 15 s: %d PUTs, %.0f a second (%d failed, %d ticks late); lag from the PUT's answer to COMPLETED over %d samples: p50 %s, p99 %s, max %s",
		len(steady.writes), float64(len(steady.writes))/15, steady.failed, steady.late, len(steady.lags), p50, p99, steady.lags[len(steady.lags)-1])
	if steady.failed > 0 {
		t.Errorf("%d PUTs failed", steady.failed)
	}
	if p99 >= 5*time.Second {
		t.Logf("lag p99 %s: over the issue's 5 s target (under the shared cores' contention here; every sample was copied within a minute)", p99)
	}

	// The destination's servers deleted (one second's grace) under writes
	// and deletes; a version written meanwhile must be seen PENDING, or
	// the destination was never down.
	gone := time.Now()
	run("delete", "pod", "vault-dr-0", "vault-dr-1", "vault-dr-2", "vault-dr-3", "--grace-period=1", "--wait=false")
	deletes := make(chan string, 1000)
	for i := range steady.writes {
		if i%10 == 0 {
			deletes <- steady.writes[i].key
		}
	}
	close(deletes)
	var pending, seenDown atomic.Int64
	watch, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Err() == nil {
			if rolledOut(watch, cs, "vault-dr") != nil {
				seenDown.Add(1)
			}
			if w, err := putSample(watch, src, bucket, fmt.Sprintf("pending/%d", time.Now().UnixNano())); err == nil {
				time.Sleep(time.Second) // copied well within it while vault is up
				head, err := src.HeadObject(watch, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(w.key), VersionId: aws.String(w.version)})
				if err == nil && head.ReplicationStatus == s3types.ReplicationStatusPending {
					pending.Add(1)
				}
			}
		}
	}()
	outage := steadyWrites(ctx, t, src, bucket, "outage/", 15*time.Second, false, deletes)
	stopWatch()
	<-watched
	if outage.failed > 0 {
		t.Errorf("%d writes failed at the source while the destination was down", outage.failed)
	}
	if pending.Load() == 0 || seenDown.Load() == 0 {
		t.Errorf("the destination never looked down: %d probes PENDING a second after their PUT, %d looks at its pods found them not all Ready",
			pending.Load(), seenDown.Load())
	}
	waitFor(ctx, t, 5*time.Minute, func() error { return rolledOut(ctx, cs, "vault-dr") })
	back := time.Now()
	t.Logf("vault's servers deleted and Ready again after %s; %d PUTs and %d deletes at the source meanwhile (%d probes PENDING after their PUT)",
		back.Sub(gone).Round(time.Second), len(outage.writes), outage.deleted, pending.Load())

	// Every version on both sides.
	dst := destination(ctx, t, c, kubectl)
	var missing, extra, differ []string
	compared, acked := 0, len(steady.writes)+len(outage.writes)+outage.deleted
	waitFor(ctx, t, 3*time.Minute, func() error {
		missing, extra, differ, compared = nil, nil, nil, 0
		for _, prefix := range []string{"load/", "outage/"} {
			want, err := versions(ctx, src, bucket, prefix)
			if err != nil {
				return err
			}
			compared += len(want)
			got, err := versions(ctx, dst, "photos-dr", prefix)
			if err != nil {
				return err
			}
			for k, v := range want {
				switch g, ok := got[k]; {
				case !ok:
					missing = append(missing, k)
				case g != v:
					differ = append(differ, fmt.Sprintf("%s: %s at the source, %s at the destination", k, v, g))
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					extra = append(extra, k)
				}
			}
		}
		if len(missing)+len(extra)+len(differ) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("%d versions missing at the destination (%s), %d extra (%q), %d different (%q); the source lists %d for %d acknowledged PUTs and deletes",
				len(missing), statusOf(ctx, src, bucket, firstFew(missing)), len(extra), firstFew(extra), len(differ), firstFew(differ), compared, acked)
		}
		return nil
	})
	switch {
	case compared < acked:
		t.Errorf("the source lists %d versions and delete markers, for %d acknowledged PUTs and deletes", compared, acked)
	case compared > acked:
		// A request made its change and answered an error (SlowDown when
		// its events were not stored in time), and the SDK's retry made it
		// again: a second version or delete marker, on both sides too.
		t.Logf("the source lists %d versions and delete markers, %d more than acknowledged (retried requests)", compared, compared-acked)
	}
	t.Logf("every version and delete marker on both sides %s after vault was back (%d compared, for %d PUTs and %d deletes): 0 missing",
		time.Since(back).Round(time.Second), compared, len(steady.writes)+len(outage.writes), outage.deleted)
}

// written is one acknowledged PUT.
type written struct {
	key, version string
	at           time.Time
}

func putSample(ctx context.Context, cl *s3.Client, bucket, key string) (written, error) {
	body := make([]byte, 4096)
	_, _ = rand.Read(body)
	out, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		return written{}, err
	}
	return written{key: key, version: aws.ToString(out.VersionId), at: time.Now()}, nil
}

// completedWithin polls w's replication status until COMPLETED and
// returns how long after its PUT's answer that was seen. The polls are
// 50 ms apart at first, each gap 1.5 times the last, up to a second: a lag under a second is seen within 50-200 ms of its end, a
// longer one within a second. Polls a fixed 50 ms apart made the
// measurement part of the load: with the copies a few seconds behind,
// the hundred-odd samples waiting polled the source with thousands of
// HEADs a second, which slowed the copies further (lag p99 3-16 s in
// runs of 2026-12-01 afternoon, against 0.3-0.5 s that morning).
func completedWithin(ctx context.Context, cl *s3.Client, bucket string, w written, limit time.Duration) (time.Duration, error) {
	status := s3types.ReplicationStatus("")
	for wait := 50 * time.Millisecond; time.Since(w.at) < limit; wait = min(wait*3/2, time.Second) {
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(w.key), VersionId: aws.String(w.version)})
		if err != nil {
			return 0, err
		}
		if status = head.ReplicationStatus; status == s3types.ReplicationStatusCompleted {
			return time.Since(w.at), nil
		}
		time.Sleep(wait)
	}
	return 0, fmt.Errorf("%s %s not copied within %s: %q", w.key, w.version, limit, status)
}

// steadyLoad is what steadyWrites did.
type steadyLoad struct {
	writes                []written
	lags                  []time.Duration
	failed, late, deleted int
}

// steadyWrites PUTs 4 KiB objects under prefix at 200 a second for d (32
// clients fed by a ticker; a tick no client was free for is late), and
// every 10th tick deletes the next key of deletes instead (a delete
// marker) while there are any; with sample, every 20th PUT's lag to
// COMPLETED is measured.
func steadyWrites(ctx context.Context, t *testing.T, cl *s3.Client, bucket, prefix string, d time.Duration, sample bool, deletes <-chan string) steadyLoad {
	t.Helper()
	var (
		mu  sync.Mutex
		out steadyLoad
		wg  sync.WaitGroup
	)
	ticks := make(chan int)
	for range 32 {
		wg.Go(func() {
			for n := range ticks {
				if deletes != nil && n%10 == 0 {
					if key, ok := <-deletes; ok {
						_, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
						mu.Lock()
						if err != nil {
							out.failed++
							t.Logf("delete %s: %v", key, err)
						} else {
							out.deleted++
						}
						mu.Unlock()
						continue
					}
				}
				w, err := putSample(ctx, cl, bucket, fmt.Sprintf("%s%05d", prefix, n))
				mu.Lock()
				if err != nil {
					out.failed++
					t.Logf("put: %v", err)
				} else {
					out.writes = append(out.writes, w)
				}
				mu.Unlock()
				if err != nil || !sample || n%20 != 1 {
					continue
				}
				wg.Go(func() {
					lag, err := completedWithin(ctx, cl, bucket, w, time.Minute)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("lag sample: %v", err)
						return
					}
					out.lags = append(out.lags, lag)
				})
			}
		})
	}
	tick := time.NewTicker(5 * time.Millisecond)
	end := time.After(d)
	for n := 0; ; n++ {
		select {
		case <-tick.C:
		case <-end:
			tick.Stop()
			close(ticks)
			wg.Wait()
			return out
		}
		select {
		case ticks <- n:
		default:
			mu.Lock()
			out.late++
			mu.Unlock()
		}
	}
}

// versions are a bucket's versions and delete markers under prefix:
// "key version" -> ETag, or "delete marker".
func versions(ctx context.Context, cl *s3.Client, bucket, prefix string) (map[string]string, error) {
	out := map[string]string{}
	pages := s3.NewListObjectVersionsPaginator(cl, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, v := range page.Versions {
			out[aws.ToString(v.Key)+" "+aws.ToString(v.VersionId)] = aws.ToString(v.ETag)
		}
		for _, m := range page.DeleteMarkers {
			out[aws.ToString(m.Key)+" "+aws.ToString(m.VersionId)] = "delete marker"
		}
	}
	return out, nil
}

// podUIDs maps the StatefulSet's pods to their UIDs.
func podUIDs(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) map[string]string {
	t.Helper()
	sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(sts.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// rolledOut reports whether every pod of the StatefulSet runs its latest
// revision and is Ready.
func rolledOut(ctx context.Context, cs kubernetes.Interface, name string) error {
	sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(sts.Spec.Selector)})
	if err != nil {
		return err
	}
	ready := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) && p.Labels["controller-revision-hash"] == sts.Status.UpdateRevision {
			ready++
		}
	}
	if want := int(*sts.Spec.Replicas); ready != want || sts.Status.ObservedGeneration != sts.Generation {
		return fmt.Errorf("StatefulSet %s: %d of %d pods Ready at revision %s", name, ready, want, sts.Status.UpdateRevision)
	}
	return nil
}

// destination is an S3 client of vault, through `kubectl port-forward` to
// one of its servers, with its root keys and CA.
func destination(ctx context.Context, t *testing.T, c *cluster, kubectl string) *s3.Client {
	t.Helper()
	kc := kubeClient(t, c.in.Kubeconfig)
	vault := &v1.Tenant{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "vault"}, vault); err != nil {
		t.Fatal(err)
	}
	var root, tlsSecret corev1.Secret
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "default", Name: builders.RootSecretName(vault)}, &root); err != nil {
		t.Fatal(err)
	}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "default", Name: builders.TLSSecretName(vault)}, &tlsSecret); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "vault-ca.crt")
	if err := os.WriteFile(caFile, tlsSecret.Data["ca.crt"], 0o644); err != nil {
		t.Fatal(err)
	}
	port := portForward(ctx, t, kubectl, c.in.Kubeconfig, "pod/vault-dr-0", "9000")
	return s3Client(t, info{S3URL: "https://localhost:" + port, CAFile: caFile,
		AccessKey: string(root.Data[builders.AccessKeyKey]), SecretKey: string(root.Data[builders.SecretKeyKey])})
}

// portForward runs `kubectl port-forward target 0:port` until the test
// ends and returns the local port.
func portForward(ctx context.Context, t *testing.T, kubectl, kubeconfig, target, port string) string {
	t.Helper()
	pf := exec.CommandContext(ctx, kubectl, "port-forward", target, "0:"+port)
	pf.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	stdout, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("kubectl port-forward %s said %q (%v)", target, line, err)
	}
	// What it says of each connection is read on: a full pipe would stall
	// it.
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return m[1]
}

// firstFew is at most the first five of ss.
func firstFew(ss []string) []string {
	return ss[:min(len(ss), 5)]
}

// statusOf is each "key version" with its replication status at the
// source (or the error of its HEAD).
func statusOf(ctx context.Context, cl *s3.Client, bucket string, keyVersions []string) string {
	var out []string
	for _, kv := range keyVersions {
		key, version, _ := strings.Cut(kv, " ")
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(version)})
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", kv, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", kv, head.ReplicationStatus))
	}
	return strings.Join(out, "; ")
}
