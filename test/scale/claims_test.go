package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/test/testenv"
)

const claimsPerNamespace = 10

// claimNamespaces is 100; STRATA_CLAIM_NAMESPACES makes a smaller run.
var claimNamespaces = func() int {
	if n, err := strconv.Atoi(os.Getenv("STRATA_CLAIM_NAMESPACES")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// BenchmarkThousandClaims runs bin/manager against envtest and a real
// `strata server` (bin/strata) standing in for one Tenant's servers, and
// creates 1,000 BucketClaims (each with a 1 GiB quota) and 1,000
// BucketAccesses (static keys in a Secret) across 100 namespaces. It
// reports:
//
//   - seconds until every claim is Ready and every access's Secret exists
//     (target < 60 s), and the slowest access-to-Secret time,
//   - the manager's peak RSS,
//   - API writes during 60 idle seconds after convergence and a whole
//     engine refresh without writes (target 0).
//
// The manager reaches the tenant at its Service's cluster DNS name through
// an HTTP proxy (HTTP_PROXY) that hands every request to the local server:
// cluster DNS and kube-proxy, the one part of a cluster envtest lacks.
//
// Run: make bench-claims.
func BenchmarkThousandClaims(b *testing.B) {
	for b.Loop() {
		runThousandClaims(b)
	}
}

func runThousandClaims(b *testing.B) {
	ctx := context.Background()
	env, k8s, err := testenv.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	facts(ctx, b, k8s)

	// The tenant's servers: one local process, behind a proxy for the
	// Service names.
	strataAddr, proxyAddr := freeAddr(b), freeAddr(b)
	proxy := &http.Server{Addr: proxyAddr, Handler: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host = "http", strataAddr
		r.Out.Host = r.In.Host // the signature covers the Service's name
	}}}
	go func() { _ = proxy.ListenAndServe() }()
	defer proxy.Close()

	cmd, metricsAddr := startManager(b, env, "HTTP_PROXY=http://"+proxyAddr, "NO_PROXY=")
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()

	const store = "store"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: store}},
		&v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: store, Name: "media"}, Spec: v1.TenantSpec{
			TLS:    v1.TLSSpec{Mode: v1.TLSDisabled},
			Claims: v1.ClaimsSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"claims": "media"}}}}},
		&v1.ServerPool{ObjectMeta: metav1.ObjectMeta{Namespace: store, Name: "nvme"}, Spec: v1.ServerPoolSpec{
			TenantRef: v1.TenantReference{Name: "media"}, Servers: 4, VolumesPerServer: 1,
			Storage: v1.StorageSpec{Media: v1.MediaLocalNVMe, StorageClassNames: []string{"nvme-local"}, Size: resource.MustParse("1Ti")}}},
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	root, keys := &corev1.Secret{}, &corev1.Secret{}
	until(b, "the root credentials and master keys", time.Minute, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: store, Name: "media-root-credentials"}, root) == nil &&
			k8s.Get(ctx, client.ObjectKey{Namespace: store, Name: "media-encryption-keys"}, keys) == nil
	})
	dir := b.TempDir()
	for name, data := range map[string][]byte{"access": root.Data[builders.AccessKeyKey], "secret": root.Data[builders.SecretKeyKey],
		"keys.json": keys.Data[builders.EncryptionKeysFileKey]} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// The drives on a filesystem of their own, as a tenant's PVs are: on
	// the machine's /tmp the capacity in the Tenant's status would follow
	// whatever else writes there (etcd, the build cache).
	drives := filepath.Join(dir, "drives")
	if err := os.MkdirAll(drives, 0o755); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2g", "strata-bench", drives).CombinedOutput(); err != nil {
		b.Logf("drives on the machine's filesystem (a tmpfs needs root: %v %s): the Tenant's capacity follows it", err, out)
	} else {
		defer func() { _ = exec.Command("umount", drives).Run() }()
	}
	srv := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "strata"), "server", "--address", strataAddr, "--no-sync", "--admin-over-http",
		filepath.Join(drives, "d{1...4}"))
	srv.Env = append(os.Environ(), builders.EnvRootUserFile+"="+filepath.Join(dir, "access"), builders.EnvRootPasswordFile+"="+filepath.Join(dir, "secret"),
		"STRATA_KMS_KEYS_FILE="+filepath.Join(dir, "keys.json"))
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _, _ = srv.Process.Wait() }()
	waitHTTP(b, "http://"+strataAddr+"/strata/health/ready")

	// The StatefulSet controller's part: the servers are ready.
	until(b, "the servers' StatefulSet", time.Minute, func() bool {
		list := &appsv1.StatefulSetList{}
		if k8s.List(ctx, list, client.InNamespace(store)) != nil || len(list.Items) == 0 {
			return false
		}
		for i := range list.Items {
			sts := &list.Items[i]
			n := *sts.Spec.Replicas
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n,
				CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n}
			if k8s.Status().Update(ctx, sts) != nil {
				return false
			}
		}
		return true
	})
	tenant := &v1.Tenant{}
	until(b, "the Tenant Ready", 2*time.Minute, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: store, Name: "media"}, tenant) == nil &&
			meta.IsStatusConditionTrue(tenant.Status.Conditions, v1.ConditionReady)
	})

	start := time.Now()
	createClaims(ctx, b, k8s)
	created := time.Since(start)
	total := claimNamespaces * claimsPerNamespace
	lastLog := time.Now()
	until(b, "every claim Ready and every access's Secret", 10*time.Minute, func() bool {
		claims, secrets, accesses := &v1.BucketClaimList{}, &corev1.SecretList{}, &v1.BucketAccessList{}
		if k8s.List(ctx, claims) != nil || k8s.List(ctx, accesses) != nil ||
			k8s.List(ctx, secrets, client.MatchingLabels{builders.LabelManagedBy: builders.ManagedBy}) != nil {
			return false
		}
		ready := 0
		reasons := map[string]int{}
		for _, c := range claims.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, v1.ConditionReady) {
				ready++
			}
			if r := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionReady); r != nil {
				reasons["claim "+r.Reason]++
			}
		}
		example := ""
		for _, a := range accesses.Items {
			if r := meta.FindStatusCondition(a.Status.Conditions, v1.ConditionReady); r != nil {
				if r.Status != metav1.ConditionTrue {
					example = r.Message
				}
				reasons["access "+r.Reason]++
			}
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			b.Logf("after %.0fs: %d claims Ready; conditions %v; e.g. %s", time.Since(start).Seconds(), ready, reasons, example)
		}
		keys := 0
		for _, s := range secrets.Items {
			if s.Namespace != store && len(s.Data["AWS_ACCESS_KEY_ID"]) > 0 {
				keys++
			}
		}
		return ready == total && keys == total
	})
	converged := time.Since(start)

	// Each access's Secret against the access (creation times, in
	// seconds).
	accesses, secrets := &v1.BucketAccessList{}, &corev1.SecretList{}
	if err := k8s.List(ctx, accesses); err != nil {
		b.Fatal(err)
	}
	if err := k8s.List(ctx, secrets, client.MatchingLabels{builders.LabelManagedBy: builders.ManagedBy}); err != nil {
		b.Fatal(err)
	}
	made := map[string]time.Time{}
	for _, s := range secrets.Items {
		made[s.Namespace+"/"+s.Name] = s.CreationTimestamp.Time
	}
	var lags []time.Duration
	for _, a := range accesses.Items {
		lags = append(lags, made[a.Namespace+"/"+a.Spec.CredentialsSecretName].Sub(a.CreationTimestamp.Time))
	}
	slices.Sort(lags)

	// Quiet for a whole engine refresh (a minute): the Tenant's capacity
	// then shows what the burst wrote, read after it.
	last := waitQuiet(b, metricsAddr, 70*time.Second)
	before := versions(ctx, b, k8s)
	tenantStatus := func() string {
		t := &v1.Tenant{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: store, Name: "media"}, t); err != nil {
			b.Fatal(err)
		}
		out, _ := json.Marshal(t.Status)
		return string(out)
	}
	statusBefore := tenantStatus()
	time.Sleep(60 * time.Second)
	idle := writes(b, metricsAddr) - last
	rss := peakRSS(b, cmd.Process.Pid)
	for k, v := range versions(ctx, b, k8s) {
		if before[k] != v {
			b.Logf("written while idle: %s", k)
		}
	}
	if after := tenantStatus(); after != statusBefore {
		b.Logf("the Tenant's status moved while idle:\nbefore %s\nafter  %s", statusBefore, after)
	}

	b.ReportMetric(converged.Seconds(), "s-to-converge")
	b.ReportMetric(lags[len(lags)-1].Seconds(), "s-max-access-to-secret")
	b.ReportMetric(float64(rss)/1024, "MiB-peak-RSS")
	b.ReportMetric(float64(idle), "idle-writes/60s")
	b.Logf("%d BucketClaims and %d BucketAccesses in %d namespaces created in %.1fs; all Ready with their Secrets after %.1fs; "+
		"access-to-Secret p50 %v, max %v (creation times, 1 s resolution); manager peak RSS %.1f MiB; %d API writes in 60 idle seconds",
		total, total, claimNamespaces, created.Seconds(), converged.Seconds(), lags[len(lags)/2], lags[len(lags)-1], float64(rss)/1024, idle)
}

