package main

// Node loss: `localcluster node down|up NODE` makes a fake Node lose power
// and come back. The command and the running cluster process talk through
// files under <state>/nodes/: the command writes NODE.request (an id and
// the action), the cluster process polls the directory, acts, and writes
// NODE.ack with the same id (and an error, if any); the command returns once
// it reads its id there.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
)

const (
	nodeActionDown = "down"
	nodeActionUp   = "up"
	// What the node lifecycle controller writes on a Node it stopped
	// hearing from.
	nodeUnknownReason  = "NodeStatusUnknown"
	nodeUnknownMessage = "Kubelet stopped posting node status."
	// How often the cluster process looks for requests and checks the
	// grace period of down nodes.
	nodePollInterval = 250 * time.Millisecond
)

// nodeRequest is NODE.request and NODE.ack.
type nodeRequest struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

func nodesDir(state string) string { return filepath.Join(state, "nodes") }

// cmdNode is `localcluster node down|up NODE`: it asks the running cluster
// process to act and waits for its answer.
func cmdNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	state := fs.String("state-dir", defaultState(), "state directory of the running cluster")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the cluster process to act")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: localcluster node down|up NODE [--state-dir DIR] [--timeout D]\n\n"+
			"down: the node loses power (its pods' processes are killed, its heartbeat stops;\n"+
			"      after --node-monitor-grace-period of `up` it turns Unknown and tainted)\n"+
			"up:   the node is back (Ready, untainted, its pods' containers start again)\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != nodeActionDown && pos[0] != nodeActionUp {
		fs.Usage()
		return errors.New("want `node down NODE` or `node up NODE`")
	}
	action, node := pos[0], pos[1]
	if !strings.HasPrefix(node, "node-") {
		return fmt.Errorf("%q is not a node of the harness (node-1, node-2, ...)", node)
	}
	abs, err := filepath.Abs(*state)
	if err != nil {
		return err
	}
	pid := runningPID(abs)
	if pid == 0 {
		return fmt.Errorf("no cluster runs from %s (`localcluster up --state-dir %s` first)", abs, abs)
	}
	id := newRequestID()
	if err := os.MkdirAll(nodesDir(abs), 0o755); err != nil {
		return err
	}
	req, _ := json.Marshal(nodeRequest{ID: id, Action: action})
	if err := writeFileAtomic(filepath.Join(nodesDir(abs), node+".request"), req, 0o644); err != nil {
		return err
	}
	ack, err := waitNodeAck(abs, node, id, *timeout, func() bool { return runningPID(abs) == pid })
	if err != nil {
		return err
	}
	if ack.Error != "" {
		return fmt.Errorf("node %s %s: %s", action, node, ack.Error)
	}
	fmt.Fprintf(os.Stderr, "localcluster: %s is %s\n", node, action)
	return nil
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		rest := fs.Args()
		// After "--" everything is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitNodeAck waits for NODE.ack to carry id, while alive says the cluster
