package monitoring

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// ts builds a series selector of the sample tenant (namespace store,
// tenant media, as the ServiceMonitor labels them) with extra labels.
func ts(metric string, extra ...string) string {
	return metric + `{namespace="store", tenant="media", ` + strings.Join(extra, ", ") + `}`
}

// alertLabels are the labels a firing alert of the sample tenant carries.
func alertLabels(alert, severity string, kv ...string) map[string]string {
	m := map[string]string{"alertname": alert, "severity": severity, "namespace": "store", "tenant": "media"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Pods of the sample tenant.
const (
	pod0 = `pod="media-pool-0-0"`
	pod1 = `pod="media-pool-0-1"`
)

type alertCase struct {
	name  string
	alert string
	input []inputSeries
	at    time.Duration
	// want are the firing alerts' label sets (none: the alert must not fire).
	want []map[string]string
	// summary, when set, must appear in the first firing alert's summary.
	summary string
}

// TestAlerts evaluates every shipped alert against series that must make
// it fire and series that must not, the way promtool's rule tests do.
func TestAlerts(t *testing.T) {
	drive := func(pod, state string, values string) inputSeries {
		return inputSeries{ts("strata_drive_state", pod, `pool="pool-0"`, `set="0"`, `index="1"`, `state="`+state+`"`), values}
	}
	set := func(metric, pod, values string) inputSeries {
		return inputSeries{ts(metric, pod, `pool="pool-0"`, `set="0"`), values}
	}
	driveBytes := func(pod, index, free, total string) []inputSeries {
		return []inputSeries{
			{ts("strata_drive_free_bytes", pod, `pool="pool-0"`, `set="0"`, `index="`+index+`"`), free},
			{ts("strata_drive_total_bytes", pod, `pool="pool-0"`, `set="0"`, `index="`+index+`"`), total},
		}
	}
	gateway := func(free, total string) []inputSeries {
		sel := []string{`service="media-nas"`, `pod="media-nas-7d9f-x"`}
		return []inputSeries{{ts("strata_gateway_volume_free_bytes", sel...), free}, {ts("strata_gateway_volume_total_bytes", sel...), total}}
	}
	requests := func(status, values string) inputSeries {
		return inputSeries{ts("strata_s3_requests_total", pod0, `api="GetObject"`, `status="`+status+`"`), values}
	}
	// A histogram of one API whose requests all take between 1 and 2.5 s
	// (slow) or under 0.5 s (fast).
	latency := func(api string, slow bool) []inputSeries {
		var out []inputSeries
		for _, le := range []string{"0.5", "1", "2.5", "+Inf"} {
			v := "0+10x30"
			if slow && (le == "0.5" || le == "1") {
				v = "0x30"
			}
			out = append(out, inputSeries{ts("strata_s3_request_duration_seconds_bucket", pod0, `api="`+api+`"`, `le="`+le+`"`), v})
		}
		return out
	}
	poolState := func(state string) inputSeries {
		return inputSeries{ts("strata_pool_state", pod0, `pool="pool-1"`, `state="`+state+`"`), "1x130"}
	}
	cat := slices.Concat[[]inputSeries]

	cases := []alertCase{{
		name: "a drive every server sees offline", alert: "StrataDriveOffline", at: 6 * time.Minute,
		input: []inputSeries{drive(pod0, "offline", "1x10"), drive(pod1, "offline", "1x10")},
		want:  []map[string]string{alertLabels("StrataDriveOffline", "warning", "pool", "pool-0", "set", "0", "index", "1")},
	}, {
		name: "a drive only a cut-off server sees offline", alert: "StrataDriveOffline", at: 10 * time.Minute,
		input: []inputSeries{drive(pod0, "offline", "1x10"), drive(pod1, "offline", "0x10")},
	}, {
		name: "a drive offline for 3 minutes", alert: "StrataDriveOffline", at: 10 * time.Minute,
		input: []inputSeries{drive(pod0, "offline", "0 0 0 0 0 0 0 1 1 1 1")},
	}, {
		name: "a set with 3 of 4 drives in sync", alert: "StrataErasureSetDegraded", at: 20 * time.Minute,
		input: []inputSeries{set("strata_erasure_set_drives_healthy", pod0, "3x20"), set("strata_erasure_set_drives", pod0, "4x20")},
		want:  []map[string]string{alertLabels("StrataErasureSetDegraded", "warning", "pool", "pool-0", "set", "0")},
	}, {
		name: "a set one server sees whole", alert: "StrataErasureSetDegraded", at: 20 * time.Minute,
		input: []inputSeries{set("strata_erasure_set_drives_healthy", pod0, "3x20"), set("strata_erasure_set_drives_healthy", pod1, "4x20"),
			set("strata_erasure_set_drives", pod0, "4x20")},
	}, {
		name: "a set at its write quorum", alert: "StrataWriteQuorumAtRisk", at: 2 * time.Minute,
		input:   []inputSeries{set("strata_erasure_set_drives_online", pod0, "3x5"), set("strata_erasure_set_write_quorum", pod0, "3x5")},
		want:    []map[string]string{alertLabels("StrataWriteQuorumAtRisk", "critical", "pool", "pool-0", "set", "0")},
		summary: "Erasure set 0 of pool pool-0 of tenant store/media",
	}, {
		name: "a set one drive above its write quorum", alert: "StrataWriteQuorumAtRisk", at: 5 * time.Minute,
		input: []inputSeries{set("strata_erasure_set_drives_online", pod0, "4x5"), set("strata_erasure_set_write_quorum", pod0, "3x5")},
	}, {
		name: "a pod not scraped", alert: "StrataPodDown", at: 6 * time.Minute,
		input: []inputSeries{{ts("up", pod1, `instance="10.0.0.2:9000"`), "0x6"}, {ts("up", pod0, `instance="10.0.0.1:9000"`), "1x6"}},
		want:  []map[string]string{alertLabels("StrataPodDown", "critical", "pod", "media-pool-0-1", "instance", "10.0.0.2:9000")},
	}, {
		name: "every pod scraped", alert: "StrataPodDown", at: 6 * time.Minute,
		input: []inputSeries{{ts("up", pod0, `instance="10.0.0.1:9000"`), "1x6"}},
	}, {
		name: "a peer offline", alert: "StrataPeerOffline", at: 6 * time.Minute,
		input:   []inputSeries{{ts("strata_internode_peers", pod0, `state="offline"`), "1x6"}, {ts("strata_internode_peers", pod1, `state="offline"`), "0x6"}},
		want:    []map[string]string{alertLabels("StrataPeerOffline", "warning")},
		summary: "cannot reach 1 other server(s)",
	}, {
		name: "every peer online", alert: "StrataPeerOffline", at: 6 * time.Minute,
		input: []inputSeries{{ts("strata_internode_peers", pod0, `state="offline"`), "0x6"}},
	}, {
		name: "clocks 3 s apart", alert: "StrataClockSkew", at: 12 * time.Minute,
		input:   []inputSeries{{ts("strata_internode_clock_offset_seconds", pod0), "3x12"}, {ts("strata_internode_clock_offset_seconds", pod1), "0.1x12"}},
		want:    []map[string]string{alertLabels("StrataClockSkew", "warning")},
		summary: "are 3 s apart",
	}, {
		name: "clocks within a second", alert: "StrataClockSkew", at: 12 * time.Minute,
		input: []inputSeries{{ts("strata_internode_clock_offset_seconds", pod0), "0.4x12"}},
	}, {
		name: "a drive's store stalling writes a third of the time", alert: "StrataMetadataWriteStalls", at: 40 * time.Minute,
		input: []inputSeries{
			{ts("strata_drive_metadata_write_stall_seconds_total", pod0, `pool="pool-0"`, `set="0"`, `index="2"`), "0+20x40"},
			{ts("strata_drive_metadata_write_stall_seconds_total", pod0, `pool="pool-0"`, `set="0"`, `index="1"`), "0+1x40"}},
		want:    []map[string]string{alertLabels("StrataMetadataWriteStalls", "warning", "pool", "pool-0", "set", "0", "index", "2")},
		summary: "of the time",
	}, {
		name: "a drive's store stalling writes for a minute once", alert: "StrataMetadataWriteStalls", at: 40 * time.Minute,
		input: []inputSeries{{ts("strata_drive_metadata_write_stall_seconds_total", pod0, `pool="pool-0"`, `set="0"`, `index="2"`),
			"0x25 60x15"}},
	}, {
		name: "a heal queue growing for an hour", alert: "StrataHealBacklogGrowing", at: 90 * time.Minute,
		input: []inputSeries{{ts("strata_heal_queue_length", pod0), "0+10x90"}, {ts("strata_heal_dropped_total", pod0), "0x90"}},
		want:  []map[string]string{alertLabels("StrataHealBacklogGrowing", "warning")},
	}, {
		name: "a full heal queue dropping objects", alert: "StrataHealBacklogGrowing", at: 90 * time.Minute,
		input: []inputSeries{{ts("strata_heal_queue_length", pod0), "10000x90"}, {ts("strata_heal_dropped_total", pod0), "0+5x90"}},
		want:  []map[string]string{alertLabels("StrataHealBacklogGrowing", "warning")},
	}, {
		name: "a long heal queue that does not grow", alert: "StrataHealBacklogGrowing", at: 90 * time.Minute,
		input: []inputSeries{{ts("strata_heal_queue_length", pod0), "500x90"}, {ts("strata_heal_dropped_total", pod0), "0x90"}},
	}, {
		name: "a drive healing with nothing rebuilt", alert: "StrataHealingStalled", at: 90 * time.Minute,
		input: []inputSeries{{ts("strata_heal_drives_healing", pod0), "1x90"}, {ts("strata_heal_bytes_total", pod0), "4096x90"}},
		want:  []map[string]string{alertLabels("StrataHealingStalled", "warning")},
	}, {
		name: "a drive healing steadily", alert: "StrataHealingStalled", at: 90 * time.Minute,
		input: []inputSeries{{ts("strata_heal_drives_healing", pod0), "1x90"}, {ts("strata_heal_bytes_total", pod0), "0+1000000x90"}},
	}, {
		name: "a pool 85% full, reported by two servers", alert: "StrataCapacityHigh", at: 20 * time.Minute,
		input: cat(driveBytes(pod0, "0", "15x20", "100x20"), driveBytes(pod0, "1", "15x20", "100x20"),
			driveBytes(pod1, "0", "15x20", "100x20"), driveBytes(pod1, "1", "15x20", "100x20")),
		want:    []map[string]string{alertLabels("StrataCapacityHigh", "warning", "pool", "pool-0")},
		summary: "is 85% full",
	}, {
		name: "a pool 85% full is not critical", alert: "StrataCapacityCritical", at: 20 * time.Minute,
		input: cat(driveBytes(pod0, "0", "15x20", "100x20"), driveBytes(pod0, "1", "15x20", "100x20")),
	}, {
		name: "a pool half full", alert: "StrataCapacityHigh", at: 20 * time.Minute,
		input: cat(driveBytes(pod0, "0", "50x20", "100x20"), driveBytes(pod0, "1", "50x20", "100x20")),
	}, {
		name: "a pool 95% full", alert: "StrataCapacityCritical", at: 6 * time.Minute,
		input: cat(driveBytes(pod0, "0", "5x20", "100x20"), driveBytes(pod0, "1", "5x20", "100x20")),
		want:  []map[string]string{alertLabels("StrataCapacityCritical", "critical", "pool", "pool-0")},
	}, {
		name: "a gateway volume 95% full", alert: "StrataCapacityCritical", at: 6 * time.Minute,
		input: gateway("5x10", "100x10"),
		want:  []map[string]string{alertLabels("StrataCapacityCritical", "critical", "pool", "nas", "service", "media-nas")},
	}, {
		name: "9% of requests failing", alert: "StrataS3ErrorsHigh", at: 20 * time.Minute,
		input:   []inputSeries{requests("200", "0+100x20"), requests("503", "0+10x20")},
		want:    []map[string]string{alertLabels("StrataS3ErrorsHigh", "warning")},
		summary: "9.091% of S3 requests",
	}, {
		name: "1% of requests failing", alert: "StrataS3ErrorsHigh", at: 20 * time.Minute,
		input: []inputSeries{requests("200", "0+100x20"), requests("503", "0+1x20")},
	}, {
		name: "HeadObject slower than 1 s", alert: "StrataS3LatencyHigh", at: 25 * time.Minute,
		input: latency("HeadObject", true),
		want:  []map[string]string{alertLabels("StrataS3LatencyHigh", "warning", "api", "HeadObject")},
	}, {
		name: "slow uploads (their time is the body's)", alert: "StrataS3LatencyHigh", at: 25 * time.Minute,
		input: latency("PutObject", true),
	}, {
		name: "fast HeadObject", alert: "StrataS3LatencyHigh", at: 25 * time.Minute,
		input: latency("HeadObject", false),
	}, {
		// Objects move until minute 30; the alert fires an hour and a half
		// later (no change within an hour, for 30 minutes).
		name: "a drain that stopped moving objects", alert: "StrataDecommissionStuck", at: 121 * time.Minute,
		input: []inputSeries{poolState("Draining"), {ts("strata_decommission_objects_moved", pod0, `pool="pool-1"`, `set="0"`), "0+10x30 300x100"}},
		want:  []map[string]string{alertLabels("StrataDecommissionStuck", "warning", "pool", "pool-1")},
	}, {
		name: "a drain whose sets have not started", alert: "StrataDecommissionStuck", at: 40 * time.Minute,
		input: []inputSeries{poolState("Draining")},
		want:  []map[string]string{alertLabels("StrataDecommissionStuck", "warning", "pool", "pool-1")},
	}, {
		name: "a drain moving objects", alert: "StrataDecommissionStuck", at: 115 * time.Minute,
		input: []inputSeries{poolState("Draining"), {ts("strata_decommission_objects_moved", pod0, `pool="pool-1"`, `set="0"`), "0+10x120"}},
	}, {
		name: "a decommissioned pool", alert: "StrataDecommissionStuck", at: 100 * time.Minute,
		input: []inputSeries{poolState("Decommissioned")},
	}, {
		// Two servers report the bucket; its bytes near their quota.
		name: "a bucket at 95% of its byte quota", alert: "StrataBucketNearQuota", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_bucket_usage_bytes", pod0, `bucket="logs"`), "950x30"}, {ts("strata_bucket_usage_bytes", pod1, `bucket="logs"`), "950x30"},
			{ts("strata_bucket_quota_bytes", pod0, `bucket="logs"`), "1000x30"}, {ts("strata_bucket_quota_objects", pod0, `bucket="logs"`), "0x30"},
			{ts("strata_bucket_usage_objects", pod0, `bucket="logs"`), "3x30"}},
		want:    []map[string]string{alertLabels("StrataBucketNearQuota", "warning", "bucket", "logs")},
		summary: "95%",
	}, {
		name: "a bucket at 95% of its object quota", alert: "StrataBucketNearQuota", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_bucket_usage_objects", pod0, `bucket="logs"`), "95x30"}, {ts("strata_bucket_quota_objects", pod0, `bucket="logs"`), "100x30"},
			{ts("strata_bucket_usage_bytes", pod0, `bucket="logs"`), "10x30"}, {ts("strata_bucket_quota_bytes", pod0, `bucket="logs"`), "0x30"}},
		want: []map[string]string{alertLabels("StrataBucketNearQuota", "warning", "bucket", "logs")},
	}, {
		name: "a bucket at half its quota", alert: "StrataBucketNearQuota", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_bucket_usage_bytes", pod0, `bucket="logs"`), "500x30"}, {ts("strata_bucket_quota_bytes", pod0, `bucket="logs"`), "1000x30"},
			{ts("strata_bucket_usage_objects", pod0, `bucket="logs"`), "5x30"}, {ts("strata_bucket_quota_objects", pod0, `bucket="logs"`), "0x30"}},
	}, {
		name: "notification events waiting 10 minutes", alert: "StrataNotificationBacklog", at: 30 * time.Minute,
		input:   []inputSeries{{ts("strata_notify_oldest_undelivered_seconds", pod0), "0+60x40"}, {ts("strata_notify_oldest_undelivered_seconds", pod1), "0x40"}},
		want:    []map[string]string{alertLabels("StrataNotificationBacklog", "warning")},
		summary: "has waited",
	}, {
		name: "notification events delivered within a minute", alert: "StrataNotificationBacklog", at: 30 * time.Minute,
		input: []inputSeries{{ts("strata_notify_oldest_undelivered_seconds", pod0), "30x40"}},
	}, {
		name: "a targets file refused for 10 minutes", alert: "StrataNotifyTargetsRefused", at: 20 * time.Minute,
		input:   []inputSeries{{ts("strata_notify_targets_file_errors_total", pod0), "0x10 0+30x20"}, {ts("strata_notify_targets_file_errors_total", pod1), "0x30"}},
		want:    []map[string]string{alertLabels("StrataNotifyTargetsRefused", "warning")},
		summary: "refuses its notification targets file",
	}, {
		name: "a targets file refused once, then read", alert: "StrataNotifyTargetsRefused", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_notify_targets_file_errors_total", pod0), "0x5 3x25"}},
	}, {
		name: "a replication remote down for 15 minutes", alert: "StrataReplicationLag", at: 30 * time.Minute,
		input: []inputSeries{{ts("strata_replication_oldest_pending_seconds", pod0, `remote="arn:strata:replication:us-east-1:dr:s3"`), "0+60x40"},
			{ts("strata_replication_oldest_pending_seconds", pod1, `remote="arn:strata:replication:us-east-1:dr:s3"`), "0x40"}},
		want:    []map[string]string{alertLabels("StrataReplicationLag", "warning", "remote", "arn:strata:replication:us-east-1:dr:s3")},
		summary: "to reach replication remote arn:strata:replication:us-east-1:dr:s3",
	}, {
		name: "replication keeping up", alert: "StrataReplicationLag", at: 30 * time.Minute,
		input: []inputSeries{{ts("strata_replication_oldest_pending_seconds", pod0, `remote="arn:strata:replication:us-east-1:dr:s3"`), "2x40"}},
	}, {
		name: "versions marked FAILED", alert: "StrataReplicationFailed", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_replication_changes_total", pod0, `bucket="media"`, `result="failed"`), "0x10 1+1x20"},
			{ts("strata_replication_changes_total", pod0, `bucket="media"`, `result="replicated"`), "0+100x30"}},
		want:    []map[string]string{alertLabels("StrataReplicationFailed", "warning", "bucket", "media")},
		summary: "Versions of bucket media",
	}, {
		name: "no version failed", alert: "StrataReplicationFailed", at: 20 * time.Minute,
		input: []inputSeries{{ts("strata_replication_changes_total", pod0, `bucket="media"`, `result="failed"`), "3x30"},
			{ts("strata_replication_changes_total", pod0, `bucket="media"`, `result="replicated"`), "0+100x30"}},
	}, {
		// Evaluation starts at the Unix epoch: the certificate's notAfter
		// is days after it.
		name: "a certificate expiring in 10 days", alert: "StrataCertificateExpiring", at: 2 * time.Hour,
		input:   []inputSeries{{ts("strata_tls_certificate_expiry_timestamp_seconds", pod0), "864000x120"}},
		want:    []map[string]string{alertLabels("StrataCertificateExpiring", "warning")},
		summary: "expires in 9d 22h",
	}, {
		name: "a certificate valid for 30 days", alert: "StrataCertificateExpiring", at: 2 * time.Hour,
		input: []inputSeries{{ts("strata_tls_certificate_expiry_timestamp_seconds", pod0), "2592000x120"}},
	}, {
		name: "a trusted CA expiring in 20 days beside one valid for years", alert: "StrataCAExpiring", at: 2 * time.Hour,
		input: []inputSeries{
			{ts("strata_tls_ca_expiry_timestamp_seconds", pod0, `fingerprint="0011223344556677"`), "1728000x120"},
			{ts("strata_tls_ca_expiry_timestamp_seconds", pod0, `fingerprint="8899aabbccddeeff"`), "315360000x120"},
		},
		want:    []map[string]string{alertLabels("StrataCAExpiring", "warning")},
		summary: "expires in 19d 22h",
	}, {
		name: "trusted CAs valid for 60 days", alert: "StrataCAExpiring", at: 2 * time.Hour,
		input: []inputSeries{{ts("strata_tls_ca_expiry_timestamp_seconds", pod0, `fingerprint="0011223344556677"`), "5184000x120"}},
	}, {
		name: "a roll-out paused by the health gate", alert: "StrataUpgradePaused", at: 6 * time.Minute,
		input: []inputSeries{
			{`strata_operator_tenant_upgrade_paused{namespace="strata-system", pod="strata-operator-0", tenant_namespace="store", tenant="media"}`, "1x6"},
			{`strata_operator_tenant_upgrade_paused{namespace="strata-system", pod="strata-operator-0", tenant_namespace="store", tenant="logs"}`, "0x6"},
		},
		want:    []map[string]string{alertLabels("StrataUpgradePaused", "warning", "tenant_namespace", "store")},
		summary: "tenant store/media is paused",
	}, {
		name: "no roll-out paused", alert: "StrataUpgradePaused", at: 6 * time.Minute,
		input: []inputSeries{{`strata_operator_tenant_upgrade_paused{namespace="strata-system", tenant_namespace="store", tenant="media"}`, "0x6"}},
	}}

	tested := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.alert+"/"+tc.name, func(t *testing.T) {
			got := evalAlert(t, ruleNamed(t, tc.alert), tc.input, tc.at)
			var labels []map[string]string
			for _, f := range got {
				labels = append(labels, f.labels)
				for name, text := range f.annotations {
					if strings.Contains(text, "<error") || strings.Contains(text, "{{") {
						t.Errorf("annotation %s not expanded: %s", name, text)
					}
				}
			}
			if len(labels) != len(tc.want) || !slices.EqualFunc(labels, tc.want, maps.Equal) {
				t.Fatalf("at %s firing %s, want %s", tc.at, describe(got), describe(asFirings(tc.want)))
			}
			if tc.summary != "" && !strings.Contains(got[0].annotations["summary"], tc.summary) {
				t.Errorf("summary %q lacks %q", got[0].annotations["summary"], tc.summary)
			}
		})
		if len(tc.want) > 0 {
			tested[tc.alert] = true
		}
	}
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if !tested[r.Alert] {
			t.Errorf("alert %s (%s) has no case where it fires", r.Alert, r.Source)
		}
	}
}

func asFirings(ls []map[string]string) []firing {
	var out []firing
	for _, l := range ls {
		out = append(out, firing{labels: l})
	}
	return out
}
