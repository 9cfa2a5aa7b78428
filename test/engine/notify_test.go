package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
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
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// s3Event is what the tests read of an S3 event message.
type s3Event struct {
	Records []struct {
		EventName string `json:"eventName"`
		EventTime string `json:"eventTime"`
		S3        struct {
			ConfigurationID string `json:"configurationId"`
			Bucket          struct{ Name string }
			Object          struct {
				Key       string `json:"key"`
				Size      int64  `json:"size"`
				ETag      string `json:"eTag"`
				Sequencer string `json:"sequencer"`
			} `json:"object"`
		} `json:"s3"`
	}
}

func parseEvent(t testing.TB, b []byte) (name, key string, ev s3Event) {
	t.Helper()
	if err := json.Unmarshal(b, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("an event message that is not one S3 record (%v): %s", err, b)
	}
	k, err := url.QueryUnescape(ev.Records[0].S3.Object.Key)
	if err != nil {
		t.Fatalf("event key %q: %v", ev.Records[0].S3.Object.Key, err)
	}
	return ev.Records[0].EventName, k, ev
}

// natsBroker is a real nats-server with JetStream, started by the test,
// and a stream taking the subject s3.events. stop and start it again on
// its address and storage (the stream survives).
type natsBroker struct {
	t      *testing.T
	url    string
	args   []string
	log    *os.File
	cmd    *exec.Cmd
	js     jetstream.JetStream
	stream jetstream.Stream
}

