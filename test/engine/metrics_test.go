package engine

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/test/monitoring"
)

const metricsToken = "scrape-token-for-tests"

// scrapeMetrics GETs /strata/metrics with a bearer token ("" sends none)
// and returns the status and the parsed families.
func scrapeMetrics(t *testing.T, hc *http.Client, base, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/strata/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return resp.StatusCode, families
}

// exported reports whether a name an expression selects is a series the
// families hold: a family's own name, or a histogram's _bucket, _sum and
// _count (a summary's _sum and _count).
func exported(name string, families map[string]*dto.MetricFamily) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f, ok := families[base]; ok {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				return true
			case dto.MetricType_SUMMARY:
				return suffix != "_bucket"
			}
		}
	}
	return false
}

// TestShippedMetricNamesAreExported: every metric the shipped alerting
// rules and Grafana dashboard select (test/monitoring gathers them) is one
// a live `strata server` or `strata gateway` exports to a scraper holding
// its token: a server with TLS and two pools, one of them draining, after
// S3 traffic, and a gateway. Without the token both answer 401.
func TestShippedMetricNamesAreExported(t *testing.T) {
	t.Parallel()
	want, err := monitoring.EngineMetricNames()
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "metrics-token")
	if err := os.WriteFile(tokenFile, []byte(metricsToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	certs := t.TempDir()
	cert := writeCert(t, certs, 1)
	// A trust bundle too, as every pod of a tenant has: the CA expiry
	// metric the StrataCAExpiring alert reads comes from it.
	if err := os.WriteFile(filepath.Join(certs, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// A notification target, so the notification metrics are exported.
	s := &server{t: t, addr: freeAddr(t), env: notifyTargets(t, startWebhook(t), nil)}
	root := t.TempDir()
	s.args = []string{"server", "--address", s.addr, "--certs-dir", certs, "--metrics-token-file", tokenFile,
		"--drive-monitor-interval", "500ms", "--shutdown-delay", "0s",
		filepath.Join(root, "p0-d{1...4}"), filepath.Join(root, "p1-d{1...4}")}
	s.startProcess()
	running.Store(t, s)
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			l := s.logs()
			t.Logf("server log (last 8 KiB):\n%s", l[max(0, len(l)-8<<10):])
		}
	})
	base := "https://" + s.addr
	waitFor(t, "server ready over TLS", 30*time.Second, func() bool {
		resp, err := hc.Get(base + "/strata/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Traffic for the request metrics: writes, reads, listings, errors.
	mc, err := minio.New(s.addr, &minio.Options{Creds: miniocreds.NewStaticV4(rootUser, rootPassword, ""), Secure: true,
		Transport: hc.Transport, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "metrics", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		body := bytes.Repeat([]byte{byte(i)}, 64<<10)
		if _, err := mc.PutObject(ctx, "metrics", fmt.Sprintf("o%d", i), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		o, err := mc.GetObject(ctx, "metrics", fmt.Sprintf("o%d", i), minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, o)
		o.Close()
	}
	if _, err := mc.StatObject(ctx, "metrics", "missing", minio.StatObjectOptions{}); err == nil {
		t.Fatal("HEAD of a missing object succeeded")
	}
	for range mc.ListObjects(ctx, "metrics", minio.ListObjectsOptions{}) {
	}

	// A quota for the bucket metrics, a drain for the decommission ones.
	for _, c := range []struct {
		method, path string
		want         int
	}{{http.MethodPut, "buckets/metrics/quota?bytes=1048576000", http.StatusOK}, {http.MethodPost, "pools/pool-1/decommission", http.StatusAccepted}} {
		req, _ := http.NewRequest(c.method, base+adminapi.Prefix+c.path, nil)
		if err := adminapi.Sign(req, rootUser, rootPassword, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}

	for _, tok := range []string{"", "wrong-token"} {
		if code, _ := scrapeMetrics(t, hc, base, tok); code != http.StatusUnauthorized {
			t.Errorf("server metrics with token %q: %d, want 401", tok, code)
		}
	}
	var serverFamilies map[string]*dto.MetricFamily
	waitFor(t, "the drain's progress in the metrics", 30*time.Second, func() bool {
		_, serverFamilies = scrapeMetrics(t, hc, base, metricsToken)
		return serverFamilies["strata_decommission_objects_moved"] != nil
	})

	// The gateway replicates a bucket to the server, so the replication
	// metrics are exported.
	if err := mc.MakeBucket(ctx, "repl-dr", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mc.EnableVersioning(ctx, "repl-dr"); err != nil {
		t.Fatal(err)
	}
	remote, _ := json.Marshal(map[string]any{"targets": []map[string]string{{"id": "dr", "type": "s3", "endpoint": base,
		"username": rootUser, "password": rootPassword, "caFile": filepath.Join(certs, "ca.crt")}}})
	targets := filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(targets, remote, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, t.TempDir(), "--metrics-token-file", tokenFile)
	g.kill()
	g.env = []string{"STRATA_NOTIFY_TARGETS_FILE=" + targets}
	g.restart()
	gc := g.aws()
	versionedBucket(t, gc, "repl")
	replicateAll(t, g, "repl", "repl-dr")
	put(t, gc, "repl", "o", []byte("replicated"))
	if code, _ := scrapeMetrics(t, http.DefaultClient, g.url(), ""); code != http.StatusUnauthorized {
		t.Errorf("gateway metrics without the token: %d, want 401", code)
	}
	var gatewayFamilies map[string]*dto.MetricFamily
	waitFor(t, "the gateway's volume and replication in the metrics", 30*time.Second, func() bool {
		_, gatewayFamilies = scrapeMetrics(t, http.DefaultClient, g.url(), metricsToken)
		return gatewayFamilies["strata_gateway_volume_total_bytes"] != nil && gatewayFamilies["strata_replication_changes_total"] != nil
	})

	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !exported(n, serverFamilies) && !exported(n, gatewayFamilies) {
			t.Errorf("%s is exported by neither a server nor a gateway; used by:\n  %s", n, strings.Join(want[n], "\n  "))
		}
	}
	t.Logf("%d metric names of the rules and dashboard checked against a live server and gateway", len(names))
}
