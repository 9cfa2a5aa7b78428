package localcluster

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/adminclient"
	"github.com/strata-storage/strata/internal/builders"
)

// TestSoak runs the demo tenant and its GatewayPool under continuous mixed
// load (the day-2 test's clients: three aws-sdk-go-v2 clients through the
// servers' Service, three through the gateways', boto3 at its defaults
// through the servers', all over HTTPS) while pods are killed at random:
// every few seconds (randomised from a logged seed, STRATA_SOAK_SEED
// reruns it) the container process of one server pod gets SIGKILL, as the
// node agent would see a crash, and the node agent restarts it (with its
// crash back-off); now and then a gateway pod is killed instead (SIGKILL,
// or deleted with grace 0 and replaced by its Deployment). Server pods
// are not force-deleted: a StatefulSet's replacement may then start while
// the old process still runs on the same volumes, which Kubernetes
// documents as unsafe. Never more than one server is down: the next kill
// waits until the killed pod is Ready again and every server reports
// every drive online, an empty heal queue, nothing deferred and write
// quorum in every set.
//
// One server pod (chosen by the seed) is never killed: the resident set
// size of its process over the whole run is the leak check. A restarted
// server's process starts cold (its metadata stores' memtables start at
// 256 KiB and double up to 16 MiB as records arrive), so its growth over
// the minute or two before its next kill would measure that, not a leak;
// a process that lives the whole soak, serving a quarter of the requests
// and holding a quarter of every object's shards while its peers die and
// come back, is where a leak (connections, goroutines, buffers for dead
// peers) shows. Before the load, fillMetadataStores writes enough records
// for that ramp to be over, so the RSS windows measure the steady state.
//
// Asserted: no failed request with the clients' standard retries unless
// more servers were down at once than the pool tolerates with writes (its
// status.tolerates, checked against the sampled pods), at most one server
// down at once, no restart of a pod that was not killed, RSS growth of
// each never-killed server under 10% (median of the last minute against
// the first minute after warm-up; windows of a fifth of the load in the
// short form), and every acknowledged object read back at the end.
// Figures (requests, failures, failed attempts, kills and recovery times,
// p99 at steady state, overall and during kills, RSS per process, the
// never-killed servers' goroutines and Go heap) are logged and printed as
// one JSON line (SOAK-JSON); latency is reported, not asserted.
//
// STRATA_SOAK_DURATION is the length of the load (2m in `make test`,
// 10m in `make soak`).
func TestSoak(t *testing.T) {
	assets, imagesDir := prerequisites(t)
	py := toolDir(t, "STRATA_PYCLIENTS", "python3")
	plan := soakPlanFromEnv(t)
	t.Logf("soak: %s of load, warm-up %s, RSS windows %s, kills every %s-%s after recovery, seed %d (STRATA_SOAK_SEED=%d reruns it)",
		plan.load, plan.warmUp, plan.window, plan.gapMin, plan.gapMax, plan.seed, plan.seed)
	ctx, cancel := context.WithTimeout(context.Background(), plan.load+30*time.Minute)
	defer cancel()
	c, kc, gwIn := startDemoWithGateways(ctx, t, assets, imagesDir)
	s := &soak{t: t, ctx: ctx, kc: kc, ns: "default", in: c.in, plan: plan,
		rng:   rand.New(rand.NewPCG(uint64(plan.seed), 0)), //nolint:gosec // reproducible choices, not secrets
		state: c.state}
	ca, err := os.ReadFile(c.in.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	s.ca = ca
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no certificate", c.in.CAFile)
	}
	s.pods = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:       s.dial,
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	token := &corev1.Secret{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: builders.MetricsTokenSecretName("media")}, token); err != nil {
		t.Fatal(err)
	}
	s.metricsToken = string(token.Data[builders.MetricsTokenKey])
	pool := &v1.ServerPool{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "nvme"}, pool); err != nil {
		t.Fatal(err)
	}
	if pool.Status.Layout == nil || pool.Status.Tolerates == nil {
		t.Fatalf("ServerPool nvme has no layout in its status: %+v", pool.Status)
	}
	lay, tol := pool.Status.Layout, pool.Status.Tolerates
	t.Logf("pool nvme: %d set(s) of %d drives, parity %d; tolerates %d server(s) down with writes", lay.Sets, lay.SetSize, lay.Parity, tol.Servers)

	servers := s.podNames(builders.ServerSelector("media"))
	s.control = servers[s.rng.IntN(len(servers))]
	s.victims = slices.DeleteFunc(slices.Clone(servers), func(p string) bool { return p == s.control })
	s.gwControl = s.podNames(builders.PoolSelector("media", "nas", builders.ComponentGateway))[s.rng.IntN(2)]
	t.Logf("servers %v; %s and gateway %s are never killed (the RSS controls)", servers, s.control, s.gwControl)
	waitFor(ctx, t, 3*time.Minute, s.settled)

	fill := fillMetadataStores(ctx, t, c.in, int(lay.SetSize-lay.Parity))
	restartsBefore := restartCounts(ctx, t, kc)
	watch := startWatch(ctx, t, kc, s.ns)
	procs := startProcWatch(ctx, kc, s.ns, 2*time.Second, s.goStats)
	mixed := startMixedLoad(ctx, t, c.in, gwIn, py, "soak")
	s.start = time.Now()
	loadEnd := s.start.Add(plan.load)
	s.sleep(plan.warmUp)
	for {
		gap := plan.gapMin + time.Duration(s.rng.Int64N(int64(plan.gapMax-plan.gapMin)+1))
		if time.Now().Add(gap).After(loadEnd) {
			s.sleep(time.Until(loadEnd))
			break
		}
		s.sleep(gap)
		// A gateway one time in four; the first kill is a server's.
		if len(s.kills) > 0 && s.rng.IntN(4) == 0 {
			s.killGateway()
		} else {
			s.killServer(s.victims[s.rng.IntN(len(s.victims))])
		}
		t.Logf("%s; %s", s.kills[len(s.kills)-1], mixed.servers.figures())
	}
	end := time.Now()
	figures := mixed.stop(t)
	procs.stop()
	watch.stop()

	r := s.report(figures, mixed, procs, watch.maxDown(s.start, end)["nvme"], end)
	r.Fill = fill
	r.Layout = fmt.Sprintf("%d set(s) of %d drives, parity %d; tolerates %d server(s) down with writes", lay.Sets, lay.SetSize, lay.Parity, tol.Servers)
	objects, bad := mixed.readBack(ctx, t, figures)
	r.ReadBack = readBackFigure{Objects: objects, Bad: bad}
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SOAK-JSON %s", line)

	if r.ServerKills == 0 {
		t.Error("no server was killed: the soak was too short")
	}
	if r.MaxServersDown > 1 {
		t.Errorf("%d servers were down at once; the soak kills one at a time", r.MaxServersDown)
	}
	if figures.failed() > 0 {
		if r.MaxServersDown > int(tol.Servers) {
			t.Logf("requests failed while %d servers were down, more than the %d the pool tolerates with writes: explained by quorum loss", r.MaxServersDown, tol.Servers)
		} else {
			figures.errorf(t, fmt.Sprintf("requests failed with at most %d server(s) down, which the pool tolerates", r.MaxServersDown))
		}
	}
	killed := map[string]bool{}
	for _, k := range s.kills {
		killed[k.Pod] = true
	}
	for pod, n := range restartCounts(ctx, t, kc) {
		if b, was := restartsBefore[pod]; was && n != b && !killed[strings.Split(pod, "/")[0]] {
			t.Errorf("pod %s restarted (%d -> %d) without being killed", pod, b, n)
		}
	}
	controlMeasured := false
	for _, f := range r.RSS {
		controlMeasured = controlMeasured || f.Pod == s.control && f.Whole
		if f.Server && f.Whole && f.GrowthPct >= 10 {
			t.Errorf("server %s (never killed): RSS grew %.1f%% (%.1f MiB -> %.1f MiB), target under 10%%", f.Pod, f.GrowthPct, f.FirstMiB, f.LastMiB)
		}
	}
	if !controlMeasured {
		t.Errorf("the RSS of %s, never killed, was not sampled over the whole soak", s.control)
	}
	if bad > 0 {
		t.Errorf("%d of %d acknowledged objects wrong or missing", bad, objects)
	}
	c.down(t, c.in.S3URL, gwIn.S3URL)
}