func startNATS(t *testing.T) *natsBroker {
	t.Helper()
	bin := os.Getenv("STRATA_NATS_SERVER")
	if bin == "" {
		skipOutsideCI(t, "STRATA_NATS_SERVER is not set (make brokers builds bin/nats-server-VERSION)")
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	logFile, err := os.Create(filepath.Join(t.TempDir(), "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	b := &natsBroker{t: t, url: "nats://" + addr, args: []string{bin, "-a", host, "-p", port, "-js", "-sd", t.TempDir()}, log: logFile}
	b.start()
	t.Cleanup(b.stop)
	var nc *nats.Conn
	waitFor(t, "nats-server to accept connections", 20*time.Second, func() bool {
		nc, err = nats.Connect(b.url, nats.MaxReconnects(-1))
		return err == nil
	})
	t.Cleanup(nc.Close)
	if b.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	b.stream, err = b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "S3EVENTS", Subjects: []string{"s3.events"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *natsBroker) start() {
	b.cmd = exec.Command(b.args[0], b.args[1:]...)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
}

func (b *natsBroker) stop() {
	if b.cmd != nil {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
		b.cmd = nil
	}
}

// messages returns every message in the stream, in order.
func (b *natsBroker) messages(t *testing.T) [][]byte {
	t.Helper()
	var info *jetstream.StreamInfo
	var err error
	waitFor(t, "the stream's state", 20*time.Second, func() bool { // through a reconnection
		info, err = b.stream.Info(ctx)
		return err == nil
	})
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := b.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Data)
	}
	return out
}

// redisBroker is a real redis-server started by the test (from Debian's
// package: make brokers), its events read from the stream s3-events.
type redisBroker struct {
	url    string
	client *redis.Client
}

func startRedis(t *testing.T) *redisBroker {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipOutsideCI(t, "redis-server is not installed (make brokers installs it)")
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--bind", host, "--port", port, "--dir", t.TempDir(), "--appendonly", "yes", "--save", "")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	b := &redisBroker{url: "redis://" + addr + "/0", client: redis.NewClient(&redis.Options{Addr: addr})}
	t.Cleanup(func() { _ = b.client.Close() })
	waitFor(t, "redis-server to answer", 20*time.Second, func() bool { return b.client.Ping(ctx).Err() == nil })
	return b
}

// messages returns the events in the stream, in order.
func (b *redisBroker) messages(t *testing.T) [][]byte {
	t.Helper()
	entries, err := b.client.XRange(ctx, "s3-events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		out = append(out, []byte(e.Values["event"].(string)))
	}
	return out
}

// rabbitBroker is a real RabbitMQ (Debian's package: make brokers) on
// free ports, with a durable queue s3-events.
type rabbitBroker struct {
	url string
	ch  *amqp.Channel
}

func startRabbit(t *testing.T) *rabbitBroker {
	t.Helper()
	// Debian's /usr/sbin/rabbitmq-server runs this one through su, whose
	// session a kill of the test's process group does not reach: run it
	// as the rabbitmq user directly.
	const bin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	account, err := user.Lookup("rabbitmq")
	if _, serr := os.Stat(bin); serr != nil || err != nil {
		skipOutsideCI(t, "rabbitmq-server is not installed (make brokers installs it)")
	}
	uid, _ := strconv.Atoi(account.Uid)
	gid, _ := strconv.Atoi(account.Gid)
	// epmd, the Erlang port mapper, outlives the node: stopped after the
	// test unless it ran before.
	if exec.Command("pgrep", "-x", "epmd").Run() != nil {
		t.Cleanup(func() { _ = exec.Command("pkill", "-x", "epmd").Run() })
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	_, dist, _ := net.SplitHostPort(freeAddr(t))
	// The server drops to the rabbitmq user: its directories are that
	// user's.
	dir, err := os.MkdirTemp("", "rabbit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "rabbitmq:rabbitmq", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown for rabbitmq: %v: %s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "HOME="+dir, "RABBITMQ_NODENAME=rabbit-"+port+"@localhost", "RABBITMQ_NODE_IP_ADDRESS="+host,
		"RABBITMQ_NODE_PORT="+port, "RABBITMQ_DIST_PORT="+dist, "RABBITMQ_MNESIA_BASE="+dir+"/mnesia", "RABBITMQ_LOG_BASE="+dir+"/log",
		"RABBITMQ_CONFIG_FILE="+dir+"/rabbitmq", "RABBITMQ_ENABLED_PLUGINS_FILE="+dir+"/enabled_plugins")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	logFile, err := os.Create(filepath.Join(dir, "rabbit.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if out, err := exec.Command("pgrep", "-f", "rabbit-"+port+"@localhost").Output(); err == nil {
			t.Errorf("RabbitMQ node rabbit-%s@localhost still runs after the test: %s", port, out)
		}
	})
	b := &rabbitBroker{url: "amqp://guest:guest@" + addr + "/"}
	var conn *amqp.Connection
	waitFor(t, "RabbitMQ to accept connections", 60*time.Second, func() bool {
		conn, err = amqp.Dial(b.url)
		return err == nil
	})
	t.Cleanup(func() { _ = conn.Close() })
	if b.ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ch.QueueDeclare("s3-events", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// messages takes the queue's messages (they are gone from it after).
func (b *rabbitBroker) messages(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		m, ok, err := b.ch.Get("s3-events", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, m.Body)
	}
}

// webhookReceiver is an HTTP endpoint that keeps the messages POSTed to it.
type webhookReceiver struct {
	url string
	mu  sync.Mutex
	got [][]byte
	// down: it answers 503 and keeps nothing.
	down atomic.Bool
}

func startWebhook(t *testing.T) *webhookReceiver {
	w := &webhookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.got = append(w.got, b)
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *webhookReceiver) messages() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.got...)
}

// notifyTargets writes a targets file naming the webhook, the NATS stream
// (either may be nil) and the Redis and RabbitMQ brokers given, and
// returns the server's environment.
func notifyTargets(t *testing.T, hook *webhookReceiver, broker *natsBroker, more ...any) []string {
	t.Helper()
	var targets []map[string]string
	if hook != nil {
		targets = append(targets, map[string]string{"id": "hook", "type": "webhook", "endpoint": hook.url})
	}
	if broker != nil {
		targets = append(targets, map[string]string{"id": "jobs", "type": "nats", "endpoint": broker.url, "subject": "s3.events"})
	}
	for _, m := range more {
		switch m := m.(type) {
		case *redisBroker:
			targets = append(targets, map[string]string{"id": "cache", "type": "redis", "endpoint": m.url, "subject": "s3-events"})
		case *rabbitBroker:
			targets = append(targets, map[string]string{"id": "mq", "type": "amqp", "endpoint": m.url, "subject": "s3-events"})
		}
	}
	b, _ := json.Marshal(map[string]any{"targets": targets})
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"STRATA_NOTIFY_TARGETS_FILE=" + path}
}

