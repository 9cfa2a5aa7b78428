package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/strata-storage/strata/engine/notifytargets"
)

// Target receives event messages.
type Target interface {
	// ARN names the target in bucket configurations.
	ARN() string
	// Deliver hands one message to the target and returns once the target
	// has taken it (a webhook's 2xx, JetStream's acknowledgement).
	Deliver(ctx context.Context, msg []byte) error
	Close()
}

// Batcher is a Target that takes several messages in flight at once:
// DeliverBatch returns once the target answered for each (errs[i] is
// msgs[i]'s). The queue hands it messages of distinct keys only, so a
// failed one never lets a later event of its key arrive first.
type Batcher interface {
	// keys[i] is msgs[i]'s object key, for a target that places messages
	// by key (Kafka's partitions).
	DeliverBatch(ctx context.Context, keys []string, msgs [][]byte) (errs []error)
}

// Laned is a Target that takes more (or fewer) deliveries at once than
// the queue's Lanes: a replication remote, whose copies wait a round trip
// to another site each. A target's answer never changes (a key's lane is
// its hash modulo the answer; another number comes with another Target,
// which SetTargets orders).
type Laned interface {
	Lanes() int
}

// TargetSpec is one target as the server's targets file gives it
// (engine/notifytargets, the format the operator writes).
type TargetSpec = notifytargets.Target

// TargetsFile is the document $STRATA_NOTIFY_TARGETS_FILE names.
type TargetsFile = notifytargets.File

// ReadTargetsFile reads a targets file's entries and checks that no two
// share an ARN in region (an error wrapping fs.ErrNotExist when there is
// no such file).
func ReadTargetsFile(path, region string) ([]TargetSpec, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("notification targets: %w", err)
	}
	var f TargetsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("notification targets %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, s := range f.Targets {
		if seen[s.ARN(region)] {
			return nil, nil, fmt.Errorf("notification targets %s: two targets are %s", path, s.ARN(region))
		}
		seen[s.ARN(region)] = true
	}
	return f.Targets, b, nil
}

// OpenTarget opens one target.
func OpenTarget(s TargetSpec, region string) (Target, error) {
	if s.ID == "" || s.Endpoint == "" {
		return nil, fmt.Errorf("a target needs an id and an endpoint: %+v", s)
	}
	switch s.Type {
	case "webhook":
		return &webhook{arn: s.ARN(region), url: s.Endpoint, token: s.AuthToken, client: &http.Client{Timeout: 10 * time.Second}}, nil
	case "nats":
		if s.Subject == "" {
			return nil, fmt.Errorf("NATS target %s needs a subject", s.ID)
		}
		return &natsTarget{arn: s.ARN(region), spec: s}, nil
	case "redis":
		return openRedis(s, region)
	case "kafka":
		return openKafka(s, region)
	case "amqp":
		if s.Subject == "" {
			return nil, fmt.Errorf("amqp target %s needs a subject: the routing key", s.ID)
		}
		return &amqpTarget{arn: s.ARN(region), spec: s}, nil
	default:
		return nil, fmt.Errorf("target %s: type %q is not one of webhook, nats, redis, amqp, kafka", s.ID, s.Type)
	}
}

// webhook POSTs each message as JSON; any 2xx answer takes it.
type webhook struct {
	arn, url, token string
	client          *http.Client
}

func (w *webhook) ARN() string { return w.arn }

func (w *webhook) Deliver(ctx context.Context, msg []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook %s answered %s", w.url, resp.Status)
	}
	return nil
}

func (w *webhook) Close() {}

// natsTarget publishes to a JetStream stream and waits for its
// acknowledgement (a plain NATS publish has none, so could not be at
// least once). It connects on first use and again after a failure.
type natsTarget struct {
	arn  string
	spec TargetSpec
	mu   sync.Mutex
	nc   *nats.Conn
	js   jetstream.JetStream
}

func (n *natsTarget) ARN() string { return n.arn }

func (n *natsTarget) conn() (jetstream.JetStream, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.js != nil && n.nc.IsConnected() {
		return n.js, nil
	}
	if n.nc != nil {
		n.nc.Close()
		n.nc, n.js = nil, nil
	}
	opts := []nats.Option{nats.Name("strata notifications"), nats.Timeout(5 * time.Second), nats.MaxReconnects(-1)}
	if n.spec.AuthToken != "" {
		opts = append(opts, nats.Token(n.spec.AuthToken))
	}
	if n.spec.Username != "" {
		opts = append(opts, nats.UserInfo(n.spec.Username, n.spec.Password))
	}
	nc, err := nats.Connect(n.spec.Endpoint, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	n.nc, n.js = nc, js
	return js, nil
}

func (n *natsTarget) Deliver(ctx context.Context, msg []byte) error {
	js, err := n.conn()
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, n.spec.Subject, msg)
	return err
}

