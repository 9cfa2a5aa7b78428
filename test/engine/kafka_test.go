package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaBroker is a real Kafka broker (one KRaft node, broker and
// controller, from the jars make brokers copies from Maven Central) run
// with the JDK on free ports of 127.0.0.1.
type kafkaBroker struct {
	t          *testing.T
	addr, conf string
	libs       string
	log        *os.File
	cmd        *exec.Cmd
}

func startKafka(t *testing.T) *kafkaBroker {
	t.Helper()
	libs := os.Getenv("STRATA_KAFKA_LIBS")
	if libs == "" {
		skipOutsideCI(t, "STRATA_KAFKA_LIBS is not set (make brokers copies Kafka's jars into bin/kafka-VERSION/libs)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		skipOutsideCI(t, "java is not installed (Kafka's broker runs on it)")
	}
	dir := t.TempDir()
	addr, controller := freeAddr(t), freeAddr(t)
	conf := filepath.Join(dir, "server.properties")
	props := strings.Join([]string{
		"process.roles=broker,controller", "node.id=1",
		"controller.quorum.voters=1@" + controller,
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + controller,
		"advertised.listeners=PLAINTEXT://" + addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=3", "offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	format := exec.Command("java", "-cp", filepath.Join(libs, "*"), "kafka.tools.StorageTool", "format",
		"-t", base64.RawURLEncoding.EncodeToString(id), "-c", conf)
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("formatting Kafka's storage: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(dir, "kafka.log"))
	if err != nil {
		t.Fatal(err)
	}
	b := &kafkaBroker{t: t, addr: addr, conf: conf, libs: libs, log: logFile}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *kafkaBroker) start() {
	b.cmd = exec.Command("java", "-Xmx384m", "-cp", filepath.Join(b.libs, "*"), "kafka.Kafka", b.conf)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	waitFor(b.t, "Kafka to accept connections", 90*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}

func (b *kafkaBroker) stop() {
	if b.cmd != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		_ = b.cmd.Wait()
		b.cmd = nil
	}
}

// createTopic makes a topic of 3 partitions (the target produces only to
// a topic that exists, as a NATS target needs its stream).
func (b *kafkaBroker) createTopic(t *testing.T, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
	req.Topics = append(req.Topics, rt)
	waitFor(t, "the topic made", 30*time.Second, func() bool {
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
	})
}

// records reads the topic from its start until want records came (or
// 30 s passed): key and value of each, per partition in order.
func (b *kafkaBroker) records(t *testing.T, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestKafkaNotifications: a bucket's events go to a real Kafka broker's
// topic, keyed by the object key (a key's events share a partition, in
// order); while the broker is down the write is still acknowledged and
// its event waits, and arrives once the broker is back.
func TestKafkaNotifications(t *testing.T) {
	kb := startKafka(t)
	kb.createTopic(t, "s3-events")
	targets, err := json.Marshal(map[string]any{"targets": []map[string]string{
		{"id": "stream", "type": "kafka", "endpoint": "kafka://" + kb.addr, "subject": "s3-events"}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(path, targets, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{drives: 4, env: []string{"STRATA_NOTIFY_TARGETS_FILE=" + path}})
	c := s.aws()
	mustCreateBucket(t, c, "events")
	const arn = "arn:strata:sqs:us-east-1:stream:kafka"
	if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("events"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			Id: aws.String("all"), QueueArn: aws.String(arn), Events: []types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}}}}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 3 {
		for _, key := range []string{"a", "b/c", "d"} {
			put(t, c, "events", key, []byte(fmt.Sprint(i)))
			want = append(want, "ObjectCreated:Put "+key)
		}
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("events"), Key: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	want = append(want, "ObjectRemoved:Delete a")
	got := kb.records(t, "s3-events", len(want))
	if len(got) != len(want) {
		t.Fatalf("the topic holds %d records, want %d", len(got), len(want))
	}
	// Per key: the right events, in order, on one partition, keyed by it.
	perKey := map[string][]string{}
	partition := map[string]int32{}
	for _, r := range got {
		name, key, _ := parseEvent(t, r.Value)
		if string(r.Key) != key {
			t.Fatalf("the record of %s %s is keyed %q", name, key, r.Key)
		}
		if p, ok := partition[key]; ok && p != r.Partition {
			t.Fatalf("%s's events on partitions %d and %d", key, p, r.Partition)
		}
		partition[key] = r.Partition
		perKey[key] = append(perKey[key], name)
	}
	for _, w := range want {
		name, key, _ := strings.Cut(w, " ")
		if len(perKey[key]) == 0 || perKey[key][0] != name {
			t.Fatalf("events of %s: %v, want them in the order of %v", key, perKey[key], want)
		}
		perKey[key] = perKey[key][1:]
	}

	// The broker down: the write is acknowledged, its event waits.
	kb.stop()
	put(t, c, "events", "while-down", []byte("x"))
	time.Sleep(time.Second)
	kb.start()
	got = kb.records(t, "s3-events", len(want)+1)
	if len(got) != len(want)+1 {
		t.Fatalf("after the broker came back the topic holds %d records, want %d", len(got), len(want)+1)
	}
	found := false
	for _, r := range got {
		if name, key, _ := parseEvent(t, r.Value); name == "ObjectCreated:Put" && key == "while-down" {
			found = true
		}
	}
	if !found {
		t.Fatal("the event of the PUT made while the broker was down never arrived")
	}
}
