package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Restart back-off: shorter than the kubelet's 10 s..5 min so a demo that
// waits for a peer recovers quickly; reset after a container ran this long.
const (
	backoffBase  = time.Second
	backoffMax   = time.Minute
	backoffReset = 2 * time.Minute
)

// containerState is one container of a pod as the agent runs it.
type containerState struct {
	spec corev1.Container
	init bool

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
	running     bool
	everStarted bool
	completed   bool // an init container that exited 0
	startedAt   metav1.Time
	restarts    int32
	backoff     time.Duration
	nextStart   time.Time
	ready       bool
	startupDone bool
	stopProbes  context.CancelFunc
	waiting     string
	waitingMsg  string
	lastTerm    *corev1.ContainerStateTerminated
	imageID     string
	containerID string
	stopRequest bool
}

func newContainerState(spec corev1.Container, init bool) *containerState {
	return &containerState{spec: spec, init: init, waiting: "ContainerCreating"}
}

func (c *containerState) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// stop sends SIGTERM, then SIGKILL once grace is over, and waits.
func (c *containerState) stop(grace time.Duration) {
	c.mu.Lock()
	cmd, done, running := c.cmd, c.done, c.running
	c.stopRequest = true
	c.mu.Unlock()
	if !running || cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if grace < time.Second {
		grace = time.Second
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (w *podWorker) setWaiting(container, reason, msg string) {
	for _, c := range w.containers {
		if container != "" && c.spec.Name != container {
			continue
		}
		c.mu.Lock()
		if !c.running {
			c.waiting, c.waitingMsg = reason, msg
		}
		c.mu.Unlock()
	}
}

// runContainers starts init containers one after the other, then every
// container, and restarts exited ones per the restart policy with back-off.
func (w *podWorker) runContainers(ctx context.Context, pod *corev1.Pod, vols map[string]string) {
	policy := pod.Spec.RestartPolicy
	if !w.initDone {
		for _, c := range w.containers {
			if !c.init {
				continue
			}
			c.mu.Lock()
			completed, running, started, code := c.completed, c.running, c.everStarted, exitCode(c.lastTerm)
			c.mu.Unlock()
			if completed || running {
				if running {
					return
				}
				continue
			}
			if started && code == 0 {
				c.mu.Lock()
				c.completed = true
				c.mu.Unlock()
				continue
			}
			if started && policy == corev1.RestartPolicyNever {
				return
			}
			w.maybeStart(ctx, pod, c, vols)
			return
		}
		w.initDone = true
	}
	for _, c := range w.containers {
		if c.init || c.isRunning() {
			continue
		}
		c.mu.Lock()
		started, code := c.everStarted, exitCode(c.lastTerm)
		c.mu.Unlock()
		if started && (policy == corev1.RestartPolicyNever || policy == corev1.RestartPolicyOnFailure && code == 0) {
			continue
		}
		w.maybeStart(ctx, pod, c, vols)
	}
}

func exitCode(t *corev1.ContainerStateTerminated) int32 {
	if t == nil {
		return -1
	}
	return t.ExitCode
}

// maybeStart starts a container unless its back-off has not passed.
func (w *podWorker) maybeStart(ctx context.Context, pod *corev1.Pod, c *containerState, vols map[string]string) {
	c.mu.Lock()
	wait := time.Until(c.nextStart)
	if wait > 0 {
		if c.everStarted {
			c.waiting = "CrashLoopBackOff"
			c.waitingMsg = fmt.Sprintf("back-off %s restarting failed container %s", c.backoff, c.spec.Name)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if err := w.startContainer(ctx, pod, c, vols); err != nil {
		c.mu.Lock()
		c.waiting, c.waitingMsg = "CreateContainerConfigError", err.Error()
		c.backoff = nextBackoff(c.backoff)
		c.nextStart = time.Now().Add(c.backoff)
		c.mu.Unlock()
		w.logger().Warn("container not started", "container", c.spec.Name, "error", err)
		w.event(pod, corev1.EventTypeWarning, "Failed", "Error: %v", err)
	}
}

func nextBackoff(b time.Duration) time.Duration {
	if b == 0 {
		return backoffBase
	}
	return min(2*b, backoffMax)
}

// startContainer runs pod-init for the container in a new mount namespace,
// its output appended to the container's log file.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c *containerState, vols map[string]string) error {
	p, err := w.buildContainer(pod, &c.spec, vols)
	if err != nil {
		return err
	}
	img, err := w.a.images.resolve(c.spec.Image)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(w.a.self, "pod-init", p.spec)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting container: %w", err)
	}
	done := make(chan struct{})
	probeCtx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	if c.everStarted {
		c.restarts++
	}
	c.cmd, c.done, c.running, c.everStarted = cmd, done, true, true
	c.startedAt = metav1.Now()
	c.ready, c.startupDone = false, c.spec.StartupProbe == nil
	c.waiting, c.waitingMsg = "", ""
	c.stopProbes = cancel
	c.stopRequest = false
	c.imageID = img.id
	c.containerID = fmt.Sprintf("localcluster://%s/%d", w.uid, cmd.Process.Pid)
	c.mu.Unlock()
	w.logger().Info("container started", "container", c.spec.Name, "pid", cmd.Process.Pid)
	w.event(pod, corev1.EventTypeNormal, "Started", "Started container %s", c.spec.Name)

	go func() {
		err := cmd.Wait()
		logf.Close()
		cancel()
		code := 0
		reason := "Completed"
		if err != nil {
			reason = "Error"
			code = 1
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
					switch {
					case ws.Signaled():
						code = 128 + int(ws.Signal())
					default:
						code = ws.ExitStatus()
					}
				}
			}
		}
		now := metav1.Now()
		c.mu.Lock()
		c.running, c.ready = false, false
		c.lastTerm = &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Reason: reason, StartedAt: c.startedAt, FinishedAt: now, ContainerID: c.containerID,
		}
		if now.Sub(c.startedAt.Time) > backoffReset {
			c.backoff = 0
		}
		c.backoff = nextBackoff(c.backoff)
		c.nextStart = now.Add(c.backoff)
		c.waiting, c.waitingMsg = "", ""
		c.mu.Unlock()
		w.logger().Info("container exited", "container", c.spec.Name, "code", code)
		close(done)
		w.poke()
	}()
	if !c.init {
		w.startProbes(probeCtx, pod, c)
	}
	return nil
}

