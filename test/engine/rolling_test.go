package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// clusterLoad writes objects and reads each back, from a few workers,
// through the nodes the test has up, as a load balancer would send them:
// taking a node out waits for the requests in flight through it, and
// putting it (back) in gives it a fresh client (no keep-alive connection
// of a previous process). The SDK's retries are off: every failure counts.
type clusterLoad struct {
	bucket   string
	stop     chan struct{}
	wg       sync.WaitGroup
	requests atomic.Int64
	failed   atomic.Int64

	mu       sync.RWMutex
	order    []int // nodes, in the order they joined
	usable   map[int]*usableNode
	written  map[string][]byte
	failures []string // the first few
}

// usableNode is one node as the load sees it.
type usableNode struct {
	mu     sync.RWMutex
	client *s3.Client // nil: out of the load
}

func (u *usableNode) use(fn func(*s3.Client)) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if u.client == nil {
		return false
	}
	fn(u.client)
	return true
}

func (u *usableNode) set(c *s3.Client) {
	u.mu.Lock()
	u.client = c
	u.mu.Unlock()
}

// startLoad starts workers writing to bucket through the given nodes.
func startLoad(c *cluster, bucket string, nodes []int, workers int) *clusterLoad {
	l := &clusterLoad{bucket: bucket, stop: make(chan struct{}), usable: map[int]*usableNode{}, written: map[string][]byte{}}
	for _, n := range nodes {
		l.put(n, c.nodes[n].aws())
	}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go l.work(w)
	}
	return l
}

// put puts a node in the load (cl) or takes it out (nil).
func (l *clusterLoad) put(n int, cl *s3.Client) {
	l.mu.Lock()
	u := l.usable[n]
	if u == nil {
		u = &usableNode{}
		l.usable[n] = u
		l.order = append(l.order, n)
	}
	l.mu.Unlock()
	u.set(cl)
}

func (l *clusterLoad) fail(what string, err error) {
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.failures) < 10 {
		l.failures = append(l.failures, what+": "+err.Error())
	}
	l.mu.Unlock()
}

func (l *clusterLoad) work(w int) {
	defer l.wg.Done()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		key := fmt.Sprintf("w%d/k%05d", w, i)
		data := randomBytes([]int{100, 4 << 10, 256 << 10}[i%3])
		l.mu.RLock()
		order := l.order
		l.mu.RUnlock()
		for try := 0; try < len(order); try++ {
			l.mu.RLock()
			u := l.usable[order[(w+i+try)%len(order)]]
			l.mu.RUnlock()
			if u.use(func(cl *s3.Client) { l.putAndGet(cl, key, data) }) {
				break
			}
		}
	}
}

func (l *clusterLoad) putAndGet(cl *s3.Client, key string, data []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l.requests.Add(1)
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &l.bucket, Key: &key, Body: bytes.NewReader(data)}); err != nil {
		l.fail("PUT", err)
		return
	}
	l.mu.Lock()
	l.written[key] = data
	l.mu.Unlock()
	l.requests.Add(1)
	out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &l.bucket, Key: &key})
	if err != nil {
		l.fail("GET", err)
		return
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		l.fail("GET", fmt.Errorf("%d bytes, not the %d written (%w)", len(got), len(data), err))
	}
}

// finish stops the load, fails the test on any failed request and reads
// every object written back through via.
func (l *clusterLoad) finish(t *testing.T, what string, via *server) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%d requests %s, %d failed", l.requests.Load(), what, l.failed.Load())
	if l.failed.Load() > 0 {
		t.Fatalf("%d requests failed %s; the first:\n%s", l.failed.Load(), what, strings.Join(l.failures, "\n"))
	}
	if len(l.written) < 100 {
		t.Fatalf("only %d objects written %s", len(l.written), what)
	}
	for key, want := range l.written {
		if got := get(t, via.aws(), l.bucket, key); !bytes.Equal(got, want) {
			t.Fatalf("%s wrong afterwards", key)
		}
	}
	listed := map[string]bool{}
	pages := s3.NewListObjectsV2Paginator(via.aws(), &s3.ListObjectsV2Input{Bucket: &l.bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("listing afterwards: %v", err)
		}
		for _, o := range page.Contents {
			listed[*o.Key] = true
		}
	}
	for key := range l.written {
		if !listed[key] {
			t.Fatalf("%s is not listed afterwards (%d listed, %d written)", key, len(listed), len(l.written))
		}
	}
}

