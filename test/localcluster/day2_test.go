package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/internal/builders"
)

// operationsPage is the runbook whose blocks TestDayTwoUnderLoad runs.
const operationsPage = "docs/operations.md"

// TestDayTwoUnderLoad takes the demo tenant (and its GatewayPool) through
// the day-2 operations of docs/operations.md, running the page's own
// commands, while clients write and read over HTTPS: three aws-sdk-go-v2
// clients through the servers' Service, three through the gateways', and a
// boto3 client at its defaults (issue 16). Steps: upgrade to another build
// (servers and gateways), a roll-out to an image that does not start,
// paused by its health gate, then rolled back to the first build; adding
// two ServerPools (the second while the first comes up), decommissioning
// the pool that holds the data, draining a node, losing a node for a
// minute, and scaling the gateways 2 -> 4 -> 2 through their autoscaler.
//
// Asserted: zero failed requests with the SDKs' standard retries (failed
// attempts before retries are reported), p99 during each step at most 3x
// steady state, no restart of a pod a step does not touch, never more
// servers of a pool down than its PodDisruptionBudget allows in a voluntary
// step, Events and Tenant status narrating the steps, and every object
// read back at the end. STRATA_DAY2_LONG=1 (`make day2-e2e`) holds each
// state a minute and adds a plain roll-back and a second upgrade.
func TestDayTwoUnderLoad(t *testing.T) {
	assets, imagesDir := prerequisites(t)
	tools, py := toolDir(t, "STRATA_CLI_TOOLS", "kubectl"), toolDir(t, "STRATA_PYCLIENTS", "python3")
	hold, long := 10*time.Second, os.Getenv("STRATA_DAY2_LONG") == "1"
	if long {
		hold = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	next := "ghcr.io/strata-storage/strata:0.1.0-next"
	c, kc, gwIn := startDemoWithGateways(ctx, t, assets, imagesWithNextBuild(t, imagesDir, next))
	ns := "default"

	book := runbook{t: t, blocks: pageBlocks(t, filepath.Join(repoRoot(), operationsPage)),
		env: []string{"PATH=" + strings.Join([]string{tools, py, "/usr/local/bin", "/usr/bin", "/bin"}, ":"),
			"KUBECONFIG=" + c.in.Kubeconfig, "HOME=" + t.TempDir()}}
	watch := startWatch(ctx, t, kc, ns)
	mixed := startMixedLoad(ctx, t, c.in, gwIn, py, "day2")
	// Failures found while the cluster runs are given when the test ends,
	// after the teardown and below the cluster's logs, which would
	// otherwise bury them.
	var verdicts []string
	fail := func(format string, args ...any) {
		v := fmt.Sprintf(format, args...)
		t.Logf("failure (given again after the teardown): %s", v)
		verdicts = append(verdicts, v)
	}
	defer func() {
		for _, v := range verdicts {
			t.Error(v)
		}
	}()
	servers, gateways := mixed.servers, mixed.gateways
	if err := serversSpeak(t, c.in, previousProtocol); err != nil {
		fail("at the start: %v", err)
	}
	steadyFrom := time.Now()
	time.Sleep(2 * hold)
	steady, nSteady := servers.p99(steadyFrom, time.Now())
	gwSteady, gwNSteady := gateways.p99(steadyFrom, time.Now())
	t.Logf("steady state: p99 %s over %d requests through the servers, %s over %d through the gateways", steady, nSteady, gwSteady, gwNSteady)

	var results []stepResult
	contended := false
	step := func(name string, touched func(pod string) bool, voluntary bool, run func()) {
		t.Logf("step %q: %s", name, servers.figures())
		before := restartCounts(ctx, t, kc)
		from := time.Now()
		// The step's steady state is the cluster at rest just before it
		// (the previous step's settling time): from one step to the next
		// the number of servers sharing the machine's cores changes.
		r := stepResult{name: name}
		r.base, _ = servers.p99(from.Add(-hold), from)
		r.gwBase, _ = gateways.p99(from.Add(-hold), from)
		run()
		time.Sleep(hold)
		to := time.Now()
		r.took = to.Sub(from)
		r.p99, r.n = servers.p99(from, to)
		r.gwP99, r.gwN = gateways.p99(from, to)
		r.maxDown = watch.maxDown(from, to)
		r.contended, contended = contended, false
		results = append(results, r)
		for pod, n := range restartCounts(ctx, t, kc) {
			if b, was := before[pod]; was && n != b && !touched(strings.Split(pod, "/")[0]) {
				fail("step %q restarted pod %s, which it does not touch (%d -> %d restarts)", name, pod, b, n)
			}
		}
		if voluntary {
			for pool, down := range r.maxDown {
				if down > 1 {
					fail("step %q: %d servers of pool %s down at once; its PodDisruptionBudget allows 1", name, down, pool)
				}
			}
		}
		t.Logf("step %q done in %s: p99 servers %s over %d requests, gateways %s over %d; most servers down at once %v; %s",
			name, r.took.Round(time.Second), r.p99, r.n, r.gwP99, r.gwN, r.maxDown, servers.figures())
	}
	all := func(string) bool { return true }
	gatewaysOnly := func(pod string) bool { return strings.HasPrefix(pod, "media-nas") }

	upgrade := func() {
		step("upgrade to another build", all, true, func() {
			book.run(ctx, "Upgrade", -1, "NEW_IMAGE="+next)
			waitFor(ctx, t, time.Minute, func() error { return serversRun(ctx, kc, ns, next, 4) })
		})
		if err := serversSpeak(t, c.in, buildinfo.ProtocolVersion); err != nil {
			fail("after the upgrade: %v", err)
		}
	}
	rollBack := func() {
		book.run(ctx, "Roll back", -1, "PREVIOUS_IMAGE="+buildinfo.EngineImage())
		waitFor(ctx, t, time.Minute, func() error { return serversRun(ctx, kc, ns, buildinfo.EngineImage(), 4) })
		if err := serversSpeak(t, c.in, previousProtocol); err != nil {
			fail("after the roll-back: %v", err)
		}
	}
	upgrade()
	if long {
		step("roll-back", all, true, rollBack)
		upgrade()
	}
	step("roll-out to a broken image paused by its health gate, then roll-back", all, true, func() {
		patchTenant(ctx, t, kc, ns, func(tn *v1.Tenant) {
			tn.Spec.Upgrade.HealthGateTimeout = durationOf(20 * time.Second)
		})
		book.run(ctx, "Upgrade", 0, "NEW_IMAGE=ghcr.io/strata-storage/strata:0.0.0-missing")
		waitFor(ctx, t, 5*time.Minute, func() error {
			return tenantCondition(ctx, kc, ns, v1.ConditionUpgrading, metav1.ConditionFalse, v1.ReasonHealthGateFailed)
		})
		out := book.run(ctx, "When a roll-out pauses", -1)
		if !strings.Contains(out, "paused at") || !strings.Contains(out, v1.ReasonHealthGateFailed) {
			fail("the page's commands do not show why the roll-out paused:\n%s", out)
		}
		rollBack()
	})
	contended = true
	step("expansion by two pools", func(pod string) bool {
		return strings.HasPrefix(pod, "media-nvme2") || strings.HasPrefix(pod, "media-nvme3")
	}, false, func() {
		book.run(ctx, "Expand: add a ServerPool", 0, "POOL=nvme2", "CPU=100m", "MEMORY=128Mi")
		time.Sleep(5 * time.Second) // nvme2 is still coming up
		book.run(ctx, "Expand: add a ServerPool", 0, "POOL=nvme3", "CPU=100m", "MEMORY=128Mi")
		book.run(ctx, "Expand: add a ServerPool", 1, "POOL=nvme2")
		book.run(ctx, "Expand: add a ServerPool", 1, "POOL=nvme3")
		waitFor(ctx, t, 5*time.Minute, func() error { return tenantServes(ctx, kc, ns, 3) })
	})
	// The short form empties the newest pool (objects written since the
	// expansion), the long one the first (every object written before).
	drained := "nvme3"
	if long {
		drained = "nvme"
	}
	step("decommission of pool "+drained, func(pod string) bool { return strings.HasPrefix(pod, "media-"+drained+"-") }, true, func() {
		book.run(ctx, "Decommission a pool", -1, "POOL="+drained)
	})
	step("drain of node-3", func(pod string) bool { return podOnNode(ctx, kc, ns, pod, "node-3") }, true, func() {
		book.run(ctx, "Drain a node for maintenance", -1, "NODE=node-3")
	})
	step("loss of node-2 for a minute", func(pod string) bool { return podOnNode(ctx, kc, ns, pod, "node-2") }, false, func() {
		c.nodeDown(t, "node-2")
		time.Sleep(30 * time.Second)
		out := book.run(ctx, "When a node is lost", 0)
		if !strings.Contains(out, "Degraded") {
			fail("with node-2 lost, the page's commands do not show the tenant Degraded:\n%s", out)
		}
		time.Sleep(30 * time.Second)
		c.nodeUp(t, "node-2")
		waitFor(ctx, t, 5*time.Minute, func() error { return tenantServes(ctx, kc, ns, 2) })
	})
	step("gateways 2 -> 4 -> 2 through the autoscaler", gatewaysOnly, false, func() {
		book.run(ctx, "Scale gateways", -1, "MIN=4", "MAX=8")
		time.Sleep(hold)
		book.run(ctx, "Scale gateways", -1, "MIN=2", "MAX=2")
		waitFor(ctx, t, 3*time.Minute, func() error { return gatewaysReady(ctx, kc, ns, 2) })
	})

	figures := mixed.stop(t)
	watch.stop()
	var table strings.Builder
	table.WriteString("| step | took | p99 servers: before -> during (x) | p99 gateways: before -> during (x) | most servers of a pool down |\n|---|---|---|---|---|\n")
	for _, r := range results {
		ratio, gwRatio := float64(r.p99)/float64(max(r.base, 1)), float64(r.gwP99)/float64(max(r.gwBase, 1))
		fmt.Fprintf(&table, "| %s | %s | %s -> %s (%.1fx) | %s -> %s (%.1fx) | %v |\n", r.name, r.took.Round(time.Second),
			r.base.Round(time.Millisecond), r.p99.Round(time.Millisecond), ratio,
			r.gwBase.Round(time.Millisecond), r.gwP99.Round(time.Millisecond), gwRatio, r.maxDown)
		switch {
		case r.contended:
			// Eight server processes start on the two cores the clients and
			// every other pod share (in a cluster they would start on other
			// machines): the gateways, which this step does not touch at
			// all, are the control for what that costs. The servers may be
			// slower than steady state by at most 3x what the control was.
			if ratio > 3*max(1, gwRatio) {
				fail("step %q: p99 %.1fx steady through the servers, more than 3x the %.1fx of the untouched gateways", r.name, ratio, gwRatio)
			}
		case ratio > 3 || gwRatio > 3:
			fail("step %q: p99 %.1fx steady through the servers, %.1fx through the gateways (target at most 3x)", r.name, ratio, gwRatio)
		}
	}
	t.Logf("figures:\n%s", table.String())
	watch.checkNarration(t)
	mixed.readBack(ctx, t, figures)
	if (len(verdicts) > 0 || figures.failed() > 0) && !t.Failed() {
		dumpLogs(t, c.state)
	}
	c.down(t, c.in.S3URL, gwIn.S3URL)
	if figures.failed() > 0 {
		figures.errorf(t, "requests failed")
	}
}

type stepResult struct {
	name       string
	took       time.Duration
	p99, gwP99 time.Duration
	// base, gwBase: p99 at rest just before the step.
	base, gwBase time.Duration
	n, gwN       int
	maxDown      map[string]int
	// contended: the step starts server processes on the machine's few
	// cores, which every client and pod share.
	contended bool
}

func durationOf(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// runbook runs the shell blocks of docs/operations.md.
type runbook struct {
	t      *testing.T
	blocks []pageBlock
	env    []string
}

// run runs block i of section (every runnable block when i < 0) with env
// added, in one shell, and returns what it printed; it fails the test when
// the section has no such block or the shell fails.
func (b runbook) run(ctx context.Context, section string, i int, env ...string) string {
	b.t.Helper()
	var script strings.Builder
	n := 0
	for _, bl := range b.blocks {
		if bl.section != section || bl.notRun != "" {
			continue
		}
		if i < 0 || n == i {
			script.WriteString(bl.script)
		}
		n++
	}
	if script.Len() == 0 {
		b.t.Fatalf("%s has no block %d under %q", operationsPage, i, section)
	}
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script.String())
	sh.Env = append(append([]string{}, b.env...), env...)
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	start := time.Now()
	if err := sh.Run(); err != nil {
		b.t.Fatalf("%s, %q (%v): %v after %s\n%s", operationsPage, section, env, err, time.Since(start).Round(time.Second), out.String())
	}
	b.t.Logf("%s, %q (%v): %s", operationsPage, section, env, time.Since(start).Round(time.Second))
	return out.String()
}

// watch samples, every half second, how many servers of each pool are
// down (not Ready, or missing from the pool's count) and what the Tenant's
// status says, for the steps' figures and the narration check.
type watch struct {
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []downSample
	phases  map[v1.TenantPhase]bool
	upgrade bool            // status.upgrade seen
	served  map[string]bool // pools that had every server Ready once
	kc      client.Client
	ns      string
}

type downSample struct {
	at   time.Time
	down map[string]int
}

func startWatch(ctx context.Context, t *testing.T, kc client.Client, ns string) *watch {
	w := &watch{stopCh: make(chan struct{}), phases: map[v1.TenantPhase]bool{}, served: map[string]bool{}, kc: kc, ns: ns}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.stopCh:
				return
			case <-time.After(500 * time.Millisecond):
			}
			w.sample(ctx)
		}
	}()
	return w
}

