package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestBundle generates the bundle from the repository's config into a scratch
// directory and checks what OLM relies on (operator-framework/api's validators
// cannot be installed here, so these are our own structural checks).
func TestBundle(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, dir := range []string{"config/crd/bases", "config/rbac", "config/manager", "config/samples", "config/webhook"} {
		copyDir(t, filepath.Join(repo, dir), filepath.Join(root, dir))
	}
	const image = "example.com/strata-operator:9.9.9"
	if err := run(root, "9.9.9", image); err != nil {
		t.Fatalf("generating the bundle: %v", err)
	}

	csv, err := readObject(filepath.Join(root, "bundle/manifests/strata-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if csv["kind"] != "ClusterServiceVersion" || csv["metadata"].(object)["name"] != "strata-operator.v9.9.9" {
		t.Fatalf("CSV kind/name wrong: %v %v", csv["kind"], csv["metadata"].(object)["name"])
	}
	spec := csv["spec"].(object)
	if spec["version"] != "9.9.9" {
		t.Errorf("spec.version = %v", spec["version"])
	}

	// Every CRD in the bundle is owned by the CSV, with its served version.
	crds, _ := filepath.Glob(filepath.Join(root, "bundle/manifests/storage.strata.dev_*.yaml"))
	if len(crds) != 5 {
		t.Fatalf("bundle has %d CRDs, want 5", len(crds))
	}
	owned := map[string]object{}
	for _, o := range spec["customresourcedefinitions"].(object)["owned"].([]any) {
		owned[o.(object)["name"].(string)] = o.(object)
	}
	for _, f := range crds {
		crd, err := readObject(f)
		if err != nil {
			t.Fatal(err)
		}
		name := crd["metadata"].(object)["name"].(string)
		o, ok := owned[name]
		if !ok {
			t.Errorf("CRD %s is not owned by the CSV", name)
			continue
		}
		if o["version"] != "v1alpha1" || o["description"] == "" {
			t.Errorf("owned CRD %s: version %v, description %q", name, o["version"], o["description"])
		}
	}

	// Every generated webhook is a webhook definition OLM serves.
	defs, _ := spec["webhookdefinitions"].([]any)
	if len(defs) != 6 {
		t.Fatalf("CSV has %d webhook definitions, want 6 (defaulting and validation of three kinds)", len(defs))
	}
	for _, d := range defs {
		d := d.(object)
		if d["deploymentName"] != "strata-operator" || d["webhookPath"] == "" || fmt.Sprint(d["targetPort"]) != "9443" {
			t.Errorf("webhook definition %v", d)
		}
	}

	// alm-examples is a JSON array of objects of owned kinds.
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv["metadata"].(object)["annotations"].(object)["alm-examples"].(string)), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON array: %v", err)
	}
	kinds := map[string]bool{}
	for _, o := range owned {
		kinds[o["kind"].(string)] = true
	}
	if len(examples) < 3 {
		t.Errorf("alm-examples has %d objects, want one per sample", len(examples))
	}
	for _, e := range examples {
		if !kinds[e["kind"].(string)] {
			t.Errorf("alm-example of kind %v is not an owned CRD", e["kind"])
		}
	}

	// The install strategy runs our image with our service account and rules.
	install := spec["install"].(object)["spec"].(object)
	deploy := install["deployments"].([]any)[0].(object)["spec"].(object)
	pod := deploy["template"].(object)["spec"].(object)
	if pod["serviceAccountName"] != serviceAccount {
		t.Errorf("deployment service account = %v", pod["serviceAccountName"])
	}
	if img := pod["containers"].([]any)[0].(object)["image"]; img != image {
		t.Errorf("deployment image = %v, want %s", img, image)
	}
	// Write access is namespaced (granted in the OperatorGroup's
	// namespaces); cluster-wide access is what placement reads.
	resources := func(key string) map[string][]any {
		out := map[string][]any{}
		for _, r := range install[key].([]any)[0].(object)["rules"].([]any) {
			urls, _ := r.(object)["nonResourceURLs"].([]any)
			for _, u := range urls {
				out["url "+u.(string)] = r.(object)["verbs"].([]any)
			}
			res, _ := r.(object)["resources"].([]any)
			for _, res := range res {
				out[res.(string)] = r.(object)["verbs"].([]any)
			}
		}
		return out
	}
	cluster, namespaced := resources("clusterPermissions"), resources("permissions")
	for _, res := range []string{"nodes", "storageclasses", "csistoragecapacities", "url /.well-known/openid-configuration"} {
		if _, ok := cluster[res]; !ok {
			t.Errorf("cluster permissions lack %s", res)
		}
	}
	for _, res := range []string{"secrets", "statefulsets", "deployments", "services", "networkpolicies", "leases"} {
		if _, ok := cluster[res]; ok {
			t.Errorf("%s granted cluster-wide", res)
		}
		if _, ok := namespaced[res]; !ok {
			t.Errorf("namespaced permissions lack %s", res)
		}
	}
	env := pod["containers"].([]any)[0].(object)["env"].([]any)
	if last := env[len(env)-1].(object); last["name"] != "WATCH_NAMESPACE" {
		t.Errorf("the manager is not told its OperatorGroup's namespaces: %v", env)
	}

	supported := map[string]bool{}
	for _, m := range spec["installModes"].([]any) {
		supported[m.(object)["type"].(string)] = m.(object)["supported"].(bool)
	}
	if len(supported) != 4 || !supported["AllNamespaces"] || !supported["OwnNamespace"] || !supported["MultiNamespace"] || !supported["SingleNamespace"] {
		t.Errorf("install modes = %v", supported)
	}

	ann, err := readObject(filepath.Join(root, "bundle/metadata/annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := ann["annotations"].(object)
	if a["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" || a["operators.operatorframework.io.bundle.package.v1"] != packageName {
		t.Errorf("bundle annotations wrong: %v", a)
	}
	if _, err := os.Stat(filepath.Join(root, "bundle/tests/scorecard/config.yaml")); err != nil {
		t.Errorf("scorecard config missing: %v", err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
