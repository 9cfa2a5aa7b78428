package builders

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// LabelMetrics marks the Services whose pods the ServiceMonitor scrapes
// (the S3 Service and gateway Services; not the headless one, which would
// scrape every server twice).
const LabelMetrics = "storage.strata.dev/metrics"

// MetricsPath is where every strata pod serves Prometheus metrics, on the
// S3 port, without authentication (like kubelet and kube-state-metrics
// endpoints; network policy is the place to restrict it).
const MetricsPath = "/strata/metrics"

// ServiceMonitor scrapes every server and gateway pod of the tenant, over
// TLS verified with the tenant's CA when TLS is on.
func ServiceMonitor(t *v1.Tenant) *monitoringv1.ServiceMonitor {
	sm := t.Spec.Monitoring.ServiceMonitor
	interval := sm.Interval
	if interval == "" {
		interval = "30s"
	}
	ep := monitoringv1.Endpoint{
		Port:     s3ServicePort(t).Name,
		Path:     MetricsPath,
		Interval: monitoringv1.Duration(interval),
		Scheme:   ptr.To(monitoringv1.SchemeHTTP),
	}
	if TLSEnabled(t) {
		ep.Scheme = ptr.To(monitoringv1.SchemeHTTPS)
		ep.TLSConfig = &monitoringv1.TLSConfig{SafeTLSConfig: monitoringv1.SafeTLSConfig{
			CA: monitoringv1.SecretOrConfigMap{Secret: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: TLSSecretName(t)}, Key: "ca.crt",
			}},
			// Pods are scraped by IP: verify the name every pod's
			// certificate carries.
			ServerName: ptr.To(fmt.Sprintf("%s.%s.svc", S3ServiceName(t.Name), t.Namespace)),
		}}
	}
	return &monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, Labels: merge(TenantLabels(t.Name), sm.Labels)},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector:          metav1.LabelSelector{MatchLabels: map[string]string{LabelTenant: t.Name, LabelMetrics: "true"}},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{t.Namespace}},
			Endpoints:         []monitoringv1.Endpoint{ep},
		},
	}
}

// PrometheusRule alerts on what a tenant's operators act on: drives
// offline, pods not scraped, capacity running out, healing that does not
// finish. Metric names are the engine's (engine/metrics).
func PrometheusRule(t *v1.Tenant) *monitoringv1.PrometheusRule {
	sel := fmt.Sprintf(`namespace=%q, service=~%q`, t.Namespace, t.Name+"(-.*)?")
	rule := func(alert, expr, forDur, severity, summary string) monitoringv1.Rule {
		d := monitoringv1.Duration(forDur)
		return monitoringv1.Rule{
			Alert: alert, Expr: intstr.FromString(expr), For: &d,
			Labels:      map[string]string{"severity": severity},
			Annotations: map[string]string{"summary": summary},
		}
	}
	return &monitoringv1.PrometheusRule{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace,
			Labels: merge(TenantLabels(t.Name), t.Spec.Monitoring.PrometheusRule.Labels)},
		Spec: monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{
			Name: "strata-" + t.Name,
			Rules: []monitoringv1.Rule{
				rule("StrataDriveOffline", fmt.Sprintf(`max by (namespace, pool, endpoint) (strata_drive_state{%s, state="offline"}) == 1`, sel),
					"5m", "warning", "A drive of tenant {{ $labels.namespace }}/"+t.Name+" is offline; objects are served from parity."),
				rule("StrataPodDown", fmt.Sprintf(`up{%s} == 0`, sel),
					"5m", "critical", "A strata pod of tenant {{ $labels.namespace }}/"+t.Name+" does not answer scrapes."),
				rule("StrataCapacityLow", fmt.Sprintf(`sum by (namespace, pool) (strata_drive_free_bytes{%s}) / sum by (namespace, pool) (strata_drive_total_bytes{%s}) < 0.1`, sel, sel),
					"15m", "warning", "Pool {{ $labels.pool }} of tenant "+t.Name+" has less than 10% of its drive space free."),
				rule("StrataHealingStuck", fmt.Sprintf(`max by (namespace) (strata_heal_drives_healing{%s}) > 0`, sel),
					"6h", "warning", "Drives of tenant "+t.Name+" have been healing for 6 hours."),
			},
		}}},
	}
}