// answers reports whether a GET of url answers 200 (false when it does
// not answer at all: the node is down).
func answers(url string) bool {
	ok, _ := answer(url)
	return ok
}

// answer is answers with what the answer says.
func answer(url string) (bool, string) {
	resp, err := http.Get(url)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(body))
}

// TestClusterRollingRestartUnderLoad restarts the servers of a 4-node
// tenant one at a time, as the operator's roll-out does, while clients
// write and read through the servers that are up: a server is taken down
// only once its engine's maintenance gate says the tenant keeps write
// quorum without it, and nothing else is waited for. The set is 6+2 (write
// quorum 6: one server's two drives may be lost, no more), so a gate that
// lets a server go while another one is not yet serving its drives loses
// writes. Every node opens its drives slowly (STRATA_TEST_DRIVE_OPEN_DELAY)
// so that a restarting node spends long enough between answering its
// peers and serving its drives; restarts alternate SIGTERM and SIGKILL; in
// one round the restarted node comes back with both drives unusable for a
// while (it is ready: the set still has read quorum). Zero failed requests
// are allowed, with the SDK's retries off.
func TestClusterRollingRestartUnderLoad(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	pool := c.poolSpec("pool-a", nodes, 2)
	pool["parity"] = 2
	c.writeTopology(pool)
	c.env = map[int][]string{}
	for _, n := range nodes {
		c.env[n] = []string{"STRATA_TEST_DRIVE_OPEN_DELAY=400ms"}
	}
	c.start(nodes)
	mustCreateBucket(t, c.nodes[11].aws(), "roll")

	load := startLoad(c, "roll", nodes, 3)

	// The roll-out: each round waits for the next node's gate, takes the
	// node out of the load, stops it and starts it again. A restarted node
	// rejoins the load once it is ready.
	restarting := map[int]bool{}
	var awayNode int
	var restoreDrives []func()
	var awaySince time.Time
	rounds := 2 * len(nodes)
	awayRound := 2 // early: the drives that return are rebuilt by a walk over every object
	for r := 0; r <= rounds; r++ {
		next := nodes[r%len(nodes)]
		began, lastWhy := time.Now(), ""
		deadline := began.Add(30 * time.Second)
		for {
			for n := range restarting {
				if answers(c.nodes[n].url() + "/strata/health/ready") {
					delete(restarting, n)
					load.put(n, c.nodes[n].aws())
				}
			}
			// The drives of the node that came back without them return
			// once the gate has held a while (someone fixed the disks),
			// or at the latest once the gate let the next node go.
			drivesAway := restoreDrives != nil
			gateOpen, why := false, "restarting"
			if !restarting[next] {
				gateOpen, why = answer(c.nodes[next].url() + "/strata/health/cluster?maintenance=true")
			}
			if !gateOpen && why != lastWhy {
				t.Logf("round %d: node %d's gate, after %s: %s", r, next, time.Since(began).Round(10*time.Millisecond), why)
				lastWhy = why
			}
			if drivesAway && (gateOpen || time.Since(awaySince) > 2*time.Second) {
				if gateOpen {
					t.Errorf("round %d: node %d's gate let it go while node %d served none of its drives", r, next, awayNode)
				}
				for _, restore := range restoreDrives {
					restore()
				}
				restoreDrives = nil
			}
			if gateOpen {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: node %d's maintenance gate still closed after 30 s (restarting: %v)", r, next, restarting)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("round %d: node %d may go after %s", r, next, time.Since(began).Round(10*time.Millisecond))
		if r == rounds {
			break // the last round only waits for the tenant to be whole
		}
		load.put(next, nil)
		if r%2 == 0 {
			c.nodes[next].stop()
		} else {
			c.nodes[next].kill()
		}
		if r == awayRound {
			awayNode, awaySince = next, time.Now()
			for d := 1; d <= 2; d++ {
				restoreDrives = append(restoreDrives, takeOffline(t, filepath.Join(c.root, fmt.Sprintf("n%d", next), fmt.Sprintf("pool-a-d%d", d))))
			}
		}
		c.nodes[next].startProcess()
		restarting[next] = true
	}
	waitFor(t, "every node ready again", 30*time.Second, func() bool {
		for _, n := range nodes {
			if !answers(c.nodes[n].url() + "/strata/health/ready") {
				return false
			}
		}
		return true
	})
	load.finish(t, fmt.Sprintf("during %d restarts", rounds), c.nodes[12])
}

// TestClusterPoolAddedUnderLoad adds a pool of four new servers to the
// topology while clients write and read through the first pool's servers.
// The running nodes bring the pool up before any of its servers answers,
// and those start one after another, opening their drives slowly, so for
// seconds the pool has some of its drives served and not others. New
// objects may go to it only once it can take them: zero failed requests.
// The new servers then join the load.
func TestClusterPoolAddedUnderLoad(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	first, added := []int{11, 12, 13, 14}, []int{15, 16, 17, 18}
	a, b := c.poolSpec("pool-a", first, 2), c.poolSpec("pool-b", added, 2)
	a["parity"], b["parity"] = 2, 2
	c.writeTopology(a)
	c.start(first)
	mustCreateBucket(t, c.nodes[11].aws(), "grow")
	load := startLoad(c, "grow", first, 3)
	time.Sleep(time.Second)

	c.writeTopology(a, b)
	waitFor(t, "the running nodes bring pool-b up", 10*time.Second, func() bool {
		_, body := c.nodes[11].adminGet("info")
		return strings.Contains(string(body), "pool-b")
	})
	c.env = map[int][]string{}
	// 3 s apart: a pool's free space, which weighs its share of new
	// objects, is looked at again every 5 s, and must be seen while only
	// some of the pool's drives are served.
	for _, n := range added {
		c.env[n] = []string{"STRATA_TEST_DRIVE_OPEN_DELAY=500ms"}
		c.launch([]int{n})
		time.Sleep(3 * time.Second)
	}
	for _, n := range added {
		c.nodes[n].waitReady()
		load.put(n, c.nodes[n].aws())
	}
	time.Sleep(3 * time.Second)
	load.finish(t, "while a pool was added", c.nodes[16])
	// It took new objects once it could (objects over 128 KiB leave shard
	// files on its drives).
	shards, _ := filepath.Glob(filepath.Join(c.root, "n15", "pool-b-d1", ".strata", "data", "*", "*"))
	if len(shards) == 0 {
		t.Fatal("pool-b took no object")
	}
	t.Logf("pool-b holds %d objects' shards on one drive", len(shards))
	// The bucket's record reached pool-b (a change to the bucket writes it
	// in every pool), though its servers did not answer when the running
	// nodes brought it up.
	tagging := &s3.PutBucketTaggingInput{Bucket: aws.String("grow"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("media")}}}}
	if _, err := c.nodes[11].aws().PutBucketTagging(ctx, tagging); err != nil {
		t.Fatalf("changing the bucket after the pool was added: %v", err)
	}
}

