// Command bundlegen writes the OLM bundle (bundle/manifests, bundle/metadata,
// bundle/tests/scorecard) from the generated CRDs, the generated RBAC, the
// manager Deployment in config/ and the samples. It replaces operator-sdk's
// `generate bundle`, which cannot be installed here; the output follows the
// registry+v1 bundle format.
//
//	go run ./hack/bundlegen -version 0.1.0 -image ghcr.io/strata-storage/strata-operator:0.1.0
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	packageName    = "strata-operator"
	channel        = "alpha"
	serviceAccount = "strata-operator"
)

type object = map[string]any

func main() {
	version := flag.String("version", "0.1.0", "bundle (operator) version")
	image := flag.String("image", "ghcr.io/strata-storage/strata-operator:0.1.0", "operator image")
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root, *version, *image); err != nil {
		fmt.Fprintln(os.Stderr, "bundlegen:", err)
		os.Exit(1)
	}
}

func run(root, version, image string) error {
	out := filepath.Join(root, "bundle")
	if err := os.RemoveAll(filepath.Join(out, "manifests")); err != nil {
		return err
	}
	for _, d := range []string{"manifests", "metadata", "tests/scorecard"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return err
		}
	}

	crdFiles, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(crdFiles)
	var owned []any
	for _, f := range crdFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "manifests", filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
		crd, err := readObject(f)
		if err != nil {
			return err
		}
		owned = append(owned, ownedCRD(crd))
	}

	managerRules, err := rulesOf(filepath.Join(root, "config/rbac/role.yaml"))
	if err != nil {
		return err
	}
	// OLM grants permissions in the OperatorGroup's target namespaces
	// (cluster-wide for AllNamespaces), clusterPermissions everywhere.
	clusterScoped, namespaced := splitRules(managerRules)
	metricsRules, err := rulesOf(filepath.Join(root, "config/rbac/metrics_auth_role.yaml"))
	if err != nil {
		return err
	}
	leaderRules, err := rulesOf(filepath.Join(root, "config/rbac/leader_election_role.yaml"))
	if err != nil {
		return err
	}
	deploy, err := managerDeployment(filepath.Join(root, "config/manager/manager.yaml"), image)
	if err != nil {
		return err
	}
	examples, err := samples(filepath.Join(root, "config/samples"))
	if err != nil {
		return err
	}
	webhooks, err := webhookDefinitions(filepath.Join(root, "config/webhook/manifests.yaml"))
	if err != nil {
		return err
	}

	csv := object{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": object{
			"name":      packageName + ".v" + version,
			"namespace": "placeholder",
			"annotations": object{
				"alm-examples":                           examples,
				"capabilities":                           "Basic Install",
				"categories":                             "Storage",
				"containerImage":                         image,
				"repository":                             "https://github.com/strata-storage/strata",
				"description":                            "Erasure-coded S3 object storage tenants on local NVMe, NVMe-oF and array LUNs, plus S3 gateways over shared filesystems.",
				"operators.operatorframework.io/builder": "strata-bundlegen",
			},
		},
		"spec": object{
			"displayName":    "Strata",
			"description":    "Strata deploys and scales S3 object-store tenants. A Tenant is one S3 identity and trust domain; ServerPools add erasure-coded servers on block storage (local NVMe, NVMe-oF, array LUNs) with failure-domain-aware layouts; GatewayPools export a shared POSIX filesystem as S3.",
			"version":        version,
			"maturity":       channel,
			"minKubeVersion": "1.30.0",
			"keywords":       []any{"s3", "object storage", "erasure coding", "nvme"},
			"provider":       object{"name": "The Strata Authors"},
			"maintainers":    []any{object{"name": "The Strata Authors", "email": "maintainers@strata.dev"}},
			"links":          []any{object{"name": "Source", "url": "https://github.com/strata-storage/strata"}},
			"installModes": []any{
				object{"type": "OwnNamespace", "supported": true},
				object{"type": "SingleNamespace", "supported": true},
				object{"type": "MultiNamespace", "supported": true},
				object{"type": "AllNamespaces", "supported": true},
			},
			"customresourcedefinitions": object{"owned": owned},
			"webhookdefinitions":        webhooks,
			"install": object{
				"strategy": "deployment",
				"spec": object{
					"clusterPermissions": []any{object{"serviceAccountName": serviceAccount, "rules": append(clusterScoped, metricsRules...)}},
					"permissions":        []any{object{"serviceAccountName": serviceAccount, "rules": append(namespaced, leaderRules...)}},
					"deployments":        []any{object{"name": packageName, "label": object{"app.kubernetes.io/name": packageName}, "spec": deploy}},
				},
			},
		},
	}
	if err := writeYAML(filepath.Join(out, "manifests", packageName+".clusterserviceversion.yaml"), csv); err != nil {
		return err
	}

	annotations := object{"annotations": object{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         packageName,
		"operators.operatorframework.io.bundle.channels.v1":        channel,
		"operators.operatorframework.io.bundle.channel.default.v1": channel,
		"operators.operatorframework.io.test.config.v1":            "tests/scorecard/",
		"operators.operatorframework.io.test.mediatype.v1":         "scorecard+v1",
	}}
	if err := writeYAML(filepath.Join(out, "metadata", "annotations.yaml"), annotations); err != nil {
		return err
	}

	var tests []any
	for _, t := range []string{"basic-check-spec", "olm-bundle-validation", "olm-crds-have-validation", "olm-spec-descriptors", "olm-status-descriptors"} {
		suite := "olm"
		if t == "basic-check-spec" {
			suite = "basic"
		}
		tests = append(tests, object{
			"entrypoint": []any{"scorecard-test", t},
			"image":      "quay.io/operator-framework/scorecard-test:v1.39.0",
			"labels":     object{"suite": suite, "test": t + "-test"},
		})
	}
	scorecard := object{
		"apiVersion": "scorecard.operatorframework.io/v1alpha3",
		"kind":       "Configuration",
		"metadata":   object{"name": "config"},
		"stages":     []any{object{"parallel": true, "tests": tests}},
	}
	return writeYAML(filepath.Join(out, "tests", "scorecard", "config.yaml"), scorecard)
}

