// Package localcluster is the end-to-end test of `make demo`: it brings the
// local cluster harness (hack/localcluster) up with the real control plane,
// operator and engine, waits for the demo Tenant to be Ready, writes and
// reads an object through the S3 endpoint the harness prints, and checks
// that tearing it down leaves nothing behind.
//
// It needs root (namespaces, mounts, veth pairs), iproute2, bin/strata and
// bin/manager, and kube-controller-manager and kube-scheduler next to
// kube-apiserver in $KUBEBUILDER_ASSETS; `make localcluster-e2e` provides
// all of that and runs it.
package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/images"
)

// info mirrors the harness's state-dir/info.json.
type info struct {
	Status     string `json:"status"`
	Message    string `json:"message"`
	Kubeconfig string `json:"kubeconfig"`
	S3URL      string `json:"s3URL"`
	CAFile     string `json:"caFile"`
	AccessKey  string `json:"accessKey"`
	SecretKey  string `json:"secretKey"`
	ReadyAfter string `json:"readyAfter"`
	// PrometheusURL is Prometheus' API on the host (--monitoring).
	PrometheusURL string `json:"prometheusURL"`
	// Exposed are the --expose Services' URLs, by namespace/name.
	Exposed map[string]string `json:"exposed"`
	// ConsoleURL is the demo tenant's web console.
	ConsoleURL string `json:"consoleURL"`
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// binary is $env, else bin/name of the repository.
func binary(t *testing.T, env, name string) string {
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(repoRoot(), "bin", name)
	}
	if _, err := os.Stat(p); err != nil {
		missing(t, fmt.Sprintf("%s not built (%v): run `make localcluster-e2e`", name, err))
	}
	return p
}

// toolDir is the directory $env names, which must hold name (a client
// tool `make localcluster-e2e` builds).
func toolDir(t *testing.T, env, name string) string {
	t.Helper()
	dir := os.Getenv(env)
	if _, err := os.Stat(filepath.Join(dir, name)); dir == "" || err != nil {
		missing(t, fmt.Sprintf("%s missing (%s=%q): run `make localcluster-e2e`", name, env, dir))
	}
	return dir
}

// missing skips the test on a machine that cannot run it (a developer's,
// without root or the control plane built) and fails it in CI, where
// .ci/run sets STRATA_CI and provides everything: it never passes there
// by not running.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("STRATA_CI") != "" {
		t.Fatal(why + " (STRATA_CI is set: CI must run this test)")
	}
	t.Skip(why)
}

func prerequisites(t *testing.T) (assets, imagesDir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "the local cluster needs root (network and mount namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing(t, "the local cluster needs iproute2's `ip`")
	}
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns"} {
		if _, err := os.Stat(filepath.Join(assets, b)); assets == "" || err != nil {
			missing(t, fmt.Sprintf("%s not in KUBEBUILDER_ASSETS=%q: run `make localcluster-e2e`", b, assets))
		}
	}
	return assets, binary(t, "STRATA_IMAGES", "images")
}

// cluster is a local cluster brought up by a test.
type cluster struct {
	lc, state string
	in        info
	out       string // what `up` printed
	tornDown  bool
	sysctls   map[string]string // the host's, before up
}

// hostSysctls are the kernel settings a kubelet changes.
func hostSysctls() map[string]string {
	out := map[string]string{}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		out[k] = strings.TrimSpace(string(v))
	}
	return out
}

// The harness binary, built once for all the tests of a run (a link
// takes seconds here) into a directory TestMain removes.
var (
	harnessOnce sync.Once
	harnessDir  string
	harnessErr  error
)

