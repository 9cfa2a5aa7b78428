package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// cluster is several strata server processes on 127.0.0.x loopback
// addresses, sharing a topology file.
type cluster struct {
	t        *testing.T
	port     int // S3 port, the same on every node (each has its own IP)
	rpcPort  int
	root     string
	topoFile string
	// topoFiles gives some nodes a topology file of their own (as pods
	// whose ConfigMap volume kubelet updates each at its own time).
	topoFiles map[int]string
	nodes     map[int]*server // by last octet
	// env adds environment variables for some nodes.
	env map[int][]string
	// bins runs some nodes with another strata binary.
	bins map[int]string
	// extra adds flags for some nodes.
	extra map[int][]string
	// net, when set, runs every node in a network namespace of its own on
	// a bridge (see netns_test.go) instead of on loopback.
	net *bridge
}

// freePort finds a port free on the wildcard address (so free on every
// loopback IP).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, port: freePort(t), rpcPort: freePort(t), root: t.TempDir(), nodes: map[int]*server{}}
	c.topoFile = filepath.Join(c.root, "topology.json")
	return c
}

func (c *cluster) ip(node int) string {
	if c.net != nil {
		return c.net.ip(node)
	}
	return fmt.Sprintf("127.0.0.%d", node)
}

// poolSpec is a pool of drives per node on the given nodes.
func (c *cluster) poolSpec(name string, nodes []int, drives int) map[string]any {
	var eps []string
	for _, n := range nodes {
		eps = append(eps, fmt.Sprintf("http://%s:%d%s/n%d/%s-d{1...%d}", c.ip(n), c.port, c.root, n, name, drives))
	}
	return map[string]any{"name": name, "endpoints": eps}
}

func (c *cluster) writeTopology(pools ...map[string]any) {
	c.t.Helper()
	c.writeTopologyTo(c.topoFile, pools...)
}

// writeTopologyFor writes the topology file of the given nodes only.
func (c *cluster) writeTopologyFor(nodes []int, pools ...map[string]any) {
	c.t.Helper()
	if c.topoFiles == nil {
		c.topoFiles = map[int]string{}
	}
	for _, n := range nodes {
		c.topoFiles[n] = filepath.Join(c.root, fmt.Sprintf("topology-n%d.json", n))
		c.writeTopologyTo(c.topoFiles[n], pools...)
	}
}

func (c *cluster) writeTopologyTo(path string, pools ...map[string]any) {
	c.t.Helper()
	b, _ := json.MarshalIndent(map[string]any{"version": 1, "pools": pools}, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		c.t.Fatal(err)
	}
}

// start starts the given nodes (processes), and waits until all of them
// are ready.
func (c *cluster) start(nodes []int) {
	c.t.Helper()
	c.launch(nodes)
	for _, n := range nodes {
		c.nodes[n].waitReady()
	}
}

// launch starts the given nodes (processes) without waiting for them.
func (c *cluster) launch(nodes []int) {
	c.t.Helper()
	for _, n := range nodes {
		s := &server{t: c.t, addr: net.JoinHostPort(c.ip(n), strconv.Itoa(c.port)), env: c.env[n], bin: c.bins[n]}
		if c.net != nil {
			s.netns = c.net.join(n)
		}
		topo := c.topoFile
		if f, ok := c.topoFiles[n]; ok {
			topo = f
		}
		s.args = []string{"server", "--address", s.addr, "--internode-port", strconv.Itoa(c.rpcPort), "--topology", topo,
			"--drive-monitor-interval", "500ms", "--shutdown-delay", "0s", "--log-level", "debug",
			// Loopback or private namespaces, no TLS.
			"--insecure-internode", "--admin-over-http"}
		s.args = append(s.args, c.extra[n]...)
		s.startProcess()
		c.nodes[n] = s
		c.t.Cleanup(func() {
			s.kill()
			if strings.Contains(s.logs(), "WARNING: DATA RACE") {
				c.t.Errorf("node %s: data race (see its log)", s.addr)
			}
			if c.t.Failed() {
				dir := filepath.Join(os.TempDir(), "strata-test-logs", c.t.Name())
				_ = os.MkdirAll(dir, 0o755)
				f := filepath.Join(dir, s.addr+".log")
				_ = os.WriteFile(f, []byte(s.logs()), 0o644)
				c.t.Logf("node %s log: %s", s.addr, f)
			}
		})
	}
}

