package builders

import (
	"fmt"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// Alert thresholds (docs/monitoring.md lists them with the alerts).
const (
	// CapacityWarning and CapacityCritical are the used fractions of a
	// pool's drives (or a gateway's volume) that warn and page.
	CapacityWarning  = 0.8
	CapacityCritical = 0.9
	// CertificateWarningDays is how long before its expiry a serving
	// certificate that was not renewed is reported.
	CertificateWarningDays = 14
	// CAWarningDays is how long before its expiry a trusted CA raises an
	// alert: long enough to roll a new CA out with the overlap clients need.
	CAWarningDays = 30
	// ErrorRatio is the fraction of S3 requests answered 5xx that alerts.
	ErrorRatio = 0.05
	// LatencyP99Seconds bounds the 99th percentile of S3 requests whose
	// duration does not grow with the object's size.
	LatencyP99Seconds = 1
	// ClockSkewSeconds is the clock difference between servers that
	// alerts: versions are stamped with the servers' clocks (engine/hlc).
	ClockSkewSeconds = 1
	// StoreStallRatio is the fraction of time a drive's metadata store
	// holds writes back (write stalls while it compacts) that alerts.
	StoreStallRatio = 0.1
	// QuotaWarning is the used fraction of a bucket's quota (bytes or
	// objects) that alerts.
	QuotaWarning = 0.9
	// NotificationBacklogSeconds is the age of the oldest undelivered
	// bucket notification event that alerts.
	NotificationBacklogSeconds = 300
	// ReplicationLagSeconds is the age of the oldest change not yet
	// replicated to a remote that alerts.
	ReplicationLagSeconds = 300
)

// sizedAPIs carry or copy an object's body within the request, so their
// duration is the client's bandwidth or the object's size, not the
// store's latency: the latency alert leaves them out.
var sizedAPIs = []string{"PutObject", "UploadPart", "UploadPartCopy", "CopyObject", "PostObject",
	"CompleteMultipartUpload", "DeleteObjects", "SelectObjectContent", "RestoreObject"}

// alert is one alerting rule before it becomes a monitoringv1.Rule.
type alert struct {
	name, expr, forDur, severity, summary, description string
}

func (a alert) rule() monitoringv1.Rule {
	d := monitoringv1.Duration(a.forDur)
	return monitoringv1.Rule{
		Alert: a.name, Expr: intstr.FromString(a.expr), For: &d,
		Labels:      map[string]string{"severity": a.severity},
		Annotations: map[string]string{"summary": a.summary, "description": a.description},
	}
}

// PrometheusRule alerts on what a tenant's operators act on: drives and
// nodes down, redundancy and write quorum, healing, capacity, certificate
// expiry, S3 errors and latency, and stuck decommissions. Metric names are
// the engine's (engine/metrics); every series carries the tenant label the
// ServiceMonitor sets. Servers report every set and drive as they see
// them, so rules take the best view across servers (max), or the view
// every server shares (min) where one partitioned server must not page.
func PrometheusRule(t *v1.Tenant) *monitoringv1.PrometheusRule {
	var rules []monitoringv1.Rule
	for _, a := range tenantAlerts(t) {
		rules = append(rules, a.rule())
	}
	return &monitoringv1.PrometheusRule{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace,
			Labels: merge(TenantLabels(t.Name), t.Spec.Monitoring.PrometheusRule.Labels)},
		Spec: monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "strata-" + t.Name, Rules: rules}}},
	}
}

