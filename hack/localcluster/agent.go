package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// agent is the node agent of every fake Node: it runs the containers of the
// pods scheduled to them as processes on this machine and reports their
// status, the part of the kubelet this cluster needs.
type agent struct {
	log        *slog.Logger
	cs         kubernetes.Interface
	cfg        *runConfig
	self       string // this binary, for pause and pod-init
	images     *imageStore
	ipam       *ipam
	recorders  func(node string) record.EventRecorder
	pods       corelisters.PodLister
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister
	claims     corelisters.PersistentVolumeClaimLister
	volumes    corelisters.PersistentVolumeLister
	services   corelisters.ServiceLister

	records atomic.Value // string: cluster DNS records
	// power says which nodes are down (`localcluster node down`): no new
	// pods start there, and their workers keep everything stopped.
	power *nodePower

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
	veths   atomic.Int64
}

// nodeIndex is n for a node of this cluster ("node-n"), else 0.
func (a *agent) nodeIndex(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "node-"))
	if err != nil || !strings.HasPrefix(name, "node-") || n < 1 || n > a.cfg.Nodes {
		return 0
	}
	return n
}

// sync starts a worker for every pod bound to one of our nodes and pokes
// all workers (each looks at its own pod).
func (a *agent) sync(ctx context.Context) {
	pods, err := a.pods.List(labels.Everything())
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for _, p := range pods {
		n := a.nodeIndex(p.Spec.NodeName)
		if n == 0 || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed && p.DeletionTimestamp == nil {
			continue
		}
		if _, ok := a.workers[p.UID]; ok {
			continue
		}
		if a.power.isDown(p.Spec.NodeName) {
			continue // a dead kubelet starts nothing
		}
		w := newPodWorker(a, p, n)
		a.workers[p.UID] = w
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			w.run(ctx)
			a.mu.Lock()
			delete(a.workers, w.uid)
			a.mu.Unlock()
		}()
	}
	for _, w := range a.workers {
		w.poke()
	}
}

// setRecords publishes new cluster DNS records to every pod's hosts file.
func (a *agent) setRecords(records string) {
	if old, _ := a.records.Load().(string); old == records {
		return
	}
	a.records.Store(records)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		w.writeHosts()
	}
}

// wait blocks until every worker has stopped its containers (after the
// context given to sync is cancelled).
func (a *agent) wait() { a.wg.Wait() }

// podWorker owns one pod: its sandbox (pause process, network), volumes,
// containers, probes and status.
type podWorker struct {
	a         *agent
	namespace string
	name      string
	uid       types.UID
	node      int
	nodeName  string
	dir       string
	hostname  string
	subdomain string
	kick      chan struct{}

	pause    *exec.Cmd
	pausePID int
	ip       string
	started  metav1.Time

	mu         sync.Mutex
	containers []*containerState
	initDone   bool
	lastStatus *corev1.PodStatus
	conditions map[corev1.PodConditionType]corev1.PodCondition

	// tokens are the projected service account tokens, kept until they
	// are due for renewal; only the worker's own goroutine uses them.
	tokens map[string]saToken
	// off: the node is down and the pod's processes are gone (nodeloss.go).
	off bool
}

func newPodWorker(a *agent, p *corev1.Pod, node int) *podWorker {
	hostname := p.Name
	if p.Spec.Hostname != "" {
		hostname = p.Spec.Hostname
	}
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	w := &podWorker{
		a: a, namespace: p.Namespace, name: p.Name, uid: p.UID, node: node, nodeName: p.Spec.NodeName,
		dir:      filepath.Join(a.cfg.State, "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID)),
		hostname: hostname, subdomain: p.Spec.Subdomain,
		kick:       make(chan struct{}, 1),
		conditions: map[corev1.PodConditionType]corev1.PodCondition{},
		tokens:     map[string]saToken{},
	}
	for i := range p.Spec.InitContainers {
		w.containers = append(w.containers, newContainerState(p.Spec.InitContainers[i], true))
	}
	for i := range p.Spec.Containers {
		w.containers = append(w.containers, newContainerState(p.Spec.Containers[i], false))
	}
	return w
}

func (w *podWorker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *podWorker) logger() *slog.Logger {
	return w.a.log.With("pod", w.namespace+"/"+w.name, "node", w.nodeName)
}

func (w *podWorker) event(pod *corev1.Pod, typ, reason, format string, args ...any) {
	if pod == nil {
		return
	}
	w.a.recorders(w.nodeName).Eventf(pod, typ, reason, format, args...)
}

// run drives the pod until it is deleted or the agent stops.
func (w *podWorker) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.shutdown(nil, 10*time.Second)
			return
		case <-w.kick:
		case <-tick.C:
		}
		if w.a.power.isDown(w.nodeName) {
			// A dead machine: nothing runs, nothing is reported.
			w.powerOff()
			continue
		}
		if w.isOff() {
			w.powerOn()
		}
		if done := w.sync(ctx); done {
			return
		}
	}
}

