package main

// Kubelet nodes: each node is a process tree in namespaces of its own (PID,
// mount, network, UTS) whose first process, `localcluster node-init`,
// starts containerd, the kubelet and kube-proxy and dies with any of them,
// taking the node's containers with it (the kernel kills a PID namespace
// whose first process exits).

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeletNode is a running node: its node-init process.
type kubeletNode struct {
	n    int
	spec nodeSpec
	cmd  *exec.Cmd
	done chan struct{}
}

// nodeCgroupParent is the cgroup (in every hierarchy) of the nodes of the
// cluster whose state directory is state: a short hash keeps two clusters
// apart.
func nodeCgroupParent(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "/localcluster-" + hex.EncodeToString(sum[:4])
}

// startKubeletNodes starts every node and waits until each reports Ready.
func startKubeletNodes(ctx context.Context, log *slog.Logger, c *runConfig, cp *controlPlane, cs kubernetes.Interface) ([]*kubeletNode, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := bindClusterRole(ctx, cs, "localcluster:kube-proxy", "system:node-proxier", "system:kube-proxy"); err != nil {
		return nil, err
	}
	proxyUser, err := cp.addUser("system:kube-proxy")
	if err != nil {
		return nil, err
	}
	apiServer := fmt.Sprintf("https://%s:%d", nodeNetBridgeAddr, apiServerPort)
	var nodes []*kubeletNode
	for n := 1; n <= c.Nodes; n++ {
		spec := nodeSpec{
			N: n, Dirs: dirsOf(c.State, n), Nodes: c.Nodes,
			CgroupRoot: nodeCgroupParent(c.State) + "/" + nodeName(n) + "/pods",
			CAFile:     filepath.Join(cp.certDir, "ca.crt"),
		}
		if err := writeNodeFiles(spec); err != nil {
			return nodes, fmt.Errorf("%s: %w", nodeName(n), err)
		}
		// The Node authorizer and NodeRestriction know a kubelet by this
		// name and group.
		kubeletUser, err := cp.addUser("system:node:"+nodeName(n), "system:nodes")
		if err != nil {
			return nodes, err
		}
		if err := writeKubeconfig(spec.Dirs.file("kubelet.kubeconfig"), kubeletUser, apiServer); err != nil {
			return nodes, err
		}
		if err := writeKubeconfig(spec.Dirs.file("kube-proxy.kubeconfig"), proxyUser, apiServer); err != nil {
			return nodes, err
		}
		node, err := startKubeletNode(ctx, self, c, spec)
		if err != nil {
			return nodes, fmt.Errorf("%s: %w", nodeName(n), err)
		}
		nodes = append(nodes, node)
	}
	if err := waitNodesReady(ctx, cs, nodes, 3*time.Minute); err != nil {
		return nodes, err
	}
	log.Info("kubelet nodes ready", "nodes", c.Nodes)
	return nodes, nil
}

// startKubeletNode makes the node's cgroups, starts node-init in new
// namespaces, gives it its network and lets it go on.
func startKubeletNode(ctx context.Context, self string, c *runConfig, spec nodeSpec) (*kubeletNode, error) {
	cgroup := nodeCgroupParent(c.State) + "/" + nodeName(spec.N)
	if err := makeCgroups(cgroup+"/system", cgroup+"/pods"); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer w.Close()
	logf, err := os.OpenFile(filepath.Join(spec.Dirs.Logs, "node-init.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(self, "node-init", "--node", strconv.Itoa(spec.N), "--nodes", strconv.Itoa(spec.Nodes),
		"--state-dir", c.State, "--cgroup", cgroup+"/system", "--assets", c.Assets)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting node-init: %w", err)
	}
	node := &kubeletNode{n: spec.N, spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(node.done)
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	veth := fmt.Sprintf("lcn%d", spec.N)
	steps := [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pid},
		{"link", "set", veth, "master", bridgeName, "up"},
		{"route", "replace", nodePodCIDR(spec.N), "via", kubeletNodeIP(spec.N)},
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			node.kill()
			return nil, err
		}
	}
	if _, err := io.WriteString(w, "go\n"); err != nil {
		node.kill()
		return nil, fmt.Errorf("node-init: %w", err)
	}
	return node, nil
}

