package engine

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestInfoSignsAndDecodes: the admin API is asked with a SigV4 signature
// by the root keys; a server of an earlier build, which announces Basic,
// is asked again with Basic; the answer decodes; a wrong key is an error;
// an unknown CA is not trusted.
func TestInfoSignsAndDecodes(t *testing.T) {
	const answer = `{"version":"0.1.0","deploymentID":"d","pools":[{"name":"pool-a","state":"Active","sets":1,"setSize":4,"parity":2,
		"drives":[{"endpoint":"e0","state":"online"},{"endpoint":"e1","state":"healing"}]}],"capacity":{"totalBytes":100,"usableBytes":50}}`
	serve := func(allowed func(r *http.Request) bool, announce string) *httptest.Server {
		return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !allowed(r) {
				w.Header().Set("WWW-Authenticate", announce)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if r.URL.Path != "/strata/admin/v1/info" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(answer))
		}))
	}
	current := serve(func(r *http.Request) bool {
		return strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=root/") && r.Header.Get("X-Amz-Date") != ""
	}, "AWS4-HMAC-SHA256")
	defer current.Close()
	old := serve(func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "root" && p == "secret"
	}, `Basic realm="strata admin"`)
	defer old.Close()
	for _, srv := range []*httptest.Server{current, old} {
		ca := pemOf(srv.Certificate().Raw)
		info, err := HTTPClient{}.Info(context.Background(), Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "secret", CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		if info.Pools[0].Drives[1].State != DriveHealing || info.Capacity.UsableBytes != 50 {
			t.Fatalf("info = %+v", info)
		}
		if _, err := (HTTPClient{}).Info(context.Background(), Endpoint{URL: srv.URL}); err == nil {
			t.Fatal("an unknown CA was trusted")
		}
	}
	_, err := HTTPClient{}.Info(context.Background(), Endpoint{URL: old.URL, AccessKey: "root", SecretKey: "wrong", CA: pemOf(old.Certificate().Raw)})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v", err)
	}
}

// A minimal S3 surface: HEAD/PUT bucket and PUT ?versioning.
func TestEnsureBucketsCreatesMissingAndSetsVersioning(t *testing.T) {
	var mu sync.Mutex
	buckets := map[string]bool{"existing": true}
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=root/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		name := strings.Trim(r.URL.Path, "/")
		_, versioning := r.URL.Query()["versioning"]
		calls = append(calls, r.Method+" "+name+map[bool]string{true: "?versioning"}[versioning])
		switch {
		case name == "unwell":
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.Method == http.MethodHead && buckets[name]:
		case r.Method == http.MethodHead:
			w.WriteHeader(http.StatusNotFound)
		case r.Method == http.MethodPut && versioning && name == "refused":
			w.Header().Set("X-Amz-Request-Id", fmt.Sprint(len(calls)))
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`<Error><Code>InvalidBucketState</Code><Message>not this one</Message></Error>`))
		case r.Method == http.MethodPut && versioning:
		case r.Method == http.MethodPut:
			buckets[name] = true
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	defer srv.Close()
	err := HTTPClient{}.EnsureBuckets(context.Background(), Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "s"},
		[]Bucket{{Name: "existing"}, {Name: "photos", Versioning: "Enabled"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "HEAD existing,HEAD photos,PUT photos,PUT photos?versioning"
	if got := strings.Join(calls, ","); got != want {
		t.Fatalf("calls = %s, want %s", got, want)
	}

	// A bucket S3 refuses does not stop the ones after it, and is named.
	calls = nil
	err = HTTPClient{}.EnsureBuckets(context.Background(), Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "s"},
		[]Bucket{{Name: "refused", Versioning: "Enabled"}, {Name: "logs", Versioning: "Enabled"}})
	// The service's answer, without the request's ID: the message of a
	// condition must not change at every pass.
	if err == nil || err.Error() != "setting versioning of bucket refused: InvalidBucketState: not this one" {
		t.Fatalf("err = %v, want the refused bucket's answer alone", err)
	}
	if got := FailedBuckets(err); !slices.Equal(got, []string{"refused"}) {
		t.Fatalf("FailedBuckets = %q, want [refused]", got)
	}
	want = "HEAD refused,PUT refused,PUT refused?versioning,HEAD logs,PUT logs,PUT logs?versioning"
	if got := strings.Join(calls, ","); got != want {
		t.Fatalf("calls = %s, want %s", got, want)
	}
	if FailedBuckets(nil) != nil {
		t.Fatal("FailedBuckets(nil) names buckets")
	}

	// Servers that fail every request (5xx) stop it at the first bucket:
	// every other would get the same answer.
	calls = nil
	err = HTTPClient{}.EnsureBuckets(context.Background(), Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "s"},
		[]Bucket{{Name: "unwell"}, {Name: "logs"}})
	if err == nil || FailedBuckets(err) != nil || slices.Contains(calls, "HEAD logs") {
		t.Fatalf("err = %v (FailedBuckets %q), calls %q: want the tenant's error, no bucket named, logs not asked", err, FailedBuckets(err), calls)
	}

	// An endpoint that does not answer stops at the first bucket: the
	// others would wait as long for the same answer.
	srv.Close()
	err = HTTPClient{}.EnsureBuckets(context.Background(), Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "s"},
		[]Bucket{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	if err == nil || !strings.Contains(err.Error(), "tenant S3 endpoint "+srv.URL) || FailedBuckets(err) != nil {
		t.Fatalf("err = %v (FailedBuckets %q), want the endpoint's and no bucket named", err, FailedBuckets(err))
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestClusterHealthGate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/strata/health/cluster" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("maintenance") == "true" {
			w.WriteHeader(http.StatusPreconditionFailed)
			_, _ = w.Write([]byte("set 0 would lose write quorum"))
		}
	}))
	defer srv.Close()
	if err := (HTTPClient{}).ClusterHealth(context.Background(), Endpoint{URL: srv.URL}, false); err != nil {
		t.Fatal(err)
	}
	err := HTTPClient{}.ClusterHealth(context.Background(), Endpoint{URL: srv.URL}, true)
	if err == nil || !strings.Contains(err.Error(), "412") || !strings.Contains(err.Error(), "set 0 would lose write quorum") {
		t.Fatalf("err = %v", err)
	}
}

// TestTLSSignsAndDecodes: a pod's TLS is asked of the admin API, signed
// like Info, and decodes into the engine's own type.
func TestTLSSignsAndDecodes(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=root/") || r.URL.Path != "/strata/admin/v1/tls" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"certificate":{"sha256":"aa","subject":"CN=pod","issuer":"CN=ca-2","notAfter":"2031-05-17T12:00:00Z"},
			"trustedCAs":[{"sha256":"c1","subject":"CN=ca-1"},{"sha256":"c2","subject":"CN=ca-2"}]}`))
	}))
	defer srv.Close()
	ep := Endpoint{URL: srv.URL, AccessKey: "root", SecretKey: "secret", CA: pemOf(srv.Certificate().Raw)}
	info, err := HTTPClient{}.TLS(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	if info.Certificate == nil || info.Certificate.Issuer != "CN=ca-2" || info.InternodeCertificate != nil ||
		len(info.TrustedCAs) != 2 || info.TrustedCAs[1].SHA256 != "c2" {
		t.Fatalf("TLS = %+v", info)
	}
	ep.AccessKey = "other"
	if _, err := (HTTPClient{}).TLS(context.Background(), ep); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unsigned by root: %v", err)
	}
}
