package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/images"
)

// installPage is the page whose commands TestInstallPage runs.
const installPage = "docs/install.md"

// pageBlock is one ```sh block of the page.
type pageBlock struct {
	line    int
	section string // the ## heading it is under
	script  string
	notRun  string // why the test does not run it ("" = it runs)
}

// pageBlocks reads the shell blocks of a Markdown page. A block preceded
// by `<!-- not run by the test: why -->` is skipped, and must say why.
func pageBlocks(t *testing.T, path string) []pageBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []pageBlock
	var cur *pageBlock
	var lastComment, section string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case cur != nil && strings.HasPrefix(line, "```"):
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += line + "\n"
		case strings.HasPrefix(line, "```sh"):
			cur = &pageBlock{line: n, section: section}
			if why, ok := strings.CutPrefix(lastComment, "<!-- not run by the test:"); ok {
				cur.notRun = strings.TrimSpace(strings.TrimSuffix(why, "-->"))
				if cur.notRun == "" {
					t.Errorf("%s:%d: a block the test skips must say why", path, n)
				}
			}
		}
		if strings.TrimSpace(line) != "" {
			lastComment = ""
			if strings.HasPrefix(line, "<!--") {
				lastComment = line
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated code block", path, cur.line)
	}
	return blocks
}