// fillFigure is what fillMetadataStores wrote and how long it took.
type fillFigure struct {
	Objects int     `json:"objects"`
	MiB     int     `json:"mib"`
	Seconds float64 `json:"seconds"`
}

// fillMetadataStores writes, before the load starts, enough inline objects
// for every drive's metadata store to have grown its memtables to their
// full size and cycled them, then reads them all back so that its block
// cache is full. Pebble starts a store's memtable at 256 KiB and doubles
// it at each flush up to the engine's 8 MiB (engine/drive), and holds the
// one being flushed next to the new one; the block cache (32 MiB a drive)
// fills only as records are read. So a server's resident memory grows by
// up to about 32 MiB per drive while the first ~48 MiB of records reach
// each drive and are read: minutes at the soak's own rate, long enough
// that RSS windows a minute after warm-up would measure that bounded ramp
// rather than a leak. Objects of 96 KiB stay inline (under 128 KiB): each
// drive's record carries a 96 KiB / data shard, so 48 MiB per drive takes
// 3,072 of them with 6 data shards.
func fillMetadataStores(ctx context.Context, t *testing.T, in info, data int) fillFigure {
	const size, perDrive = 96 << 10, 48 << 20
	n := perDrive / (size / data)
	cl := s3Client(t, in)
	bucket := aws.String("soak-fill")
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("f"), size)
	start := time.Now()
	each := func(what string, op func(key *string) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if err := op(aws.String(fmt.Sprintf("fill/%06d", i))); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s the metadata stores: %v", what, err)
		}
	}
	each("filling", func(key *string) error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: bytes.NewReader(body)})
		return err
	})
	each("reading back", func(key *string) error {
		_, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: key})
		return err
	})
	f := fillFigure{Objects: n, MiB: n * size >> 20, Seconds: time.Since(start).Seconds()}
	t.Logf("filled the metadata stores and read them back: %d objects of %d KiB (%d MiB of records per drive) in %.0fs", n, size>>10, perDrive>>20, f.Seconds)
	return f
}

