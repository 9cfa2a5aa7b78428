package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-storage/strata/internal/builders"
)

// defaultState is where `make demo` keeps the cluster.
func defaultState() string {
	if d := os.Getenv("LOCALCLUSTER_STATE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "strata-localcluster")
}

// cmdUp starts the cluster process in new network and mount namespaces,
// detached, and waits until the Tenant is Ready (or failed, or the timeout).
func cmdUp(args []string) error {
	var c runConfig
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	c.flags(fs)
	fs.IntVar(&c.APIPort, "api-port", 16443, "port of the API server on 127.0.0.1 (0 picks one)")
	fs.IntVar(&c.S3Port, "s3-port", 19000, "port of the tenant's S3 endpoint on 127.0.0.1 (0 picks one)")
	foreground := fs.Bool("foreground", false, "stay in the foreground until interrupted, then stop the cluster")
	prometheusPort := fs.Int("prometheus-port", 19090, "with --monitoring, the port of Prometheus' HTTP API on 127.0.0.1 (0 picks one)")
	consolePort := fs.Int("console-port", 19443, "port of the tenant's web console on 127.0.0.1 (0 picks one; -1: none), when its spec.console enables it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.State == "" {
		c.State = defaultState()
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network and mount namespaces, veth pairs and bind mounts (see docs/localcluster.md)")
	}
	var err error
	for _, p := range []*string{&c.State, &c.Repo, &c.Images, &c.Assets} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	for i, m := range c.Manifests {
		if c.Manifests[i], err = filepath.Abs(m); err != nil {
			return err
		}
	}
	if _, err := os.Stat(c.Images); err != nil {
		return fmt.Errorf("%w (run `make images`)", err)
	}
	if c.Monitoring {
		if _, err := os.Stat(monitoringCRDDir(c.Images)); err != nil {
			return fmt.Errorf("--monitoring: %w (run `hack/monitoring-images.sh %s`)", err, c.Images)
		}
		// Prometheus' API on the host, served like any --expose.
		if !slices.ContainsFunc(c.Expose, func(e string) bool { return strings.HasPrefix(e, prometheusService+"=") }) {
			c.Expose = append(c.Expose, fmt.Sprintf("%s=%d", prometheusService, *prometheusPort))
		}
	}
	// The tenant's console, served like any --expose (the Service's port
	// named console).
	if ns, name, _ := strings.Cut(c.Tenant, "/"); *consolePort >= 0 && !c.Bare {
		c.Expose = append(c.Expose, fmt.Sprintf("%s/%s:%s=%d", ns, builders.S3ServiceName(name), consolePortName, *consolePort))
	}
	if c.Assets == "" {
		return errors.New("--assets (or KUBEBUILDER_ASSETS) must name the control-plane binaries (`hack/envtest.sh --control-plane` prints the directory)")
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(c.Assets, b)); err != nil {
			return fmt.Errorf("%s missing in %s (run `make control-plane`)", b, c.Assets)
		}
	}
	if pid := runningPID(c.State); pid != 0 {
		if in, err := readInfo(c.State); err == nil && in.Status == "ready" {
			fmt.Fprintf(os.Stderr, "localcluster: already running from %s (pid %d)\n", c.State, pid)
			printUsage(os.Stdout, in, c.State)
			return nil
		}
		return fmt.Errorf("a cluster already runs from %s (pid %d): `localcluster down --state-dir %s` first", c.State, pid, c.State)
	}
	if err := os.RemoveAll(c.State); err != nil {
		return err
	}
	for _, d := range []string{"logs/pods", "kube", "volumes", "pods", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.State, d), 0o755); err != nil {
			return err
		}
	}

	// The host's side: two listeners on loopback, handed to the cluster
	// process, which serves them from inside its own network namespace.
	apiLn, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.APIPort))
	if err != nil {
		return fmt.Errorf("API server port: %w", err)
	}
	s3Ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.S3Port))
	if err != nil {
		return fmt.Errorf("S3 port: %w", err)
	}
	c.APIPort = apiLn.Addr().(*net.TCPAddr).Port
	c.S3Port = s3Ln.Addr().(*net.TCPAddr).Port
	var exposeFiles []*os.File
	for i, e := range c.Expose {
		svc, portName, port, err := parseExpose(e)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("port of %s: %w", svc, err)
		}
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			return err
		}
		ln.Close()
		if portName != "" {
			svc += ":" + portName
		}
		c.Expose[i] = fmt.Sprintf("%s=%d", svc, ln.Addr().(*net.TCPAddr).Port)
		exposeFiles = append(exposeFiles, f)
	}
	apiFile, err := apiLn.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	s3File, err := s3Ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	runArgs := []string{"run",
		"--state-dir", c.State, "--repo", c.Repo, "--assets", c.Assets,
		"--images", c.Images,
		"--nodes", strconv.Itoa(c.Nodes), "--tenant", c.Tenant, "--timeout", c.Timeout.String(), "--bare=" + strconv.FormatBool(c.Bare),
		"--api-port", strconv.Itoa(c.APIPort), "--s3-port", strconv.Itoa(c.S3Port),
		"--node-monitor-grace-period", c.NodeGrace.String(),
	}
	for _, m := range c.Manifests {
		runArgs = append(runArgs, "--manifests", m)
	}
	for _, e := range c.Expose {
		runArgs = append(runArgs, "--expose", e)
	}
	if c.Monitoring {
		runArgs = append(runArgs, "--monitoring")
	}
	logf, err := os.OpenFile(c.logFile("cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, runArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = append([]*os.File{apiFile, s3File}, exposeFiles...)
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(c.State, "tmp"))
	cmd.Dir = c.State
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A network namespace of its own for the whole cluster, and a
		// mount namespace (made private, so nothing mounted in it leaks).
		Unshareflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
		Setsid:       !*foreground,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the cluster process: %w", err)
	}
	apiLn.Close()
	s3Ln.Close()
	apiFile.Close()
	s3File.Close()
	for _, f := range exposeFiles {
		f.Close()
	}
	logf.Close()
	if err := os.WriteFile(filepath.Join(c.State, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if *foreground {
		// Ctrl-C reaches the cluster process too (same process group); this
		// one stays to clean up after it, and passes a SIGTERM on.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			for s := range sigs {
				if s == syscall.SIGTERM {
					_ = cmd.Process.Signal(syscall.SIGTERM)
				}
			}
		}()
	}

	started := time.Now()
	fmt.Fprintf(os.Stderr, "localcluster: starting (%d nodes, tenant %s); logs in %s\n", c.Nodes, c.Tenant, filepath.Join(c.State, "logs"))
	var in info
	lastMsg := ""
	for {
		select {
		case err := <-exited:
			if *foreground {
				return cleanup(c.State, fmt.Errorf("the cluster process exited before the tenant was ready (%w)", err))
			}
			return fmt.Errorf("the cluster process exited (%w); see %s", err, c.logFile("cluster.log"))
		case <-time.After(time.Second):
		}
		in, _ = readInfo(c.State)
		if in.Status == "ready" || in.Status == "failed" {
			break
		}
		if msg := progress(c.State); msg != lastMsg && msg != "" {
			fmt.Fprintf(os.Stderr, "localcluster: %s (%s)\n", msg, time.Since(started).Round(time.Second))
			lastMsg = msg
		}
		if time.Since(started) > c.Timeout+2*time.Minute {
			return fmt.Errorf("no answer from the cluster process after %s; see %s", time.Since(started).Round(time.Second), c.logFile("cluster.log"))
		}
	}
	if in.Status == "failed" {
		fmt.Fprintf(os.Stderr, "localcluster: %s\nThe cluster keeps running for inspection (export KUBECONFIG=%s); stop it with `localcluster down --state-dir %s`.\n", in.Message, in.Kubeconfig, c.State)
		if *foreground {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				return cleanup(c.State, fmt.Errorf("not ready; the cluster process: %w", err))
			}
			return cleanup(c.State, errors.New("not ready; cluster stopped"))
		}
		return errors.New("not ready (the tenant, or Prometheus with --monitoring)")
	}
	printUsage(os.Stdout, in, c.State)
	if *foreground {
		fmt.Fprintln(os.Stderr, "localcluster: running in the foreground; Ctrl-C stops it")
		err := <-exited
		return cleanup(c.State, err)
	}
	return nil
}

