package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// TestUpgradePausedMetric: one series per Tenant, 1 only for a roll-out
// the health gate paused, labelled with the Tenant's namespace.
func TestUpgradePausedMetric(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tenant := func(ns, name, reason string) *v1.Tenant {
		tn := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if reason != "" {
			tn.Status.Conditions = []metav1.Condition{{Type: v1.ConditionUpgrading, Status: metav1.ConditionFalse, Reason: reason}}
		}
		return tn
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		tenant("store", "media", v1.ReasonHealthGateFailed),
		tenant("store", "logs", v1.ReasonReconciled),
		tenant("other", "media", ""),
	).Build()
	reg := prometheus.NewRegistry()
	if err := RegisterMetrics(reg, c); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(reg, c); err != nil {
		t.Fatalf("a second registration must keep the first: %v", err)
	}
	want := `
# HELP strata_operator_tenant_upgrade_paused 1 when the Tenant's roll-out is paused: a server did not regain cluster health within spec.upgrade.healthGateTimeout (condition Upgrading, reason HealthGateFailed).
# TYPE strata_operator_tenant_upgrade_paused gauge
strata_operator_tenant_upgrade_paused{tenant="logs",tenant_namespace="store"} 0
strata_operator_tenant_upgrade_paused{tenant="media",tenant_namespace="other"} 0
strata_operator_tenant_upgrade_paused{tenant="media",tenant_namespace="store"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricUpgradePaused); err != nil {
		t.Fatal(err)
	}
}