// soakPlan is how long the soak runs and how often it kills.
type soakPlan struct {
	load           time.Duration // of load, warm-up included
	warmUp, window time.Duration // before the first kill; of each RSS median
	gapMin, gapMax time.Duration // from one recovery to the next kill
	seed           int64
}

func soakPlanFromEnv(t *testing.T) soakPlan {
	p := soakPlan{load: 150 * time.Second, seed: time.Now().UnixNano()}
	if v := os.Getenv("STRATA_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 30*time.Second {
			t.Fatalf("STRATA_SOAK_DURATION=%q: want a duration of at least 30s", v)
		}
		p.load = d
	}
	if v := os.Getenv("STRATA_SOAK_SEED"); v != "" {
		seed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_SOAK_SEED=%q: %v", v, err)
		}
		p.seed = seed
	}
	// A minute of warm-up and minute-long RSS windows in the long form. A
	// short one warms up for half the load, windows of an eighth: a server
	// under the demo's 1 GiB limit plans a 256 MiB block cache and lets
	// its heap grow to twice the live data (GOGC 100 under an 800 MiB soft
	// limit, docs/engine.md "Memory"), so its resident memory rises under
	// the load for about a minute after the fill, to about 340-355 MiB
	// (per 15 s, 2026-12-01: 206, 290, 324, 353, 354; 218, 270, 283, 351,
	// 355), and a window in that ramp measures it, not a leak (a warm-up
	// of 30 s in a 75 s load failed CI at +11% and a run here at +25%; 15 s
	// before it, on 51ec08a, +10.8%). On a slower VM (2026-12-02: the
	// fill 28 s instead of 6) the ramp ended 15 s after the minute (200,
	// 239, 281, 306, 317, 358, 359, 361: +14.4% failed CI), so a short
	// form warms up for 90 s of 150.
	p.warmUp = min(90*time.Second, p.load*3/5)
	p.window = min(time.Minute, p.load/8)
	p.gapMin, p.gapMax = 10*time.Second, 30*time.Second
	if p.load < 5*time.Minute {
		p.gapMin, p.gapMax = 3*time.Second, 10*time.Second
	}
	return p
}