// process still runs.
func waitNodeAck(state, node, id string, timeout time.Duration, alive func() bool) (nodeRequest, error) {
	deadline := time.Now().Add(timeout)
	for {
		var ack nodeRequest
		if data, err := os.ReadFile(filepath.Join(nodesDir(state), node+".ack")); err == nil &&
			json.Unmarshal(data, &ack) == nil && ack.ID == id {
			return ack, nil
		}
		if !alive() {
			return nodeRequest{}, fmt.Errorf("the cluster process of %s exited before acting on the request (see %s)",
				state, filepath.Join(state, "logs", "cluster.log"))
		}
		if time.Now().After(deadline) {
			return nodeRequest{}, fmt.Errorf("the cluster process of %s did not act on the request within %s "+
				"(is it still starting, or stuck? see %s)", state, timeout, filepath.Join(state, "logs", "cluster.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodePower says which nodes are down (have no power), for the agent and
// the heartbeat; the zero value and nil have every node up.
type nodePower struct {
	mu   sync.Mutex
	down map[string]time.Time // node -> when it went down
}

func (p *nodePower) isDown(node string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.down[node]
	return ok
}

// downSince is when node went down, and whether it is.
func (p *nodePower) downSince(node string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.down[node]
	return t, ok
}

func (p *nodePower) set(node string, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down == nil {
		p.down = map[string]time.Time{}
	}
	if !down {
		delete(p.down, node)
	} else if _, ok := p.down[node]; !ok {
		p.down[node] = time.Now()
	}
}

// nodeLifecycle acts on node requests and does, for the nodes that are
// down, what the node lifecycle controller (disabled in the controller
// manager) does: after the grace period, Node conditions Unknown, the
// unreachable taints, and the node's pods not Ready.
type nodeLifecycle struct {
	log      *slog.Logger
	cs       kubernetes.Interface
	power    *nodePower
	agent    *agent
	pods     corelisters.PodLister
	grace    time.Duration
	dir      string
	kubelet  func(node string) record.EventRecorder
	recorder record.EventRecorder // as the node-controller
	kickPods func()
	// kubelets are real nodes: node down and up stop and start them,
	// and the controller manager's node lifecycle controller does the rest.
	kubelets *kubeletCluster

	handled map[string]string // node -> id of the last request acted on
	unknown map[string]bool   // nodes marked Unknown and tainted
}

// run polls for requests and watches the grace period until ctx ends.
func (l *nodeLifecycle) run(ctx context.Context) {
	l.handled, l.unknown = map[string]string{}, map[string]bool{}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		l.log.Error("node requests directory", "error", err)
		return
	}
	t := time.NewTicker(nodePollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.serveRequests(ctx)
		if l.kubelets == nil {
			l.monitor(ctx)
		}
	}
}

// serveRequests acts on every new NODE.request and acknowledges it.
func (l *nodeLifecycle) serveRequests(ctx context.Context) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		node, ok := strings.CutSuffix(e.Name(), ".request")
		if !ok || strings.HasPrefix(node, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(l.dir, e.Name()))
		if err != nil {
			continue
		}
		var req nodeRequest
		if err := json.Unmarshal(data, &req); err != nil || req.ID == "" || l.handled[node] == req.ID {
			continue
		}
		start := time.Now()
		err = l.act(ctx, node, req.Action)
		if ctx.Err() != nil {
			return // shutting down: the command sees the process end
		}
		l.handled[node] = req.ID
		ack := nodeRequest{ID: req.ID, Action: req.Action}
		if err != nil {
			ack.Error = err.Error()
			l.log.Warn("node request failed", "node", node, "action", req.Action, "error", err)
		} else {
			l.log.Info("node "+req.Action, "node", node, "took", time.Since(start).Round(time.Millisecond))
		}
		data, _ = json.Marshal(ack)
		if err := writeFileAtomic(filepath.Join(l.dir, node+".ack"), data, 0o644); err != nil {
			l.log.Warn("node request ack", "node", node, "error", err)
		}
	}
}

func (l *nodeLifecycle) act(ctx context.Context, node, action string) error {
	if l.kubelets != nil {
		return l.kubelets.act(ctx, l.cs, node, action)
	}
	if l.agent.nodeIndex(node) == 0 {
		return fmt.Errorf("no node %s in this cluster (node-1 .. node-%d)", node, l.agent.cfg.Nodes)
	}
	switch action {
	case nodeActionDown:
		return l.down(ctx, node)
	case nodeActionUp:
		return l.up(ctx, node)
	}
	return fmt.Errorf("unknown action %q", action)
}

// down cuts the node's power: the heartbeat stops and the agent kills
// everything of the node's pods at once; this returns once it has.
func (l *nodeLifecycle) down(ctx context.Context, node string) error {
	if l.power.isDown(node) {
		return nil
	}
	l.power.set(node, true)
	return l.agent.powerOffNode(ctx, node, 30*time.Second)
}

// up restores power: the "kubelet" posts a Ready status, the "node
// lifecycle controller" removes the unreachable taints, and the agent starts
// the node's pods again (asynchronously, like a kubelet after a reboot).
func (l *nodeLifecycle) up(ctx context.Context, node string) error {
	if !l.power.isDown(node) {
		return nil
	}
	n := l.agent.nodeIndex(node)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = nodeStatus(n, metav1.Now())
		_, err = l.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("posting the status of %s: %w", node, err)
	}
	if err := updateTaints(ctx, l.cs, node, withoutUnreachable); err != nil {
		return fmt.Errorf("removing the unreachable taints of %s: %w", node, err)
	}
	l.power.set(node, false)
	delete(l.unknown, node)
	if obj, err := l.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		l.kubelet(node).Eventf(obj, corev1.EventTypeWarning, "Rebooted", "Node %s has been rebooted, boot id: %s", node, newRequestID())
		l.kubelet(node).Eventf(obj, corev1.EventTypeNormal, "NodeReady", "Node %s status is now: NodeReady", node)
	}
	l.agent.powerOnNode(node)
	l.kickPods()
	return nil
}

// monitor marks nodes down for longer than the grace period Unknown and
// tainted, and keeps their pods not Ready.
func (l *nodeLifecycle) monitor(ctx context.Context) {
	for n := 1; n <= l.agent.cfg.Nodes; n++ {
		node := nodeName(n)
		since, down := l.power.downSince(node)
		if !down || time.Since(since) < l.grace {
			continue
		}
		if !l.unknown[node] {
			if err := l.markUnknown(ctx, node); err != nil {
				if ctx.Err() == nil {
					l.log.Warn("marking node unknown", "node", node, "error", err)
				}
				continue
			}
			l.unknown[node] = true
			l.log.Info("node unknown: tainted unreachable, its pods not ready", "node", node,
				"after", time.Since(since).Round(time.Millisecond))
		}
		l.markPodsNotReady(ctx, node)
	}
}

