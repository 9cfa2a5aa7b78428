package localcluster

import (
	"os/exec"
	"testing"
	"time"
)

// nodeDown makes a node of the cluster lose power (`localcluster node
// down`): its pods' processes are killed and its heartbeat stops; after the
// harness's --node-monitor-grace-period (15 s unless `up` was given another)
// the Node turns Unknown with the unreachable taints and its pods lose
// Ready. It returns once the processes are dead.
func (c *cluster) nodeDown(t *testing.T, node string) {
	t.Helper()
	c.node(t, "down", node)
}

// nodeUp brings a node back (`localcluster node up`): Ready, untainted, its
// pods' containers started again (restart counts up by one). It returns
// once the Node is Ready; the pods become Ready when their probes pass.
func (c *cluster) nodeUp(t *testing.T, node string) {
	t.Helper()
	c.node(t, "up", node)
}

func (c *cluster) node(t *testing.T, action, node string) {
	t.Helper()
	start := time.Now()
	out, err := exec.Command(c.lc, "node", action, node, "--state-dir", c.state).CombinedOutput()
	if err != nil {
		t.Fatalf("localcluster node %s %s: %v\n%s", action, node, err, out)
	}
	t.Logf("node %s %s (%s)", action, node, time.Since(start).Round(time.Millisecond))
}
