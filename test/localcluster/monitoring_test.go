package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// monitoringImages fails (or skips, outside CI) the test when --monitoring
// cannot run: prometheus-operator's and Prometheus' images and the CRDs
// come from hack/monitoring-images.sh.
func monitoringImages(t *testing.T, imagesDir string) {
	t.Helper()
	for _, d := range []string{"prometheus-operator", "prometheus-config-reloader", "prometheus", "prometheus-operator-crds"} {
		if _, err := os.Stat(filepath.Join(imagesDir, d)); err != nil {
			missing(t, fmt.Sprintf("%s not in %s: run `hack/monitoring-images.sh %s`", d, imagesDir, imagesDir))
		}
	}
}

// prometheusScrapes checks a cluster brought up with --monitoring:
// prometheus-operator and a Prometheus run as pods of the images
// hack/monitoring-images.sh built, the operator gives the demo tenant a
// ServiceMonitor and a PrometheusRule, and Prometheus, configured by
// prometheus-operator from them, scrapes every server pod with the
// tenant's metrics token over TLS verified with the tenant's CA, loads the
// tenant's rules, and the console charts from it. TestDemoTenantServesS3
// runs it last, on its own cluster (one bring-up, not two; the series have
// had the whole test to fill).
func prometheusScrapes(ctx context.Context, t *testing.T, c *cluster) {
	prom := c.in.PrometheusURL
	if prom == "" || !strings.Contains(c.out, prom) {
		t.Fatalf("up printed no Prometheus URL (info %q):\n%s", prom, c.out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.in.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=media,app.kubernetes.io/component=server"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range pods.Items {
		want = append(want, p.Name)
	}
	sort.Strings(want)
	if len(want) != 4 {
		t.Fatalf("server pods %v, want 4", want)
	}

	// Scrapes start within one interval (10 s in the demo tenant) of
	// prometheus-operator writing the configuration.
	t.Run("up is 1 for every server pod", func(t *testing.T) {
		waitFor(ctx, t, 3*time.Minute, func() error {
			return everyPod(prom, `up{namespace="default", tenant="media"}`, want, func(v string) bool { return v == "1" })
		})
	})
	t.Run("every server pod exports its drives' state", func(t *testing.T) {
		waitFor(ctx, t, time.Minute, func() error {
			return everyPod(prom, `count by (pod) (strata_drive_state{namespace="default", tenant="media"})`, want, func(v string) bool { return v != "0" })
		})
	})
	t.Run("the tenant's rules are loaded and evaluate", func(t *testing.T) {
		// Every alert of the PrometheusRule the operator made, in its group.
		pr, err := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{
			Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules",
		}).Namespace("default").Get(ctx, "media", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
		if len(groups) != 1 {
			t.Fatalf("PrometheusRule media has %d groups", len(groups))
		}
		group, _, _ := unstructured.NestedString(groups[0].(map[string]any), "name")
		rules, _, _ := unstructured.NestedSlice(groups[0].(map[string]any), "rules")
		var alerts []string
		for _, r := range rules {
			a, _, _ := unstructured.NestedString(r.(map[string]any), "alert")
			alerts = append(alerts, a)
		}
		sort.Strings(alerts)
		waitFor(ctx, t, 2*time.Minute, func() error { return rulesLoaded(prom, group, alerts) })
	})
	t.Run("the console charts the last hour from Prometheus", func(t *testing.T) {
		consoleCharts(ctx, t, c)
	})
}

// waitFor retries check every second until it succeeds or the time is
// up.
func waitFor(ctx context.Context, t *testing.T, limit time.Duration, check func() error) {
	t.Helper()
	waitEvery(ctx, t, limit, time.Second, check)
}

// waitEvery retries check every period until it succeeds or limit is up.
func waitEvery(ctx context.Context, t *testing.T, limit, period time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("after %s: %v", limit, err)
		}
		time.Sleep(period)
	}
}

// promGet reads one API answer of Prometheus into data.
func promGet(base, path string, query url.Values, data any) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(base + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("%s: HTTP %d: %.200s", path, resp.StatusCode, body)
	}
	if answer.Status != "success" {
		return fmt.Errorf("%s: %s", path, answer.Error)
	}
	return json.Unmarshal(answer.Data, data)
}

// everyPod checks that an instant query has one sample per pod of want,
// each whose value ok accepts, and none for other pods.
func everyPod(prom, query string, want []string, ok func(string) bool) error {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := promGet(prom, "/api/v1/query", url.Values{"query": {query}}, &data); err != nil {
		return err
	}
	got := map[string]string{}
	for _, r := range data.Result {
		got[r.Metric["pod"]] = fmt.Sprint(r.Value[1])
	}
	var pods []string
	for p, v := range got {
		if !ok(v) {
			return fmt.Errorf("%s: pod %s has %s", query, p, v)
		}
		pods = append(pods, p)
	}
	sort.Strings(pods)
	if !slices.Equal(pods, want) {
		return fmt.Errorf("%s: samples for pods %v, want %v", query, pods, want)
	}
	return nil
}

// rulesLoaded checks that Prometheus has the group with exactly the
// alerts, each evaluated without error.
func rulesLoaded(prom, group string, alerts []string) error {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			File  string `json:"file"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := promGet(prom, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return err
	}
	var names []string
	for _, g := range data.Groups {
		names = append(names, g.Name)
		if g.Name != group {
			continue
		}
		var got []string
		for _, r := range g.Rules {
			if r.Health != "ok" {
				return fmt.Errorf("rule %s of %s: health %q %s", r.Name, g.File, r.Health, r.LastError)
			}
			got = append(got, r.Name)
		}
		sort.Strings(got)
		if !slices.Equal(got, alerts) {
			return fmt.Errorf("group %s has alerts %v, want %v", group, got, alerts)
		}
		return nil
	}
	return fmt.Errorf("no rule group %s among %v", group, names)
}