func readObject(path string) (object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	o := object{}
	if err := yaml.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// readDocuments splits a multi-document YAML file.
func readDocuments(path string) ([]object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var docs []object
	for _, part := range bytes.Split(data, []byte("\n---")) {
		o := object{}
		if err := yaml.Unmarshal(part, &o); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(o) > 0 {
			docs = append(docs, o)
		}
	}
	return docs, nil
}

func ownedCRD(crd object) object {
	spec := crd["spec"].(object)
	names := spec["names"].(object)
	versions := spec["versions"].([]any)
	v := versions[0].(object)
	kind := names["kind"].(string)
	desc := ""
	if schema, ok := v["schema"].(object)["openAPIV3Schema"].(object); ok {
		desc, _ = schema["description"].(string)
	}
	return object{
		"name":        crd["metadata"].(object)["name"],
		"version":     v["name"],
		"kind":        kind,
		"displayName": kind,
		"description": strings.SplitN(desc, "\n", 2)[0],
	}
}

func rulesOf(path string) ([]any, error) {
	o, err := readObject(path)
	if err != nil {
		return nil, err
	}
	rules, _ := o["rules"].([]any)
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s has no rules", path)
	}
	return rules, nil
}

func managerDeployment(path, image string) (object, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		if d["kind"] != "Deployment" {
			continue
		}
		spec := d["spec"].(object)
		pod := spec["template"].(object)["spec"].(object)
		pod["serviceAccountName"] = serviceAccount
		for _, c := range pod["containers"].([]any) {
			c.(object)["image"] = image
			// The namespaces of the OperatorGroup ("" for all), which
			// --watch-namespaces defaults to.
			env, _ := c.(object)["env"].([]any)
			c.(object)["env"] = append(env, object{"name": "WATCH_NAMESPACE", "valueFrom": object{
				"fieldRef": object{"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}})
		}
		return spec, nil
	}
	return nil, fmt.Errorf("%s has no Deployment", path)
}

// webhookDefinitions turns the generated webhook configurations into CSV
// webhook definitions: OLM then creates the configurations, the Service and
// the certificate, mounted where the manager looks by default
// (/tmp/k8s-webhook-server/serving-certs).
func webhookDefinitions(path string) ([]any, error) {
	docs, err := readDocuments(path)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, d := range docs {
		typ := map[any]string{
			"MutatingWebhookConfiguration":   "MutatingAdmissionWebhook",
			"ValidatingWebhookConfiguration": "ValidatingAdmissionWebhook",
		}[d["kind"]]
		if typ == "" {
			continue
		}
		for _, w := range d["webhooks"].([]any) {
			w := w.(object)
			svc := w["clientConfig"].(object)["service"].(object)
			out = append(out, object{
				"type":                    typ,
				"generateName":            w["name"],
				"admissionReviewVersions": w["admissionReviewVersions"],
				"failurePolicy":           w["failurePolicy"],
				"sideEffects":             w["sideEffects"],
				"rules":                   w["rules"],
				"webhookPath":             svc["path"],
				"deploymentName":          packageName,
				"containerPort":           443,
				"targetPort":              9443,
			})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no webhooks", path)
	}
	return out, nil
}

// samples renders the sample objects as the alm-examples JSON array.
func samples(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "storage_*.yaml"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var all []any
	for _, f := range files {
		o, err := readObject(f)
		if err != nil {
			return "", err
		}
		all = append(all, o)
	}
	data, err := json.MarshalIndent(all, "", "  ")
	return string(data), err
}

func writeYAML(path string, o object) error {
	data, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// clusterWide are the resources the manager reads outside the namespaces it
// watches: cluster-scoped kinds, and the CSIStorageCapacity objects CSI
// drivers publish in their own namespaces.
var clusterWide = map[string]bool{"nodes": true, "namespaces": true, "storageclasses": true, "csistoragecapacities": true}

// splitRules parts the manager's rules into those on clusterWide resources
// and the others (namespaced, granted only where the operator watches).
func splitRules(rules []any) (cluster, namespaced []any) {
	for _, r := range rules {
		r := r.(object)
		if _, ok := r["nonResourceURLs"]; ok {
			// URLs of the API server (its OIDC discovery): cluster-wide by
			// nature.
			cluster = append(cluster, r)
			continue
		}
		var c, n []any
		for _, res := range r["resources"].([]any) {
			if clusterWide[res.(string)] {
				c = append(c, res)
			} else {
				n = append(n, res)
			}
		}
		with := func(res []any) object {
			o := object{}
			for k, v := range r {
				o[k] = v
			}
			o["resources"] = res
			return o
		}
		if len(c) > 0 {
			cluster = append(cluster, with(c))
		}
		if len(n) > 0 {
			namespaced = append(namespaced, with(n))
		}
	}
	return cluster, namespaced
}
