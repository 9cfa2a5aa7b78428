package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		pos   []string
		state string
	}{
		{[]string{"down", "node-2", "--state-dir", "/s"}, []string{"down", "node-2"}, "/s"},
		{[]string{"--state-dir=/s", "up", "node-1"}, []string{"up", "node-1"}, "/s"},
		{[]string{"down", "--state-dir", "/s", "node-3"}, []string{"down", "node-3"}, "/s"},
		{[]string{"down", "--", "--state-dir"}, []string{"down", "--state-dir"}, ""},
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		state := fs.String("state-dir", "", "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *state != tc.state {
			t.Errorf("%q: %q, state %q, %v; want %q, state %q", tc.args, pos, *state, err, tc.pos, tc.state)
		}
	}
}

// Requests are acted on once each, in the order given, and acknowledged
// with the action's error.
func TestNodeRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := t.TempDir()
	var mu sync.Mutex
	var acted []string
	l := &nodeRequests{log: slog.New(slog.NewTextHandler(io.Discard, nil)), dir: nodesDir(state),
		act: func(_ context.Context, node, action string) error {
			mu.Lock()
			defer mu.Unlock()
			acted = append(acted, action+" "+node)
			if node == "node-9" {
				return errors.New("no node node-9")
			}
			return nil
		}}
	go l.run(ctx)
	request := func(node, action string) nodeRequest {
		t.Helper()
		id := newRequestID()
		data, _ := json.Marshal(nodeRequest{ID: id, Action: action})
		if err := os.MkdirAll(nodesDir(state), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFileAtomic(filepath.Join(nodesDir(state), node+".request"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		ack, err := waitNodeAck(state, node, id, 10*time.Second, func() bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if ack := request("node-2", nodeActionDown); ack.Error != "" {
		t.Fatalf("down: %s", ack.Error)
	}
	if ack := request("node-2", nodeActionUp); ack.Error != "" {
		t.Fatalf("up: %s", ack.Error)
	}
	if ack := request("node-9", nodeActionDown); ack.Error != "no node node-9" {
		t.Errorf("node-9: ack %+v", ack)
	}
	time.Sleep(3 * nodePollInterval) // a request is acted on once
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"down node-2", "up node-2", "down node-9"}; !slices.Equal(acted, want) {
		t.Errorf("acted %q, want %q", acted, want)
	}
}
