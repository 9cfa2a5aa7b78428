package main

import (
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/strata-storage/strata/engine/buildinfo"
)

// TestWatchNamespaces: --watch-namespaces limits the caches to the listed
// namespaces, except the CSIStorageCapacity objects placement reads
// wherever CSI drivers publish them; without it every namespace is watched.
func TestWatchNamespaces(t *testing.T) {
	if got := splitNamespaces(" team-a, ,team-b,"); !slices.Equal(got, []string{"team-a", "team-b"}) {
		t.Fatalf("split: %v", got)
	}
	if o := cacheOptions(nil); o.DefaultNamespaces != nil {
		t.Fatalf("no list: namespaces %v", o.DefaultNamespaces)
	}
	o := cacheOptions([]string{"team-a", "team-b"})
	if len(o.DefaultNamespaces) != 2 {
		t.Fatalf("namespaces %v", o.DefaultNamespaces)
	}
	for obj, by := range o.ByObject {
		if _, ok := obj.(*storagev1.CSIStorageCapacity); ok {
			if _, all := by.Namespaces[cache.AllNamespaces]; !all {
				t.Fatalf("CSIStorageCapacity namespaces %v", by.Namespaces)
			}
			return
		}
	}
	t.Fatal("CSIStorageCapacity limited to the watched namespaces")
}

func TestDefaultImageChecked(t *testing.T) {
	for _, ok := range []string{buildinfo.EngineImage(), "strata:dev", "localhost:5000/strata@sha256:" + strings.Repeat("ab", 32)} {
		if err := checkImage(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ":bar13", "Strata:1", "ghcr.io/strata:-x"} {
		if err := checkImage(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestWebhookCertFlags: --webhook-cert-secret takes the Service as
// NAMESPACE/NAME and excludes --webhook-cert-dir; the certificate is for
// the names the API server calls the Service by.
func TestWebhookCertFlags(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	ok := options{
		webhookCertSecret: "op-webhook-ca", webhookService: "strata-system/op-webhook", clusterDomain: "cluster.local",
		validatingWebhooks: "op-validating", mutatingWebhooks: "op-mutating",
	}
	if _, err := newWebhookCertKeeper(cfg, newScheme(), ok); err != nil {
		t.Fatalf("valid flags refused: %v", err)
	}
	for name, change := range map[string]func(*options){
		"a certificate directory too": func(o *options) { o.webhookCertDir = "/certs" },
		"a Service without namespace": func(o *options) { o.webhookService = "op-webhook" },
		"no mutating configuration":   func(o *options) { o.mutatingWebhooks = "" },
	} {
		o := ok
		change(&o)
		if _, err := newWebhookCertKeeper(cfg, newScheme(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	want := []string{"op-webhook.strata-system.svc", "op-webhook.strata-system.svc.example.org"}
	if got := serviceDNSNames("strata-system", "op-webhook", "example.org"); !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}