// TestClusterServesFromEveryNode: four nodes with two drives each form one
// pool; an object written through one node reads back through every other,
// with both clients.
func TestClusterServesFromEveryNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	objs := writeCorpus(t, c.nodes[11], "shared")
	for _, n := range nodes {
		checkCorpus(t, c.nodes[n], "shared", objs)
	}
	// A node learns that a peer finished starting (and serves its drives)
	// at its next ping, within a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := c.nodes[12].adminGet("info")
		if code == 200 && strings.Count(string(body), `"state": "online"`) == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin info from a node: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Every node's health gate: one node may go down for maintenance.
	for _, n := range nodes {
		if got := httpStatus(t, c.nodes[n].url()+"/strata/health/cluster?maintenance=true"); got != 200 {
			t.Fatalf("node %d: maintenance gate %d with every node up", n, got)
		}
	}
	bucketChangesSeenAtOnce(t, c, nodes, "shared")
}

// bucketChangesSeenAtOnce: a bucket setting changed through one node is
// what the next request through any other node sees, though every node
// has the bucket's record cached: the change is acknowledged once the
// online peers have dropped theirs. Versioning goes back and forth
// through each node in turn.
func bucketChangesSeenAtOnce(t *testing.T, c *cluster, nodes []int, bucket string) {
	t.Helper()
	versioning := func(n int) types.BucketVersioningStatus {
		out, err := c.nodes[n].aws().GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("GetBucketVersioning through node %d: %v", n, err)
		}
		return out.Status
	}
	for round := range 12 {
		for _, n := range nodes {
			versioning(n) // every node holds the record now
		}
		want := []types.BucketVersioningStatus{types.BucketVersioningStatusEnabled, types.BucketVersioningStatusSuspended}[round%2]
		by := nodes[round%len(nodes)]
		if _, err := c.nodes[by].aws().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
			VersioningConfiguration: &types.VersioningConfiguration{Status: want}}); err != nil {
			t.Fatalf("PutBucketVersioning through node %d: %v", by, err)
		}
		for _, n := range nodes {
			if got := versioning(n); got != want {
				t.Fatalf("round %d: versioning set to %s through node %d, node %d answers %q", round, want, by, n, got)
			}
		}
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterNodeKilledUnderLoad: one node of four is killed with -9 while
// clients write and read through the others; writes succeed (write quorum
// holds: 6 of 8 drives), reads return correct bytes, no request hangs; the
// node restarts, rejoins and heals what it missed.
func TestClusterNodeKilledUnderLoad(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	mustCreateBucket(t, c.nodes[11].aws(), "load")

	var mu sync.Mutex
	written := map[string][]byte{}
	var failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			via := c.nodes[nodes[w%3]] // nodes 11..13 stay up
			cl := via.aws()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d/k%04d", w, i)
				data := randomBytes([]int{100, 5000, 200 << 10, 1 << 20}[i%4])
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("load"), Key: &key, Body: bytes.NewReader(data)})
				cancel()
				if err != nil {
					if failures.Add(1) < 5 {
						t.Errorf("write %s through %s during the node loss: %v", key, via.addr, err)
					}
					continue
				}
				mu.Lock()
				written[key] = data
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	c.nodes[14].kill()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d writes failed while write quorum held", failures.Load())
	}
	if len(written) < 20 {
		t.Fatalf("only %d objects written under load", len(written))
	}
	for key, want := range written {
		if got := get(t, c.nodes[12].aws(), "load", key); !bytes.Equal(got, want) {
			t.Fatalf("%s wrong with a node down", key)
		}
	}
	// The node rejoins, and the nodes that wrote while it was away heal
	// what it missed.
	c.nodes[14].restart()
	waitFor(t, "node 14's peers see it online", 30*time.Second, func() bool {
		return httpStatus(t, c.nodes[11].url()+"/strata/health/cluster?maintenance=true") == 200
	})
	for _, n := range nodes {
		c.nodes[n].waitHealed(t)
	}
	// Proof: with two other nodes gone, node 14's drives must hold their
	// shards (4 of 8 drives left = the data shards).
	c.nodes[12].kill()
	c.nodes[13].kill()
	waitFor(t, "node 11 notices the lost nodes", 30*time.Second, func() bool {
		return httpStatus(t, c.nodes[11].url()+"/strata/health/cluster") != 200
	})
	for key, want := range written {
		if got := get(t, c.nodes[11].aws(), "load", key); !bytes.Equal(got, want) {
			t.Fatalf("%s wrong after the rejoined node healed", key)
		}
	}
}

