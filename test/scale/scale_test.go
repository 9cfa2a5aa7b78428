// Package scale holds the operator's scale benchmark: it is a benchmark, not
// a test (`make bench-operator`), because what it reports are times and
// memory, which do not belong in pass/fail tests.
package scale_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/test/testenv"
)

const tenants = 100

// BenchmarkHundredTenants runs bin/manager against envtest, creates 100
// Tenants each with a ServerPool and a GatewayPool (each in its own
// namespace), and reports:
//
//   - seconds until every StatefulSet and Deployment exists (target < 60 s),
//   - the manager's peak RSS (VmHWM; target < 150 MiB),
//   - API writes (POST/PUT/PATCH/DELETE from the manager's client metrics)
//     during 60 idle seconds after convergence (target 0).
//
// Run: make bench-operator (or go test ./test/scale -run '^$' -bench . -benchtime 1x).
func BenchmarkHundredTenants(b *testing.B) {
	for b.Loop() {
		runHundredTenants(b)
	}
}

func runHundredTenants(b *testing.B) {
	ctx := context.Background()
	env, k8s, err := testenv.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	facts(ctx, b, k8s)
	cmd, metricsAddr := startManager(b, env)
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()

	start := time.Now()
	create(ctx, b, k8s)
	created := time.Since(start)
	for {
		sts, deps := &appsv1.StatefulSetList{}, &appsv1.DeploymentList{}
		if err := k8s.List(ctx, sts); err != nil {
			b.Fatal(err)
		}
		if err := k8s.List(ctx, deps); err != nil {
			b.Fatal(err)
		}
		if len(sts.Items) >= tenants && len(deps.Items) >= tenants {
			break
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("after 10 minutes: %d StatefulSets, %d Deployments", len(sts.Items), len(deps.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
	toWorkloads := time.Since(start)

	// Converged: no write for 10 s. Then count writes over 60 idle seconds.
	last := waitQuiet(b, metricsAddr, 10*time.Second)
	time.Sleep(60 * time.Second)
	idle := writes(b, metricsAddr) - last
	rss := peakRSS(b, cmd.Process.Pid)

	b.ReportMetric(toWorkloads.Seconds(), "s-to-workloads")
	b.ReportMetric(float64(rss)/1024, "MiB-peak-RSS")
	b.ReportMetric(float64(idle), "idle-writes/60s")
	b.Logf("%d tenants (+%d ServerPools, %d GatewayPools) created in %.1fs; every StatefulSet and Deployment existed after %.1fs; manager peak RSS %.1f MiB; %d API writes in 60 idle seconds",
		tenants, tenants, tenants, created.Seconds(), toWorkloads.Seconds(), float64(rss)/1024, idle)
}

// startManager runs bin/manager (or $MANAGER_BIN) against env with env
// variables extra besides its kubeconfig, waits until it is ready, and
// returns it and the address of its metrics.
func startManager(b *testing.B, env *envtest.Environment, extra ...string) (*exec.Cmd, string) {
	bin := os.Getenv("MANAGER_BIN")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), "bin", "manager")
	}
	kubeconfig, err := testenv.AdminKubeconfig(env, "operator", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	metricsAddr, probeAddr := freeAddr(b), freeAddr(b)
	cmd := exec.Command(bin, "--metrics-secure=false", "--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address="+probeAddr, "--enable-webhooks=false", "--zap-log-level=error")
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), extra...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitHTTP(b, "http://"+probeAddr+"/readyz")
	return cmd, metricsAddr
}

// waitQuiet waits until the manager has written nothing for quiet
// (sampled every 5 s) and returns its count of writes then.
func waitQuiet(b *testing.B, metricsAddr string, quiet time.Duration) int {
	last, still := writes(b, metricsAddr), time.Duration(0)
	for still < quiet {
		time.Sleep(5 * time.Second)
		cur := writes(b, metricsAddr)
		if cur == last {
			still += 5 * time.Second
		} else {
			still = 0
		}
		last = cur
	}
	return last
}

// facts: four storage nodes and the classes the pools use.
func facts(ctx context.Context, b *testing.B, k8s client.Client) {
	for i := range 4 {
		name := fmt.Sprintf("node-%d", i)
		if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}); err != nil {
			b.Fatal(err)
		}
	}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	for _, name := range []string{"nvme-local", "cephfs"} {
		if err := k8s.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "x.csi.example", VolumeBindingMode: &wffc}); err != nil {
			b.Fatal(err)
		}
	}
}

// create makes the 100 tenants with their pools, 8 at a time.
func create(ctx context.Context, b *testing.B, k8s client.Client) {
	var wg sync.WaitGroup
	errs := make(chan error, tenants)
	sem := make(chan struct{}, 8)
	for i := range tenants {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ns := fmt.Sprintf("tenant-%03d", i)
			objs := []client.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
				&v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "media"},
					Spec: v1.TenantSpec{Buckets: []v1.BucketSpec{{Name: "photos"}}}},
				&v1.ServerPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nvme"}, Spec: v1.ServerPoolSpec{
					TenantRef: v1.TenantReference{Name: "media"}, Servers: 4, VolumesPerServer: 4,
					Storage: v1.StorageSpec{Media: v1.MediaLocalNVMe, StorageClassNames: []string{"nvme-local"}, Size: resource.MustParse("1Ti")},
				}},
				&v1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nas"}, Spec: v1.GatewayPoolSpec{
					TenantRef: v1.TenantReference{Name: "media"},
					Replicas:  ptr.To[int32](2),
					Volume:    v1.GatewayVolume{StorageClassName: "cephfs", Size: ptr.To(resource.MustParse("1Ti"))},
				}},
			}
			for _, o := range objs {
				if err := k8s.Create(ctx, o); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// writes sums the manager's client requests that change state.
func writes(b *testing.B, addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(line, m) {
				f := strings.Fields(line)
				n, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += int(n)
			}
		}
	}
	return total
}

// peakRSS is the process's high-water resident set size in KiB.
func peakRSS(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHTTP(b *testing.B, url string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Fatalf("%s never answered", url)
}