// kill ends the node at once: node-init's death takes every process of its
// PID namespace, containers included.
func (k *kubeletNode) kill() {
	_ = k.cmd.Process.Kill()
	<-k.done
}

// waitNodesReady waits for every node's Ready condition.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, nodes []*kubeletNode, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, k := range nodes {
		for {
			node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(k.n), metav1.GetOptions{})
			if err == nil && nodeReady(node) {
				break
			}
			select {
			case <-k.done:
				return fmt.Errorf("%s died while starting: %s", nodeName(k.n), lastLines(filepath.Join(k.spec.Dirs.Logs, "node-init.log"), 20))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not Ready after %s: %s", nodeName(k.n), timeout, lastLines(filepath.Join(k.spec.Dirs.Logs, "kubelet.log"), 20))
			}
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// lastLines is the end of a log file, for error messages.
func lastLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return path + ":\n" + strings.Join(lines, "\n")
}

// bindClusterRole binds a built-in ClusterRole to a user.
func bindClusterRole(ctx context.Context, cs kubernetes.Interface, name, role, user string) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to %s: %w", role, user, err)
	}
	return nil
}

// cgroupMounts are the mount points of this machine's cgroup hierarchies
// (v1 controllers, named ones, and cgroup2).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... mount-point ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 1 {
			continue
		}
		if after[0] == "cgroup" || after[0] == "cgroup2" {
			if !slices.Contains(out, fields[4]) {
				out = append(out, fields[4])
			}
		}
	}
	return out, sc.Err()
}

// makeCgroups creates each path (and its parents) in every hierarchy; in
// the cpuset hierarchy each new level takes its parent's CPUs and memory
// nodes, without which no task may join it.
func makeCgroups(paths ...string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		for _, p := range paths {
			dir := m
			for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
				parent := dir
				dir = filepath.Join(dir, part)
				if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
						if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
							if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
								return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// joinCgroups moves the calling process into path in every hierarchy.
func joinCgroups(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, m := range mounts {
		if err := os.WriteFile(filepath.Join(m, path, "cgroup.procs"), pid, 0o644); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", filepath.Join(m, path), err)
		}
	}
	return nil
}

// removeCgroups kills what is left in path's tree and removes it from
// every hierarchy, deepest first. It returns the first directory it could
// not remove.
func removeCgroups(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var firstErr error
	for _, m := range mounts {
		root := filepath.Join(m, path)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			killCgroupTasks(dirs[i])
			var err error
			for try := 0; try < 50; try++ {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
			}
		}
	}
	return firstErr
}

// killCgroupTasks SIGKILLs every process of one cgroup directory.
func killCgroupTasks(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// The host sysctls a kubelet changes (protectKernelDefaults off): saved
// before the first node starts, restored when the cluster stops.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func sysctlRecord(state string) string { return filepath.Join(state, "host-sysctls.json") }

// saveSysctls records the host's values unless a record exists (a crashed
// run's record holds the host's own values).
func saveSysctls(state string) error {
	if _, err := os.Stat(sysctlRecord(state)); err == nil {
		return nil
	}
	values := map[string]string{}
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		values[k] = strings.TrimSpace(string(v))
	}
	data, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return writeFileAtomic(sysctlRecord(state), data, 0o600)
}

// restoreSysctls puts the recorded values back and drops the record.
func restoreSysctls(state string) error {
	data, err := os.ReadFile(sysctlRecord(state))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("%s: %w", sysctlRecord(state), err)
	}
	for k, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("restoring %s: %w", k, err)
		}
	}
	return os.Remove(sysctlRecord(state))
}