// harness is the path of the hack/localcluster binary, built at its first
// use.
func harness(t *testing.T) string {
	t.Helper()
	harnessOnce.Do(func() {
		if harnessDir, harnessErr = os.MkdirTemp("", "strata-localcluster-"); harnessErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(harnessDir, "localcluster"), "./hack/localcluster")
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			harnessErr = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if harnessErr != nil {
		t.Fatalf("building the harness: %v", harnessErr)
	}
	return filepath.Join(harnessDir, "localcluster")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if harnessDir != "" {
		_ = os.RemoveAll(harnessDir)
	}
	os.Exit(code)
}

// startCluster builds the harness and brings a cluster up (the demo tenant
// unless args say otherwise), failing the test when the tenant is not
// Ready in time. It is torn down when the test ends, after its logs are
// printed if the test failed, unless the test called down itself.
func startCluster(ctx context.Context, t *testing.T, assets, imagesDir string, args ...string) *cluster {
	t.Helper()
	work := t.TempDir()
	c := &cluster{lc: harness(t), state: filepath.Join(work, "state"), sysctls: hostSysctls()}
	t.Cleanup(func() {
		if !c.tornDown {
			if t.Failed() {
				dumpLogs(t, c.state)
			}
			c.stop(t)
		}
	})
	upArgs := append([]string{"up", "--state-dir", c.state, "--repo", repoRoot(), "--assets", assets,
		"--images", imagesDir, "--api-port", "0", "--s3-port", "0", "--console-port", "0", "--timeout", "6m"}, args...)
	up := exec.CommandContext(ctx, c.lc, upArgs...)
	up.Dir = repoRoot()
	var out bytes.Buffer
	up.Stdout, up.Stderr = &out, &out
	start := time.Now()
	if err := up.Run(); err != nil {
		t.Fatalf("localcluster up: %v\n%s", err, out.String())
	}
	t.Logf("localcluster up returned after %s", time.Since(start).Round(time.Second))
	c.out = out.String()
	data, err := os.ReadFile(filepath.Join(c.state, "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &c.in); err != nil {
		t.Fatal(err)
	}
	if c.in.Status != "ready" {
		t.Fatalf("status %q: %s", c.in.Status, c.in.Message)
	}
	return c
}

func (c *cluster) stop(t *testing.T) {
	cmd := exec.Command(c.lc, "down", "--state-dir", c.state)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("localcluster down: %v\n%s", err, out)
	}
}

// down tears the cluster down and checks that nothing of it is left: no
// state directory, process, interface or listener (the host ports in urls).
func (c *cluster) down(t *testing.T, urls ...string) {
	t.Helper()
	c.tornDown = true
	if t.Failed() {
		dumpLogs(t, c.state)
	}
	start := time.Now()
	c.stop(t)
	t.Logf("torn down in %s", time.Since(start).Round(100*time.Millisecond))
	if _, err := os.Stat(c.state); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
	if pids := processesUnder(c.state); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, "lcbr") || strings.HasPrefix(i.Name, "lcv") {
			t.Errorf("interface %s left in the host's namespace", i.Name)
		}
	}
	// Kubelet nodes: their cgroups gone from every hierarchy, and the
	// kernel settings the kubelets changed back as they were before up.
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/localcluster-*"); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	if now := hostSysctls(); fmt.Sprint(now) != fmt.Sprint(c.sysctls) {
		t.Errorf("host sysctls not restored: %v, were %v before up", now, c.sysctls)
	}
	for _, u := range urls {
		if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections", u)
		}
	}
}

