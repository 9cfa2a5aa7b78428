// Package monitoring gathers every PromQL expression Strata ships (the
// tenant's alerting rules from internal/builders, the operator chart's rule
// file and the Grafana dashboard) so tests can parse them, unit-test the
// alerts, and check that each metric they name is one a live process
// exports (test/engine) or the operator registers.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
)

// Where an expression comes from.
const (
	SourceTenantRules   = "tenant PrometheusRule (internal/builders)"
	SourceOperatorRules = "charts/strata-operator/rules/operator.yaml"
	SourceDashboard     = "charts/strata-operator/dashboards/strata.json"
)

// OperatorPrefix starts the names of the operator's own metrics; every
// other strata_ metric comes from the engine.
const OperatorPrefix = "strata_operator_"

// Expression is one PromQL query, named by where it is.
type Expression struct {
	Source, Name, Query string
}

func (e Expression) String() string { return e.Source + ": " + e.Name }

// Rule is one alerting rule as Prometheus would load it.
type Rule struct {
	Source      string
	Alert, Expr string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SampleTenant is the tenant whose rules are checked: TLS on, so the
// certificate alert is among them.
func SampleTenant() *v1.Tenant {
	t := &v1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: "store", Name: "media"}}
	t.Spec.TLS.Mode = v1.TLSOperator
	return t
}

// Rules returns the sample tenant's rules and the operator chart's.
func Rules() ([]Rule, error) {
	var out []Rule
	add := func(source string, groups []monitoringv1.RuleGroup) {
		for _, g := range groups {
			for _, r := range g.Rules {
				rule := Rule{Source: source, Alert: r.Alert, Expr: r.Expr.String(), Labels: r.Labels, Annotations: r.Annotations}
				if r.For != nil {
					rule.For = string(*r.For)
				}
				out = append(out, rule)
			}
		}
	}
	add(SourceTenantRules, builders.PrometheusRule(SampleTenant()).Spec.Groups)
	b, err := os.ReadFile(filepath.Join(RepoRoot(), SourceOperatorRules))
	if err != nil {
		return nil, err
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", SourceOperatorRules, err)
	}
	add(SourceOperatorRules, spec.Groups)
	return out, nil
}

// DashboardVariables are the values the dashboard's template variables
// take in the checks ($__rate_interval is Grafana's own).
var DashboardVariables = map[string]string{
	"$__rate_interval": "1m", "$namespace": "store", "$tenant": "media",
}

// DashboardModel is the part of Grafana's dashboard model the checks read.
type DashboardModel struct {
	Panels     []DashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// DashboardPanel is a panel (or a row holding panels).
type DashboardPanel struct {
	Title      string           `json:"title"`
	Type       string           `json:"type"`
	Datasource map[string]any   `json:"datasource"`
	Panels     []DashboardPanel `json:"panels"`
	Targets    []struct {
		Expr       string         `json:"expr"`
		RefID      string         `json:"refId"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

// Dashboard reads the shipped dashboard.
func Dashboard() (*DashboardModel, error) {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), SourceDashboard))
	if err != nil {
		return nil, err
	}
	d := &DashboardModel{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%s: %w", SourceDashboard, err)
	}
	return d, nil
}

// Substitute replaces the dashboard's template variables by sample values.
func Substitute(q string) string {
	// Longest names first: $__rate_interval before a hypothetical $__rate.
	names := make([]string, 0, len(DashboardVariables))
	for n := range DashboardVariables {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		q = strings.ReplaceAll(q, n, DashboardVariables[n])
	}
	return q
}

// labelValues matches a variable query label_values(SELECTOR, LABEL): the
// selector is PromQL, the function is Grafana's.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// DashboardExpressions are the dashboard's target expressions and the
// selectors of its variable queries, variables substituted.
func DashboardExpressions() ([]Expression, error) {
	d, err := Dashboard()
	if err != nil {
		return nil, err
	}
	var out []Expression
	var walk func([]DashboardPanel)
	walk = func(ps []DashboardPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Expression{Source: SourceDashboard, Name: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Query: Substitute(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		out = append(out, Expression{Source: SourceDashboard, Name: "variable " + v.Name, Query: Substitute(m[1])})
	}
	return out, nil
}

// Expressions are every rule's and the dashboard's.
func Expressions() ([]Expression, error) {
	rules, err := Rules()
	if err != nil {
		return nil, err
	}
	var out []Expression
	for _, r := range rules {
		out = append(out, Expression{Source: r.Source, Name: "alert " + r.Alert, Query: r.Expr})
	}
	dash, err := DashboardExpressions()
	if err != nil {
		return nil, err
	}
	return append(out, dash...), nil
}

// Parse parses a query as Prometheus does.
func Parse(q string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(q)
}

// MetricNames are the metric names a query selects, sorted.
func MetricNames(q string) ([]string, error) {
	expr, err := Parse(q)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name != "" {
			seen[name] = true
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// ScrapeMetrics are the series Prometheus adds to every target itself.
var ScrapeMetrics = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// EngineMetricNames maps every metric name the shipped expressions use
// that a strata process must export (not the operator's, not Prometheus'
// own) to the expressions that use it.
func EngineMetricNames() (map[string][]string, error) {
	exprs, err := Expressions()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range exprs {
		names, err := MetricNames(e.Query)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e, err)
		}
		for _, n := range names {
			if ScrapeMetrics[n] || strings.HasPrefix(n, OperatorPrefix) {
				continue
			}
			out[n] = append(out[n], e.String())
		}
	}
	return out, nil
}