// TestClusterConcurrentOverwrites: writers on one key through every node
// end with one winner that every node agrees on.
func TestClusterConcurrentOverwrites(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	mustCreateBucket(t, c.nodes[11].aws(), "race")
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := randomBytes([]int{300, 300 << 10}[round%2])
				_, err := c.nodes[nodes[w%4]].aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("race"), Key: aws.String("hot"), Body: bytes.NewReader(data)})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
			}()
		}
		wg.Wait()
		var etags []string
		for _, n := range nodes {
			h, err := c.nodes[n].aws().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("race"), Key: aws.String("hot")})
			if err != nil {
				t.Fatal(err)
			}
			etags = append(etags, *h.ETag)
		}
		for _, e := range etags[1:] {
			if e != etags[0] {
				t.Fatalf("round %d: nodes disagree on the winner: %v", round, etags)
			}
		}
		vs, _ := c.nodes[13].aws().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("race")})
		if len(vs.Versions) != 1 || *vs.Versions[0].ETag != etags[0] {
			t.Fatalf("round %d: versions left behind: %+v", round, vs.Versions)
		}
	}
}

// TestClusterVersionSkew: nodes speaking older internode protocols work
// with nodes speaking the current one (3, the framed channel): node 14
// speaks 2 (batches over HTTP/2, no frames), node 13 speaks 1 (no batches).
func TestClusterVersionSkew(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.env = map[int][]string{14: {"STRATA_INTERNODE_PROTOCOL=2"}, 13: {"STRATA_INTERNODE_PROTOCOL=1"}}
	c.start(nodes)
	objs := writeCorpus(t, c.nodes[14], "skew")
	for _, n := range nodes {
		checkCorpus(t, c.nodes[n], "skew", objs)
	}
	more := writeCorpus(t, c.nodes[11], "skew2")
	checkCorpus(t, c.nodes[14], "skew2", more)
	checkCorpus(t, c.nodes[13], "skew2", more)
}

// TestClusterMixedBuilds: nodes of the previous build (STRATA_PREVIOUS_BIN,
// which make engine-integration builds from PREVIOUS_REV) and of this one
// serve one pool together, each reading what the other wrote: the wire
// format of every internode operation is unchanged between them.
func TestClusterMixedBuilds(t *testing.T) {
	t.Parallel()
	prev := os.Getenv("STRATA_PREVIOUS_BIN")
	if prev == "" {
		// hack/build-previous.sh builds it from git history; a shallow
		// clone has none, and only there may the test skip.
		skipOutsideCI(t, "STRATA_PREVIOUS_BIN not set (make engine-integration builds it from PREVIOUS_REV)")
	}
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.bins = map[int]string{11: prev, 13: prev}
	c.start(nodes)
	objs := writeCorpus(t, c.nodes[11], "mixed")
	for _, n := range nodes {
		checkCorpus(t, c.nodes[n], "mixed", objs)
	}
	more := writeCorpus(t, c.nodes[12], "mixed2")
	checkCorpus(t, c.nodes[13], "mixed2", more)
	checkCorpus(t, c.nodes[14], "mixed2", more)
	mixedBuildsOperations(t, c.nodes[13].aws(), c.nodes[14].aws())
}

// mixedBuildsOperations runs the operations a corpus does not (versions,
// tags, deletes, listings, multipart) with one client on each build.
func mixedBuildsOperations(t *testing.T, old, cur *s3.Client) {
	t.Helper()
	mustCreateBucket(t, cur, "ops")
	if _, err := old.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("ops"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	v1 := put(t, old, "ops", "doc", []byte("one"))
	put(t, cur, "ops", "doc", []byte("two"))
	if _, err := old.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("ops"), Key: aws.String("doc"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatal(err)
	}
	if tags, err := cur.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String("ops"), Key: aws.String("doc")}); err != nil || len(tags.TagSet) != 1 {
		t.Fatalf("tags written by the old build: %v %v", tags, err)
	}
	if _, err := cur.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("ops"), Key: aws.String("doc"), VersionId: v1.VersionId}); err != nil {
		t.Fatal(err)
	}
	vs, err := old.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("ops")})
	if err != nil || len(vs.Versions) != 1 {
		t.Fatalf("versions after a delete by the new build: %v %v", vs, err)
	}
	up, err := old.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("ops"), Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	part := randomBytes(5 << 20)
	var parts []types.CompletedPart
	for i, c := range []*s3.Client{cur, old} {
		n := int32(i + 1)
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("ops"), Key: aws.String("mp"), UploadId: up.UploadId,
			PartNumber: &n, Body: bytes.NewReader(part)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: &n})
	}
	if ups, err := cur.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("ops")}); err != nil || len(ups.Uploads) != 1 {
		t.Fatalf("uploads started by the old build: %v %v", ups, err)
	}
	if _, err := cur.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("ops"), Key: aws.String("mp"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, old, "ops", "mp"); !bytes.Equal(got, append(append([]byte{}, part...), part...)) {
		t.Fatalf("multipart object: %d bytes", len(got))
	}
	l, err := old.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("ops")})
	if err != nil || len(l.Contents) != 2 {
		t.Fatalf("listing: %v %v", l, err)
	}
}