// startProbes runs the startup probe, then readiness and liveness probes,
// each on its own period.
func (w *podWorker) startProbes(ctx context.Context, pod *corev1.Pod, c *containerState) {
	spec := c.spec
	startupDone := make(chan struct{})
	go func() {
		if spec.StartupProbe == nil {
			close(startupDone)
			return
		}
		if w.probeUntil(ctx, pod, c, spec.StartupProbe, "Startup", nil) {
			c.mu.Lock()
			c.startupDone = true
			c.mu.Unlock()
			close(startupDone)
			w.poke()
		}
	}()
	go func() {
		select {
		case <-startupDone:
		case <-ctx.Done():
			return
		}
		if spec.ReadinessProbe == nil {
			c.mu.Lock()
			c.ready = true
			c.mu.Unlock()
			w.poke()
			return
		}
		w.probeUntil(ctx, pod, c, spec.ReadinessProbe, "Readiness", func(ok bool) {
			c.mu.Lock()
			changed := c.ready != ok
			c.ready = ok
			c.mu.Unlock()
			if changed {
				w.poke()
			}
		})
	}()
	go func() {
		select {
		case <-startupDone:
		case <-ctx.Done():
			return
		}
		if spec.LivenessProbe != nil {
			w.probeUntil(ctx, pod, c, spec.LivenessProbe, "Liveness", nil)
		}
	}()
}

// probeUntil probes on the probe's period. With report (readiness) it runs
// until the context ends and reports each state change by the thresholds.
// Without (startup, liveness) a run of failureThreshold failures kills the
// container; a startup probe returns true on its first success.
func (w *podWorker) probeUntil(ctx context.Context, pod *corev1.Pod, c *containerState, p *corev1.Probe, kind string, report func(bool)) bool {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	failThreshold := max(p.FailureThreshold, 1)
	successThreshold := max(p.SuccessThreshold, 1)
	select {
	case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
	case <-ctx.Done():
		return false
	}
	var fails, successes int32
	for {
		ok, msg := w.runProbe(ctx, &c.spec, p, timeout)
		if ctx.Err() != nil {
			return false
		}
		if ok {
			fails = 0
			successes++
			if kind == "Startup" {
				return true
			}
			if report != nil && successes >= successThreshold {
				report(true)
			}
		} else {
			successes = 0
			fails++
			if fails == failThreshold || fails%10 == 0 {
				w.event(pod, corev1.EventTypeWarning, "Unhealthy", "%s probe failed: %s", kind, msg)
			}
			if report != nil && fails >= failThreshold {
				report(false)
			}
			if report == nil && fails >= failThreshold {
				w.event(pod, corev1.EventTypeNormal, "Killing", "Container %s failed %s probe, will be restarted", c.spec.Name, kind)
				grace := time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
				go c.stop(grace)
				return false
			}
		}
		select {
		case <-time.After(period):
		case <-ctx.Done():
			return false
		}
	}
}

