package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// MetricUpgradePaused is 1 for a Tenant whose roll-out is paused by its
// health gate (charts/strata-operator's PrometheusRule alerts on it).
const MetricUpgradePaused = "strata_operator_tenant_upgrade_paused"

// tenantCollector exports what only the operator knows and an alert
// needs: a roll-out the health gate paused. It reads the Tenants from the
// manager's cache at scrape time, so a scrape costs no API call and a
// deleted Tenant leaves no stale series. The tenant's namespace is a label
// of its own (tenant_namespace): the operator's scrape sets namespace to
// the operator's.
type tenantCollector struct {
	reader        client.Reader
	upgradePaused *prometheus.Desc
}

func newTenantCollector(reader client.Reader) *tenantCollector {
	return &tenantCollector{
		reader: reader,
		upgradePaused: prometheus.NewDesc(MetricUpgradePaused,
			"1 when the Tenant's roll-out is paused: a server did not regain cluster health within spec.upgrade.healthGateTimeout (condition Upgrading, reason HealthGateFailed).",
			[]string{"tenant_namespace", "tenant"}, nil),
	}
}

// RegisterMetrics adds the operator's own metrics to reg (the manager's
// registry, served on its metrics endpoint). A second registration (tests
// that set up several managers in one process) keeps the first.
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader) error {
	err := reg.Register(newTenantCollector(reader))
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.upgradePaused }

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &v1.TenantList{}
	if err := c.reader.List(ctx, list); err != nil {
		// The cache is not synced yet (or is stopping): no samples rather
		// than zeros that would resolve a firing alert.
		return
	}
	for i := range list.Items {
		t := &list.Items[i]
		ch <- prometheus.MustNewConstMetric(c.upgradePaused, prometheus.GaugeValue, upgradePaused(t), t.Namespace, t.Name)
	}
}

// upgradePaused is 1 when the Tenant's Upgrading condition says the health
// gate stopped the roll-out.
func upgradePaused(t *v1.Tenant) float64 {
	if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionUpgrading); c != nil && c.Reason == v1.ReasonHealthGateFailed {
		return 1
	}
	return 0
}
