package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// chartWindow and chartStep are the tenant page's charts: the last hour, a
// point every 30 s.
const (
	chartWindow = time.Hour
	chartStep   = 30 * time.Second
)

// chart is one PromQL expression the tenant page draws; %s is the
// tenant's label matchers (Config.PrometheusSelector), with a trailing
// comma when there are any.
type chart struct {
	Title string
	Unit  string
	expr  string
}

var charts = []chart{
	{"Requests", "per second", `sum(rate(strata_s3_requests_total{%s}[2m]))`},
	// A tenant without a 5xx has no such series: zero, not a gap.
	{"Errors (5xx)", "per second", `sum(rate(strata_s3_requests_total{%sstatus=~"5.."}[2m])) or vector(0)`},
	{"Latency, 99th percentile", "seconds", `histogram_quantile(0.99, sum by (le) (rate(strata_s3_request_duration_seconds_bucket{%s}[2m])))`},
}

// series is one chart's points, [unix seconds, value].
type series struct {
	Title  string       `json:"title"`
	Unit   string       `json:"unit"`
	Points [][2]float64 `json:"points"`
}

type chartsView struct {
	// Configured is false without a Prometheus (the page then shows no
	// charts).
	Configured bool     `json:"configured"`
	Series     []series `json:"series"`
	// Error says why Prometheus did not answer.
	Error string `json:"error,omitempty"`
}

// charts answers the tenant page's charts from Prometheus, to credentials
// that may read the admin API (the same audience as the rest of the page).
func (c *Console) charts(w http.ResponseWriter, r *http.Request, k *call) {
	if _, err := c.admin(k.ses).Info(r.Context()); err != nil {
		writeAdminError(w, err)
		return
	}
	v := chartsView{Configured: c.cfg.PrometheusURL != "", Series: []series{}}
	if !v.Configured {
		writeJSON(w, http.StatusOK, v)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	end := time.Now()
	sel := c.cfg.PrometheusSelector
	if sel != "" && !strings.HasSuffix(sel, ",") {
		sel += ","
	}
	for _, ch := range charts {
		points, err := c.queryRange(ctx, fmt.Sprintf(ch.expr, sel), end.Add(-chartWindow), end)
		if err != nil {
			v.Error = err.Error()
			break
		}
		v.Series = append(v.Series, series{Title: ch.Title, Unit: ch.Unit, Points: points})
	}
	writeJSON(w, http.StatusOK, v)
}

// queryRange asks Prometheus' HTTP API for one expression's values over
// [start, end], the first series only (the expressions sum to one).
func (c *Console) queryRange(ctx context.Context, expr string, start, end time.Time) ([][2]float64, error) {
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.Itoa(int(chartStep.Seconds()))}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.cfg.PrometheusURL, "/")+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.prometheus.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the Prometheus at %s did not answer: %w", c.cfg.PrometheusURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Status != "success" {
		return nil, fmt.Errorf("the Prometheus at %s answered %s: %s", c.cfg.PrometheusURL, resp.Status, firstNonEmpty(doc.Error, string(body[:min(len(body), 200)])))
	}
	points := [][2]float64{}
	if len(doc.Data.Result) == 0 {
		return points, nil
	}
	for _, pv := range doc.Data.Result[0].Values {
		ts, _ := pv[0].(float64)
		s, _ := pv[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		points = append(points, [2]float64{ts, v})
	}
	return points, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