// TestInstallPage runs every shell block of docs/install.md, as written and
// in order, in one shell, against a bare local cluster (no operator until
// Helm installs it, as a pod running the image `make images` built): the
// operator chart, the tenant chart, keys and CA from their Secrets, the aws
// CLI, helm test, strata admin, a second pool through helm upgrade, and the
// CRD upgrade. Then it checks what the page promises from outside.
func TestInstallPage(t *testing.T) {
	assets, imagesDir := prerequisites(t)
	tools := os.Getenv("STRATA_CLI_TOOLS") // kubectl, helm and mc (hack/cli-tools.sh)
	py := os.Getenv("STRATA_PYCLIENTS")    // the aws CLI (make pyclients)
	for _, tool := range []string{filepath.Join(tools, "kubectl"), filepath.Join(tools, "helm"), filepath.Join(tools, "mc"), filepath.Join(py, "aws")} {
		if _, err := os.Stat(tool); tools == "" || py == "" || err != nil {
			missing(t, fmt.Sprintf("%s missing (STRATA_CLI_TOOLS=%q, STRATA_PYCLIENTS=%q): run `make localcluster-e2e`", tool, tools, py))
		}
	}
	strataBin := binary(t, "STRATA_BIN", "strata")

	// Two scripts: the page up to its removal section, checked from
	// outside while the tenant runs, then the removal.
	blocks := pageBlocks(t, filepath.Join(repoRoot(), installPage))
	var scripts [2]strings.Builder
	run := 0
	for _, b := range blocks {
		if b.notRun != "" {
			t.Logf("%s:%d not run: %s", installPage, b.line, b.notRun)
			continue
		}
		run++
		phase := 0
		if strings.Contains(b.section, "Removing") {
			phase = 1
		}
		fmt.Fprintf(&scripts[phase], "echo '>>> %s:%d'\nset -x\n%sset +x\n", installPage, b.line, b.script)
	}
	if run < 10 || scripts[1].Len() == 0 {
		t.Fatalf("only %d runnable blocks in %s (or no removal section): the page lost its commands", run, installPage)
	}

	work := t.TempDir()
	lc := harness(t)
	state := filepath.Join(work, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			dumpLogs(t, state)
		}
		if out, err := exec.Command(lc, "down", "--state-dir", state).CombinedOutput(); err != nil {
			t.Errorf("localcluster down: %v\n%s", err, out)
		}
	}()
	up := exec.CommandContext(ctx, lc, "up", "--bare", "--monitoring", "--prometheus-port", "0", "--state-dir", state, "--repo", repoRoot(), "--assets", assets,
		"--images", imagesDir, "--tenant", "media/media", "--api-port", "0", "--s3-port", "0", "--timeout", "3m")
	up.Dir = repoRoot()
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("localcluster up --bare: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(state, "info.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in info
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}

	// The page runs from a checkout: the charts and README.md are there;
	// what it writes (media-ca.crt, README.copy) stays in the work dir.
	page := filepath.Join(work, "checkout")
	if err := os.MkdirAll(page, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"charts", "README.md"} {
		if err := os.Symlink(filepath.Join(repoRoot(), p), filepath.Join(page, p)); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(work, "home")
	if err := os.MkdirAll(filepath.Join(home, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strataBin, filepath.Join(home, "bin", "strata")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	runPage := func(phase int) {
		t.Helper()
		sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+scripts[phase].String())
		sh.Dir = page
		sh.Env = []string{
			"PATH=" + strings.Join([]string{filepath.Join(home, "bin"), tools, py, "/usr/local/bin", "/usr/bin", "/bin"}, ":"),
			"HOME=" + home,
			"KUBECONFIG=" + in.Kubeconfig,
			// What the page's port-forward block gives on a real cluster:
			// the local cluster forwards this host port to the tenant's
			// Service.
			"S3_ENDPOINT=" + in.S3URL,
			// What the page's kube-prometheus-stack block gives: the local
			// cluster's own Prometheus (--monitoring).
			"PROMETHEUS_URL=" + in.PrometheusURL,
		}
		out.Reset()
		sh.Stdout, sh.Stderr = &out, &out
		start := time.Now()
		err := sh.Run()
		t.Logf("the page's blocks (part %d) ran in %s:\n%s", phase+1, time.Since(start).Round(time.Second), out.String())
		if err != nil {
			t.Fatalf("%s: %v", installPage, err)
		}
	}
	runPage(0)

	cfg, err := clientcmd.BuildConfigFromFlags("", in.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)

	t.Run("the operator runs as a pod of its image", func(t *testing.T) {
		loaded, err := images.LoadLayouts(imagesDir)
		if err != nil {
			t.Fatal(err)
		}
		ref := buildinfo.OperatorRepository + ":" + buildinfo.Version
		op, ok := images.Find(loaded, ref)
		if !ok {
			t.Fatalf("no %s in %s", ref, imagesDir)
		}
		deps, err := cs.AppsV1().Deployments("strata-system").List(ctx, metav1.ListOptions{})
		if err != nil || len(deps.Items) != 1 || !deploymentAvailable(&deps.Items[0]) {
			t.Fatalf("operator Deployment: %v %+v", err, deps)
		}
		pods, err := cs.CoreV1().Pods("strata-system").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("operator pods: %v", err)
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.ContainerStatuses {
				if c.Image != ref || c.ImageID != op.Repository+"@"+op.Digest || !c.Ready {
					t.Errorf("pod %s: image %s (%s) ready %v, want %s@%s", p.Name, c.Image, c.ImageID, c.Ready, ref, op.Digest)
				}
			}
		}
	})

	t.Run("both pools serve and helm test passed", func(t *testing.T) {
		pods, err := cs.CoreV1().Pods("media").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !podReady(&p) {
				t.Errorf("server pod %s not Ready", p.Name)
			}
		}
		if len(pods.Items) != 8 {
			t.Errorf("%d server pods, want 4 per pool, 2 pools", len(pods.Items))
		}
		// helm test deletes its pods once they succeed (hook-succeeded):
		// what it printed is the record.
		if !regexp.MustCompile(`TEST SUITE:\s+media-selftest\n.*\n.*\nPhase:\s+Succeeded`).MatchString(strings.ReplaceAll(out.String(), "        ", "")) {
			t.Errorf("helm test did not report media-selftest Succeeded")
		}
		copied, err := os.ReadFile(filepath.Join(page, "README.copy"))
		if err != nil {
			t.Fatal(err)
		}
		readme, _ := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
		if !bytes.Equal(copied, readme) {
			t.Errorf("README.copy read back through S3 differs from README.md")
		}
	})

	runPage(1)
	t.Run("removal leaves no pods and keeps the data's claims", func(t *testing.T) {
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(2 * time.Minute)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("%s after 2 minutes", what)
				}
				time.Sleep(time.Second)
			}
		}
		waitFor("pods left in media and strata-system", func() bool {
			a, err1 := cs.CoreV1().Pods("media").List(ctx, metav1.ListOptions{})
			b, err2 := cs.CoreV1().Pods("strata-system").List(ctx, metav1.ListOptions{})
			return err1 == nil && err2 == nil && len(a.Items)+len(b.Items) == 0
		})
		claims, err := cs.CoreV1().PersistentVolumeClaims("media").List(ctx, metav1.ListOptions{})
		if err != nil || len(claims.Items) != 24 {
			t.Errorf("claims after removal with deletionPolicy Retain: %d (%v), want the 24 drives' (16 + 8)", len(claims.Items), err)
		}
		if _, err := cs.CoreV1().Secrets("media").Get(ctx, "media-root-credentials", metav1.GetOptions{}); err != nil {
			t.Errorf("root keys after removal with deletionPolicy Retain: %v", err)
		}
	})
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
