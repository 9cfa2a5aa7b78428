package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubectlOf is the kubectl binary and a function running it against the
// cluster, which fails the test when kubectl fails.
func kubectlOf(ctx context.Context, t *testing.T, c *cluster) (string, func(args ...string) string) {
	kubectl := filepath.Join(toolDir(t, "STRATA_CLI_TOOLS", "kubectl"), "kubectl")
	return kubectl, func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.in.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// kubectlOnNodes runs what a user of the cluster runs against its kubelets
// through the API server: `kubectl exec` (no shell in the image: the
// binary itself), `kubectl port-forward` (an HTTPS health check through
// it), and `kubectl logs --previous` after the server's process is killed
// and its kubelet has started it again.
func kubectlOnNodes(ctx context.Context, t *testing.T, c *cluster, cs kubernetes.Interface) {
	kubectl, run := kubectlOf(ctx, t, c)

	if out := run("exec", "media-nvme-0", "--", "/strata", "version"); !strings.HasPrefix(out, "strata ") {
		t.Errorf("kubectl exec /strata version: %q", out)
	}

	port := portForward(ctx, t, kubectl, c.in.Kubeconfig, "pod/media-nvme-0", "9000")
	ca, err := os.ReadFile(c.in.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	resp, err := hc.Get("https://127.0.0.1:" + port + "/strata/health/live")
	if err != nil {
		t.Fatalf("through kubectl port-forward: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("liveness through kubectl port-forward: %s", resp.Status)
	}

	const victim = "media-nvme-2"
	killPodProcess(ctx, t, cs, victim)
	waitFor(ctx, t, 2*time.Minute, func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount < 1 || !podReady(p) {
			return fmt.Errorf("%s not restarted and Ready yet", victim)
		}
		return nil
	})
	if out := run("logs", victim, "--previous"); !strings.Contains(out, "serving S3") {
		t.Errorf("kubectl logs --previous of the killed server does not show it served:\n%s", out)
	}
}

// killPodProcess kills the container process of a pod of the default
// namespace with SIGKILL, as a crash would; its kubelet starts it again.
func killPodProcess(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	signalPodProcess(ctx, t, cs, name, syscall.SIGKILL)
}

// signalPodProcess sends sig to the server process of a running pod.
func signalPodProcess(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string, sig syscall.Signal) {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := containerPID(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
}

// endpointLeft waits until no EndpointSlice of a Service lists the pod as
// ready (its readiness probe failed, or it is gone) and returns how long
// that took.
func endpointLeft(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, service, pod string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service}
	waitEvery(ctx, t, within, 500*time.Millisecond, func() error {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.TargetRef != nil && e.TargetRef.Name == pod && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					return fmt.Errorf("%s is still a ready endpoint of %s/%s", pod, ns, service)
				}
			}
		}
		return nil
	})
	return time.Since(start)
}
