package builders

import (
	"fmt"
	"io"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// LabelMetrics marks the Services whose pods the ServiceMonitor scrapes
// (the S3 Service and gateway Services; not the headless one, which would
// scrape every server twice).
const LabelMetrics = "storage.strata.dev/metrics"

// MetricsPath is where every strata pod serves Prometheus metrics, on the
// S3 port, to scrapers that present the tenant's metrics token.
const MetricsPath = "/strata/metrics"

// MetricsTokenKey is the key of the metrics token Secret.
const MetricsTokenKey = "token"

// LabelTenantTarget is the label the ServiceMonitor puts on every series
// it scrapes: the tenant's name, which rules and dashboards select by.
const LabelTenantTarget = "tenant"

// NewMetricsToken generates the token Prometheus presents to the tenant's
// pods: 43 letters and digits (256 bits) from random (crypto/rand in the
// operator). The caller
// makes the Tenant its owner: unlike root keys, it protects no data, so
// it goes with the Tenant.
func NewMetricsToken(t *v1.Tenant, random io.Reader) (*corev1.Secret, error) {
	token, err := randomKey(random, 43)
	if err != nil {
		return nil, fmt.Errorf("generating metrics token: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsTokenSecretName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{MetricsTokenKey: []byte(token)},
	}, nil
}

// The scrape schemes in lower case: prometheus-operator's CRDs accept
// only "http" and "https" up to v0.86 (both cases from v0.87, whose Go
// constants are the upper-case ones), so these work with either.
const (
	schemeHTTP  monitoringv1.Scheme = "http"
	schemeHTTPS monitoringv1.Scheme = "https"
)

// ServiceMonitor scrapes every server and gateway pod of the tenant with
// the tenant's metrics token, over TLS verified with the tenant's CA when
// TLS is on, and labels every series with the tenant's name.
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
		Scheme:   ptr.To(schemeHTTP),
		// A constant, not a copy of a Service label: the rules and the
		// dashboard need it on every series, whatever Service a pod is
		// reached through.
		RelabelConfigs: []monitoringv1.RelabelConfig{{Action: "replace", TargetLabel: LabelTenantTarget, Replacement: ptr.To(t.Name)}},
	}
	// prometheus-operator reads the Secret from the ServiceMonitor's
	// namespace, which is the tenant's.
	ep.Authorization = &monitoringv1.SafeAuthorization{Type: "Bearer", Credentials: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: MetricsTokenSecretName(t.Name)}, Key: MetricsTokenKey,
	}}
	if TLSEnabled(t) {
		ep.Scheme = ptr.To(schemeHTTPS)
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
