package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/builders"
)

// TestExpansionUnderLoad adds a ServerPool to the demo tenant while clients
// write and read over HTTPS, and a second one while the first is still
// coming up (issue 16, the short form of the expansion scenario). Every
// request must succeed with the SDK's standard retries, no pod that was
// there before may restart, and every object written before, during and
// after is read back at the end. It reports the attempts that failed
// before retries (what a client with retries off would have seen) and p99
// latency during the step against steady state.
func TestExpansionUnderLoad(t *testing.T) {
	// It fails on main (issue 16, open): since 81c4828 no write is lost,
	// but GETs right after PUTs answer NoSuchKey while the nodes load the
	// new topology at different times.
	day2Only(t)
	assets, imagesDir := prerequisites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, assets, imagesDir)
	kc := kubeClient(t, c.in.Kubeconfig)
	ns := "default"
	restarts := restartCounts(ctx, t, kc)

	l := startLoad(ctx, t, c.in, "expansion", staticTrust(t, c.in.CAFile), nil)
	steadyFrom := time.Now()
	time.Sleep(20 * time.Second)
	stepFrom := time.Now()
	for i, name := range []string{"nvme2", "nvme3"} {
		if i > 0 {
			time.Sleep(5 * time.Second) // the first is still coming up
		}
		if err := kc.Create(ctx, extraPool(ns, name)); err != nil {
			t.Fatal(err)
		}
		t.Logf("created ServerPool %s; %s", name, l.figures())
	}
	waitFor(ctx, t, 8*time.Minute, func() error { return tenantServes(ctx, kc, ns, 3) })
	stepTo := time.Now()
	t.Logf("both pools joined after %s; %s", stepTo.Sub(stepFrom).Round(time.Second), l.figures())
	time.Sleep(15 * time.Second)
	total, failed, attempts, errs := l.stop()

	steady, nSteady := l.p99(steadyFrom, stepFrom)
	during, nDuring := l.p99(stepFrom, stepTo)
	t.Logf("load: %d requests, %d failed with the SDK's retries, %d attempts failed before them; p99 steady %s (%d requests), during the step %s (%d requests, %.1fx)",
		total, failed, attempts, steady, nSteady, during, nDuring, float64(during)/float64(max(steady, 1)))
	if failed > 0 {
		t.Errorf("requests failed during the expansion: %d; first errors: %v", failed, errs)
	}
	if after := restartCounts(ctx, t, kc); !sameRestarts(restarts, after) {
		t.Errorf("pods that were there before restarted: %v -> %v", restarts, after)
	}
	readBack(ctx, t, c.in, "expansion", l)
	c.down(t, c.in.S3URL)
}

// TestRollingUpgradeUnderLoad rolls the demo tenant's servers to another
// build of the engine (the same code linked with another version, as an
// image under another tag) and back while clients write and read over
// HTTPS (issue 16, the short form of the upgrade scenario): no request may
// fail with the SDK's standard retries, and every server ends on the image
// asked for.
func TestRollingUpgradeUnderLoad(t *testing.T) {
	day2Only(t)
	assets, imagesDir := prerequisites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	next := "ghcr.io/strata-storage/strata:0.1.0-next"
	c := startCluster(ctx, t, assets, imagesWithNextBuild(t, imagesDir, next))
	kc := kubeClient(t, c.in.Kubeconfig)
	ns := "default"
	l := startLoad(ctx, t, c.in, "upgrade", staticTrust(t, c.in.CAFile), nil)
	steadyFrom := time.Now()
	time.Sleep(20 * time.Second)
	for _, step := range []struct{ name, image string }{{"upgrade", next}, {"rollback", ""}} {
		from := time.Now()
		patchTenant(ctx, t, kc, ns, func(tn *v1.Tenant) { tn.Spec.Image = step.image })
		want := step.image
		if want == "" {
			want = buildinfo.EngineImage()
		}
		waitFor(ctx, t, 10*time.Minute, func() error { return serversRun(ctx, kc, ns, want) })
		to := time.Now()
		during, n := l.p99(from, to)
		t.Logf("%s to %s: every server runs it after %s; p99 %s over %d requests; %s", step.name, want, to.Sub(from).Round(time.Second), during, n, l.figures())
	}
	steady, nSteady := l.p99(steadyFrom, steadyFrom.Add(20*time.Second))
	total, failed, attempts, errs := l.stop()
	t.Logf("load: %d requests, %d failed with the SDK's retries, %d attempts failed before them; p99 steady %s (%d requests)",
		total, failed, attempts, steady, nSteady)
	if failed > 0 {
		t.Errorf("requests failed during the roll-outs: %d; first errors: %v", failed, errs)
	}
	readBack(ctx, t, c.in, "upgrade", l)
	c.down(t, c.in.S3URL)
}

// imagesWithNextBuild is a directory with the images in dir (hard links)
// and the engine relinked with version 0.1.0-next as image ref.
func imagesWithNextBuild(t *testing.T, dir, ref string) string {
	work := t.TempDir()
	out := filepath.Join(work, "images")
	bin := filepath.Join(work, "strata-next")
	steps := [][]string{
		{"cp", "-al", dir, out},
		{"go", "build", "-trimpath", "-ldflags", "-s -w -buildid= -X github.com/strata-storage/strata/engine/buildinfo.Version=0.1.0-next",
			"-o", bin, "./cmd/strata"},
		{"go", "run", "./hack/images", "-out", filepath.Join(work, "next"), "-image", "ref=" + ref + ",entrypoint=/strata,binary=" + bin},
		{"mv", filepath.Join(work, "next", "strata"), filepath.Join(out, "strata-next")},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", s, err, b)
		}
	}
	return out
}