// tenantAlerts are the tenant's rules, in the order an operator triages.
func tenantAlerts(t *v1.Tenant) []alert {
	// sel selects the tenant's series; extra matchers follow.
	sel := func(metric string, extra ...string) string {
		m := append([]string{fmt.Sprintf("namespace=%q", t.Namespace), fmt.Sprintf("%s=%q", LabelTenantTarget, t.Name)}, extra...)
		return metric + "{" + strings.Join(m, ", ") + "}"
	}
	const byTenant = "namespace, tenant"
	const bySet = byTenant + ", pool, set"
	const byDrive = bySet + ", index"
	const byPool = byTenant + ", pool"
	who := "tenant {{ $labels.namespace }}/{{ $labels.tenant }}"

	poolUsed := fmt.Sprintf("1 - sum by (%[1]s) (max by (%[2]s) (%[3]s)) / sum by (%[1]s) (max by (%[2]s) (%[4]s))",
		byPool, byDrive, sel("strata_drive_free_bytes"), sel("strata_drive_total_bytes"))
	// A gateway's Service is <tenant>-<pool>: its pool label is the
	// GatewayPool's name.
	gatewayUsed := fmt.Sprintf(`label_replace(1 - max by (%[1]s, service) (%[2]s) / max by (%[1]s, service) (%[3]s), "pool", "$1", "service", %[4]q)`,
		byTenant, sel("strata_gateway_volume_free_bytes"), sel("strata_gateway_volume_total_bytes"), t.Name+"-(.*)")
	used := fmt.Sprintf("((%s) or (%s))", poolUsed, gatewayUsed)
	capacityAction := "Add a ServerPool (new objects go to the pool with the most free space), delete objects or old versions, " +
		"or grow the drives (storage.size, when the storage class allows expansion); for a GatewayPool, grow its volume."

	alerts := []alert{{
		name: "StrataDriveOffline", severity: "warning", forDur: "5m",
		expr:    fmt.Sprintf(`min by (%s) (%s) == 1`, byDrive, sel("strata_drive_state", `state="offline"`)),
		summary: "Drive {{ $labels.index }} of erasure set {{ $labels.set }} in pool {{ $labels.pool }} of " + who + " is offline.",
		description: "Every server that reports the drive has seen it offline for 5 minutes. Objects of the set are served from parity " +
			"and writes continue while the set keeps its write quorum (see StrataWriteQuorumAtRisk). GET /strata/admin/v1/info names " +
			"the drive's endpoint: check that server pod, its node and its PersistentVolume. A drive that returns, or an empty " +
			"replacement, is rebuilt by healing.",
	}, {
		name: "StrataErasureSetDegraded", severity: "warning", forDur: "15m",
		expr: fmt.Sprintf(`max by (%[1]s) (%[2]s) < max by (%[1]s) (%[3]s)`,
			bySet, sel("strata_erasure_set_drives_healthy"), sel("strata_erasure_set_drives")),
		summary: "Erasure set {{ $labels.set }} of pool {{ $labels.pool }} of " + who + " is below full redundancy.",
		description: "Only {{ $value }} drives of the set have been online and in sync for 15 minutes; the others are offline or " +
			"healing, so the set survives fewer failures than its parity allows. StrataDriveOffline names the offline drives; " +
			"GET /strata/admin/v1/heal shows healing progress. Avoid planned restarts of this pool's servers until it recovers.",
	}, {
		name: "StrataWriteQuorumAtRisk", severity: "critical", forDur: "1m",
		expr: fmt.Sprintf(`max by (%[1]s) (%[2]s) - max by (%[1]s) (%[3]s) <= 0`,
			bySet, sel("strata_erasure_set_drives_online"), sel("strata_erasure_set_write_quorum")),
		summary: "Erasure set {{ $labels.set }} of pool {{ $labels.pool }} of " + who + " is at or below its write quorum.",
		description: "The set has {{ $value }} drives to spare above its write quorum. At 0, losing one more drive or its server " +
			"makes writes to the set fail with 503 SlowDown; below 0 they fail now (reads need fewer drives and may still work). " +
			"Do not restart, drain or upgrade servers of this pool; bring the offline drives or servers back first (StrataDriveOffline, StrataPodDown).",
	}, {
		name: "StrataPodDown", severity: "critical", forDur: "5m",
		expr:    fmt.Sprintf(`%s == 0`, sel("up")),
		summary: "Strata pod {{ $labels.pod }} of " + who + " is down or cannot be scraped.",
		description: "Prometheus has not scraped {{ $labels.pod }} ({{ $labels.instance }}) for 5 minutes. A server down takes its " +
			"drives offline (StrataDriveOffline); a gateway down leaves the others its load. Check the pod's status, events and logs " +
			"(kubectl describe pod, kubectl logs). A pod that runs but refuses the scrape answers 401: the token in Secret " +
			MetricsTokenSecretName(t.Name) + " must be the one mounted in the pod (kubelet updates it within a minute or two).",
	}, {
		name: "StrataPeerOffline", severity: "warning", forDur: "5m",
		expr:    fmt.Sprintf(`max by (%s) (%s) > 0`, byTenant, sel("strata_internode_peers", `state="offline"`)),
		summary: "A server of " + who + " cannot reach {{ $value }} other server(s) over the internode port.",
		description: "For 5 minutes a server has found other servers not answering on the internode port. With StrataPodDown, a " +
			"node is down. Alone, the servers run but cannot reach each other: check the NetworkPolicy, DNS of the headless " +
			"Service and the internode TLS certificates. The servers' logs name the node ('node offline').",
	}, {
		name: "StrataClockSkew", severity: "warning", forDur: "10m",
		expr:    fmt.Sprintf(`max by (%s) (%s) > %g`, byTenant, sel("strata_internode_clock_offset_seconds"), float64(ClockSkewSeconds)),
		summary: "The clocks of the servers of " + who + " are {{ $value }} s apart.",
		description: "For 10 minutes a server has seen another's clock more than 1 s from its own. Versions are ordered by the " +
			"servers' clocks: each server follows the peers ahead of it (so no write is stamped before one it follows), but every " +
			"server then stamps Last-Modified ahead of real time, and a server more than 2 minutes off is refused by the others. " +
			"Check NTP (chrony, systemd-timesyncd) on the nodes of the pods the servers' logs name.",
	}, {
		name: "StrataHealBacklogGrowing", severity: "warning", forDur: "30m",
		expr: fmt.Sprintf(`(sum by (%[1]s) (%[2]s) > 0 and sum by (%[1]s) (delta(%[2]s[30m])) > 0) or sum by (%[1]s) (rate(%[3]s[30m])) > 0`,
			byTenant, sel("strata_heal_queue_length"), sel("strata_heal_dropped_total")),
		summary: "The heal queue of " + who + " keeps growing.",
		description: "For the last hour objects have been found damaged faster than they are healed, or the queue is full and " +
			"objects are left to the integrity scanner. Look for drives that are offline or failing (StrataDriveOffline, the " +
			"servers' logs), and for healing throttled by --heal-bytes-per-second. GET /strata/admin/v1/heal shows the queue.",
	}, {
		name: "StrataHealingStalled", severity: "warning", forDur: "30m",
		expr: fmt.Sprintf(`max by (%[1]s) (%[2]s) > 0 unless on (%[1]s) sum by (%[1]s) (rate(%[3]s[30m])) > 0`,
			byTenant, sel("strata_heal_drives_healing"), sel("strata_heal_bytes_total")),
		summary: "Drives of " + who + " are being rebuilt but nothing has been healed for an hour.",
		description: "{{ $value }} drive(s) are marked healing and no object byte has been rebuilt for an hour. GET " +
			"/strata/admin/v1/heal shows each drive's rebuild and its last error; the servers' logs say why a heal failed " +
			"(commonly: too few drives of the set online to rebuild from).",
	}, {
		name: "StrataMetadataWriteStalls", severity: "warning", forDur: "15m",
		expr: fmt.Sprintf(`max by (%s) (rate(%s[15m])) > %g`,
			byDrive, sel("strata_drive_metadata_write_stall_seconds_total"), StoreStallRatio),
		summary: "Writes to drive {{ $labels.index }} of erasure set {{ $labels.set }} in pool {{ $labels.pool }} of " + who +
			" wait for its metadata store {{ $value | humanizePercentage }} of the time.",
		description: "For 15 minutes the drive's metadata store has held writes back more than 10% of the time while it " +
			"compacts (strata_drive_metadata_write_stall_seconds_total): PUTs and deletes to its set slow down. The drive " +
			"does not keep up with the write rate: compare its compaction debt and L0 sublevels " +
			"(strata_drive_metadata_compaction_debt_bytes, strata_drive_metadata_l0_sublevels) with the other drives', and " +
			"check the PersistentVolume's latency and the server's CPU. A drive slower than its set's others slows its set; " +
			"replace it or move the pool to faster storage, or add a ServerPool to spread new objects.",
	}, {
		name: "StrataCapacityHigh", severity: "warning", forDur: "15m",
		expr:        fmt.Sprintf(`%s > %g`, used, CapacityWarning),
		summary:     "Pool {{ $labels.pool }} of " + who + " is {{ $value | humanizePercentage }} full.",
		description: fmt.Sprintf("More than %.0f%% of the pool's space has been used for 15 minutes. %s", CapacityWarning*100, capacityAction),
	}, {
		name: "StrataCapacityCritical", severity: "critical", forDur: "5m",
		expr:    fmt.Sprintf(`%s > %g`, used, CapacityCritical),
		summary: "Pool {{ $labels.pool }} of " + who + " is {{ $value | humanizePercentage }} full.",
		description: fmt.Sprintf("More than %.0f%% of the pool's space is used: when a set's drives fill, writes to it fail with "+
			"503 SlowDown (a gateway's volume answers 507 or 500). %s", CapacityCritical*100, capacityAction),
	}, {
		name: "StrataS3ErrorsHigh", severity: "warning", forDur: "10m",
		expr: fmt.Sprintf(`sum by (%[1]s) (rate(%[2]s[5m])) / sum by (%[1]s) (rate(%[3]s[5m])) > %g`,
			byTenant, sel("strata_s3_requests_total", `status=~"5.."`), sel("strata_s3_requests_total"), ErrorRatio),
		summary: "{{ $value | humanizePercentage }} of S3 requests to " + who + " fail with a 5xx status.",
		description: fmt.Sprintf("More than %.0f%% of S3 requests have been answered 5xx for 10 minutes (requests refused for load "+
			"are not counted here). 503 SlowDown means an erasure set lost its read or write quorum (StrataWriteQuorumAtRisk, "+
			"StrataDriveOffline); 500 is an internal error: the pods' logs name it. The dashboard splits errors by API.", ErrorRatio*100),
	}, {
		name: "StrataS3LatencyHigh", severity: "warning", forDur: "15m",
		expr: fmt.Sprintf(`histogram_quantile(0.99, sum by (%s, api, le) (rate(%s[5m]))) > %d`,
			byTenant, sel("strata_s3_request_duration_seconds_bucket", fmt.Sprintf(`api!~%q`, strings.Join(sizedAPIs, "|"))), LatencyP99Seconds),
		summary: "The 99th percentile of {{ $labels.api }} requests to " + who + " is {{ $value | humanizeDuration }}.",
		description: fmt.Sprintf("For 15 minutes 1%% of {{ $labels.api }} requests have taken longer than %ds (uploads and copies, "+
			"whose time grows with their size, are not measured here). Look for a slow or failing drive (the dashboard's drive "+
			"panels, kernel logs of its node), servers short of CPU (requests and limits), healing competing for I/O, or "+
			"listings of very large prefixes.", LatencyP99Seconds),
	}, {
		name: "StrataDecommissionStuck", severity: "warning", forDur: "30m",
		expr: fmt.Sprintf(`max by (%[1]s) (%[2]s) == 1 unless on (%[1]s) sum by (%[1]s) (changes(%[3]s[1h])) > 0`,
			byPool, sel("strata_pool_state", `state="Draining"`), sel("strata_decommission_objects_moved")),
		summary: "The decommission of pool {{ $labels.pool }} of " + who + " has made no progress for over an hour.",
		description: "The pool is Draining and no object has moved to the other pools for an hour and a half. GET " +
			"/strata/admin/v1/pools/{{ $labels.pool }}/decommission shows each set's progress and error; the other pools need free " +
			"space for what moves, and every server of the pool must be up. Setting the ServerPool's spec.decommission back to " +
			"false cancels the drain (what moved stays moved).",
	}, {
		name: "StrataBucketNearQuota", severity: "warning", forDur: "15m",
		expr: fmt.Sprintf(`(max by (%[1]s) (%[2]s) / max by (%[1]s) (%[3]s > 0) > %[6]g) or (max by (%[1]s) (%[4]s) / max by (%[1]s) (%[5]s > 0) > %[6]g)`,
			byTenant+", bucket", sel("strata_bucket_usage_bytes"), sel("strata_bucket_quota_bytes"),
			sel("strata_bucket_usage_objects"), sel("strata_bucket_quota_objects"), QuotaWarning),
		summary: "Bucket {{ $labels.bucket }} of " + who + " has used {{ $value | humanizePercentage }} of its quota.",
		description: fmt.Sprintf("For 15 minutes the bucket has held more than %.0f%% of its quota's bytes or objects; writes past "+
			"the quota are refused with 403 QuotaExceeded. Delete objects or old versions (a lifecycle rule expires them), or raise "+
			"the quota: the BucketClaim's spec.quota, or strata admin bucket BUCKET quota BYTES OBJECTS for a bucket no claim owns.",
			QuotaWarning*100),
	}, {
		name: "StrataNotificationBacklog", severity: "warning", forDur: "10m",
		expr:    fmt.Sprintf(`max by (%s) (%s) > %d`, byTenant, sel("strata_notify_oldest_undelivered_seconds"), NotificationBacklogSeconds),
		summary: "A bucket notification event of " + who + " has waited {{ $value | humanizeDuration }} for its target.",
		description: "For 10 minutes a server or gateway has held events older than 5 minutes that no target took " +
			"(strata_notify_backlog_events counts them). They are kept, stored with the writes that made them, and delivered in " +
			"order once the target answers; writes go on meanwhile. The pod's log names the target and its error " +
			"('notifications: delivery failed'): check the webhook or broker, its address and credentials in the targets file. " +
			"Changes waiting for a replication remote count here too; StrataReplicationLag names the remote.",
	}, {
		name: "StrataNotifyTargetsRefused", severity: "warning", forDur: "5m",
		expr:    fmt.Sprintf(`max by (%s) (increase(%s[5m])) > 0`, byTenant, sel("strata_notify_targets_file_errors_total")),
		summary: "A server or gateway of " + who + " refuses its notification targets file.",
		description: "For 5 minutes a pod has read its targets file (the Secret TENANT-notify-targets, mounted) and refused it: " +
			"unreadable, malformed, or a target or replication remote that cannot be opened (a CA file without a certificate, " +
			"an unknown type). It keeps the targets and remotes it had, so a change of the Tenant's spec.notifications or " +
			"spec.replication has not taken effect there. The pod's log says why ('the targets file was read again and refused').",
	}, {
		name: "StrataReplicationLag", severity: "warning", forDur: "10m",
		expr:    fmt.Sprintf(`max by (%s, remote) (%s) > %d`, byTenant, sel("strata_replication_oldest_pending_seconds"), ReplicationLagSeconds),
		summary: "Changes of " + who + " have waited {{ $value | humanizeDuration }} to reach replication remote {{ $labels.remote }}.",
		description: "For 10 minutes a server or gateway has held changes older than 5 minutes that the remote did not take " +
			"(strata_replication_backlog_changes counts them; x-amz-replication-status says PENDING). They are kept, stored with " +
			"the writes that made them, and copied in order per key once the remote answers. The pod's log names the error " +
			"('notifications: delivery failed' with the remote's ARN): check that the remote Tenant or endpoint is up, its " +
			"credentials and CA (spec.replication.remotes), and strata admin replication.",
	}, {
		name: "StrataReplicationFailed", severity: "warning", forDur: "0m",
		expr:    fmt.Sprintf(`sum by (%s, bucket) (increase(%s[15m])) > 0`, byTenant, sel("strata_replication_changes_total", `result="failed"`)),
		summary: "Versions of bucket {{ $labels.bucket }} of " + who + " failed to replicate.",
		description: "In the last 15 minutes the destination refused versions for a reason that retrying does not cure (no such " +
			"bucket, access denied, versioning or object lock missing at the destination, an SSE-C object): they are marked " +
			"FAILED and not retried. The pod's log says why ('replication: a version failed to replicate'); once fixed, " +
			"strata admin replication resync BUCKET copies them.",
	}}
	if TLSEnabled(t) {
		alerts = append(alerts, alert{
			name: "StrataCertificateExpiring", severity: "warning", forDur: "1h",
			expr: fmt.Sprintf(`min by (%s) (%s) - time() < %d * 86400`,
				byTenant, sel("strata_tls_certificate_expiry_timestamp_seconds"), CertificateWarningDays),
			summary:     "The serving certificate of " + who + " expires in {{ $value | humanizeDuration }}.",
			description: certificateAction(t),
		}, alert{
			name: "StrataCAExpiring", severity: "warning", forDur: "1h",
			expr: fmt.Sprintf(`min by (%s) (%s) - time() < %d * 86400`,
				byTenant, sel("strata_tls_ca_expiry_timestamp_seconds"), CAWarningDays),
			summary:     "A CA that " + who + " trusts expires in {{ $value | humanizeDuration }}.",
			description: caAction(t),
		})
	}
	return alerts
}

