package main

// Node loss: `localcluster node down|up NODE` makes a node lose power (its
// namespace dies: kubelet, containerd, kube-proxy and containers) and come
// back (started again on the same disk). The command and the running cluster process talk through
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
	"strings"
	"time"
)

const (
	nodeActionDown = "down"
	nodeActionUp   = "up"
	// How often the cluster process looks for requests.
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

// nodeRequests serves node requests: each NODE.request is acted on by the
// kubelet cluster (the node stops or starts) and acknowledged.
type nodeRequests struct {
	log *slog.Logger
	dir string
	act func(ctx context.Context, node, action string) error // kubeletCluster.act

	handled map[string]string // node -> id of the last request acted on
}

// run polls for requests until ctx ends.
func (l *nodeRequests) run(ctx context.Context) {
	l.handled = map[string]string{}
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
	}
}

// serveRequests acts on every new NODE.request and acknowledges it.
func (l *nodeRequests) serveRequests(ctx context.Context) {
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