// markUnknown sets every condition of the node Unknown and taints it
// unreachable, as the node lifecycle controller does after its grace period.
func (l *nodeLifecycle) markUnknown(ctx context.Context, node string) error {
	var obj *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Conditions = unknownConditions(cur.Status.Conditions, metav1.Now())
		obj, err = l.cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	l.recorder.Eventf(obj, corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", node)
	return updateTaints(ctx, l.cs, node, withUnreachable)
}

// unknownConditions is conds with every status Unknown ("Kubelet stopped
// posting node status."), transition times moved only where the status
// changes, heartbeats kept.
func unknownConditions(conds []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, len(conds))
	for i, c := range conds {
		if c.Status != corev1.ConditionUnknown {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, nodeUnknownReason, nodeUnknownMessage
		out[i] = c
	}
	return out
}

// withUnreachable adds the unreachable NoSchedule and NoExecute taints
// (the latter with its time, which tolerationSeconds count from).
func withUnreachable(taints []corev1.Taint, now metav1.Time) []corev1.Taint {
	out := slices.Clone(taints)
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		if slices.ContainsFunc(out, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable && t.Effect == effect }) {
			continue
		}
		t := corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: effect}
		if effect == corev1.TaintEffectNoExecute {
			t.TimeAdded = &now
		}
		out = append(out, t)
	}
	return out
}

// withoutUnreachable removes the unreachable taints.
func withoutUnreachable(taints []corev1.Taint, _ metav1.Time) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable })
}

// updateTaints rewrites the node's taints with f, retrying on conflicts.
func updateTaints(ctx context.Context, cs kubernetes.Interface, node string, f func([]corev1.Taint, metav1.Time) []corev1.Taint) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := f(cur.Spec.Taints, metav1.Now())
		if len(taints) == len(cur.Spec.Taints) {
			return nil
		}
		cur.Spec.Taints = taints
		_, err = cs.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// markPodsNotReady sets the Ready condition of the node's pods False (the
// EndpointSlice controller then drops them from Services), with a
// NodeNotReady event, as the node lifecycle controller does.
func (l *nodeLifecycle) markPodsNotReady(ctx context.Context, node string) {
	pods, err := l.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName != node || !podConditionTrue(p, corev1.PodReady) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": p.UID},
			"status": map[string]any{"conditions": []map[string]any{{
				"type": corev1.PodReady, "status": corev1.ConditionFalse, "lastTransitionTime": metav1.Now(),
			}}},
		})
		_, err := l.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
				l.log.Warn("marking pod not ready", "pod", p.Namespace+"/"+p.Name, "error", err)
			}
			continue
		}
		l.recorder.Eventf(p, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
}

func podConditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// powerOffNode has every worker of node's pods kill its containers and
// sandbox (SIGKILL, no hooks), and waits until they all have.
func (a *agent) powerOffNode(ctx context.Context, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		a.mu.Lock()
		for _, w := range a.workers {
			if w.nodeName == node && !w.isOff() {
				w.poke()
				pending = append(pending, w.namespace+"/"+w.name)
			}
		}
		a.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pods of %s still running after %s: %s", node, timeout, strings.Join(pending, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// powerOnNode pokes the workers of node's pods, which start them again.
func (a *agent) powerOnNode(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if w.nodeName == node {
			w.poke()
		}
	}
}

func (w *podWorker) isOff() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.off
}

// powerOff is the pod on a machine that lost power: every container killed
// at once, the sandbox (pause process, network namespace, veth) gone. The
// pod's directory (container roots, emptyDirs) stays, as a disk would.
func (w *podWorker) powerOff() {
	if w.isOff() {
		return
	}
	var wg sync.WaitGroup
	for _, c := range w.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.kill()
		}()
	}
	wg.Wait()
	w.destroySandbox()
	w.mu.Lock()
	w.off, w.lastStatus = true, nil
	w.mu.Unlock()
	w.logger().Info("node down: containers and sandbox killed")
}

// powerOn is the kubelet starting after a reboot: the containers start
// again without crash back-off (restart counts go up; the last state says
// how they died), in a new sandbox that sync creates. The status is written
// afresh: the node lifecycle emulation changed it meanwhile.
func (w *podWorker) powerOn() {
	for _, c := range w.containers {
		c.mu.Lock()
		c.backoff, c.nextStart = 0, time.Time{}
		c.mu.Unlock()
	}
	w.mu.Lock()
	w.off, w.lastStatus = false, nil
	w.mu.Unlock()
	w.logger().Info("node up: starting the pod again")
}

// kill sends SIGKILL and waits for the container to end.
func (c *containerState) kill() {
	c.mu.Lock()
	cmd, done, running := c.cmd, c.done, c.running
	c.mu.Unlock()
	if !running || cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}