// createClaims makes the namespaces, claims and accesses, 16 at a time.
func createClaims(ctx context.Context, b *testing.B, k8s client.Client) {
	var wg sync.WaitGroup
	errs := make(chan error, claimNamespaces)
	sem := make(chan struct{}, 16)
	for i := range claimNamespaces {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ns := fmt.Sprintf("app-%03d", i)
			objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"claims": "media"}}}}
			for j := range claimsPerNamespace {
				name := fmt.Sprintf("data-%d", j)
				objs = append(objs,
					&v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.BucketClaimSpec{
						TenantRef: v1.ClaimTenantReference{Namespace: "store", Name: "media"},
						Quota:     &v1.BucketQuota{MaxSize: ptr.To(resource.MustParse("1Gi"))}}},
					&v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.BucketAccessSpec{
						BucketClaims: []string{name}, Role: v1.AccessReadWrite, CredentialsSecretName: name + "-keys"}})
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

// versions are the resourceVersions of what the operator writes, by
// kind/namespace/name.
func versions(ctx context.Context, b *testing.B, k8s client.Client) map[string]string {
	out := map[string]string{}
	for kind, l := range map[string]client.ObjectList{"Tenant": &v1.TenantList{}, "ServerPool": &v1.ServerPoolList{},
		"BucketClaim": &v1.BucketClaimList{}, "BucketAccess": &v1.BucketAccessList{}, "Secret": &corev1.SecretList{},
		"ConfigMap": &corev1.ConfigMapList{}, "StatefulSet": &appsv1.StatefulSetList{}, "Service": &corev1.ServiceList{}} {
		if err := k8s.List(ctx, l); err != nil {
			b.Fatal(err)
		}
		items, _ := meta.ExtractList(l)
		for _, o := range items {
			m, _ := meta.Accessor(o)
			out[kind+" "+m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	return out
}

func until(b *testing.B, what string, limit time.Duration, ok func() bool) {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			b.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