// notifyDrained reports whether s's queue holds no undelivered events
// (its backlog metric).
func notifyDrained(t *testing.T, s *server) bool {
	code, families := scrapeMetrics(t, http.DefaultClient, s.url(), "")
	f := families["strata_notify_backlog_events"]
	return code == http.StatusOK && f != nil && len(f.Metric) == 1 && f.Metric[0].GetGauge().GetValue() == 0
}

const (
	hookARN  = "arn:strata:sqs:us-east-1:hook:webhook"
	natsARN  = "arn:strata:sqs:us-east-1:jobs:nats"
	redisARN = "arn:strata:sqs:us-east-1:cache:redis"
	amqpARN  = "arn:strata:sqs:us-east-1:mq:amqp"
)

// TestBucketNotifications: a bucket's notification configuration set and
// read through S3 (an unknown target and overlapping rules refused with
// InvalidArgument); PUT, copy, multipart completion and DELETE under one
// prefix reach a webhook as S3 event records, PUTs under another a NATS
// JetStream stream, the PUT and DELETE of a .png under a third a Redis stream, and a PUT
// under a fourth a RabbitMQ queue.
func TestBucketNotifications(t *testing.T) {
	broker := startNATS(t)
	hook := startWebhook(t)
	rb := startRedis(t)
	mq := startRabbit(t)
	s := startServer(t, serverOpts{drives: 4, env: notifyTargets(t, hook, broker, rb, mq)})
	c := s.aws()
	mustCreateBucket(t, c, "events")

	_, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String("arn:strata:sqs:us-east-1:nobody:webhook"), Events: []types.Event{"s3:ObjectCreated:*"}}}}})
	if errCode(err) != "InvalidArgument" {
		t.Fatalf("a configuration naming an unknown target: %v, want InvalidArgument", err)
	}
	_, err = c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{
			QueueConfigurations: []types.QueueConfiguration{{QueueArn: aws.String(hookARN), Events: []types.Event{"s3:ObjectCreated:*"}}},
			TopicConfigurations: []types.TopicConfiguration{{TopicArn: aws.String(natsARN), Events: []types.Event{"s3:ObjectCreated:Put"}}},
		}})
	if errCode(err) != "InvalidArgument" {
		t.Fatalf("two rules sharing an event type over every key: %v, want InvalidArgument", err)
	}
	_, err = c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{
			QueueConfigurations: []types.QueueConfiguration{{Id: aws.String("data"), QueueArn: aws.String(hookARN),
				Events: []types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*"},
				Filter: &types.NotificationConfigurationFilter{Key: &types.S3KeyFilter{FilterRules: []types.FilterRule{{Name: "prefix", Value: aws.String("data/")}}}}}},
			TopicConfigurations: []types.TopicConfiguration{{Id: aws.String("logs"), TopicArn: aws.String(natsARN),
				Events: []types.Event{"s3:ObjectCreated:Put"},
				Filter: &types.NotificationConfigurationFilter{Key: &types.S3KeyFilter{FilterRules: []types.FilterRule{{Name: "prefix", Value: aws.String("logs/")}}}}},
				{Id: aws.String("thumbs"), TopicArn: aws.String(redisARN), Events: []types.Event{"s3:ObjectRemoved:*", "s3:ObjectCreated:Put"},
					Filter: &types.NotificationConfigurationFilter{Key: &types.S3KeyFilter{FilterRules: []types.FilterRule{
						{Name: "prefix", Value: aws.String("img/")}, {Name: "suffix", Value: aws.String(".png")}}}}}},
			LambdaFunctionConfigurations: []types.LambdaFunctionConfiguration{{Id: aws.String("docs"), LambdaFunctionArn: aws.String(amqpARN),
				Events: []types.Event{"s3:ObjectCreated:*"},
				Filter: &types.NotificationConfigurationFilter{Key: &types.S3KeyFilter{FilterRules: []types.FilterRule{{Name: "prefix", Value: aws.String("docs/")}}}}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String("events")})
	if err != nil || len(got.QueueConfigurations) != 1 || len(got.TopicConfigurations) != 2 ||
		aws.ToString(got.TopicConfigurations[0].TopicArn) != natsARN || len(got.TopicConfigurations[0].Filter.Key.FilterRules) != 1 {
		t.Fatalf("GetBucketNotificationConfiguration: %+v %v", got, err)
	}

	body := randomBytes(1000)
	etag := aws.ToString(put(t, c, "events", "data/a file.txt", body).ETag)
	put(t, c, "events", "logs/x", []byte("x"))
	put(t, c, "events", "docs/readme", []byte("docs"))
	put(t, c, "events", "img/a.png", []byte("png"))
	put(t, c, "events", "img/a.jpg", []byte("jpg"))
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("events"), Key: aws.String("img/a.png")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("events"), Key: aws.String("data/b.txt"), CopySource: aws.String("events/data/a%20file.txt")}); err != nil {
		t.Fatal(err)
	}
	if err := uploadParts(c, "events", "data/big", [][]byte{randomBytes(5 << 20), randomBytes(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("events"), Key: aws.String("data/a file.txt")}); err != nil {
		t.Fatal(err)
	}

	want := []string{"ObjectCreated:Put data/a file.txt", "ObjectCreated:Copy data/b.txt",
		"ObjectCreated:CompleteMultipartUpload data/big", "ObjectRemoved:Delete data/a file.txt"}
	waitFor(t, "four events at the webhook", 10*time.Second, func() bool { return len(hook.messages()) >= len(want) })
	msgs := hook.messages()
	if len(msgs) != len(want) {
		t.Fatalf("the webhook got %d events, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		name, key, ev := parseEvent(t, m)
		if name+" "+key != want[i] {
			t.Errorf("event %d is %s %s, want %s", i, name, key, want[i])
		}
		r := ev.Records[0]
		if r.S3.Bucket.Name != "events" || r.S3.ConfigurationID != "data" || r.S3.Object.Sequencer == "" {
			t.Errorf("event %d: %s", i, m)
		}
		if i == 0 && (r.S3.Object.Size != 1000 || `"`+r.S3.Object.ETag+`"` != etag) {
			t.Errorf("the PUT's event says size %d, ETag %q; the PUT answered 1000 and %s", r.S3.Object.Size, r.S3.Object.ETag, etag)
		}
	}
	waitFor(t, "the PUT under logs/ at the NATS stream", 10*time.Second, func() bool { return len(broker.messages(t)) >= 1 })
	if nm := broker.messages(t); len(nm) != 1 {
		t.Fatalf("the stream holds %d events, want 1", len(nm))
	} else if name, key, _ := parseEvent(t, nm[0]); name != "ObjectCreated:Put" || key != "logs/x" {
		t.Fatalf("the stream's event is %s %s", name, key)
	}

	waitFor(t, "two events at the Redis stream", 10*time.Second, func() bool { return len(rb.messages(t)) >= 2 })
	var redisGot []string
	for _, m := range rb.messages(t) {
		name, key, _ := parseEvent(t, m)
		redisGot = append(redisGot, name+" "+key)
	}
	if strings.Join(redisGot, ", ") != "ObjectCreated:Put img/a.png, ObjectRemoved:Delete img/a.png" {
		t.Fatalf("the Redis stream holds %v", redisGot)
	}

	var amqpGot []string
	waitFor(t, "an event at the RabbitMQ queue", 10*time.Second, func() bool {
		for _, m := range mq.messages(t) {
			name, key, _ := parseEvent(t, m)
			amqpGot = append(amqpGot, name+" "+key)
		}
		return len(amqpGot) >= 1
	})
	if strings.Join(amqpGot, ", ") != "ObjectCreated:Put docs/readme" {
		t.Fatalf("the RabbitMQ queue held %v", amqpGot)
	}

	// No configuration: no events, and GET answers an empty one.
	if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{}}); err != nil {
		t.Fatal(err)
	}
	put(t, c, "events", "data/quiet", []byte("q"))
	got, err = c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String("events")})
	if err != nil || len(got.QueueConfigurations)+len(got.TopicConfigurations) != 0 {
		t.Fatalf("after turning notifications off: %+v %v", got, err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(hook.messages()); n != len(want) {
		t.Fatalf("%d events after notifications were turned off", n-len(want))
	}
}

// TestNotificationsSurviveKill9: the server holding the queue is killed
// with SIGKILL in the middle of a PUT and DELETE load and started again;
// every PUT and DELETE that was acknowledged has its event in the NATS
// stream (duplicates allowed, counted).
func TestNotificationsSurviveKill9(t *testing.T) {
	t.Parallel()
	broker := startNATS(t)
	s := startServer(t, serverOpts{drives: 4, env: notifyTargets(t, nil, broker)})
	c := s.aws()
	mustCreateBucket(t, c, "load")
	if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("load"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String(natsARN), Events: []types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}}}}}); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		acked = map[string]bool{} // "eventName key"
		stop  atomic.Bool
		fails atomic.Int64
	)
	noRetry := func(o *s3.Options) { o.RetryMaxAttempts = 1 }
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%d/%06d", w, i)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.PutObject(cctx, &s3.PutObjectInput{Bucket: aws.String("load"), Key: aws.String(key), Body: strings.NewReader("x")}, noRetry)
				if err == nil {
					mu.Lock()
					acked["ObjectCreated:Put "+key] = true
					mu.Unlock()
					if i%3 == 0 {
						_, err = c.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String("load"), Key: aws.String(key)}, noRetry)
						if err == nil {
							mu.Lock()
							acked["ObjectRemoved:Delete "+key] = true
							mu.Unlock()
						}
					}
				}
				cancel()
				if err != nil {
					fails.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(2 * time.Second)
	s.kill()
	s.restart()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 100 {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	var seen map[string]int
	var missing []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		seen, missing = map[string]int{}, nil
		for _, m := range broker.messages(t) {
			name, key, _ := parseEvent(t, m)
			seen[name+" "+key]++
		}
		for k := range acked {
			if seen[k] == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			t.Fatalf("%d of %d acknowledged writes have no event at the broker after 30 s, e.g. %v", len(missing), len(acked), missing[:min(5, len(missing))])
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d writes acknowledged (%d failed around the kill), %d events at the broker, %d duplicates", len(acked), fails.Load(), len(seen)+dups, dups)
}

// TestGatewayBucketNotifications: the gateway queues its events in the
// directory it serves and delivers them as the server does; tagging
// changes make ObjectTagging events.
func TestGatewayBucketNotifications(t *testing.T) {
	t.Parallel()
	hook := startWebhook(t)
	g := startGateway(t, t.TempDir())
	g.kill()
	g.env = notifyTargets(t, hook, nil)
	g.restart()
	c := g.aws()
	mustCreateBucket(t, c, "events")
	if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String(hookARN), Events: []types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"}}}}}); err != nil {
		t.Fatal(err)
	}
	put(t, c, "events", "k", []byte("v"))
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("events"), Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("stage"), Value: aws.String("raw")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String("events"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("events"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four events at the webhook", 10*time.Second, func() bool { return len(hook.messages()) >= 4 })
	var got []string
	for _, m := range hook.messages() {
		name, key, _ := parseEvent(t, m)
		got = append(got, name+" "+key)
	}
	if strings.Join(got, ", ") != "ObjectCreated:Put k, ObjectTagging:Put k, ObjectTagging:Delete k, ObjectRemoved:Delete k" {
		t.Fatalf("the webhook got %v", got)
	}
	if out, err := c.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil || len(out.Buckets) != 1 {
		t.Fatalf("ListBuckets shows %d buckets (%v): the queue's own must not be one", len(out.Buckets), err)
	}
}

// TestNotificationsOfALostNode: a node of four stores events while the
// broker is down, then is killed with SIGKILL and never comes back; once
// the broker is up, the other nodes deliver every event of every PUT and
// DELETE the lost node acknowledged (its batches are erasure-coded like
// any object; STRATA_TEST_NOTIFY_TAKEOVER shortens the minute they wait
// for their node).
func TestNotificationsOfALostNode(t *testing.T) {
	t.Parallel()
	broker := startNATS(t)
	c := newCluster(t)
	nodes := []int{11, 12, 13, 14}
	env := append(notifyTargets(t, nil, broker), "STRATA_TEST_NOTIFY_TAKEOVER=2s")
	c.env = map[int][]string{}
	for _, n := range nodes {
		c.env[n] = env
	}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	first := c.nodes[11].aws()
	mustCreateBucket(t, first, "lost")
	if _, err := first.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("lost"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String(natsARN), Events: []types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}}}}}); err != nil {
		t.Fatal(err)
	}

	broker.stop()
	lost := c.nodes[12].aws()
	var want []string
	for i := range 60 {
		key := fmt.Sprintf("k%03d", i)
		put(t, lost, "lost", key, []byte(key))
		want = append(want, "ObjectCreated:Put "+key)
		if i%3 == 0 {
			if _, err := lost.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("lost"), Key: aws.String(key)}); err != nil {
				t.Fatal(err)
			}
			want = append(want, "ObjectRemoved:Delete "+key)
		}
	}
	c.nodes[12].kill()
	broker.start()

	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		seen := map[string]int{}
		for _, m := range broker.messages(t) {
			name, key, _ := parseEvent(t, m)
			seen[name+" "+key]++
		}
		var missing []string
		for _, w := range want {
			if seen[w] == 0 {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			t.Logf("%d events of the lost node delivered by the others (%d messages)", len(want), len(broker.messages(t)))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events of the lost node not delivered after 45 s, e.g. %v", len(missing), len(want), missing[:min(5, len(missing))])
		}
	}
}