func (w *watch) sample(ctx context.Context) {
	pools := &v1.ServerPoolList{}
	pods := &corev1.PodList{}
	tn := &v1.Tenant{}
	if w.kc.List(ctx, pools, client.InNamespace(w.ns)) != nil ||
		w.kc.List(ctx, pods, client.InNamespace(w.ns), client.MatchingLabels(builders.ServerSelector("media"))) != nil ||
		w.kc.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "media"}, tn) != nil {
		return
	}
	ready := map[string]int{}
	for _, p := range pods.Items {
		if podReady(&p) && p.DeletionTimestamp == nil {
			ready[p.Labels[builders.LabelPool]]++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	down := map[string]int{}
	for _, p := range pools.Items {
		// A pool counts once every server of it was Ready (it is coming up
		// before) and until it is decommissioned (its servers go then).
		if ready[p.Name] == int(p.Spec.Servers) {
			w.served[p.Name] = true
		}
		if !w.served[p.Name] || p.Status.PoolState == v1.PoolStateDecommissioned || p.DeletionTimestamp != nil {
			continue
		}
		down[p.Name] = int(p.Spec.Servers) - ready[p.Name]
	}
	w.samples = append(w.samples, downSample{at: time.Now(), down: down})
	w.phases[tn.Status.Phase] = true
	if tn.Status.Upgrade != nil && tn.Status.Upgrade.Total > 0 {
		w.upgrade = true
	}
}

// maxDown is the most servers of each pool down at once in [from, to].
func (w *watch) maxDown(from, to time.Time) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, s := range w.samples {
		if s.at.Before(from) || s.at.After(to) {
			continue
		}
		for pool, n := range s.down {
			out[pool] = max(out[pool], n)
		}
	}
	return out
}

