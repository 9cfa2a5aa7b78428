package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"time"
)

// The cluster's addresses. All of them live only inside the network
// namespace the harness makes for the cluster and the nodes' namespaces
// bridged to it; the host's own network never sees them.
const (
	// bridgeName is the node network: the cluster namespace is its
	// nodeNetBridgeAddr, node n's eth0 is kubeletNodeIP(n).
	bridgeName = "lcbr0"
	// Node n's pods take 10.244.n.2-254 behind its CNI bridge (10.244.n.1).
	podCIDRPrefix = "10.244"
	// serviceCIDR matches envtest's --service-cluster-ip-range: every
	// address in it is local to the cluster namespace, where the service
	// proxy listens on each ClusterIP for the harness's own processes;
	// pods reach Services through kube-proxy on their node.
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
// in: loopback, the node network's bridge, and the service range as local
// addresses (so the proxy can listen on any ClusterIP). Routes to each
// node's pods are added as the node starts.
func setupClusterNetwork(ctx context.Context) error {
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("%s/%d", nodeNetBridgeAddr, nodeNetPrefixLen), "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
		{"route", "add", "local", serviceCIDR, "dev", "lo"},
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
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