// soak is the state of TestSoak's kill loop.
type soak struct {
	t     *testing.T
	ctx   context.Context
	kc    client.Client
	ns    string
	in    info   // root keys for the admin API
	ca    []byte // the tenant CA
	state string // the cluster's state directory
	// pods reaches the pods' own addresses (routable only inside the
	// cluster's network namespace), verifying them with the tenant CA
	// under the name "localhost" their certificate carries.
	pods         *http.Client
	metricsToken string
	plan         soakPlan
	rng          *rand.Rand
	control      string // the server never killed
	// gwControl is the gateway never killed (the other one may be, and
	// its replacements).
	gwControl string
	victims   []string // the servers that may be
	start     time.Time
	kills     []kill
}

// kill is one pod killed and its recovery.
type kill struct {
	Pod     string `json:"pod"`
	Server  bool   `json:"server"`
	How     string `json:"how"`
	PID     int    `json:"pid"`
	at      time.Time
	ready   time.Time // the pod (or its replacement) Ready again
	settled time.Time // and every server in sync (a server killed) or both gateways Ready
	// AtS, ReadyS, SettledS: seconds from the start of the load and from
	// the kill.
	AtS      float64 `json:"atS"`
	ReadyS   float64 `json:"readyS"`
	SettledS float64 `json:"settledS"`
}

func (k kill) String() string {
	return fmt.Sprintf("kill at %.0fs: %s of %s (pid %d); Ready after %.1fs, settled after %.1fs", k.AtS, k.How, k.Pod, k.PID, k.ReadyS, k.SettledS)
}

func (s *soak) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-s.ctx.Done():
		s.t.Fatal("the soak's time is up")
	}
}

// podNames are the names of the pods with labels, sorted.
func (s *soak) podNames(labels map[string]string) []string {
	list := &corev1.PodList{}
	if err := s.kc.List(s.ctx, list, client.InNamespace(s.ns), client.MatchingLabels(labels)); err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// killServer SIGKILLs the server process of pod, waits for the pod to be
// Ready again (restarted by the node agent) and for the servers to be in
// sync.
func (s *soak) killServer(pod string) {
	k := s.sigkill(pod, true)
	s.settle(&k, s.settled)
}

// killGateway kills a gateway pod other than the control, either way.
func (s *soak) killGateway() {
	gws := slices.DeleteFunc(s.podNames(builders.PoolSelector("media", "nas", builders.ComponentGateway)),
		func(p string) bool { return p == s.gwControl })
	if len(gws) == 0 {
		s.t.Fatalf("no gateway pod but %s", s.gwControl)
	}
	pod := gws[s.rng.IntN(len(gws))]
	if s.rng.IntN(2) == 0 {
		k := s.sigkill(pod, false)
		s.settle(&k, func() error { return gatewaysReadyPods(s.ctx, s.kc, s.ns, "") })
		return
	}
	p := s.pod(pod)
	k := kill{Pod: pod, How: "delete --grace-period=0", at: time.Now()}
	if pid, err := containerPID(p); err == nil {
		k.PID = pid
	}
	if err := s.kc.Delete(s.ctx, p, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		s.t.Fatalf("deleting gateway pod %s: %v", pod, err)
	}
	s.settle(&k, func() error { return gatewaysReadyPods(s.ctx, s.kc, s.ns, p.UID) })
}

func (s *soak) pod(name string) *corev1.Pod {
	p := &corev1.Pod{}
	if err := s.kc.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, p); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// sigkill kills the container process of pod with SIGKILL and waits until
// the node agent has restarted it and the pod is Ready.
func (s *soak) sigkill(name string, server bool) kill {
	p := s.pod(name)
	pid, err := containerPID(p)
	if err != nil {
		s.t.Fatal(err)
	}
	uid, restarts := p.UID, p.Status.ContainerStatuses[0].RestartCount
	k := kill{Pod: name, Server: server, How: "SIGKILL", PID: pid, at: time.Now()}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("killing %s (pid %d): %v", name, pid, err)
	}
	waitEvery(s.ctx, s.t, 5*time.Minute, 250*time.Millisecond, func() error {
		p := &corev1.Pod{}
		if err := s.kc.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, p); err != nil {
			return err
		}
		if p.UID != uid || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount == restarts || !podReady(p) {
			return fmt.Errorf("pod %s not yet restarted and Ready", name)
		}
		return nil
	})
	k.ready = time.Now()
	return k
}

