package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jsClients returns the directory `make jsclients` installed the AWS SDK
// for JavaScript v3 into (its node_modules) and the node that runs it.
func jsClients(t *testing.T) (dir, node string) {
	t.Helper()
	dir = os.Getenv("STRATA_JSCLIENTS")
	node, err := exec.LookPath("node")
	problem := ""
	switch {
	case dir == "":
		problem = "STRATA_JSCLIENTS is not set"
	case err != nil:
		problem = "no node in PATH"
	default:
		for _, pkg := range []string{"@aws-sdk/client-s3", "@aws-sdk/lib-storage"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
				problem = fmt.Sprintf("STRATA_JSCLIENTS=%s has no node_modules/%s", dir, pkg)
				break
			}
		}
	}
	if problem != "" {
		skipOutsideCI(t, problem+": run `make jsclients` (node and npm needed) and set STRATA_JSCLIENTS=$PWD/bin/node-clients")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs, node
}

// jsSummary is what aws_sdk_js_matrix.js prints.
type jsSummary struct {
	Requests int            `json:"requests"`
	Ops      map[string]int `json:"ops"`
	Payloads map[string]int `json:"payloads"`
	Checks   int            `json:"checks"`
	Failures []struct {
		What  string `json:"what"`
		Error string `json:"error"`
	} `json:"failures"`
	HTTPErrors []map[string]any `json:"http_errors"`
}

// matrixJS runs testdata/clients/aws_sdk_js_matrix.js: the AWS SDK for
// JavaScript v3 at its defaults (flexible checksums in aws-chunked
// trailers, response checksums validated), retries off.
func matrixJS(t *testing.T, tg *tlsTarget) {
	dir, node := jsClients(t)
	script, err := filepath.Abs("testdata/clients/aws_sdk_js_matrix.js")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := []string{
		"PATH=" + filepath.Dir(node) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TMPDIR=" + home,
		"LANG=C.UTF-8",
		"NODE_PATH=" + filepath.Join(dir, "node_modules"),
		"AWS_CONFIG_FILE=" + filepath.Join(home, ".aws", "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, ".aws", "credentials"),
		"AWS_ACCESS_KEY_ID=" + rootUser,
		"AWS_SECRET_ACCESS_KEY=" + rootPassword,
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	m := tg.meter(t)
	r := runClient(t, env, home, node, script, "--endpoint", tg.endpoint(), "--bucket", "js-sdk", "--ca", tg.caFile)
	if s := strings.TrimSpace(r.stderr); s != "" {
		t.Logf("node stderr:\n%s", tail(s))
	}
	var sum jsSummary
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &sum); err != nil {
		t.Fatalf("AWS SDK for JavaScript summary: %v\n%s", err, tail(r.stdout))
	}
	t.Logf("AWS SDK for JavaScript: %d HTTP requests, %d checks; operations %v; payloads %v", sum.Requests, sum.Checks, sum.Ops, sum.Payloads)
	for _, f := range sum.Failures {
		t.Errorf("AWS SDK for JavaScript: %s: %s", f.What, f.Error)
	}
	if len(sum.HTTPErrors) > 0 {
		j, _ := json.Marshal(sum.HTTPErrors)
		t.Errorf("AWS SDK for JavaScript: %d requests answered with an error or not answered: %s", len(sum.HTTPErrors), j)
	}
	if sum.Ops["UploadPartCommand"] < 7 || sum.Ops["DeleteBucketCommand"] != 1 {
		t.Errorf("AWS SDK for JavaScript: the scenario did not run through (operations %v)", sum.Ops)
	}
	if sum.Payloads["STREAMING-UNSIGNED-PAYLOAD-TRAILER"] == 0 {
		t.Errorf("AWS SDK for JavaScript: no request sent aws-chunked with a checksum trailer (payloads %v)", sum.Payloads)
	}
	m.done(t, "AWS SDK for JavaScript")
	tg.bucketGone(t, "js-sdk")
}
