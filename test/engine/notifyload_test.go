package engine

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestNotificationLoad measures what bucket notifications cost a 4 KiB
// PUT: bin/bench PUT rounds on a bucket whose PUTs are notified to a real
// nats-server's JetStream stream and on a plain one, alternating which
// goes first, each run's server CPU counted until its events are
// delivered (the broker runs on the same two cores, as it would not in
// production). STRATA_TEST_NOTIFY_LOAD=1 runs it (make notify-load);
// STRATA_BENCH_BIN names bin/bench, STRATA_TEST_NOTIFY_ROUNDS the rounds
// (6), STRATA_TEST_PPROF_DIR keeps the server's CPU profiles.
func TestNotificationLoad(t *testing.T) {
	if os.Getenv("STRATA_TEST_NOTIFY_LOAD") == "" {
		t.Skip("the notification load measurement runs with STRATA_TEST_NOTIFY_LOAD=1 (make notify-load)")
	}
	benchBin := os.Getenv("STRATA_BENCH_BIN")
	if benchBin == "" {
		t.Fatal("STRATA_BENCH_BIN must name bin/bench")
	}
	broker := startNATS(t)
	env := notifyTargets(t, nil, broker)
	profDir, pprofAddr := os.Getenv("STRATA_TEST_PPROF_DIR"), ""
	if profDir != "" {
		pprofAddr = freeAddr(t)
		env = append(env, "STRATA_PPROF_ADDR="+pprofAddr)
	}
	s := startServer(t, serverOpts{drives: 4, env: env})
	c := s.aws()
	mustCreateBucket(t, c, "plain")
	mustCreateBucket(t, c, "notified")
	if _, err := c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String("notified"),
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{{
			QueueArn: aws.String(natsARN), Events: []types.Event{"s3:ObjectCreated:*"}}}}}); err != nil {
		t.Fatal(err)
	}
	drain := func() {
		t.Helper()
		waitFor(t, "the notification backlog to drain", 5*time.Minute, func() bool { return notifyDrained(t, s) })
	}
	rounds := 6
	if v := os.Getenv("STRATA_TEST_NOTIFY_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	for _, client := range []struct {
		name  string
		flags []string
	}{{"lean", nil}, {"SDK defaults", []string{"-sign-payload", "-checksums", "-full-sdk"}}} {
		measureCost(t, s, benchBin, drain, client.name, client.flags, rounds, profDir, pprofAddr, costCase{"notified", "notifications", 10})
	}
	if n := len(broker.messages(t)); n == 0 {
		t.Fatal("no event reached the broker")
	}
}
