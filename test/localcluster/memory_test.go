package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/strata-storage/strata/engine/adminclient"
	"github.com/strata-storage/strata/internal/builders"
)

// memoryLimitedLoad runs the demo tenant's servers, each a pod with a
// 1 GiB memory limit (hack/localcluster/demo/media.yaml) that the kubelet
// enforces in the pod's cgroup, through mixed 16 MiB and 4 KiB PUTs and
// GETs while one server is deleted and comes back, and waits for the heal
// of what it missed: no container may be OOM-killed, and every object read
// back must be the one written.
func memoryLimitedLoad(ctx context.Context, t *testing.T, c *cluster, cs kubernetes.Interface) {
	const (
		workers  = 24
		loadFor  = 45 * time.Second
		deleteAt = 10 * time.Second
		victim   = "media-nvme-1"
	)
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		lim := p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
		if lim.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Fatalf("pod %s has a memory limit of %s, want 1Gi (hack/localcluster/demo/media.yaml)", p.Name, lim.String())
		}
	}

	client := s3Client(t, c.in)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("memory")}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	var puts, gets, bigOps, failed atomic.Int64
	var firstErr atomic.Value
	loadCtx, stopLoad := context.WithTimeout(ctx, loadFor)
	defer stopLoad()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				body := []byte(fmt.Sprintf("%04d-%06d-", w, i) + strings.Repeat("s", 4096-12))
				if i%3 == 0 {
					body = big
					bigOps.Add(1)
				}
				key := fmt.Sprintf("w%02d/%06d", w, i)
				if _, err := client.PutObject(loadCtx, &s3.PutObjectInput{Bucket: aws.String("memory"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Errorf("PUT %s: %w", key, err))
					}
					continue
				}
				puts.Add(1)
				out, err := client.GetObject(loadCtx, &s3.GetObjectInput{Bucket: aws.String("memory"), Key: aws.String(key)})
				if err == nil {
					var got []byte
					got, err = io.ReadAll(out.Body)
					_ = out.Body.Close()
					if err == nil && !bytes.Equal(got, body) {
						err = fmt.Errorf("read %d bytes, not the %d written", len(got), len(body))
					}
				}
				if err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Errorf("GET %s: %w", key, err))
					}
					continue
				}
				gets.Add(1)
			}
		}()
	}
	time.Sleep(deleteAt)
	// The server goes away with its data in flight and comes back on the
	// same claims; what it missed meanwhile is healed.
	old, err := cs.CoreV1().Pods("default").Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("load of %d workers for %s: %d PUTs (%d of 16 MiB), %d GETs, %d failed (first: %v)",
		workers, loadFor, puts.Load(), bigOps.Load(), gets.Load(), failed.Load(), firstErr.Load())
	// A request in flight to the deleted server may fail every retry of
	// the SDK; anything more is a fault.
	if n, total := failed.Load(), puts.Load()+gets.Load(); total == 0 || n*100 > total {
		t.Errorf("%d of %d requests failed (first: %v)", n, total, firstErr.Load())
	}

	ca, err := os.ReadFile(c.in.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 3*time.Minute, func() error {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.Name == victim && p.UID == old.UID {
				return errors.New("the deleted server is not replaced yet")
			}
			if !podReady(&p) {
				return fmt.Errorf("server %s not Ready", p.Name)
			}
			ac, err := adminclient.New("https://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(builders.S3Port)), adminclient.Options{
				AccessKey: c.in.AccessKey, SecretKey: c.in.SecretKey, CA: ca, ServerName: "localhost", Timeout: 10 * time.Second,
				DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dialInCluster(c.state, addr) },
			})
			if err != nil {
				return err
			}
			heal, err := ac.Heal(ctx)
			if err != nil {
				return fmt.Errorf("server %s: %w", p.Name, err)
			}
			if heal.QueueLength > 0 || heal.Deferred > 0 {
				return fmt.Errorf("server %s: %d objects queued for healing, %d deferred", p.Name, heal.QueueLength, heal.Deferred)
			}
		}
		return nil
	})

	list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		for _, st := range p.Status.ContainerStatuses {
			for _, term := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
				if term != nil && term.Reason == "OOMKilled" {
					t.Errorf("pod %s container %s was OOM-killed at %s", p.Name, st.Name, term.FinishedAt)
				}
			}
			if st.RestartCount > 0 {
				t.Errorf("pod %s container %s restarted %d times", p.Name, st.Name, st.RestartCount)
			}
		}
		if peak, err := peakMemory(&p); err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
		} else {
			t.Logf("pod %s: peak memory of its cgroup %d MiB of its 1024 MiB limit", p.Name, peak>>20)
		}
	}
}

// peakMemory is the most memory the pod's container ever used as its
// memory cgroup counts it (cgroup v1 memory.max_usage_in_bytes, the number
// the kernel's OOM killer weighs against the limit).
func peakMemory(p *corev1.Pod) (int64, error) {
	pid, err := containerPID(p)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(","+parts[1]+",", ",memory,") {
			continue
		}
		v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.max_usage_in_bytes"))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	}
	return 0, fmt.Errorf("process %d has no memory cgroup", pid)
}