func (w *watch) stop() {
	close(w.stopCh)
	w.wg.Wait()
}

// checkNarration checks that the Tenant's status showed the roll-outs and
// the lost node, and that Events told each step.
func (w *watch) checkNarration(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	phases, upgrade := w.phases, w.upgrade
	w.mu.Unlock()
	for _, p := range []v1.TenantPhase{v1.TenantUpgrading, v1.TenantDegraded, v1.TenantReady} {
		if !phases[p] {
			t.Errorf("the Tenant never showed phase %s (seen: %v)", p, phases)
		}
	}
	if !upgrade {
		t.Error("the Tenant never showed status.upgrade during the roll-outs")
	}
	events := &corev1.EventList{}
	if err := w.kc.List(context.Background(), events, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range events.Items {
		seen[e.InvolvedObject.Kind+"/"+e.Reason] = true
	}
	for _, want := range []string{
		"Tenant/" + v1.ReasonRollingUpdate, "Tenant/" + v1.ReasonHealthGateFailed, "ServerPool/RolloutStep",
		"ServerPool/" + v1.ReasonDraining, "ServerPool/" + v1.ReasonDecommissioned, "Tenant/TopologyUpdated",
	} {
		if !seen[want] {
			t.Errorf("no Event %s (seen: %v)", want, seen)
		}
	}
}

// tenantCondition says why the Tenant's condition typ is not status/reason.
func tenantCondition(ctx context.Context, kc client.Client, ns, typ string, status metav1.ConditionStatus, reason string) error {
	tn := &v1.Tenant{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "media"}, tn); err != nil {
		return err
	}
	c := meta.FindStatusCondition(tn.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("condition %s is %+v, want %s/%s", typ, c, status, reason)
	}
	return nil
}

