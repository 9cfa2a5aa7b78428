package notify

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// kafkaTarget produces each event to a Kafka topic, keyed by the object
// key (so a key's events share a partition and its consumers see them in
// order), with acknowledgement from every in-sync replica and the
// idempotent producer: an event is taken once the partition's leader
// answers that all of them have it.
type kafkaTarget struct {
	arn    string
	client *kgo.Client
}

// openKafka connects lazily: the client dials the seed brokers when it
// first produces, and again after they fail.
func openKafka(s TargetSpec, region string) (Target, error) {
	if s.Subject == "" {
		return nil, fmt.Errorf("kafka target %s needs a subject: the topic events are produced to", s.ID)
	}
	brokers, useTLS, err := kafkaBrokers(s.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("kafka target %s: %w", s.ID, err)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(s.Subject),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(15 * time.Second),
		// A request a broker never answers fails with its context instead
		// of holding the target (the idempotent producer otherwise waits).
		kgo.AllowIdempotentProduceCancellation(),
		kgo.ClientID("strata-notifications"),
	}
	if useTLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if s.Username != "" {
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka target %s: %w", s.ID, err)
	}
	return &kafkaTarget{arn: s.ARN(region), client: client}, nil
}

// kafkaBrokers reads an endpoint of one or more kafka:// (kafkas:// for
// TLS) URLs, comma-separated, into the brokers' host:port.
func kafkaBrokers(endpoint string) (brokers []string, useTLS bool, err error) {
	for i, raw := range strings.Split(endpoint, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return nil, false, err
		}
		secure := u.Scheme == "kafkas"
		if u.Scheme != "kafka" && !secure || u.Host == "" {
			return nil, false, fmt.Errorf("endpoint %q: want kafka://host:port (kafkas:// for TLS), comma-separated", raw)
		}
		if i > 0 && secure != useTLS {
			return nil, false, fmt.Errorf("endpoint %q: kafka:// and kafkas:// mixed", endpoint)
		}
		useTLS = secure
		host := u.Host
		if u.Port() == "" {
			host += ":9092"
		}
		brokers = append(brokers, host)
	}
	return brokers, useTLS, nil
}

func (k *kafkaTarget) ARN() string { return k.arn }

func (k *kafkaTarget) Deliver(ctx context.Context, msg []byte) error {
	return k.DeliverBatch(ctx, []string{""}, [][]byte{msg})[0]
}

// DeliverBatch produces every message before waiting for the brokers'
// acknowledgements. It returns when ctx ends even if a broker never
// answers (the records still in flight count as failed, and are sent
// again: at least once).
func (k *kafkaTarget) DeliverBatch(ctx context.Context, keys []string, msgs [][]byte) []error {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Value: m}
		if keys[i] != "" {
			r.Key = []byte(keys[i])
		}
		k.client.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- result{i, err} })
	}
	errs := make([]error, len(msgs))
	answered := make([]bool, len(msgs))
	for range msgs {
		select {
		case r := <-results:
			errs[r.i], answered[r.i] = r.err, true
		case <-ctx.Done():
			for i := range errs {
				if !answered[i] {
					errs[i] = fmt.Errorf("kafka: no acknowledgement: %w", ctx.Err())
				}
			}
			return errs
		}
	}
	return errs
}

func (k *kafkaTarget) Close() { k.client.Close() }