// waitPoolInUse waits until each of the nodes runs pool.
func (c *cluster) waitPoolInUse(pool string, nodes ...int) {
	c.t.Helper()
	waitFor(c.t, pool+" in use by nodes "+fmt.Sprint(nodes), 30*time.Second, func() bool {
		for _, n := range nodes {
			if _, body := c.nodes[n].adminGet("info"); !strings.Contains(string(body), `"name": "`+pool+`"`) {
				return false
			}
		}
		return true
	})
}

// TestClusterDecommissionWaitsForStoredEvents: a pool whose drives hold
// writes' events not yet delivered (the webhook is down) is drained of its
// objects but not Decommissioned, so the events are not lost with it; once
// the webhook answers they are delivered and the pool is.
func TestClusterDecommissionWaitsForStoredEvents(t *testing.T) {
	t.Parallel()
	hook := startWebhook(t)
	hook.down.Store(true)
	c := newCluster(t)
	targets := notifyTargets(t, hook, nil)
	c.env = map[int][]string{11: targets, 12: targets, 13: targets, 14: targets}
	poolA := c.poolSpec("pool-a", []int{11, 12}, 2)
	c.writeTopology(poolA)
	c.start([]int{11, 12})
	cl := c.nodes[11].aws()
	mustCreateBucket(t, cl, "events")
	if _, err := cl.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String(hookARN), Events: []types.Event{"s3:ObjectCreated:*"}}}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		put(t, cl, "events", fmt.Sprintf("k%d", i), randomBytes(1000))
	}
	poolB := c.poolSpec("pool-b", []int{13, 14}, 2)
	c.writeTopology(poolA, poolB)
	c.start([]int{13, 14})
	c.waitPoolInUse("pool-b", 11, 12)
	if code, body := c.nodes[12].admin("POST", "pools/pool-a/decommission"); code != http.StatusAccepted {
		t.Fatalf("starting the decommission: %d %s", code, body)
	}
	var st decomStatus
	waitFor(t, "pool-a's objects moved", 60*time.Second, func() bool {
		_, body := c.nodes[11].admin("GET", "pools/pool-a/decommission")
		_ = json.Unmarshal(body, &st)
		return st.ObjectsMoved >= 5
	})
	time.Sleep(5 * time.Second) // passes of the decommission that find it drained
	_, body := c.nodes[11].admin("GET", "pools/pool-a/decommission")
	if err := json.Unmarshal(body, &st); err != nil || st.State == "Decommissioned" {
		t.Fatalf("pool-a decommissioned with its events undelivered: %s", body)
	}
	hook.down.Store(false)
	waitFor(t, "the events delivered and pool-a decommissioned", 120*time.Second, func() bool {
		_, body := c.nodes[11].admin("GET", "pools/pool-a/decommission")
		_ = json.Unmarshal(body, &st)
		return st.State == "Decommissioned"
	})
	if n := len(hook.messages()); n < 5 {
		t.Fatalf("%d events delivered, want 5", n)
	}
}

type decomStatus struct {
	State        string `json:"state"`
	Done         bool   `json:"done"`
	ObjectsMoved int64  `json:"objectsMoved"`
}