// TestClusterPoolAddedWhileNodesDisagree adds a pool that two of the four
// running nodes learn of 12 s after the others (in Kubernetes each pod's
// copy of the topology ConfigMap is updated at its own time). Objects are
// written through the nodes that know the new pool and read back at once
// through those that do not yet: none may be placed where a node that
// serves reads cannot look, so every GET finds what its PUT wrote. Once
// every node knows the pool, it takes new objects.
func TestClusterPoolAddedWhileNodesDisagree(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	first, added := []int{11, 12, 13, 14}, []int{15, 16, 17, 18}
	a, b := c.poolSpec("pool-a", first, 2), c.poolSpec("pool-b", added, 2)
	a["parity"], b["parity"] = 2, 2
	c.writeTopologyFor(first, a)
	c.start(first)
	mustCreateBucket(t, c.nodes[11].aws(), "split")

	var requests, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			put, read := c.nodes[11+w].aws(), c.nodes[13+w].aws() // knows pool-b early / late
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				key := fmt.Sprintf("w%d/k%05d", w, i)
				data := randomBytes([]int{4 << 10, 256 << 10}[i%2])
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				requests.Add(2)
				_, err := put.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("split"), Key: &key, Body: bytes.NewReader(data)})
				var got []byte
				if err == nil {
					var out *s3.GetObjectOutput
					if out, err = read.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("split"), Key: &key}); err == nil {
						got, err = io.ReadAll(out.Body)
						out.Body.Close()
						if err == nil && !bytes.Equal(got, data) {
							err = fmt.Errorf("%d bytes, not the %d written", len(got), len(data))
						}
					}
				}
				cancel()
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 5 {
						failures = append(failures, key+": "+err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(time.Second)

	c.writeTopologyFor(added, a, b)
	c.launch(added)
	c.writeTopologyFor([]int{11, 12}, a, b)
	for _, n := range added {
		c.nodes[n].waitReady()
	}
	time.Sleep(12 * time.Second) // nodes 13 and 14 still know pool-a alone
	c.writeTopologyFor([]int{13, 14}, a, b)
	shards := func() int {
		got, _ := filepath.Glob(filepath.Join(c.root, "n15", "pool-b-d1", ".strata", "data", "*", "*"))
		return len(got)
	}
	waitFor(t, "pool-b takes new objects once every node knows it", 30*time.Second, func() bool { return shards() > 0 })
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d requests while nodes disagreed on the pools and after, %d failed; pool-b holds %d objects' shards on one drive",
		requests.Load(), failed.Load(), shards())
	if failed.Load() > 0 {
		t.Fatalf("%d PUT+GET pairs failed; the first:\n%s", failed.Load(), strings.Join(failures, "\n"))
	}
}