// settle waits until ok (the cluster has recovered from k), and records k.
func (s *soak) settle(k *kill, ok func() error) {
	waitEvery(s.ctx, s.t, 5*time.Minute, 250*time.Millisecond, ok)
	k.settled = time.Now()
	if k.ready.IsZero() {
		k.ready = k.settled
	}
	k.AtS = k.at.Sub(s.start).Seconds()
	k.ReadyS = k.ready.Sub(k.at).Seconds()
	k.SettledS = k.settled.Sub(k.at).Seconds()
	s.kills = append(s.kills, *k)
}

// settled says why the servers are not in sync: a server pod not Ready,
// or one that sees a drive not online, has objects queued for healing or
// deferred until a drive is back, or a set without write quorum.
func (s *soak) settled() error {
	list := &corev1.PodList{}
	if err := s.kc.List(s.ctx, list, client.InNamespace(s.ns), client.MatchingLabels(builders.ServerSelector("media"))); err != nil {
		return err
	}
	for _, p := range list.Items {
		if !podReady(&p) || p.Status.PodIP == "" {
			return fmt.Errorf("server %s not Ready", p.Name)
		}
		ac, err := s.podAdmin(&p)
		if err != nil {
			return err
		}
		info, err := ac.Info(s.ctx)
		if err != nil {
			return fmt.Errorf("server %s: %w", p.Name, err)
		}
		for _, pl := range info.Pools {
			for _, d := range pl.Drives {
				if d.State != "online" {
					return fmt.Errorf("server %s sees drive %s %s", p.Name, d.Endpoint, d.State)
				}
			}
		}
		heal, err := ac.Heal(s.ctx)
		if err != nil {
			return fmt.Errorf("server %s: %w", p.Name, err)
		}
		if heal.QueueLength > 0 || heal.Deferred > 0 {
			return fmt.Errorf("server %s: %d objects queued for healing, %d deferred", p.Name, heal.QueueLength, heal.Deferred)
		}
		if err := ac.ClusterHealth(s.ctx, false); err != nil {
			return fmt.Errorf("server %s: %w", p.Name, err)
		}
	}
	return nil
}

// podAdmin is an admin client of one pod, reached as s.pods reaches it.
func (s *soak) podAdmin(p *corev1.Pod) (*adminclient.Client, error) {
	return adminclient.New("https://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(builders.S3Port)), adminclient.Options{
		AccessKey: s.in.AccessKey, SecretKey: s.in.SecretKey, CA: s.ca, ServerName: "localhost", Timeout: 10 * time.Second,
		DialContext: s.dial,
	})
}

// dial connects from inside the cluster's network namespace.
func (s *soak) dial(_ context.Context, _, addr string) (net.Conn, error) {
	return dialInCluster(s.state, addr)
}

// gatewaysReadyPods says why the GatewayPool nas does not have two Ready
// pods, none of them gone (the UID of a pod deleted, or "").
func gatewaysReadyPods(ctx context.Context, kc client.Client, ns string, gone types.UID) error {
	list := &corev1.PodList{}
	if err := kc.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(builders.PoolSelector("media", "nas", builders.ComponentGateway))); err != nil {
		return err
	}
	ready := 0
	for _, p := range list.Items {
		if p.UID == gone || p.DeletionTimestamp != nil {
			return fmt.Errorf("gateway pod %s still there", p.Name)
		}
		if podReady(&p) {
			ready++
		}
	}
	if ready != 2 || len(list.Items) != 2 {
		return fmt.Errorf("%d of %d gateway pods Ready, want 2", ready, len(list.Items))
	}
	return gatewaysReady(ctx, kc, ns, 2)
}

// containerPID is the process of the pod's first container as this
// machine's PID namespace numbers it. The kubelet reports the container as
// containerd://<id>, and runc puts the container in a cgroup named by that
// id (<cgroupRoot>/kubepods/.../pod<uid>/<id>): the process whose
// /proc/<pid>/cgroup names it, and runs strata, is the server or gateway.
func containerPID(p *corev1.Pod) (int, error) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return 0, fmt.Errorf("pod %s: no running container", p.Name)
	}
	cid := p.Status.ContainerStatuses[0].ContainerID
	id, ok := strings.CutPrefix(cid, "containerd://")
	if !ok || id == "" {
		return 0, fmt.Errorf("pod %s: container ID %q is not containerd's", p.Name, cid)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), "/"+id+"\n") {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), "strata") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pod %s: no strata process in the cgroup of container %s", p.Name, id)
}