func TestDemoTenantServesS3(t *testing.T) {
	assets, imagesDir := prerequisites(t)
	monitoringImages(t, imagesDir)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// With the monitoring of `make demo DEMO_FLAGS=--monitoring`, checked
	// last (prometheusScrapes).
	c := startCluster(ctx, t, assets, imagesDir, "--monitoring", "--prometheus-port", "0")
	in := c.in
	if !strings.Contains(c.out, in.S3URL) || !strings.Contains(c.out, "export KUBECONFIG="+in.Kubeconfig) {
		t.Errorf("up did not print the S3 URL and kubeconfig:\n%s", c.out)
	}

	t.Run("every server pod Ready on its own node", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			if !podReady(&p) {
				t.Errorf("pod %s not Ready: %+v", p.Name, p.Status.Conditions)
			}
			if p.Status.PodIP == "" {
				t.Errorf("pod %s has no IP", p.Name)
			}
			nodes[p.Spec.NodeName] = true
		}
		if len(pods.Items) != 4 || len(nodes) != 4 {
			t.Errorf("want 4 server pods on 4 nodes, got %d pods on %d nodes", len(pods.Items), len(nodes))
		}
	})

	t.Run("the pods run the image make images built", func(t *testing.T) {
		loaded, err := images.LoadLayouts(imagesDir)
		if err != nil {
			t.Fatal(err)
		}
		engine, ok := images.Find(loaded, buildinfo.EngineImage())
		if !ok {
			t.Fatalf("no %s in %s", buildinfo.EngineImage(), imagesDir)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				// No spec.image in the demo Tenant: the operator's default,
				// the engine image of its own release.
				if c.Image != buildinfo.EngineImage() || c.ImageID != engine.Repository+"@"+engine.Digest {
					t.Errorf("pod %s container %s: image %s (%s), want %s@%s", p.Name, c.Name, c.Image, c.ImageID, buildinfo.EngineImage(), engine.Digest)
				}
			}
		}
	})

	t.Run("S3 through the printed endpoint", func(t *testing.T) {
		client := s3Client(t, in)
		bucket := "e2e"
		if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatalf("create bucket: %v", err)
		}
		body := bytes.Repeat([]byte("strata local cluster "), 20000) // ~400 KiB: erasure-coded, not inline
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/object"), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put: %v", err)
		}
		got, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("dir/object")})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		read, err := io.ReadAll(got.Body)
		got.Body.Close()
		if err != nil || !bytes.Equal(read, body) {
			t.Fatalf("read back %d bytes (err %v), want the %d written", len(read), err, len(body))
		}
		list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil || len(list.Contents) != 1 {
			t.Fatalf("list: %v, %d objects", err, len(list.Contents))
		}
		// SSE-S3 with the master key the operator generated for the tenant
		// (mounted from <tenant>-encryption-keys).
		secret := bytes.Repeat([]byte("sealed at rest "), 1000)
		put, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("sealed"), Body: bytes.NewReader(secret),
			ServerSideEncryption: s3types.ServerSideEncryptionAes256})
		if err != nil || put.ServerSideEncryption != s3types.ServerSideEncryptionAes256 {
			t.Fatalf("SSE-S3 put: %v (encryption %q)", err, put.ServerSideEncryption)
		}
		sealed, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("sealed")})
		if err != nil {
			t.Fatalf("SSE-S3 get: %v", err)
		}
		read, err = io.ReadAll(sealed.Body)
		sealed.Body.Close()
		if err != nil || !bytes.Equal(read, secret) || sealed.ServerSideEncryption != s3types.ServerSideEncryptionAes256 {
			t.Fatalf("SSE-S3 read back %d bytes (err %v, encryption %q), want the %d written", len(read), err, sealed.ServerSideEncryption, len(secret))
		}
		// The Tenant's declared bucket was created by the operator through
		// the same Service.
		if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("photos")}); err != nil {
			t.Errorf("declared bucket photos: %v", err)
		}
	})

	t.Run("16 MiB and 4 KiB load in a 1 GiB memory limit, a server lost and healed, no OOM kill", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		memoryLimitedLoad(ctx, t, c, kubernetes.NewForConfigOrDie(cfg))
	})

	t.Run("a user added to the Tenant works without restarting a server", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		restarts := func() map[string]int32 {
			pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int32{}
			for _, p := range pods.Items {
				for _, c := range p.Status.ContainerStatuses {
					out[p.Name+"/"+string(p.UID)] += c.RestartCount
				}
			}
			return out
		}
		before := restarts()
		user := corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-app-keys", Namespace: "default"},
			StringData: map[string]string{"accessKey": "E2EAPPACCESSKEY00001", "secretKey": "e2e-app-secret-key-0123456789abcdef"},
		}
		if _, err := cs.CoreV1().Secrets("default").Create(ctx, &user, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tenants := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "storage.strata.dev", Version: "v1alpha1", Resource: "tenants"})
		patch := []byte(`{"spec":{"users":[{"name":"app","secretRef":{"name":"e2e-app-keys"},"policy":"readwrite","buckets":["photos"]}]}}`)
		if _, err := tenants.Namespace("default").Patch(ctx, "media", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// The operator rewrites the IAM Secret, the kubelet the mounted
		// file, and the engine reloads it.
		app := s3Client(t, info{S3URL: in.S3URL, CAFile: in.CAFile, AccessKey: "E2EAPPACCESSKEY00001", SecretKey: "e2e-app-secret-key-0123456789abcdef"})
		deadline := time.Now().Add(2 * time.Minute)
		for {
			_, err := app.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("from-app"), Body: strings.NewReader("hello")})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the new user cannot write after 2 minutes: %v", err)
			}
			time.Sleep(2 * time.Second)
		}
		if after := restarts(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("server restarts changed: %v -> %v", before, after)
		}
	})

	t.Run("a pod claims a bucket and reaches it with its ServiceAccount's token alone", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		claimsFromPods(ctx, t, kubeClient(t, in.Kubeconfig), kubernetes.NewForConfigOrDie(cfg))
	})

	t.Run("the web console in a browser: sign in, a 50 MiB upload and its download, a server killed shows its drives offline", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		consoleInBrowser(ctx, t, c, kubernetes.NewForConfigOrDie(cfg))
	})

	t.Run("kubectl exec, port-forward and logs --previous reach the kubelets", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kubectlOnNodes(ctx, t, c, kubernetes.NewForConfigOrDie(cfg))
	})

	t.Run("a replication pair with a second Tenant: 200 PUT/s copied within a minute (lag reported), the destination's servers deleted under writes, 0 versions missing", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		replicationPair(ctx, t, c, kubernetes.NewForConfigOrDie(cfg))
	})

	t.Run("bucket notifications of the second Tenant to a NATS server in the cluster, its credentials from a Secret: every PUT and DELETE has its event", func(t *testing.T) {
		bucketNotifications(ctx, t, c)
	})

	prometheusScrapes(ctx, t, c)

	// Down, then nothing of the cluster is left.
	c.down(t, in.S3URL, in.PrometheusURL)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// s3Client talks to the endpoint with the root keys, trusting the tenant CA.