// progress is a one-line summary of what the cluster log says last.
func progress(state string) string {
	data, err := os.ReadFile(filepath.Join(state, "logs", "cluster.log"))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if i := strings.Index(l, "msg="); i >= 0 && strings.Contains(l, "level=INFO") {
			msg := l[i+4:]
			if strings.HasPrefix(msg, "\"") {
				if j := strings.Index(msg[1:], "\""); j >= 0 {
					msg = msg[1 : j+1]
				}
			} else if j := strings.Index(msg, " "); j >= 0 {
				msg = msg[:j]
			}
			return msg
		}
	}
	return ""
}

func readInfo(state string) (info, error) {
	var in info
	data, err := os.ReadFile(filepath.Join(state, "info.json"))
	if err != nil {
		return in, err
	}
	err = json.Unmarshal(data, &in)
	return in, err
}

// printUsage says how to reach the cluster and the tenant.
func printUsage(w io.Writer, in info, state string) {
	env := filepath.Join(state, "env")
	var b strings.Builder
	if in.Bare {
		fmt.Fprintf(&b, "export KUBECONFIG=%s\n", in.Kubeconfig)
		_ = os.WriteFile(env, []byte(b.String()), 0o600)
		fmt.Fprintf(w, "\nLocal cluster ready (after %s), without the operator: install it and a tenant with Helm (docs/install.md).\n\n", in.ReadyAfter)
		fmt.Fprintf(w, "  export KUBECONFIG=%s\n", in.Kubeconfig)
		fmt.Fprintf(w, "S3 of tenant %s, once installed: %s\n", in.Tenant, in.S3URL)
		fmt.Fprintf(w, "Logs: %s\nStop and remove everything: make demo-down\n", in.Logs)
		return
	}
	fmt.Fprintf(&b, "export KUBECONFIG=%s\n", in.Kubeconfig)
	fmt.Fprintf(&b, "export AWS_ACCESS_KEY_ID=%s\n", in.AccessKey)
	fmt.Fprintf(&b, "export AWS_SECRET_ACCESS_KEY=%s\n", in.SecretKey)
	fmt.Fprintf(&b, "export AWS_DEFAULT_REGION=us-east-1\n")
	fmt.Fprintf(&b, "export AWS_ENDPOINT_URL=%s\n", in.S3URL)
	if in.CAFile != "" {
		fmt.Fprintf(&b, "export AWS_CA_BUNDLE=%s\n", in.CAFile)
	}
	_ = os.WriteFile(env, []byte(b.String()), 0o600)

	fmt.Fprintf(w, "\nStrata tenant %s is Ready (after %s).\n\n", in.Tenant, in.ReadyAfter)
	fmt.Fprintf(w, "Kubernetes (kube-apiserver, etcd, controller-manager, scheduler, the Strata operator):\n")
	fmt.Fprintf(w, "  export KUBECONFIG=%s\n", in.Kubeconfig)
	fmt.Fprintf(w, "  kubectl get tenant,serverpool,statefulset,pods,pvc -o wide\n\n")
	fmt.Fprintf(w, "S3 endpoint: %s\n", in.S3URL)
	fmt.Fprintf(w, "  root access key: %s\n", in.AccessKey)
	fmt.Fprintf(w, "  root secret key: %s\n", in.SecretKey)
	if in.CAFile != "" {
		fmt.Fprintf(w, "  CA certificate:  %s\n", in.CAFile)
	}
	for svc, url := range in.Exposed {
		fmt.Fprintf(w, "Service %s: %s (same keys and CA)\n", svc, url)
	}
	if in.ConsoleURL != "" {
		fmt.Fprintf(w, "Web console (spec.console of the Tenant): %s/ (sign in with the root keys above; docs/console.md)\n", in.ConsoleURL)
	}
	if in.PrometheusURL != "" {
		fmt.Fprintf(w, "Prometheus (scraping the tenant through its ServiceMonitor, with its rules): %s\n", in.PrometheusURL)
		fmt.Fprintf(w, "  curl -s '%s/api/v1/query?query=strata_drive_state' | head -c 300; curl -s %s/api/v1/rules | head -c 300\n", in.PrometheusURL, in.PrometheusURL)
	}
	fmt.Fprintf(w, "\nAll of the above as environment variables, then the AWS CLI:\n")
	fmt.Fprintf(w, "  source %s\n", env)
	fmt.Fprintf(w, "  aws s3 mb s3://demo\n")
	fmt.Fprintf(w, "  aws s3 cp README.md s3://demo/\n")
	fmt.Fprintf(w, "  aws s3 ls s3://demo/\n\n")
	fmt.Fprintf(w, "Logs: %s (cluster.log, operator.log, pods/)\n", in.Logs)
	fmt.Fprintf(w, "Stop and remove everything: make demo-down\n")
}