// procWatch samples, every period, the resident set size of the
// container process of each of the tenant's pods (/proc/<pid>/status:
// pods are processes of this machine), and every fifth time the
// goroutines and Go heap in use of each server (its /strata/metrics).
type procWatch struct {
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	series  map[process]*processSeries
	goStats func(p *corev1.Pod) (goroutines, heap int64, err error)
}

type process struct {
	pod    string
	pid    int
	server bool
}

type processSeries struct {
	// rss is VmRSS, anon its anonymous part (RssAnon: without the
	// binary's pages, which count as they are first run).
	rss, anon, goroutines, heap []point
}

type point struct {
	at time.Time
	v  int64
}

func startProcWatch(ctx context.Context, kc client.Client, ns string, period time.Duration,
	goStats func(p *corev1.Pod) (goroutines, heap int64, err error)) *procWatch {
	w := &procWatch{stopCh: make(chan struct{}), series: map[process]*processSeries{}, goStats: goStats}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i := 0; ; i++ {
			w.sample(ctx, kc, ns, i%5 == 0)
			select {
			case <-w.stopCh:
				return
			case <-time.After(period):
			}
		}
	}()
	return w
}

func (w *procWatch) sample(ctx context.Context, kc client.Client, ns string, withGoStats bool) {
	list := &corev1.PodList{}
	if kc.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{builders.LabelInstance: "media"}) != nil {
		return
	}
	for _, p := range list.Items {
		pid, err := containerPID(&p)
		if err != nil {
			continue // not running, or the status still names a process that died
		}
		rss, anon, err := residentBytes(pid)
		if err != nil {
			continue
		}
		key := process{pod: p.Name, pid: pid, server: p.Labels[builders.LabelComponent] == builders.ComponentServer}
		now := time.Now()
		w.mu.Lock()
		ps := w.series[key]
		if ps == nil {
			ps = &processSeries{}
			w.series[key] = ps
		}
		ps.rss = append(ps.rss, point{now, rss})
		ps.anon = append(ps.anon, point{now, anon})
		w.mu.Unlock()
		if !withGoStats || !key.server {
			continue
		}
		if g, h, err := w.goStats(&p); err == nil {
			w.mu.Lock()
			ps.goroutines = append(ps.goroutines, point{now, g})
			ps.heap = append(ps.heap, point{now, h})
			w.mu.Unlock()
		}
	}
}

// residentBytes is VmRSS of a process and its RssAnon.
func residentBytes(pid int) (rss, anon int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		var into *int64
		switch name {
		case "VmRSS":
			into = &rss
		case "RssAnon":
			into = &anon
		default:
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %q: %w", pid, sc.Text(), err)
		}
		*into = kib << 10
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS or RssAnon", pid)
	}
	return rss, anon, sc.Err()
}

func (w *procWatch) stop() {
	close(w.stopCh)
	w.wg.Wait()
}

// medianIn is the median of the points in [from, to), and how many.
func medianIn(points []point, from, to time.Time) (int64, int) {
	var vs []int64
	for _, p := range points {
		if !p.at.Before(from) && p.at.Before(to) {
			vs = append(vs, p.v)
		}
	}
	if len(vs) == 0 {
		return 0, 0
	}
	slices.Sort(vs)
	return vs[len(vs)/2], len(vs)
}

// goStats reads a server's goroutines and Go heap in use from its
// metrics, with the tenant's metrics token.
func (s *soak) goStats(p *corev1.Pod) (goroutines, heap int64, err error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet,
		"https://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(builders.S3Port))+builders.MetricsPath, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.metricsToken)
	resp, err := s.pods.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s metrics: %s", p.Name, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var into *int64
		switch {
		case !ok:
			continue
		case name == "go_goroutines":
			into = &goroutines
		case name == "go_memstats_heap_inuse_bytes":
			into = &heap
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s metrics: %q: %w", p.Name, sc.Text(), err)
		}
		*into = int64(f)
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s metrics: no go_goroutines or go_memstats_heap_inuse_bytes", p.Name)
	}
	return goroutines, heap, sc.Err()
}