// runProbe performs one probe from the cluster namespace, as the kubelet
// probes from the node.
func (w *podWorker) runProbe(ctx context.Context, c *corev1.Container, p *corev1.Probe, timeout time.Duration) (bool, string) {
	switch {
	case p.HTTPGet != nil:
		return w.httpProbe(ctx, c, p.HTTPGet, timeout)
	case p.TCPSocket != nil:
		port, err := resolvePort(c, p.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = w.ip
		}
		conn, err := dialTimeout(ctx, net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	case p.GRPC != nil:
		conn, err := dialTimeout(ctx, net.JoinHostPort(w.ip, strconv.Itoa(int(p.GRPC.Port))), timeout)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	}
	// Exec probes would need a way into the container; the images here
	// declare none. Treat as passing, and say so in docs/localcluster.md.
	return true, ""
}

func (w *podWorker) httpProbe(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction, timeout time.Duration) (bool, string) {
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return false, err.Error()
	}
	host := g.Host
	if host == "" {
		host = w.ip
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), g.Path)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	client := &http.Client{Transport: &http.Transport{
		// The kubelet does not verify probe certificates either.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes skip verification like the kubelet
		DisableKeepAlives: true,
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// resolvePort turns a probe port (number or container port name) into a number.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// status computes the pod's status from what runs.
func (w *podWorker) status(pod *corev1.Pod) corev1.PodStatus {
	st := corev1.PodStatus{
		QOSClass:  pod.Status.QOSClass,
		HostIP:    nodeIP(w.node),
		HostIPs:   []corev1.HostIP{{IP: nodeIP(w.node)}},
		StartTime: ptr.To(w.started),
	}
	if w.ip != "" {
		st.PodIP = w.ip
		st.PodIPs = []corev1.PodIP{{IP: w.ip}}
	}
	allReady, anyRunning, allDone, anyFailed := true, false, true, false
	for _, c := range w.containers {
		cs := c.containerStatus(pod.Spec.Containers, c.spec.Image)
		if c.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			continue
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		allReady = allReady && cs.Ready
		anyRunning = anyRunning || cs.State.Running != nil
		c.mu.Lock()
		term := c.lastTerm
		restartable := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
			pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && exitCode(term) != 0
		if c.running || term == nil || restartable {
			allDone = false
		}
		if term != nil && term.ExitCode != 0 {
			anyFailed = true
		}
		c.mu.Unlock()
	}
	switch {
	case !w.initDone:
		st.Phase = corev1.PodPending
	case allDone && anyFailed:
		st.Phase = corev1.PodFailed
	case allDone:
		st.Phase = corev1.PodSucceeded
	case anyRunning || pod.Spec.RestartPolicy == corev1.RestartPolicyAlways && w.everStarted():
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	boolStatus := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	w.setCondition(corev1.PodReadyToStartContainers, boolStatus(w.pause != nil), "")
	w.setCondition(corev1.PodInitialized, boolStatus(w.initDone), "")
	reason := ""
	if !allReady {
		reason = "ContainersNotReady"
	}
	w.setCondition(corev1.ContainersReady, boolStatus(allReady && anyRunning), reason)
	w.setCondition(corev1.PodReady, boolStatus(allReady && anyRunning), reason)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			st.Conditions = append(st.Conditions, c)
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, w.conditions[t])
	}
	return st
}

func (w *podWorker) everStarted() bool {
	for _, c := range w.containers {
		c.mu.Lock()
		s := c.everStarted
		c.mu.Unlock()
		if s && !c.init {
			return true
		}
	}
	return false
}

// setCondition records a condition, keeping its transition time while its
// status stays the same.
func (w *podWorker) setCondition(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	old, ok := w.conditions[t]
	if ok && old.Status == s && old.Reason == reason {
		return
	}
	w.conditions[t] = corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: metav1.Now()}
}

func (c *containerState) containerStatus(_ []corev1.Container, img string) corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := corev1.ContainerStatus{
		Name: c.spec.Name, Image: img, ImageID: c.imageID, RestartCount: c.restarts,
		Ready:   c.running && c.ready && c.startupDone,
		Started: ptr.To(c.running && c.startupDone),
	}
	switch {
	case c.running:
		cs.ContainerID = c.containerID
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: c.startedAt}
		if c.lastTerm != nil {
			cs.LastTerminationState.Terminated = c.lastTerm
		}
	case c.lastTerm != nil && (c.completed || c.waiting == ""):
		cs.ContainerID = c.containerID
		cs.State.Terminated = c.lastTerm
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.waiting, Message: c.waitingMsg}
		if c.lastTerm != nil {
			cs.LastTerminationState.Terminated = c.lastTerm
		}
	}
	return cs
}

func statusEqual(a, b corev1.PodStatus) bool { return equality.Semantic.DeepEqual(a, b) }

// patchPodStatus writes the status with the pod's UID as a precondition.
func patchPodStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, st corev1.PodStatus) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   st,
	})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
