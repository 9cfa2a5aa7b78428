package monitoring

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// A small rule-test harness in the manner of promtool's `test rules`:
// input series in promtool's notation, evaluated every interval from time
// 0; an alert fires once its expression has returned a series at every
// evaluation for the rule's `for` duration, as in Prometheus' rule
// manager. Annotations are expanded with Prometheus' template engine.

// interval is the scrape and evaluation interval of the tests.
const interval = time.Minute

// inputSeries is one series: a selector and its values, one per interval
// from time 0 ('1+0x10', '0 1 _ 3'), as in promtool's input_series.
type inputSeries struct{ series, values string }

// firing is an alert the harness found firing: its labels (the series'
// without __name__, the rule's, alertname) and expanded annotations.
type firing struct {
	labels      map[string]string
	annotations map[string]string
}

// sample is a float sample (chunks.Sample).
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

// seriesSet walks a slice of series.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// load turns input series into a queryable store.
func load(t *testing.T, input []inputSeries) storage.Queryable {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	var all []storage.Series
	for _, in := range input {
		lset, values, err := p.ParseSeriesDesc(in.series + " " + in.values)
		if err != nil {
			t.Fatalf("input series %s %q: %v", in.series, in.values, err)
		}
		var samples []chunks.Sample
		for i, v := range values {
			if v.Omitted {
				continue
			}
			samples = append(samples, sample{t: int64(i) * interval.Milliseconds(), f: v.Value})
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
			for _, s := range all {
				if matchAll(s.Labels(), matchers) {
					out = append(out, s)
				}
			}
			sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
			return &seriesSet{series: out}
		},
	}}
}

func matchAll(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// evalAlert evaluates rule over the input every interval up to at and
// returns the alerts firing at at.
func evalAlert(t *testing.T, rule Rule, input []inputSeries, at time.Duration) []firing {
	t.Helper()
	hold := time.Duration(0)
	if rule.For != "" {
		d, err := model.ParseDuration(rule.For)
		if err != nil {
			t.Fatalf("%s: for %q: %v", rule.Alert, rule.For, err)
		}
		hold = time.Duration(d)
	}
	store := load(t, input)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	query := func(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
		qry, err := engine.NewInstantQuery(ctx, store, nil, q, ts)
		if err != nil {
			return nil, err
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Vector()
	}
	activeSince := map[string]time.Duration{}
	var last promql.Vector
	for ts := time.Duration(0); ts <= at; ts += interval {
		vec, err := query(ctx, rule.Expr, time.Unix(0, 0).Add(ts))
		if err != nil {
			t.Fatalf("%s at %s: %v", rule.Alert, ts, err)
		}
		seen := map[string]bool{}
		for _, s := range vec {
			k := s.Metric.String()
			seen[k] = true
			if _, ok := activeSince[k]; !ok {
				activeSince[k] = ts
			}
		}
		for k := range activeSince {
			if !seen[k] {
				delete(activeSince, k)
			}
		}
		last = vec
	}
	var out []firing
	for _, s := range last {
		if at-activeSince[s.Metric.String()] < hold {
			continue
		}
		lb := labels.NewBuilder(s.Metric)
		lb.Del(model.MetricNameLabel)
		for k, v := range rule.Labels {
			lb.Set(k, v)
		}
		lb.Set(labels.AlertName, rule.Alert)
		f := firing{labels: lb.Labels().Map(), annotations: map[string]string{}}
		data := template.AlertTemplateData(s.Metric.Map(), nil, "", s)
		for name, text := range rule.Annotations {
			// The variables Prometheus' rule manager defines for templates.
			defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
			exp := template.NewTemplateExpander(ctx, defs+text, "__alert_"+rule.Alert, data,
				model.Time(at.Milliseconds()), template.QueryFunc(query), &url.URL{}, nil)
			res, err := exp.Expand()
			if err != nil {
				t.Fatalf("%s: annotation %s: %v", rule.Alert, name, err)
			}
			f.annotations[name] = res
		}
		out = append(out, f)
	}
	return out
}

// ruleNamed finds a shipped rule.
func ruleNamed(t *testing.T, alert string) Rule {
	t.Helper()
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Alert == alert {
			return r
		}
	}
	t.Fatalf("no alert %s", alert)
	return Rule{}
}

func describe(fs []firing) string {
	var out []string
	for _, f := range fs {
		keys := slices.Sorted(maps.Keys(f.labels))
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("%s=%q", k, f.labels[k]))
		}
		out = append(out, "{"+strings.Join(kv, ", ")+"}")
	}
	return "[" + strings.Join(out, " ") + "]"
}