// caAction says what to do about an expiring CA in the tenant's TLS mode.
func caAction(t *v1.Tenant) string {
	lead := fmt.Sprintf("A CA in the tenant's trust bundle (ca.crt of Secret %s) expires within %d days; every certificate it "+
		"signed stops verifying then. status.certificate.trustedCAs lists the CAs with their expiry. ", TLSSecretName(t), CAWarningDays)
	switch t.Spec.TLS.Mode {
	case v1.TLSExternal:
		return lead + "With tls.mode External, put a new CA next to the old one in ca.crt of Secret " + TLSSourceSecretName(t) +
			", then a certificate it signed; the operator moves the pods in order (docs/tls.md)."
	case v1.TLSCertManager:
		return lead + "cert-manager renews the tenant's own CA a third of its life before expiry: check Certificate " +
			CAIssuerName(t.Name) + " or the issuer named in spec.tls.issuerRef."
	default:
		return lead + "The operator replaces its CA a third of its life before expiry, or at once with " +
			"`kubectl annotate tenant " + t.Name + " " + v1.AnnotationRotateCA + "=$(date +%s) --overwrite`; check status.certificate.renewal and the operator's logs."
	}
}

// certificateAction says what to do about an expiring certificate in the
// tenant's TLS mode.
func certificateAction(t *v1.Tenant) string {
	lead := fmt.Sprintf("A pod serves a certificate that expires within %d days (negative: it has expired). ", CertificateWarningDays)
	tail := " Pods load a renewed certificate from the Secret without a restart."
	switch t.Spec.TLS.Mode {
	case v1.TLSExternal:
		return lead + "With tls.mode External, replace tls.crt and tls.key (and ca.crt) in Secret " + TLSSourceSecretName(t) +
			"; the operator stages them into Secret " + TLSSecretName(t) + " (the Tenant's CertificatesReady condition says if it cannot)." + tail
	case v1.TLSCertManager:
		return lead + "cert-manager should have renewed it: check Certificate " + t.Name + " (kubectl describe certificate), " +
			"its issuer and the Tenant's CertificatesReady condition and status.certificate.renewal." + tail
	default:
		return lead + "The operator renews it a third of its life before expiry: check the Tenant's CertificatesReady condition, " +
			"status.certificate.renewal, its Events and the operator's logs." + tail
	}
}