// serversRun says why not every server pod runs image, Ready.
func serversRun(ctx context.Context, kc client.Client, ns, image string) error {
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(builders.ServerSelector("media"))); err != nil {
		return err
	}
	if len(list.Items) != 4 {
		return fmt.Errorf("%d server pods", len(list.Items))
	}
	for _, p := range list.Items {
		if !podReady(&p) || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Image != image {
			return fmt.Errorf("pod %s not yet Ready on %s", p.Name, image)
		}
	}
	return nil
}

// TestDecommissionUnderLoad drains the demo tenant's first pool into a
// second one while clients keep writing and reading over HTTPS (issue 16,
// the short form of the decommission scenario), then deletes it: no request
// may fail with the SDK's standard retries, and every object written before
// and during the drain is read back from the remaining pool.
func TestDecommissionUnderLoad(t *testing.T) {
	day2Only(t)
	assets, imagesDir := prerequisites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, assets, imagesDir)
	kc := kubeClient(t, c.in.Kubeconfig)
	ns := "default"
	if err := kc.Create(ctx, extraPool(ns, "nvme2")); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 6*time.Minute, func() error { return tenantServes(ctx, kc, ns, 2) })
	l := startLoad(ctx, t, c.in, "drain", staticTrust(t, c.in.CAFile), nil)
	steadyFrom := time.Now()
	time.Sleep(30 * time.Second)
	from := time.Now()
	pool := &v1.ServerPool{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nvme"}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Decommission = true
	if err := kc.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 10*time.Minute, func() error {
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nvme"}, pool); err != nil {
			return err
		}
		if pool.Status.PoolState != v1.PoolStateDecommissioned {
			return fmt.Errorf("pool nvme is %q", pool.Status.PoolState)
		}
		return nil
	})
	drained := time.Now()
	if err := kc.Delete(ctx, pool); err != nil {
		t.Fatalf("deleting the decommissioned pool: %v", err)
	}
	time.Sleep(20 * time.Second)
	during, n := l.p99(from, drained)
	steady, nSteady := l.p99(steadyFrom, from)
	total, failed, attempts, errs := l.stop()
	t.Logf("drained in %s; load: %d requests, %d failed with the SDK's retries, %d attempts failed before them; p99 steady %s (%d), during the drain %s (%d)",
		drained.Sub(from).Round(time.Second), total, failed, attempts, steady, nSteady, during, n)
	if failed > 0 {
		t.Errorf("requests failed during the decommission: %d; first errors: %v", failed, errs)
	}
	readBack(ctx, t, c.in, "drain", l)
	c.down(t, c.in.S3URL)
}

// day2Only skips a day-2 scenario outside `make day2-e2e` (STRATA_DAY2=1).
// They are not in `make test` yet: the expansion one fails on main, and
// each starts a cluster of its own (2.5-4 min) while `make test` is already
// at about 29 minutes; they join it on one shared cluster once all pass
// (issue 16).
func day2Only(t *testing.T) {
	t.Helper()
	if os.Getenv("STRATA_DAY2") != "1" {
		t.Skip("issue 16: a day-2 scenario, run by `make day2-e2e` (not yet in `make test`)")
	}
}

// extraPool is a pool like the demo's: four servers of two drives, one per
// node.
func extraPool(ns, name string) *v1.ServerPool {
	return &v1.ServerPool{
		ObjectMeta: metaOf(ns, name),
		Spec: v1.ServerPoolSpec{
			TenantRef:        v1.TenantReference{Name: "media"},
			Servers:          4,
			VolumesPerServer: 2,
			Storage: v1.StorageSpec{Media: v1.MediaLocalNVMe, StorageClassNames: []string{"nvme-local"},
				Size: resource.MustParse("10Gi")},
			Topology: v1.TopologySpec{FailureDomainKey: "kubernetes.io/hostname", Tolerate: v1.ToleranceSpec{Domains: ptr.To[int32](1)}},
		},
	}
}

// tenantServes says why the tenant does not yet serve from pools pools.
func tenantServes(ctx context.Context, kc client.Client, ns string, pools int) error {
	tn := &v1.Tenant{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media"}, tn); err != nil {
		return err
	}
	ready := 0
	for _, p := range tn.Status.Pools {
		if p.Kind == "ServerPool" && p.Ready {
			ready++
		}
	}
	if !meta.IsStatusConditionTrue(tn.Status.Conditions, v1.ConditionReady) || ready != pools {
		return fmt.Errorf("tenant: %d of %d server pools ready, conditions %v", ready, pools, tn.Status.Conditions)
	}
	return nil
}

func sameRestarts(before, after map[string]int32) bool {
	for pod, n := range before {
		if after[pod] != n {
			return false
		}
	}
	return true
}

// staticTrust verifies servers against the CA file the harness wrote.
func staticTrust(t *testing.T, caFile string) func(tls.ConnectionState) error {
	data, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	src := &trustSource{}
	if err := src.set(data); err != nil {
		t.Fatal(err)
	}
	return src.verify
}

// readBack reads every object the load wrote, with a client of its own.
func readBack(ctx context.Context, t *testing.T, in info, bucket string, l *load) {
	cl := s3Client(t, in)
	bad := 0
	for key, want := range l.objects() {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err == nil {
			var got []byte
			got, err = io.ReadAll(out.Body)
			out.Body.Close()
			if err == nil && (int64(len(got)) != want.size || got[0] != want.fill) {
				err = fmt.Errorf("%d bytes starting %q, want %d starting %q", len(got), got[:1], want.size, want.fill)
			}
		}
		if err != nil {
			bad++
			if bad <= 5 {
				t.Errorf("object %s: %v", key, err)
			}
		}
	}
	t.Logf("read back %d objects written under load, %d wrong or missing", len(l.objects()), bad)
}
