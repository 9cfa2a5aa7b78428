package monitoring

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/controllers"
)

// TestExpressionsParse: every rule and dashboard expression is PromQL that
// Prometheus' parser accepts, and selects at least one metric.
func TestExpressionsParse(t *testing.T) {
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	bySource := map[string]int{}
	for _, e := range exprs {
		bySource[e.Source]++
		if strings.Contains(e.Query, "$") && !strings.Contains(e.Query, `"$1"`) {
			t.Errorf("%s: a template variable is left: %s", e, e.Query)
		}
		names, err := MetricNames(e.Query)
		if err != nil {
			t.Errorf("%s: %v\n%s", e, err, e.Query)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s selects no metric: %s", e, e.Query)
		}
	}
	for _, src := range []string{SourceTenantRules, SourceOperatorRules, SourceDashboard} {
		if bySource[src] == 0 {
			t.Errorf("no expression from %s", src)
		}
	}
}

// TestOperatorMetricsRegistered: every strata_operator_ metric an
// expression names is one the operator registers (the engine's are checked
// against live processes in test/engine).
func TestOperatorMetricsRegistered(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "store", Name: "media"}}).Build()
	reg := prometheus.NewRegistry()
	if err := controllers.RegisterMetrics(reg, c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, f := range families {
		registered[f.GetName()] = true
	}
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for _, e := range exprs {
		names, _ := MetricNames(e.Query)
		for _, n := range names {
			if !strings.HasPrefix(n, OperatorPrefix) {
				continue
			}
			used++
			if !registered[n] {
				t.Errorf("%s uses %s, which the operator does not register (it has %v)", e, n, registered)
			}
		}
	}
	if used == 0 {
		t.Error("no expression uses an operator metric: the upgrade-paused alert is missing")
	}
}

// TestDashboard: every panel queries the $datasource variable, every
// target selects the chosen namespace and tenant, and the panels the
// issue asks for exist.
func TestDashboard(t *testing.T) {
	d, err := Dashboard()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "namespace", "tenant"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}
	titles := map[string]bool{}
	var walk func([]DashboardPanel)
	walk = func(ps []DashboardPanel) {
		for _, p := range ps {
			titles[p.Title] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if uid := fmt.Sprint(p.Datasource["uid"]); uid != "${datasource}" {
				t.Errorf("panel %q: data source %q, want ${datasource}", p.Title, uid)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if uid := fmt.Sprint(tg.Datasource["uid"]); uid != "${datasource}" {
					t.Errorf("panel %q target %s: data source %q", p.Title, tg.RefID, uid)
				}
				if !strings.Contains(tg.Expr, `namespace="$namespace"`) || !strings.Contains(tg.Expr, `tenant="$tenant"`) {
					t.Errorf("panel %q target %s does not select $namespace and $tenant: %s", p.Title, tg.RefID, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	for _, want := range []string{"Capacity used", "Used by pool", "Requests by API", "Requests by status", "Request duration p50 / p99",
		"Time to first byte p50 / p99", "Drives by state", "Heal queue", "Peers offline"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}
