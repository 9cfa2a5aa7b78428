package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
	var puts, gets, bigOps, failed, failedBefore atomic.Int64
	var deleted atomic.Bool
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		if !deleted.Load() {
			failedBefore.Add(1)
		}
		firstErr.CompareAndSwap(nil, err.Error())
	}
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
						fail(fmt.Errorf("PUT %s: %w", key, err))
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
						fail(fmt.Errorf("GET %s: %w", key, err))
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
	deleted.Store(true)
	if err := cs.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("load of %d workers for %s: %d PUTs (%d of 16 MiB), %d GETs, %d failed (first: %v)",
		workers, loadFor, puts.Load(), bigOps.Load(), gets.Load(), failed.Load(), firstErr.Load())
	// Before the deletion nothing may fail. After it, a request whose body
	// was in flight from or to the killed server fails (the SDK does not
	// retry a body cut short): at most a couple per worker.
	if n := failedBefore.Load(); n > 0 {
		t.Errorf("%d requests failed before any server was lost (first: %v)", n, firstErr.Load())
	}
	if n := failed.Load(); n > 2*workers || puts.Load() == 0 {
		t.Errorf("%d requests failed after the server was lost, %d PUTs (first: %v)", n, puts.Load(), firstErr.Load())
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
			t.Logf("pod %s: peak resident set %d MiB in its 1024 MiB limit", p.Name, peak>>20)
		}
	}
}

// peakMemory is the peak resident set of the pod's server process
// (VmHWM). The pod's memory cgroup also counts the page cache of what the
// server wrote to its drives, which the kernel reclaims at the limit (its
// usage sits at the limit under this load without any OOM kill); the
// resident set is what the limit has to hold.
func peakMemory(p *corev1.Pod) (int64, error) {
	pid, err := containerPID(p)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("process %d: no VmHWM in /proc/%d/status", pid, pid)
}