// startDemoWithGateways brings up the demo tenant with its GatewayPool
// (hack/localcluster/demo-gateway), the gateways' Service exposed on the
// host, and waits for both gateways: gwIn is the cluster's info with the
// gateways' endpoint as S3URL.
func startDemoWithGateways(ctx context.Context, t *testing.T, assets, imagesDir string) (c *cluster, kc client.Client, gwIn info) {
	t.Helper()
	c = startCluster(ctx, t, assets, imagesDir,
		"--manifests", "hack/localcluster/demo", "--manifests", "hack/localcluster/demo-gateway", "--expose", "default/media-nas=0")
	kc = kubeClient(t, c.in.Kubeconfig)
	gwIn = c.in
	gwIn.S3URL = c.in.Exposed["default/media-nas"]
	if gwIn.S3URL == "" {
		t.Fatalf("the harness exposed no gateway Service: %v", c.in.Exposed)
	}
	waitFor(ctx, t, 3*time.Minute, func() error { return gatewaysReady(ctx, kc, "default", 2) })
	return c, kc, gwIn
}

// gatewaysReady says why the GatewayPool nas does not have n Ready pods.
func gatewaysReady(ctx context.Context, kc client.Client, ns string, n int32) error {
	g := &v1.GatewayPool{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nas"}, g); err != nil {
		return err
	}
	if g.Status.ReadyReplicas != n || g.Status.Replicas != n {
		return fmt.Errorf("GatewayPool nas: %d of %d ready, want %d", g.Status.ReadyReplicas, g.Status.Replicas, n)
	}
	return nil
}