// TestLifecycleExpirationEvents: expirations made by lifecycle rules make
// s3:LifecycleExpiration events: Delete for a version removed (an
// unversioned bucket), DeleteMarkerCreated for a current version hidden (a
// versioned one). A day is a second here (STRATA_TEST_LIFECYCLE_DAY).
func TestLifecycleExpirationEvents(t *testing.T) {
	t.Parallel()
	hook := startWebhook(t)
	s := startServer(t, serverOpts{drives: 4, extra: []string{"--lifecycle-interval", "300ms"},
		env: append(notifyTargets(t, hook, nil), "STRATA_TEST_LIFECYCLE_DAY=1s")})
	c := s.aws()
	mustCreateBucket(t, c, "scratch")
	versionedBucket(t, c, "kept")
	for _, b := range []string{"scratch", "kept"} {
		if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(b),
			NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
				QueueArn: aws.String(hookARN), Events: []types.Event{"s3:LifecycleExpiration:*"}}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(b),
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("tmp"),
				Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}}}}); err != nil {
			t.Fatal(err)
		}
		put(t, c, b, "tmp/a", []byte("expires"))
		put(t, c, b, "keep/b", []byte("stays"))
	}
	waitFor(t, "two expiration events", 30*time.Second, func() bool { return len(hook.messages()) >= 2 })
	got := map[string]string{}
	for _, m := range hook.messages() {
		name, key, ev := parseEvent(t, m)
		got[ev.Records[0].S3.Bucket.Name] = name + " " + key
	}
	want := map[string]string{"scratch": "LifecycleExpiration:Delete tmp/a", "kept": "LifecycleExpiration:DeleteMarkerCreated tmp/a"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestTargetsFileReadAgain: a running server takes the targets file's
// changes without a restart, as the operator's Secret changes under a pod:
// a webhook and a replication remote added are known within seconds and
// take their events and copies; a broken file is refused (counted, the
// targets in force kept); a target removed is dropped with its events
// (after the grace, shortened here), and the process that started is the
// one that answers throughout.
func TestTargetsFileReadAgain(t *testing.T) {
	t.Parallel()
	hook, later := startWebhook(t), startWebhook(t)
	dst := startServer(t, serverOpts{drives: 4})
	path := filepath.Join(t.TempDir(), "targets.json")
	writeTargets := func(body string) {
		t.Helper()
		// As the kubelet updates a mounted Secret: the new file renamed
		// over the old one.
		if err := os.WriteFile(path+".new", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	hookEntry := fmt.Sprintf(`{"id":"hook","type":"webhook","endpoint":%q}`, hook.url)
	laterEntry := fmt.Sprintf(`{"id":"later","type":"webhook","endpoint":%q}`, later.url)
	drEntry := fmt.Sprintf(`{"id":"dr","type":"s3","endpoint":%q,"username":%q,"password":%q}`, dst.url(), rootUser, rootPassword)
	writeTargets(`{"targets":[` + hookEntry + `]}`)
	// Events for a target removed are dropped once a second old (not two
	// minutes: UnknownGrace).
	s := startServer(t, serverOpts{drives: 4, env: []string{"STRATA_NOTIFY_TARGETS_FILE=" + path, "STRATA_TEST_NOTIFY_UNKNOWN_GRACE=1s"}})
	pid := s.cmd.Process.Pid
	c, dc := s.aws(), dst.aws()
	mustCreateBucket(t, c, "events")
	const laterARN = "arn:strata:sqs:us-east-1:later:webhook"
	notifyTo := func(arn string) error {
		_, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
			NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
				QueueArn: aws.String(arn), Events: []types.Event{"s3:ObjectCreated:*"}}}}})
		return err
	}
	if err := notifyTo(laterARN); errCode(err) != "InvalidArgument" {
		t.Fatalf("a target not yet in the file: %v, want InvalidArgument", err)
	}
	metric := func(name string) float64 {
		_, families := scrapeMetrics(t, http.DefaultClient, s.url(), "")
		if f := families[name]; f != nil && len(f.Metric) == 1 {
			if g := f.Metric[0].GetGauge(); g != nil {
				return g.GetValue()
			}
			return f.Metric[0].GetCounter().GetValue()
		}
		return -1
	}

	writeTargets(`{"targets":[` + hookEntry + `,` + laterEntry + `,` + drEntry + `]}`)
	added := time.Now()
	waitFor(t, "the added webhook known", 15*time.Second, func() bool { return notifyTo(laterARN) == nil })
	t.Logf("the added targets were in force %s after the file changed", time.Since(added).Round(time.Millisecond))
	if n := metric("strata_notify_targets"); n != 3 {
		t.Fatalf("strata_notify_targets %v, want 3", n)
	}
	put(t, c, "events", "one", []byte("1"))
	waitFor(t, "the event at the added webhook", 10*time.Second, func() bool { return len(later.messages()) == 1 })
	versionedBucket(t, c, "src")
	versionedBucket(t, dc, "dst")
	replicateAll(t, s, "src", "dst")
	put(t, c, "src", "copied", []byte("to the added remote"))
	sameVersions(t, c, dc, "src", "dst", 30*time.Second)

	writeTargets(`{"targets":[` + hookEntry) // cut short
	waitFor(t, "the broken file counted", 15*time.Second, func() bool { return metric("strata_notify_targets_file_errors_total") > 0 })
	put(t, c, "events", "two", []byte("2"))
	waitFor(t, "the event after the broken file", 10*time.Second, func() bool { return len(later.messages()) == 2 })
	if n := metric("strata_notify_targets"); n != 3 {
		t.Fatalf("strata_notify_targets %v after a broken file, want the 3 in force", n)
	}

	writeTargets(`{"targets":[` + hookEntry + `,` + drEntry + `]}`)
	waitFor(t, "the removed webhook unknown", 15*time.Second, func() bool { return errCode(notifyTo(laterARN)) == "InvalidArgument" })
	// The bucket's configuration still names it: the event is dropped.
	put(t, c, "events", "three", []byte("3"))
	waitFor(t, "the backlog drained", 10*time.Second, func() bool { return notifyDrained(t, s) })
	if err := notifyTo(hookARN); err != nil {
		t.Fatal(err)
	}
	put(t, c, "events", "four", []byte("4"))
	waitFor(t, "the event at the webhook kept", 10*time.Second, func() bool { return len(hook.messages()) == 1 })
	if n := len(later.messages()); n != 2 {
		t.Fatalf("the removed webhook got %d events, want 2", n)
	}
	select {
	case <-s.done:
		t.Fatalf("the server exited:\n%s", s.logs())
	default:
	}
	if s.cmd.Process.Pid != pid {
		t.Fatal("the server was restarted")
	}
}
