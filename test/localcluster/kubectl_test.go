package localcluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubectlOnNodes runs what a user of the cluster runs against its kubelets
// through the API server: `kubectl exec` (no shell in the image: the
// binary itself), `kubectl port-forward` (an HTTPS health check through
// it), and `kubectl logs --previous` after the server's process is killed
// and its kubelet has started it again.
func kubectlOnNodes(ctx context.Context, t *testing.T, c *cluster, cs kubernetes.Interface) {
	kubectl := filepath.Join(toolDir(t, "STRATA_CLI_TOOLS", "kubectl"), "kubectl")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.in.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	if out := run("exec", "media-nvme-0", "--", "/strata", "version"); !strings.HasPrefix(out, "strata ") {
		t.Errorf("kubectl exec /strata version: %q", out)
	}

	pf := exec.CommandContext(ctx, kubectl, "port-forward", "pod/media-nvme-0", "0:9000")
	pf.Env = append(os.Environ(), "KUBECONFIG="+c.in.Kubeconfig)
	stdout, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("kubectl port-forward said %q (%v)", line, err)
	}
	ca, err := os.ReadFile(c.in.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	resp, err := hc.Get("https://127.0.0.1:" + m[1] + "/strata/health/live")
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
	p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := containerPID(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