// soakReport is TestSoak's figures, printed as one JSON line.
type soakReport struct {
	Seed           int64        `json:"seed"`
	LoadS          float64      `json:"loadS"`
	WarmUpS        float64      `json:"warmUpS"`
	WindowS        float64      `json:"rssWindowS"`
	Layout         string       `json:"layout"`
	Clients        mixedFigures `json:"clients"`
	Requests       int64        `json:"requests"`
	Failed         int64        `json:"failed"`
	AttemptsFailed int64        `json:"attemptsFailed"`
	ServerKills    int          `json:"serverKills"`
	GatewayKills   int          `json:"gatewayKills"`
	MaxServersDown int          `json:"maxServersDown"`
	// Recovery of the servers killed: to Ready, to every server in sync.
	ReadyS   spread          `json:"serverReadyS"`
	SettledS spread          `json:"serverSettledS"`
	P99      []p99Figure     `json:"p99"`
	RSS      []processFigure `json:"rss"`
	ReadBack readBackFigure  `json:"readBack"`
	Fill     fillFigure      `json:"fill"`
	Kills    []kill          `json:"kills"`
}

type spread struct {
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	slices.Sort(xs)
	return spread{Median: xs[len(xs)/2], Max: xs[len(xs)-1]}
}

// p99Figure is one Service's p99: at steady state (after warm-up, no pod
// of the Service's kind down or catching up), overall, and while one was.
type p99Figure struct {
	Service   string  `json:"service"`
	SteadyMs  float64 `json:"steadyMs"`
	SteadyN   int     `json:"steadyN"`
	OverallMs float64 `json:"overallMs"`
	OverallN  int     `json:"overallN"`
	KillsMs   float64 `json:"duringKillsMs"`
	KillsN    int     `json:"duringKillsN"`
}

// processFigure is one process of a pod: when it ran (seconds from the
// start of the load, as sampled), its peak RSS, and for a process that ran
// through the whole soak (Whole) the median RSS of the first window after
// warm-up and of the last window, the medians of every window (CurveMiB),
// and for a server its goroutines and Go heap in use in those two windows.
type processFigure struct {
	Pod      string  `json:"pod"`
	PID      int     `json:"pid"`
	Server   bool    `json:"server"`
	FromS    float64 `json:"fromS"`
	ToS      float64 `json:"toS"`
	Whole    bool    `json:"whole"`
	PeakMiB  float64 `json:"peakMiB"`
	FirstMiB float64 `json:"firstMiB,omitempty"`
	// AnonMiB: the anonymous part of FirstMiB and LastMiB.
	AnonMiB    [2]float64 `json:"anonMiB,omitzero"`
	LastMiB    float64    `json:"lastMiB,omitempty"`
	GrowthPct  float64    `json:"growthPct,omitempty"`
	CurveMiB   []float64  `json:"curveMiB,omitempty"`
	Goroutines [2]int64   `json:"goroutines,omitzero"`
	HeapMiB    [2]float64 `json:"heapInuseMiB,omitzero"`
}

type readBackFigure struct {
	Objects int `json:"objects"`
	Bad     int `json:"bad"`
}

