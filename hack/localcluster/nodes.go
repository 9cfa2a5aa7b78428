package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Labels of the fake Nodes.
const (
	labelStorageRole = "node-role.strata.dev/storage"
	kubeletVersion   = "v1.36.3"
)

// nodeName is the name of node n (1-based).
func nodeName(n int) string { return fmt.Sprintf("node-%d", n) }

// zoneOf spreads nodes over two zones, so zone-level failure domains exist.
func zoneOf(n int) string { return fmt.Sprintf("zone-%c", 'a'+(n-1)%2) }

// nodeObject is node n as the agent registers it.
func nodeObject(n int) *corev1.Node {
	name := nodeName(n)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:       name,
				corev1.LabelOSStable:       "linux",
				corev1.LabelArchStable:     "amd64",
				corev1.LabelTopologyZone:   zoneOf(n),
				corev1.LabelTopologyRegion: "local",
				labelStorageRole:           "true",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("%s.%d.0/24", podCIDRPrefix, n), PodCIDRs: []string{fmt.Sprintf("%s.%d.0/24", podCIDRPrefix, n)}},
	}
}

// nodeStatus is a Ready node with room for the demo's pods.
func nodeStatus(n int, now metav1.Time) corev1.NodeStatus {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("16"),
		corev1.ResourceMemory:           resource.MustParse("64Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: nodeIP(n)},
			{Type: corev1.NodeHostName, Address: nodeName(n)},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: "amd64",
			ContainerRuntimeVersion: "localcluster://1", OSImage: "localcluster node agent",
		},
	}
}

// registerNodes creates the Nodes, reports them Ready and removes the
// not-ready taint the API server puts on new Nodes (the node lifecycle
// controller would, were it running).
func registerNodes(ctx context.Context, cs kubernetes.Interface, count int) error {
	for n := 1; n <= count; n++ {
		node, err := cs.CoreV1().Nodes().Create(ctx, nodeObject(n), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %d: %w", n, err)
		}
		node.Status = nodeStatus(n, metav1.Now())
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", node.Name, err)
		}
		if err := clearNotReadyTaint(ctx, cs, node.Name); err != nil {
			return err
		}
	}
	return nil
}

func clearNotReadyTaint(ctx context.Context, cs kubernetes.Interface, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			return nil
		}
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"taints": keep},
		})
		_, err = cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clearing the not-ready taint of %s: %w", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// heartbeatNodes refreshes the Ready condition's heartbeat now and then, as
// a kubelet would, so `kubectl describe node` looks alive.
// Nodes that are down (`localcluster node down`) get none.
func heartbeatNodes(ctx context.Context, cs kubernetes.Interface, count int, power *nodePower) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for n := 1; n <= count; n++ {
			if power.isDown(nodeName(n)) {
				continue
			}
			node, err := cs.CoreV1().Nodes().Get(ctx, nodeName(n), metav1.GetOptions{})
			if err != nil || power.isDown(nodeName(n)) {
				continue
			}
			now := metav1.Now()
			for i := range node.Status.Conditions {
				node.Status.Conditions[i].LastHeartbeatTime = now
			}
			_, _ = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		}
	}
}