// TestClusterPoolDecommissionedBeforeSomeNodesKnowIt: a pool is added and
// decommissioned before two of the nodes' topology files list it (in
// Kubernetes each pod's copy of the ConfigMap is updated at its own time:
// the day-2 test added and decommissioned a pool within a minute). Those
// two are told "Decommissioned" for a pool they do not run; when their
// file then lists it Draining, and later not at all, they must take it as
// decommissioned and drop it. Before the fix they brought it up Draining,
// refused its removal ("not decommissioned; it keeps serving its objects"),
// and stayed not Ready for good once its servers were gone: a draining
// pool's sets counted in their read-quorum check.
func TestClusterPoolDecommissionedBeforeSomeNodesKnowIt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	first, added, late := []int{11, 12, 13, 14}, []int{15, 16}, []int{13, 14}
	a, b := c.poolSpec("pool-a", first, 2), c.poolSpec("pool-b", added, 2)
	c.writeTopologyFor(first, a)
	c.start(first)
	mustCreateBucket(t, c.nodes[11].aws(), "early")
	put(t, c.nodes[11].aws(), "early", "k", randomBytes(100))

	c.writeTopologyFor(added, a, b)
	c.writeTopologyFor([]int{11, 12}, a, b)
	c.start(added)
	waitFor(t, "pool-b known to nodes 11 and 12", 30*time.Second, func() bool {
		for _, n := range []int{11, 12} {
			if _, body := c.nodes[n].adminGet("info"); !strings.Contains(string(body), `"name": "pool-b"`) {
				return false
			}
		}
		return true
	})
	// The decommission as the operator asks for it: the pool listed
	// Draining, in the files of the nodes that know it.
	b["state"] = "Draining"
	c.writeTopologyFor(append([]int{11, 12}, added...), a, b)
	waitFor(t, "pool-b decommissioned", 60*time.Second, func() bool {
		var st decomStatus
		_, body := c.nodes[11].admin("GET", "pools/pool-b/decommission")
		_ = json.Unmarshal(body, &st)
		return st.State == "Decommissioned"
	})

	// The late nodes' file now lists pool-b as the operator wrote it when
	// the decommission was asked, then without it; its servers go.
	c.writeTopologyFor(late, a, b)
	waitFor(t, "pool-b brought up by the late nodes", 30*time.Second, func() bool {
		for _, n := range late {
			if _, body := c.nodes[n].adminGet("info"); !strings.Contains(string(body), `"name": "pool-b"`) {
				return false
			}
		}
		return true
	})
	for _, n := range late {
		var st decomStatus
		_, body := c.nodes[n].admin("GET", "pools/pool-b/decommission")
		if err := json.Unmarshal(body, &st); err != nil || st.State != "Decommissioned" {
			t.Errorf("node %d: pool-b brought up after it was decommissioned: %s", n, body)
		}
	}
	c.writeTopologyFor(first, a)
	for _, n := range added {
		c.nodes[n].kill()
	}
	waitFor(t, "pool-b dropped by every node, and every node Ready", 30*time.Second, func() bool {
		for _, n := range first {
			if _, body := c.nodes[n].adminGet("info"); strings.Contains(string(body), `"name": "pool-b"`) {
				return false
			}
			if httpStatus(t, c.nodes[n].url()+"/strata/health/ready") != http.StatusOK {
				return false
			}
		}
		return true
	})
	for _, n := range first {
		if got := get(t, c.nodes[n].aws(), "early", "k"); len(got) != 100 {
			t.Fatalf("node %d: read back %d bytes", n, len(got))
		}
	}
}