// sync does one pass; true when the pod is gone and the worker ends.
func (w *podWorker) sync(ctx context.Context) bool {
	pod, err := w.a.pods.Pods(w.namespace).Get(w.name)
	if apierrors.IsNotFound(err) || err == nil && pod.UID != w.uid {
		// Deleted without us (force delete): stop what runs.
		w.shutdown(nil, 2*time.Second)
		return true
	}
	if err != nil {
		return false
	}
	if pod.DeletionTimestamp != nil {
		grace := time.Duration(ptr.Deref(pod.DeletionGracePeriodSeconds, 30)) * time.Second
		w.shutdown(pod, grace)
		err := w.a.cs.CoreV1().Pods(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &w.uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.logger().Warn("final delete failed", "error", err)
		}
		return true
	}
	if w.pause == nil {
		if err := w.createSandbox(ctx); err != nil {
			w.logger().Warn("sandbox", "error", err)
			w.event(pod, corev1.EventTypeWarning, "FailedCreatePodSandBox", "%v", err)
			w.destroySandbox()
			return false
		}
	}
	vols, err := w.volumePaths(ctx, pod)
	if err != nil {
		w.setWaiting("", "ContainerCreating", err.Error())
		w.event(pod, corev1.EventTypeWarning, "FailedMount", "%v", err)
		w.updateStatus(ctx, pod)
		return false
	}
	w.runContainers(ctx, pod, vols)
	w.updateStatus(ctx, pod)
	return false
}

// createSandbox starts the pause process in new network and UTS namespaces
// and plugs its network namespace into the bridge.
func (w *podWorker) createSandbox(ctx context.Context) error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	ip, err := w.a.ipam.allocate(w.node, string(w.uid))
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.ip = ip
	w.mu.Unlock()
	cmd := exec.Command(w.a.self, "pause", "--hostname", w.hostname, "--state-dir", w.a.cfg.State)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting pause: %w", err)
	}
	w.pause, w.pausePID = cmd, cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	veth := fmt.Sprintf("lcv%d", w.a.veths.Add(1))
	if err := attachPod(ctx, w.pausePID, veth, ip); err != nil {
		return err
	}
	if w.started.IsZero() {
		// The pod's start time stays when the sandbox is made again
		// after its node came back.
		w.started = metav1.Now()
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "containers"), 0o755); err != nil {
		return err
	}
	w.logger().Info("sandbox ready", "ip", ip)
	return nil
}

func (w *podWorker) destroySandbox() {
	if w.pause != nil && w.pause.Process != nil {
		_ = w.pause.Process.Kill()
	}
	w.pause, w.pausePID = nil, 0
}

// hostsFile is the pod's /etc/hosts as of now.
func (w *podWorker) hostsFile() string {
	records, _ := w.a.records.Load().(string)
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	return podHosts(ip, w.hostname, w.subdomain, w.namespace, records)
}

// writeHosts refreshes /etc/hosts in every container root of the pod.
func (w *podWorker) writeHosts() {
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	if ip == "" {
		return
	}
	hosts := []byte(w.hostsFile())
	for _, c := range w.containers {
		etc := filepath.Join(w.paths(c.spec.Name).rootfs, "etc")
		if _, err := os.Stat(etc); err == nil {
			_ = writeFileAtomic(filepath.Join(etc, "hosts"), hosts, 0o644)
		}
	}
}

// shutdown stops the containers (preStop hooks, SIGTERM, SIGKILL after
// grace), then the sandbox, and removes the pod's directory. pod is nil when
// the agent itself stops or the pod vanished: no hooks then.
func (w *podWorker) shutdown(pod *corev1.Pod, grace time.Duration) {
	deadline := time.Now().Add(grace)
	if pod != nil {
		w.event(pod, corev1.EventTypeNormal, "Killing", "Stopping containers")
	}
	var wg sync.WaitGroup
	for _, c := range w.containers {
		if !c.isRunning() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pod != nil {
				w.preStop(pod, c, deadline)
			}
			c.stop(time.Until(deadline))
		}()
	}
	wg.Wait()
	w.destroySandbox()
	w.a.ipam.release(string(w.uid))
	if err := removeUnmounted(w.dir); err != nil {
		w.logger().Warn("removing pod directory", "error", err)
	}
}

// removeUnmounted removes a directory tree unless something is mounted
// inside it in this mount namespace (containers mount in namespaces of their
// own, which are gone once they exit; a mount here would be a bug, and
// removing through it could delete a volume's data).
func removeUnmounted(dir string) error {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			return fmt.Errorf("%s is still mounted", f[4])
		}
	}
	return os.RemoveAll(dir)
}

// preStop runs a container's preStop hook (sleep and httpGet; exec hooks
// are not supported) within the deadline.
func (w *podWorker) preStop(pod *corev1.Pod, c *containerState, deadline time.Time) {
	lc := c.spec.Lifecycle
	if lc == nil || lc.PreStop == nil {
		return
	}
	switch h := lc.PreStop; {
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		if r := time.Until(deadline); d > r {
			d = r
		}
		time.Sleep(d)
	case h.HTTPGet != nil:
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		_, _ = w.httpProbe(ctx, &c.spec, h.HTTPGet, time.Until(deadline))
	}
}

// updateStatus writes the pod's status when it changed, as a strategic
// merge patch carrying the pod's UID (so a recreated pod of the same name
// is never patched with a stale status).
func (w *podWorker) updateStatus(ctx context.Context, pod *corev1.Pod) {
	st := w.status(pod)
	w.mu.Lock()
	same := w.lastStatus != nil && statusEqual(*w.lastStatus, st)
	w.mu.Unlock()
	if same {
		return
	}
	if err := patchPodStatus(ctx, w.a.cs, pod, st); err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.logger().Warn("status update failed", "error", err)
		}
		return
	}
	w.mu.Lock()
	w.lastStatus = &st
	w.mu.Unlock()
}