// TestClusterAddPoolLiveThenDecommission: a pool appended to the topology
// file is formatted by its own nodes and used by the running ones without a
// restart; then the first pool is decommissioned under load: its objects
// (every version) move to the new pool, and once empty it is removed.
func TestClusterAddPoolLiveThenDecommission(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	poolA := c.poolSpec("pool-a", []int{11, 12}, 2)
	c.writeTopology(poolA)
	c.start([]int{11, 12})
	cl := c.nodes[11].aws()
	mustCreateBucket(t, cl, "grow")
	if _, err := cl.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("grow"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	objs := corpus{}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("before/%02d", i)
		put(t, cl, "grow", key, randomBytes(10))
		objs[key] = randomBytes([]int{3000, 300 << 10}[i%2]) // a second version
		put(t, cl, "grow", key, objs[key])
	}

	// Expand: pool B on two new nodes.
	poolB := c.poolSpec("pool-b", []int{13, 14}, 2)
	c.writeTopology(poolA, poolB)
	c.start([]int{13, 14})
	c.waitPoolInUse("pool-b", 11, 12)
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("after/%02d", i)
		objs[key] = randomBytes(2000)
		put(t, c.nodes[12].aws(), "grow", key, objs[key])
	}
	checkCorpus(t, c.nodes[14], "grow", objs)

	// Decommission pool A while a writer keeps writing.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("during/%03d", i)
			data := randomBytes(1500)
			if _, err := c.nodes[13].aws().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("grow"), Key: &key, Body: bytes.NewReader(data)}); err != nil {
				t.Errorf("write during decommission: %v", err)
				return
			}
			mu.Lock()
			objs[key] = data
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if code, body := c.nodes[12].admin("POST", "pools/pool-a/decommission"); code != http.StatusAccepted {
		t.Fatalf("starting the decommission: %d %s", code, body)
	}
	var st decomStatus
	waitFor(t, "pool-a drained", 120*time.Second, func() bool {
		_, body := c.nodes[11].admin("GET", "pools/pool-a/decommission")
		_ = json.Unmarshal(body, &st)
		return st.State == "Decommissioned"
	})
	close(stop)
	wg.Wait()
	if st.ObjectsMoved < 30 {
		t.Fatalf("only %d objects moved", st.ObjectsMoved)
	}
	// Every version moved: each "before" key still has its two versions.
	vs, err := c.nodes[14].aws().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("grow"), Prefix: aws.String("before/")})
	if err != nil || len(vs.Versions) != 60 {
		t.Fatalf("versions after the move: %d (%v)", len(vs.Versions), err)
	}
	// A topology that still says Draining (the operator's ConfigMap,
	// written before the drain ended, or loaded late by a node) does not
	// take the pool back from Decommissioned on any node, those without a
	// drive in it included.
	poolA["state"] = "Draining"
	c.writeTopology(poolA, poolB)
	time.Sleep(5 * time.Second) // two of the watcher's reads
	for _, n := range []int{11, 12, 13, 14} {
		var got decomStatus
		_, body := c.nodes[n].admin("GET", "pools/pool-a/decommission")
		if err := json.Unmarshal(body, &got); err != nil || got.State != "Decommissioned" {
			t.Fatalf("node %d after a topology saying Draining: %s", n, body)
		}
	}
	// Pool A's nodes can go: everything is served from pool B.
	c.writeTopology(poolB)
	waitFor(t, "pool-a gone from every node's admin info", 30*time.Second, func() bool {
		for _, n := range []int{11, 12, 13, 14} {
			if _, body := c.nodes[n].adminGet("info"); strings.Contains(string(body), `"name": "pool-a"`) {
				return false
			}
		}
		return true
	})
	c.nodes[11].kill()
	c.nodes[12].kill()
	mu.Lock()
	defer mu.Unlock()
	checkCorpus(t, c.nodes[13], "grow", objs)
}

// TestClusterNeedsTLSOrSaysInsecure: a clustered server refuses to start
// without certificates, naming the way out; with --insecure-internode it
// starts and says so in its log. Certificates without ca.crt are enough:
// the peers are then verified against the system roots, which it says.
func TestClusterNeedsTLSOrSaysInsecure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	topo := filepath.Join(dir, "topology.json")
	doc := fmt.Sprintf(`{"version":1,"pools":[{"name":"pool-0","endpoints":["http://127.0.0.1:%d%s/d{1...4}"]}]}`, port, dir)
	if err := os.WriteFile(topo, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"server", "--address", fmt.Sprintf("127.0.0.1:%d", port), "--internode-port", strconv.Itoa(freePort(t)),
			"--topology", topo, "--shutdown-delay", "0s"}, extra...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args()...)
	cmd.Env = append(os.Environ(), "STRATA_ROOT_USER="+rootUser, "STRATA_ROOT_PASSWORD="+rootPassword)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no --certs-dir") || !strings.Contains(string(out), "--insecure-internode") {
		t.Errorf("without certificates: started or said something else (%v):\n%s", err, out)
	}

	certs := t.TempDir()
	writeCert(t, certs, 1) // tls.crt and tls.key, no ca.crt
	verified := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), args: args("--certs-dir", certs)}
	verified.startProcess()
	t.Cleanup(verified.kill)
	waitFor(t, "a start with certificates but no ca.crt", 30*time.Second, func() bool {
		return strings.Contains(verified.logs(), "serving S3") && strings.Contains(verified.logs(), "verified against the system roots")
	})
	verified.kill()

	s := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), args: args("--insecure-internode")}
	s.start()
	t.Cleanup(s.kill)
	if !strings.Contains(s.logs(), "not encrypted nor its peers verified (--insecure-internode)") {
		t.Errorf("the insecure start was not logged:\n%s", s.logs())
	}
	mustCreateBucket(t, s.aws(), "insecure")
}