// cmdNodeInit is the first process of a node (hidden subcommand). It waits
// for "go" on fd 3 (its network interface is in place then), makes its
// mounts, cgroup, hostname and network, starts containerd, the kubelet and
// kube-proxy, reaps every orphan of the node, and exits when one of the
// three exits: the node then dies whole.
func cmdNodeInit(args []string) error {
	fs := flag.NewFlagSet("node-init", flag.ContinueOnError)
	n := fs.Int("node", 0, "node number (1-based)")
	nodes := fs.Int("nodes", 0, "number of nodes")
	state := fs.String("state-dir", "", "the cluster's state directory")
	cgroup := fs.String("cgroup", "", "the cgroup of the node's own processes")
	assets := fs.String("assets", "", "directory with kubelet and kube-proxy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Getpid() != 1 {
		return errors.New("node-init runs as the first process of a node's PID namespace")
	}
	goSignal := bufio.NewReader(os.NewFile(3, "go"))
	if line, err := goSignal.ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("waiting for the node's network (read %q): %w", line, err)
	}
	d := dirsOf(*state, *n)
	spec := nodeSpec{N: *n, Dirs: d, Nodes: *nodes}
	if err := nodeMounts(d); err != nil {
		return err
	}
	if err := joinCgroups(*cgroup); err != nil {
		return err
	}
	if err := syscall.Sethostname([]byte(nodeName(*n))); err != nil {
		return err
	}
	if err := nodeNetwork(spec); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	// Runs first: the kubelet exits when the runtime's socket is not up.
	containerd, err := startDaemon("containerd", []string{"containerd", "--config", d.file("containerd.toml")}, "/var/log/containerd.log")
	if err != nil {
		return err
	}
	if err := waitSocket("/run/containerd/containerd.sock", 60*time.Second); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	kubelet, err := startDaemon("kubelet", spec.kubeletFlags(filepath.Join(*assets, "kubelet")), "/var/log/kubelet.log")
	if err != nil {
		return err
	}
	proxy, err := startDaemon("kube-proxy", []string{filepath.Join(*assets, "kube-proxy"), "--config=" + d.file("kube-proxy.yaml"), "--v=1"}, "/var/log/kube-proxy.log")
	if err != nil {
		return err
	}
	vital := map[int]string{containerd: "containerd", kubelet: "kubelet", proxy: "kube-proxy"}
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for children: %w", err)
		}
		if name, ok := vital[pid]; ok {
			return fmt.Errorf("%s exited (%v): the node stops", name, status)
		}
	}
}

// nodeMounts gives the node its own /proc (its PID namespace), /run
// (containerd's socket and state, runc's), /var/lib (kubelet, containerd,
// CNI state) and /var/log (pod and daemon logs), each private to it.
func nodeMounts(d nodeDirs) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	mounts := []struct {
		src, target, fstype string
		flags               uintptr
	}{
		{"proc", "/proc", "proc", syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC},
		{"tmpfs", "/run", "tmpfs", syscall.MS_NOSUID | syscall.MS_NODEV},
		{d.VarLib, "/var/lib", "", syscall.MS_BIND},
		{d.Logs, "/var/log", "", syscall.MS_BIND},
	}
	for _, m := range mounts {
		if err := syscall.Mount(m.src, m.target, m.fstype, m.flags, ""); err != nil {
			return fmt.Errorf("mounting %s on %s: %w", m.src, m.target, err)
		}
	}
	return nil
}

// nodeNetwork brings up the node's side: its address on the node network,
// routes to the other nodes' pods and to the Service range (whose
// addresses the cluster namespace serves for traffic kube-proxy leaves
// alone), and forwarding between its pods and the rest.
func nodeNetwork(s nodeSpec) error {
	ctx := context.Background()
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", fmt.Sprintf("%s/%d", kubeletNodeIP(s.N), nodeNetPrefixLen), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", serviceCIDR, "via", nodeNetBridgeAddr},
	}
	for m := 1; m <= s.Nodes; m++ {
		if m != s.N {
			steps = append(steps, []string{"route", "add", nodePodCIDR(m), "via", kubeletNodeIP(m)})
		}
	}
	for _, st := range steps {
		if err := ipCmd(ctx, st...); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{
		"net/ipv4/ip_forward": "1",
		// kube-proxy's rules must see traffic between pods of one bridge.
		"net/bridge/bridge-nf-call-iptables": "1",
	} {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	return nil
}

// startDaemon starts one of the node's daemons with its output in logPath;
// node-init reaps it (no exec.Cmd.Wait: one reaper takes every child).
func startDaemon(name string, argv []string, logPath string) (int, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{nil, f, f},
		Env:   os.Environ(),
	})
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	return p.Pid, nil
}

