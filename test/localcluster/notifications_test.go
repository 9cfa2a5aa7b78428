package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// bucketNotifications: the Tenant "vault" (replicationPair made it)
// declares a NATS target whose credentials are a Secret's
// (testdata/replication-pair.yaml) and the cluster runs that NATS server
// (testdata/notifications-broker.yaml); a bucket of vault configured
// through S3 to send its creations and removals there has an event at the
// broker for every acknowledged PUT and DELETE.
func bucketNotifications(ctx context.Context, t *testing.T, c *cluster) {
	kubectl, _ := kubectlOf(ctx, t, c)
	port := portForward(ctx, t, kubectl, c.in.Kubeconfig, "deployment/nats", "4222")
	nc, err := nats.Connect("nats://127.0.0.1:"+port, nats.UserInfo("strata", "nats-e2e-password"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S3EVENTS", Subjects: []string{"s3.events"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}

	vault := destination(ctx, t, c, kubectl)
	const bucket = "inbox"
	if _, err := vault.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := vault.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(bucket),
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			Id: aws.String("jobs"), QueueArn: aws.String("arn:strata:sqs:us-east-1:jobs:nats"),
			Events: []s3types.Event{"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}}}}}); err != nil {
		t.Fatalf("the notification configuration: %v", err)
	}
	want := map[string]bool{} // "event key"
	for i := range 200 {
		key := fmt.Sprintf("in/%03d", i)
		if _, err := vault.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(key))}); err != nil {
			t.Fatal(err)
		}
		want["ObjectCreated:Put "+key] = true
		if i%4 == 0 {
			if _, err := vault.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
				t.Fatal(err)
			}
			want["ObjectRemoved:Delete "+key] = true
		}
	}
	acked := time.Now()
	var missing []string
	got := map[string]int{}
	waitFor(ctx, t, 2*time.Minute, func() error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		clear(got)
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := stream.GetMsg(ctx, seq)
			if err != nil {
				return err
			}
			var ev struct {
				Records []struct {
					EventName string `json:"eventName"`
					S3        struct {
						Bucket struct{ Name string } `json:"bucket"`
						Object struct{ Key string }  `json:"object"`
					} `json:"s3"`
				}
			}
			if err := json.Unmarshal(m.Data, &ev); err != nil || len(ev.Records) != 1 || ev.Records[0].S3.Bucket.Name != bucket {
				return fmt.Errorf("message %d is no event of bucket %s: %.200q (%w)", seq, bucket, m.Data, err)
			}
			key, err := url.QueryUnescape(ev.Records[0].S3.Object.Key) // keys in S3 events are URL-encoded
			if err != nil {
				return fmt.Errorf("message %d: key %q: %w", seq, ev.Records[0].S3.Object.Key, err)
			}
			got[ev.Records[0].EventName+" "+key]++
		}
		missing = missing[:0]
		for k := range want {
			if got[k] == 0 {
				missing = append(missing, k)
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d events not at the broker, such as %q (%d distinct events there)", len(missing), len(want), missing[:min(5, len(missing))], len(got))
		}
		return nil
	})
	dups := 0
	for k, n := range got {
		if !want[k] {
			t.Errorf("an event no request made: %s", k)
		}
		dups += n - 1
	}
	t.Logf("%d PUTs and DELETEs through kubectl port-forward to vault-dr-0: every event at the NATS server in the cluster %s after the last was answered (%d duplicates)",
		len(want), time.Since(acked).Round(time.Second), dups)
}