// DeliverBatch publishes every message before waiting for the stream's
// acknowledgements: one write to the connection for the batch, not one
// round trip per message.
func (n *natsTarget) DeliverBatch(ctx context.Context, _ []string, msgs [][]byte) []error {
	errs := make([]error, len(msgs))
	js, err := n.conn()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	acks := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		acks[i], errs[i] = js.PublishAsync(n.spec.Subject, m)
	}
	for i, a := range acks {
		if a == nil {
			continue
		}
		select {
		case <-a.Ok():
		case errs[i] = <-a.Err():
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	return errs
}

func (n *natsTarget) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nc != nil {
		n.nc.Close()
	}
}

// ARNs lists targets' ARNs in order.
func ARNs(ts []Target) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ARN())
	}
	slices.Sort(out)
	return out
}

// redisTarget adds each event to a Redis stream (XADD, field "event"):
// taken once Redis answers with the entry's ID. How durable that is is
// the Redis server's persistence (appendonly, appendfsync).
type redisTarget struct {
	arn    string
	stream string
	client *redis.Client
}

func openRedis(s TargetSpec, region string) (Target, error) {
	if s.Subject == "" {
		return nil, fmt.Errorf("redis target %s needs a subject: the stream events are added to", s.ID)
	}
	opts, err := redis.ParseURL(s.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("redis target %s: %w", s.ID, err)
	}
	if s.Username != "" {
		opts.Username = s.Username
	}
	if s.Password != "" {
		opts.Password = s.Password
	} else if s.AuthToken != "" {
		opts.Password = s.AuthToken
	}
	opts.MaxRetries = -1 // the queue retries, in order
	return &redisTarget{arn: s.ARN(region), stream: s.Subject, client: redis.NewClient(opts)}, nil
}

func (r *redisTarget) ARN() string { return r.arn }

func (r *redisTarget) Deliver(ctx context.Context, msg []byte) error {
	return r.client.XAdd(ctx, &redis.XAddArgs{Stream: r.stream, Values: []any{"event", msg}}).Err()
}

func (r *redisTarget) Close() { _ = r.client.Close() }

// amqpTarget publishes each event (persistent, mandatory) to an AMQP
// exchange with publisher confirms: taken once the broker acknowledges
// it. A message no queue takes comes back (basic.return, sent before the
// acknowledgement) and counts as a failure, so it is retried, not lost.
// Publishes are one at a time: a return is then the last publish's.
type amqpTarget struct {
	arn  string
	spec TargetSpec
	mu   sync.Mutex
	conn *amqp.Connection
	ch   *amqp.Channel
	back chan amqp.Return
}

func (a *amqpTarget) ARN() string { return a.arn }

func (a *amqpTarget) channel() (*amqp.Channel, error) {
	if a.ch != nil && !a.ch.IsClosed() {
		return a.ch, nil
	}
	a.closeLocked()
	u := a.spec.Endpoint
	if a.spec.Username != "" {
		if parsed, err := url.Parse(u); err == nil {
			parsed.User = url.UserPassword(a.spec.Username, a.spec.Password)
			u = parsed.String()
		}
	}
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "strata notifications"}})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	a.conn, a.ch, a.back = conn, ch, ch.NotifyReturn(make(chan amqp.Return, 1))
	return ch, nil
}

func (a *amqpTarget) Deliver(ctx context.Context, msg []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, err := a.channel()
	if err != nil {
		return err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, a.spec.Exchange, a.spec.Subject, true, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: msg})
	if err != nil {
		a.closeLocked()
		return err
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		a.closeLocked()
		return err
	}
	select {
	case r := <-a.back:
		return fmt.Errorf("amqp: no queue took the event (exchange %q, routing key %q: %s)", r.Exchange, r.RoutingKey, r.ReplyText)
	default:
	}
	if !acked {
		return errors.New("amqp: the broker refused the event (nack)")
	}
	return nil
}

func (a *amqpTarget) closeLocked() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
	a.conn, a.ch, a.back = nil, nil, nil
}

func (a *amqpTarget) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked()
}
