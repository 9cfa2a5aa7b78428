// Package notifytargets is the format of the bucket notifications'
// targets file that `strata server` and `strata gateway` read
// (engine/notify) and that the operator writes for each tenant: defined
// once here, with nothing but the standard library, so both sides may
// import it.
package notifytargets

// EnvVar names the targets file for `strata server` and `strata gateway`.
const EnvVar = "STRATA_NOTIFY_TARGETS_FILE"

// DefaultRegion is the region in target ARNs (the S3 front end's).
const DefaultRegion = "us-east-1"

// Target types.
const (
	Webhook = "webhook"
	NATS    = "nats"
	Redis   = "redis"
	AMQP    = "amqp"
	Kafka   = "kafka"
	// S3 is not a notification target but a bucket replication remote
	// (engine/replicate): another S3 endpoint that replication
	// configurations name by its ARN (arn:strata:replication:REGION:ID:s3).
	S3 = "s3"
)

// RemoteARNPrefix starts the ARN of every replication remote (type S3).
const RemoteARNPrefix = "arn:strata:replication:"

// Target is one target as the file gives it.
type Target struct {
	// ID is the target's name in its ARN (arn:strata:sqs:REGION:ID:TYPE).
	ID string `json:"id"`
	// Type is Webhook, NATS, Redis, AMQP, Kafka or S3.
	Type string `json:"type"`
	// Endpoint is the webhook's URL, the NATS server's (nats://host:4222,
	// several comma-separated), the Redis server's (redis://host:6379/0,
	// rediss:// for TLS), the AMQP broker's (amqp://host:5672/vhost,
	// amqps:// for TLS) or the Kafka brokers' (kafka://host:9092, kafkas://
	// for TLS, several comma-separated), or the S3 endpoint's
	// (https://host:port) for a replication remote.
	Endpoint string `json:"endpoint"`
	// AuthToken is sent as a bearer token (webhook) or the NATS token.
	AuthToken string `json:"authToken,omitempty"`
	// Username and Password authenticate to NATS, Redis, AMQP or Kafka
	// (SASL/PLAIN); for S3 they are the access key and secret.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Subject is the NATS subject published to (a JetStream stream must
	// take it: publishing waits for the stream's acknowledgement), the
	// Redis stream events are added to (XADD), the AMQP routing key, or
	// the Kafka topic (which must exist).
	Subject string `json:"subject,omitempty"`
	// Exchange is the AMQP exchange published to ("": the default
	// exchange, which routes to the queue the routing key names).
	Exchange string `json:"exchange,omitempty"`
	// CAFile is a PEM file of the CA that signed an S3 remote's
	// certificate (empty: the system's roots).
	CAFile string `json:"caFile,omitempty"`
}

// File is the targets file: {"targets": [...]}.
type File struct {
	Targets []Target `json:"targets"`
}

// ARN is the target's ARN in region.
func (t Target) ARN(region string) string {
	if t.Type == S3 {
		return RemoteARNPrefix + region + ":" + t.ID + ":s3"
	}
	return "arn:strata:sqs:" + region + ":" + t.ID + ":" + t.Type
}