// podOnNode reports whether pod runs on node (false when it is gone).
func podOnNode(ctx context.Context, kc client.Client, ns, pod, node string) bool {
	p := &corev1.Pod{}
	return kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, p) == nil && p.Spec.NodeName == node
}

// imagesWithNextBuild is a directory with the images in dir (hard links),
// its engine relinked to speak the internode protocol before this one (the
// release the cluster starts on), and this engine's protocol relinked with
// version 0.1.0-next as image ref: the upgrade goes to a build that speaks a
// newer protocol, the roll-back to one that speaks an older one.
func imagesWithNextBuild(t *testing.T, dir, ref string) string {
	work := t.TempDir()
	out := filepath.Join(work, "images")
	steps := [][]string{{"cp", "-al", dir, out}, {"rm", "-r", filepath.Join(out, "strata")}}
	const pkg = "github.com/strata-storage/strata/engine/buildinfo"
	for _, b := range []struct{ name, ref, ldflags string }{
		{"strata", buildinfo.EngineImage(), fmt.Sprintf("-X %s.speakProtocol=%d", pkg, previousProtocol)},
		{"strata-next", ref, "-X " + pkg + ".Version=0.1.0-next"},
	} {
		bin := filepath.Join(work, "bin", b.name)
		steps = append(steps,
			[]string{"go", "build", "-trimpath", "-ldflags", "-s -w -buildid= " + b.ldflags, "-o", bin, "./cmd/strata"},
			[]string{"go", "run", "./hack/images", "-out", filepath.Join(work, b.name), "-image", "ref=" + b.ref + ",entrypoint=/strata,binary=" + bin},
			[]string{"mv", filepath.Join(work, b.name, "strata"), filepath.Join(out, b.name)})
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

// previousProtocol is the internode protocol of the build the day-2
// cluster starts on: one before this build's.
const previousProtocol = buildinfo.ProtocolVersion - 1

// serversSpeak says why the servers behind in's S3 endpoint do not all
// speak the internode protocol want, from their admin API's info (the
// endpoint spreads the calls over every server).
func serversSpeak(t *testing.T, in info, want int) error {
	cl := tenantHTTPClient(t, in)
	for i := 0; i < 12; i++ {
		req, err := http.NewRequest(http.MethodGet, in.S3URL+"/strata/admin/v1/info", nil)
		if err != nil {
			return err
		}
		req.SetBasicAuth(in.AccessKey, in.SecretKey)
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		var got struct {
			ProtocolVersion int `json:"protocolVersion"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("admin info: %s", resp.Status)
		}
		if err != nil {
			return fmt.Errorf("admin info: %w", err)
		}
		if got.ProtocolVersion != want {
			return fmt.Errorf("a server speaks internode protocol %d, want %d", got.ProtocolVersion, want)
		}
	}
	return nil
}

// serversRun says why not every server pod runs image, Ready.
func serversRun(ctx context.Context, kc client.Client, ns, image string, n int) error {
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(builders.ServerSelector("media"))); err != nil {
		return err
	}
	if len(list.Items) != n {
		return fmt.Errorf("%d server pods", len(list.Items))
	}
	for _, p := range list.Items {
		if !podReady(&p) || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Image != image {
			return fmt.Errorf("pod %s not yet Ready on %s", p.Name, image)
		}
	}
	return nil
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
		return fmt.Errorf("tenant: %d of %d server pools ready, conditions %v\n%s", ready, pools, tn.Status.Conditions, serverState(ctx, kc, ns))
	}
	return nil
}

// serverState describes the tenant's ServerPools, their StatefulSets and
// the server pods not Ready, for a failure to say where readiness stopped:
// the pods (node agent), the StatefulSets' status (kube-controller-manager)
// or the pools' status (the operator).
func serverState(ctx context.Context, kc client.Client, ns string) string {
	var b strings.Builder
	pools := &v1.ServerPoolList{}
	if err := kc.List(ctx, pools, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	for _, p := range pools.Items {
		c := meta.FindStatusCondition(p.Status.Conditions, v1.ConditionReady)
		fmt.Fprintf(&b, "ServerPool %s: generation %d observed %d, %d of %d servers ready", p.Name, p.Generation, p.Status.ObservedGeneration, p.Status.ReadyServers, p.Spec.Servers)
		if c != nil {
			fmt.Fprintf(&b, ", Ready %s since %s: %s", c.Status, c.LastTransitionTime.UTC().Format(time.TimeOnly), c.Message)
		}
		b.WriteString("\n")
	}
	sets := &appsv1.StatefulSetList{}
	if err := kc.List(ctx, sets, client.InNamespace(ns), client.MatchingLabels(builders.ServerSelector("media"))); err != nil {
		return b.String() + err.Error()
	}
	for _, s := range sets.Items {
		fmt.Fprintf(&b, "StatefulSet %s: generation %d observed %d, replicas %d ready %d updated %d\n", s.Name, s.Generation,
			s.Status.ObservedGeneration, ptr.Deref(s.Spec.Replicas, 0), s.Status.ReadyReplicas, s.Status.UpdatedReplicas)
	}
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(builders.ServerSelector("media"))); err != nil {
		return b.String() + err.Error()
	}
	for _, p := range list.Items {
		if podReady(&p) {
			continue
		}
		fmt.Fprintf(&b, "pod %s on %s not Ready: phase %s, conditions", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s@%s", c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.TimeOnly))
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "; container %s ready %v restarts %d", cs.Name, cs.Ready, cs.RestartCount)
		}
		b.WriteString("\n")
	}
	return b.String()
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