func s3Client(t *testing.T, in info) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(in.S3URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(in.AccessKey, in.SecretKey, ""),
		HTTPClient:   tenantHTTPClient(t, in),
	})
}

// tenantHTTPClient is an HTTP client that trusts the tenant CA.
func tenantHTTPClient(t *testing.T, in info) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if in.CAFile != "" {
		pem, err := os.ReadFile(in.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("%s holds no certificate", in.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// processesUnder lists processes whose command line, root or working
// directory is in dir.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		root, _ := os.Readlink(filepath.Join("/proc", e.Name(), "root"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(string(cmdline), dir) || strings.HasPrefix(root, dir) || strings.HasPrefix(cwd, dir) {
			out = append(out, fmt.Sprintf("%s %s", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return out
}

// dumpLogs prints the tail of every log of the cluster, and keeps the
// whole of them in STRATA_KEEP_LOGS (a directory) when it is set.
func dumpLogs(t *testing.T, state string) {
	if keep := os.Getenv("STRATA_KEEP_LOGS"); keep != "" {
		dst := filepath.Join(keep, fmt.Sprintf("%s-%s", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UTC().Format("150405")))
		_ = os.MkdirAll(keep, 0o755)
		if out, err := exec.Command("cp", "-a", filepath.Join(state, "logs"), dst).CombinedOutput(); err != nil {
			t.Logf("keeping the logs in %s: %v: %s", dst, err, out)
		} else {
			t.Logf("the whole logs are in %s", dst)
		}
	}
	_ = filepath.Walk(filepath.Join(state, "logs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a log that vanished is no reason to stop dumping the others
		}
		if fi.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		t.Logf("=== %s (tail)\n%s", p, data)
		return nil
	})
}
