package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The cluster's addresses. All of them live only inside the network
// namespace the harness makes for the cluster and the pods' namespaces
// bridged to it; the host's own network never sees them.
const (
	bridgeName = "lcbr0"
	// podCIDR is the pod network: node n's pods take 10.244.n.2-254, node n
	// itself 10.244.n.1, the bridge (the pods' gateway) 10.244.0.1.
	podCIDRPrefix = "10.244"
	bridgeAddr    = "10.244.0.1"
	podPrefixLen  = 16
	// serviceCIDR matches envtest's --service-cluster-ip-range: every
	// address in it is local to the cluster namespace, where the service
	// proxy listens on each ClusterIP.
	serviceCIDR = "10.0.0.0/24"
)

// ipCmd runs `ip` (iproute2) with a deadline; the output says why it failed.
func ipCmd(ctx context.Context, args ...string) error {
	return run(ctx, "ip", args...)
}

func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// setupClusterNetwork prepares the cluster namespace the inner process runs
// in: loopback, the pod bridge, the node addresses, and the service range as
// local addresses (so the proxy can listen on any ClusterIP).
//
// With kubelet nodes the bridge is the node network instead (each node's
// eth0 on it, routes to their pod ranges added as they start), and the
// cluster namespace is its 10.240.0.1.
func setupClusterNetwork(ctx context.Context, nodes int, kubelets bool) error {
	addr := fmt.Sprintf("%s/%d", bridgeAddr, podPrefixLen)
	if kubelets {
		addr = fmt.Sprintf("%s/%d", nodeNetBridgeAddr, nodeNetPrefixLen)
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", addr, "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		{"route", "add", "local", serviceCIDR, "dev", "lo"},
	}
	for n := 1; n <= nodes && !kubelets; n++ {
		steps = append(steps, []string{"addr", "add", fmt.Sprintf("%s/%d", nodeIP(n), podPrefixLen), "dev", bridgeName})
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// nodeIP is node n's InternalIP (1-based).
func nodeIP(n int) string { return fmt.Sprintf("%s.%d.1", podCIDRPrefix, n) }

// ipam hands out pod IPs per node and remembers them per pod UID.
type ipam struct {
	mu    sync.Mutex
	used  map[string]string // ip -> pod uid
	byPod map[string]string // pod uid -> ip
}

func newIPAM() *ipam {
	return &ipam{used: map[string]string{}, byPod: map[string]string{}}
}

func (a *ipam) allocate(node int, podUID string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byPod[podUID]; ok {
		return ip, nil
	}
	for h := 2; h < 255; h++ {
		ip := fmt.Sprintf("%s.%d.%d", podCIDRPrefix, node, h)
		if _, taken := a.used[ip]; !taken {
			a.used[ip] = podUID
			a.byPod[podUID] = ip
			return ip, nil
		}
	}
	return "", fmt.Errorf("node %d has no free pod address", node)
}

func (a *ipam) release(podUID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byPod[podUID]; ok {
		delete(a.used, ip)
		delete(a.byPod, podUID)
	}
}

// attachPod gives the network namespace of process pid an eth0 on the
// bridge with the pod's address and a default route through the bridge.
func attachPod(ctx context.Context, pid int, hostVeth, ip string) error {
	netns := fmt.Sprintf("/proc/%d/ns/net", pid)
	if err := ipCmd(ctx, "link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)); err != nil {
		return err
	}
	if err := ipCmd(ctx, "link", "set", hostVeth, "master", bridgeName, "up"); err != nil {
		return err
	}
	inPod := [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", fmt.Sprintf("%s/%d", ip, podPrefixLen), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", bridgeAddr},
	}
	for _, s := range inPod {
		if err := run(ctx, "nsenter", append([]string{"--net=" + netns, "ip"}, s...)...); err != nil {
			return err
		}
	}
	return nil
}

// dialTimeout dials a pod or Service address from the cluster namespace.
func dialTimeout(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(ctx, "tcp", addr)
}
