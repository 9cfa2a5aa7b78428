package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
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

func TestUnreachableTaints(t *testing.T) {
	now := metav1.Now()
	other := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	tainted := withUnreachable([]corev1.Taint{other}, now)
	if len(tainted) != 3 || tainted[0] != other {
		t.Fatalf("taints %+v", tainted)
	}
	for _, tt := range tainted[1:] {
		if tt.Key != corev1.TaintNodeUnreachable || (tt.Effect == corev1.TaintEffectNoExecute) != (tt.TimeAdded != nil) {
			t.Errorf("taint %+v", tt)
		}
	}
	if again := withUnreachable(tainted, now); len(again) != 3 {
		t.Errorf("tainting twice: %+v", again)
	}
	if back := withoutUnreachable(tainted, now); len(back) != 1 || back[0] != other {
		t.Errorf("untainted: %+v", back)
	}
}

func TestUnknownConditions(t *testing.T) {
	then := metav1.NewTime(time.Now().Add(-time.Hour))
	now := metav1.Now()
	conds := nodeStatus(1, then).Conditions
	got := unknownConditions(conds, now)
	for i, c := range got {
		if c.Status != corev1.ConditionUnknown || c.Reason != nodeUnknownReason || c.Message != nodeUnknownMessage ||
			!c.LastTransitionTime.Equal(&now) || !c.LastHeartbeatTime.Equal(&then) || c.Type != conds[i].Type {
			t.Errorf("condition %+v", c)
		}
	}
	if conds[0].Status != corev1.ConditionTrue {
		t.Error("the input was changed")
	}
	if again := unknownConditions(got, metav1.NewTime(now.Add(time.Minute))); !again[0].LastTransitionTime.Equal(&now) {
		t.Error("the transition time moved without a transition")
	}
}

// TestNodeRequests goes through the request files as the command and the
// cluster process use them: down, the grace period (Unknown, taints, pods
// not Ready), up (Ready, untainted), and a request for a node that does not
// exist.
func TestNodeRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := nodeObject(2)
	node.Status = nodeStatus(2, metav1.Now())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID("u1")},
		Spec:       corev1.PodSpec{NodeName: "node-2"},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	cs := fake.NewClientset(node, pod)
	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods().Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	power := &nodePower{}
	ag := &agent{cfg: &runConfig{Nodes: 2}, workers: map[types.UID]*podWorker{}, power: power}
	recorder := record.NewFakeRecorder(100)
	state := t.TempDir()
	l := &nodeLifecycle{
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), cs: cs, power: power, agent: ag, pods: pods,
		grace: 300 * time.Millisecond, dir: nodesDir(state),
		kubelet:  func(string) record.EventRecorder { return recorder },
		recorder: recorder, kickPods: func() {},
	}
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
	getNode := func() *corev1.Node {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ready := func(n *corev1.Node) corev1.ConditionStatus {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}

	if ack := request("node-2", nodeActionDown); ack.Error != "" {
		t.Fatalf("down: %s", ack.Error)
	}
	if !power.isDown("node-2") || power.isDown("node-1") {
		t.Fatal("node-2 not down, or node-1 down")
	}
	if s := ready(getNode()); s != corev1.ConditionTrue {
		t.Errorf("Ready %s before the grace period", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := getNode()
		p, _ := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if ready(n) == corev1.ConditionUnknown && len(n.Spec.Taints) == 2 && !podConditionTrue(p, corev1.PodReady) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %+v %+v, pod %+v", n.Status.Conditions, n.Spec.Taints, p.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if ack := request("node-2", nodeActionUp); ack.Error != "" {
		t.Fatalf("up: %s", ack.Error)
	}
	if n := getNode(); ready(n) != corev1.ConditionTrue || len(n.Spec.Taints) != 0 || power.isDown("node-2") {
		t.Errorf("after up: %+v %+v", n.Status.Conditions, n.Spec.Taints)
	}
	if ack := request("node-9", nodeActionDown); ack.Error == "" {
		t.Error("node-9 went down")
	}
}