// TestClusterDrainWaitsUntilEveryNodeKnows: a pool is decommissioned
// through the topology (as the operator does it) while the nodes' copies of
// the topology say so at different times, and a writer keeps putting new
// objects through a node whose copy still says Active. The drain's leader
// tells every node the pool is draining, and waits for the writes they
// placed there, before it walks the pool: not one acknowledged object is
// lost. Before, the late node kept placing objects in the pool after its
// drain had passed them, the pool was called empty and decommissioned, and
// they were gone (the day-2 test on real kubelets lost one so).
func TestClusterDrainWaitsUntilEveryNodeKnows(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	first, added, late := []int{11, 12}, []int{13, 14}, []int{11}
	a, b := c.poolSpec("pool-a", first, 2), c.poolSpec("pool-b", added, 2)
	c.writeTopologyFor(append(first, added...), a, b)
	c.start(append(first, added...))
	mustCreateBucket(t, c.nodes[11].aws(), "drain")

	var mu sync.Mutex
	objs := corpus{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := c.nodes[late[0]].aws()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key, data := fmt.Sprintf("k%05d", i), randomBytes(1000)
			if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("drain"), Key: &key, Body: bytes.NewReader(data)}); err != nil {
				t.Errorf("put %s: %v", key, err)
				return
			}
			mu.Lock()
			objs[key] = data
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	time.Sleep(2 * time.Second) // objects in both pools

	b["state"] = "Draining"
	c.writeTopologyFor([]int{12, 13, 14}, a, b)
	waitFor(t, "pool-b decommissioned", 90*time.Second, func() bool {
		var st decomStatus
		_, body := c.nodes[13].admin("GET", "pools/pool-b/decommission")
		_ = json.Unmarshal(body, &st)
		return st.State == "Decommissioned"
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	c.writeTopologyFor(late, a, b)
	c.writeTopologyFor(append(first, added...), a)
	waitFor(t, "pool-b dropped by pool-a's nodes", 30*time.Second, func() bool {
		for _, n := range first {
			if _, body := c.nodes[n].adminGet("info"); strings.Contains(string(body), `"name": "pool-b"`) {
				return false
			}
		}
		return true
	})
	for _, n := range added {
		c.nodes[n].kill()
	}
	mu.Lock()
	defer mu.Unlock()
	missing := 0
	var first5 []string
	cl := c.nodes[12].aws()
	for key, want := range objs {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("drain"), Key: aws.String(key)})
		if err == nil {
			var got []byte
			got, err = io.ReadAll(out.Body)
			out.Body.Close()
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("%d bytes, not the ones written", len(got))
			}
		}
		if err != nil {
			missing++
			if len(first5) < 5 {
				first5 = append(first5, fmt.Sprintf("%s: %v", key, err))
			}
		}
	}
	t.Logf("%d objects written while pool-b drained, %d missing once it was gone", len(objs), missing)
	if missing > 0 {
		t.Fatalf("acknowledged objects lost with the decommissioned pool:\n%s", strings.Join(first5, "\n"))
	}
}