// waitSocket waits until a unix socket accepts connections.
func waitSocket(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting after %s: %w", path, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeletCluster is what the cluster namespace runs for kubelet nodes, and
// the nodes.
type kubeletCluster struct {
	log   *slog.Logger
	c     *runConfig
	self  string
	stops []func()

	mu    sync.Mutex
	nodes []*kubeletNode
}

// startKubeletCluster starts what kubelet nodes need from the cluster
// namespace (the image registry, CoreDNS) and the nodes. Call stop even on
// error: it stops them all, removes their cgroups and restores the host's
// sysctls.
func startKubeletCluster(ctx context.Context, log *slog.Logger, c *runConfig, cp *controlPlane, cs kubernetes.Interface, store *imageStore) (*kubeletCluster, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	kc := &kubeletCluster{log: log, c: c, self: self}
	if err := saveSysctls(c.State); err != nil {
		return kc, fmt.Errorf("recording the host's sysctls: %w", err)
	}
	kc.stops = append(kc.stops, func() {
		if err := restoreSysctls(c.State); err != nil {
			log.Error("restoring the host's sysctls", "error", err)
		}
	})
	reg, err := startRegistry(ctx, log.With("component", "registry"), c.State, store.loaded)
	if err != nil {
		return kc, err
	}
	kc.stops = append(kc.stops, reg.stop)
	dns, err := startCoreDNS(ctx, c, cp, cs)
	if err != nil {
		return kc, err
	}
	kc.stops = append(kc.stops, func() { dns.stop(5 * time.Second) })
	kc.stops = append(kc.stops, func() {
		kc.mu.Lock()
		defer kc.mu.Unlock()
		for _, k := range kc.nodes {
			k.kill()
		}
		if err := removeCgroups(nodeCgroupParent(c.State)); err != nil {
			log.Error("removing the nodes' cgroups", "error", err)
		}
	})
	nodes, err := startKubeletNodes(ctx, log, c, cp, cs)
	kc.mu.Lock()
	kc.nodes = nodes
	kc.mu.Unlock()
	return kc, err
}

func (kc *kubeletCluster) stop() {
	for i := len(kc.stops) - 1; i >= 0; i-- {
		kc.stops[i]()
	}
}

// act is `localcluster node down|up NODE` on a kubelet node.
func (kc *kubeletCluster) act(ctx context.Context, cs kubernetes.Interface, node, action string) error {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	i := slices.IndexFunc(kc.nodes, func(k *kubeletNode) bool { return nodeName(k.n) == node })
	if i < 0 {
		return fmt.Errorf("no node %s in this cluster (node-1 .. node-%d)", node, kc.c.Nodes)
	}
	k := kc.nodes[i]
	cgroup := nodeCgroupParent(kc.c.State) + "/" + node
	switch action {
	case nodeActionDown:
		// Power off: node-init's death takes the kubelet, containerd,
		// kube-proxy and every container at once; the node network's
		// address stops answering.
		k.kill()
		return removeCgroups(cgroup)
	case nodeActionUp:
		select {
		case <-k.done:
		default:
			return nil // running
		}
		nk, err := startKubeletNode(ctx, kc.self, kc.c, k.spec)
		if err != nil {
			return err
		}
		kc.nodes[i] = nk
		return waitNodesReady(ctx, cs, []*kubeletNode{nk}, 2*time.Minute)
	}
	return fmt.Errorf("unknown action %q", action)
}