// cmdStatus prints how to use a running cluster.
func cmdStatus(args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	state := fs.String("state-dir", defaultState(), "state directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if runningPID(*state) == 0 {
		return fmt.Errorf("no cluster runs from %s", *state)
	}
	in, err := readInfo(*state)
	if err != nil {
		return err
	}
	if in.Status != "ready" {
		fmt.Printf("status: %s %s\n", in.Status, in.Message)
		return nil
	}
	printUsage(os.Stdout, in, *state)
	return nil
}

// runningPID is the cluster process of state when it still runs.
func runningPID(state string) int {
	data, err := os.ReadFile(filepath.Join(state, "pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !mentionsDir(string(cmdline), state) {
		return 0
	}
	return pid
}

// cmdDown stops the cluster process (which stops pods, the operator and
// the control plane), ends anything of this state directory still running,
// and removes the directory.
func cmdDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	state := fs.String("state-dir", defaultState(), "state directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*state)
	if err != nil {
		return err
	}
	if pid := runningPID(abs); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitGone(pid, 90*time.Second) {
			fmt.Fprintf(os.Stderr, "localcluster: pid %d did not stop in 90 s; killing it\n", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, 10*time.Second)
		}
	}
	return cleanup(abs, nil)
}

// cleanup kills stragglers started for state (their command lines name it:
// envtest's etcd and kube-apiserver, pods) and removes the directory.
func cleanup(state string, cause error) error {
	if _, err := os.Stat(state); err != nil {
		return cause
	}
	for _, pid := range pidsMentioning(state) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 5*time.Second)
	}
	// Kubelet nodes: whatever is left in their cgroups (containers do not
	// name the state directory), and the sysctls the kubelets changed.
	if err := removeCgroups(nodeCgroupParent(state)); err != nil {
		cause = errors.Join(cause, err)
	}
	if err := restoreSysctls(state); err != nil {
		cause = errors.Join(cause, err)
	}
	if err := os.RemoveAll(state); err != nil {
		return fmt.Errorf("removing %s: %w", state, err)
	}
	return cause
}

// pidsMentioning lists processes whose command line, executable, root or
// working directory mentions s: the cluster's own processes and containers
// (chrooted into a root under s).
func pidsMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && mentionsDir(string(cmdline), s) {
			out = append(out, pid)
			continue
		}
		for _, link := range []string{"root", "cwd", "exe"} {
			if t, err := os.Readlink(filepath.Join("/proc", e.Name(), link)); err == nil && mentionsDir(t, s) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// mentionsDir says whether text names dir or a path inside it (and not a
// sibling such as dir2).
func mentionsDir(text, dir string) bool {
	for i := strings.Index(text, dir); i >= 0; {
		end := i + len(dir)
		if end == len(text) || strings.ContainsRune("/\x00 =", rune(text[end])) {
			return true
		}
		next := strings.Index(text[end:], dir)
		if next < 0 {
			return false
		}
		i = end + next
	}
	return false
}

func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			return true // a zombie: its parent reaps it
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}