func (s *soak) report(f mixedFigures, m *mixedLoad, procs *procWatch, maxDown int, end time.Time) soakReport {
	t := s.t
	r := soakReport{Seed: s.plan.seed, LoadS: end.Sub(s.start).Seconds(), WarmUpS: s.plan.warmUp.Seconds(), WindowS: s.plan.window.Seconds(),
		Clients: f, Requests: f.Servers.Requests + f.Gateways.Requests + f.Boto3.Requests, Failed: f.failed(),
		AttemptsFailed: f.Servers.AttemptsFailed + f.Gateways.AttemptsFailed + f.Boto3.AttemptsFailed,
		MaxServersDown: maxDown, Kills: s.kills}
	var ready, settled []float64
	for _, k := range s.kills {
		if k.Server {
			r.ServerKills++
			ready, settled = append(ready, k.ReadyS), append(settled, k.SettledS)
		} else {
			r.GatewayKills++
		}
	}
	r.ReadyS, r.SettledS = spreadOf(ready), spreadOf(settled)

	warm := s.start.Add(s.plan.warmUp)
	for _, svc := range []struct {
		name   string
		l      *load
		server bool
	}{{"servers", m.servers, true}, {"gateways", m.gateways, false}} {
		during := func(at time.Time) bool {
			for _, k := range s.kills {
				if k.Server == svc.server && !at.Before(k.at) && !at.After(k.settled) {
					return true
				}
			}
			return false
		}
		steady, nSteady := svc.l.p99Where(func(at time.Time) bool { return !at.Before(warm) && !during(at) })
		overall, nOverall := svc.l.p99Where(func(time.Time) bool { return true })
		kills, nKills := svc.l.p99Where(during)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		r.P99 = append(r.P99, p99Figure{Service: svc.name, SteadyMs: ms(steady), SteadyN: nSteady,
			OverallMs: ms(overall), OverallN: nOverall, KillsMs: ms(kills), KillsN: nKills})
		t.Logf("p99 through the %s' Service: steady %s (%d requests), overall %s (%d), during kills of its pods %s (%d)",
			svc.name, steady.Round(time.Millisecond), nSteady, overall.Round(time.Millisecond), nOverall, kills.Round(time.Millisecond), nKills)
	}

	procs.mu.Lock()
	defer procs.mu.Unlock()
	keys := slices.Collect(maps.Keys(procs.series))
	slices.SortFunc(keys, func(a, b process) int {
		return cmp.Or(cmp.Compare(a.pod, b.pod), procs.series[a].rss[0].at.Compare(procs.series[b].rss[0].at))
	})
	const mib = 1 << 20
	w := s.plan.window
	killed := map[int]bool{}
	for _, k := range s.kills {
		killed[k.PID] = true
	}
	for _, p := range keys {
		ps := procs.series[p]
		from, to := ps.rss[0].at, ps.rss[len(ps.rss)-1].at
		// A process killed in the last window is not one that ran the
		// whole soak (it was counted so, and its growth asserted).
		fig := processFigure{Pod: p.pod, PID: p.pid, Server: p.server, FromS: from.Sub(s.start).Seconds(), ToS: to.Sub(s.start).Seconds(),
			Whole: !from.After(warm) && !to.Before(end.Add(-w)) && !killed[p.pid]}
		for _, pt := range ps.rss {
			fig.PeakMiB = max(fig.PeakMiB, float64(pt.v)/mib)
		}
		if !fig.Whole {
			t.Logf("RSS of %s pid %d (ran %.0fs-%.0fs): peak %.1f MiB", p.pod, p.pid, fig.FromS, fig.ToS, fig.PeakMiB)
			r.RSS = append(r.RSS, fig)
			continue
		}
		first, n1 := medianIn(ps.rss, warm, warm.Add(w))
		last, n2 := medianIn(ps.rss, end.Add(-w), end)
		fig.FirstMiB, fig.LastMiB = float64(first)/mib, float64(last)/mib
		a1, _ := medianIn(ps.anon, warm, warm.Add(w))
		a2, _ := medianIn(ps.anon, end.Add(-w), end)
		fig.AnonMiB = [2]float64{float64(a1) / mib, float64(a2) / mib}
		fig.GrowthPct = 100 * float64(last-first) / float64(max(first, 1))
		for at := s.start; !at.Add(w).After(end); at = at.Add(w) {
			m, _ := medianIn(ps.rss, at, at.Add(w))
			fig.CurveMiB = append(fig.CurveMiB, math.Round(float64(m)/mib*10)/10)
		}
		extra := ""
		if p.server {
			g1, _ := medianIn(ps.goroutines, warm, warm.Add(w))
			g2, _ := medianIn(ps.goroutines, end.Add(-w), end)
			h1, _ := medianIn(ps.heap, warm, warm.Add(w))
			h2, _ := medianIn(ps.heap, end.Add(-w), end)
			fig.Goroutines, fig.HeapMiB = [2]int64{g1, g2}, [2]float64{float64(h1) / mib, float64(h2) / mib}
			extra = fmt.Sprintf("; goroutines %d -> %d, Go heap in use %.1f -> %.1f MiB", g1, g2, fig.HeapMiB[0], fig.HeapMiB[1])
		}
		t.Logf("RSS of %s pid %d (the whole soak): %.1f MiB (median of %d samples in the first %s after warm-up) -> %.1f MiB (of %d in the last): %+.1f%% (anonymous %.1f -> %.1f MiB); peak %.1f MiB; per %s from the start: %v MiB%s",
			p.pod, p.pid, fig.FirstMiB, n1, w, fig.LastMiB, n2, fig.GrowthPct, fig.AnonMiB[0], fig.AnonMiB[1], fig.PeakMiB, w, fig.CurveMiB, extra)
		r.RSS = append(r.RSS, fig)
	}
	return r
}
