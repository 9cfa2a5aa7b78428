// Package layering checks the module's layering: the engine (what the
// strata image runs) knows nothing of Kubernetes or the operator; the
// operator links nothing of the engine but its admin API's types and
// client; and the engine's own layers depend only downwards (drive <
// erasure < S3 server < server and gateway < cmd), with the object
// layer's contract a leaf under all of them.
package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/strata-storage/strata"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs `go list -json` over patterns from the module's root.
func list(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	touchSources(t)
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v matched nothing", patterns)
	}
	return pkgs
}

// touchSources stats every Go file and module file of the repository:
// go test caches a result by the files the test process itself opened, and
// go list runs in another process, so without this an import added later
// would be checked against a stale cached pass.
func touchSources(t *testing.T) {
	t.Helper()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// engineForbidden says why the engine may not depend on path ("" if it may).
func engineForbidden(path string) string {
	for _, m := range retiredModules {
		if path == m || strings.HasPrefix(path, m+"/") {
			return "a retired module (" + m + "): the S3 front end is our own"
		}
	}
	switch {
	case strings.HasPrefix(path, "k8s.io/"), strings.HasPrefix(path, "sigs.k8s.io/"):
		return "Kubernetes"
	case path == module+"/api" || strings.HasPrefix(path, module+"/api/"),
		strings.HasPrefix(path, module+"/controllers"),
		strings.HasPrefix(path, module+"/internal/"):
		return "the operator"
	}
	return ""
}

// operatorAllowed are the engine packages the operator may link: the admin
// API's wire types and its client, the health endpoints' paths, the build
// info and the keys and notification targets file formats. Nothing that
// stores data.
var operatorAllowed = map[string]bool{
	module + "/engine/adminapi":    true,
	module + "/engine/adminclient": true,
	module + "/engine/buildinfo":   true,
	module + "/engine/health":      true,
	// The keys file and the notification targets file the operator writes
	// and the engine reads: formats defined once, on the standard library
	// alone.
	module + "/engine/keysfile":      true,
	module + "/engine/notifytargets": true,
}

// storageModules are the modules of the engine's storage: the metadata
// store and the erasure code. Only the drive and erasure layers link them.
var storageModules = []string{
	"github.com/cockroachdb/pebble",
	"github.com/klauspost/reedsolomon",
}

// engineModules are modules only the engine needs; an operator that links
// one links the engine's internals.
var engineModules = storageModules

// retiredModules are the borrowed S3 front end's modules, which nothing
// may link again: the HTTP server, the protocol layer and the backend
// behind them are ours (engine/s3http, engine/s3api, engine/posix;
// docs/decisions.md).
var retiredModules = []string{"github.com/versity/versitygw", "github.com/gofiber/fiber", "github.com/valyala/fasthttp"}

// operatorForbidden says why the operator may not depend on path ("" if
// it may).
func operatorForbidden(path string) string {
	for _, m := range retiredModules {
		if path == m || strings.HasPrefix(path, m+"/") {
			return "a retired module (" + m + ")"
		}
	}
	for _, m := range engineModules {
		if path == m || strings.HasPrefix(path, m+"/") {
			return "an engine module (" + m + ")"
		}
	}
	if !strings.HasPrefix(path, module+"/engine/") || operatorAllowed[path] {
		return ""
	}
	return "the engine outside its admin API types and client, health paths, build info and keys file"
}

// TestEngineStandsAlone: nothing the strata binary is built from, directly
// or through a dependency, is Kubernetes or operator code, or a module of
// the S3 front end it no longer borrows.
func TestEngineStandsAlone(t *testing.T) {
	for _, p := range list(t, "./engine/...", "./cmd/...") {
		for _, d := range p.Deps {
			if why := engineForbidden(d); why != "" {
				t.Errorf("%s depends on %s (%s)", p.ImportPath, d, why)
			}
		}
	}
}

// TestOperatorLinksOnlyTheEngineClient: the operator's binary, through
// every dependency, links no engine package but the admin API's types and
// client (so no erasure, drive or metadata-store code).
func TestOperatorLinksOnlyTheEngineClient(t *testing.T) {
	for _, p := range list(t, ".", "./api/...", "./controllers/...", "./internal/...") {
		for _, d := range p.Deps {
			if why := operatorForbidden(d); why != "" {
				t.Errorf("%s depends on %s (%s)", p.ImportPath, d, why)
			}
		}
	}
}

// The engine's layers, lowest first. A package of one layer may not
// depend, directly or through others, on a package of a higher one. The
// object layer's contract (engine/objlayer) and the S3 error table
// (engine/s3err) are leaves below every layer: the erasure layer
// implements the contract, so it imports it (docs/decisions.md).
var engineLayers = []struct {
	name     string
	packages []string // path prefixes under the module
}{
	{"drive", []string{"engine/drive", "engine/vfs"}},
	{"erasure", []string{"engine/erasure", "engine/internode", "engine/cluster"}},
	{"S3 server", []string{"engine/s3api", "engine/s3http", "engine/s3sig", "engine/s3rules", "engine/lifecycle", "engine/iamapi", "engine/oidc"}},
	{"server and gateway", []string{"engine/server", "engine/gateway", "engine/posix"}},
	{"cmd", []string{"cmd/"}},
}

// leaves are the packages below every layer: they depend on no engine
// package outside this list.
var leaves = []string{"engine/objlayer", "engine/s3err", "engine/adminapi", "engine/buildinfo", "engine/hlc", "engine/keysfile", "engine/notifytargets", "engine/health"}

// layerOf returns the index of the layer a package belongs to (-1: none).
func layerOf(path string) int {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return -1
	}
	for i, l := range engineLayers {
		for _, p := range l.packages {
			if rel == p || strings.HasPrefix(rel, strings.TrimSuffix(p, "/")+"/") {
				return i
			}
		}
	}
	return -1
}

func isLeaf(path string) bool {
	rel, _ := strings.CutPrefix(path, module+"/")
	for _, l := range leaves {
		if rel == l {
			return true
		}
	}
	return false
}

// layeringForbidden says why a package may not depend on dep ("" if it may).
func layeringForbidden(pkg, dep string) string {
	if isLeaf(pkg) && strings.HasPrefix(dep, module+"/") && !isLeaf(dep) {
		return "a contract leaf depends on nothing of the engine's but other leaves"
	}
	from, to := layerOf(pkg), layerOf(dep)
	if from >= 0 && to > from {
		return fmt.Sprintf("the %s layer is below the %s layer", engineLayers[from].name, engineLayers[to].name)
	}
	// The S3 server and the gateway reach storage only through the object
	// layer's contract: no drive or erasure code, no storage module.
	rel, _ := strings.CutPrefix(pkg, module+"/")
	if from >= 0 && engineLayers[from].name == "S3 server" || rel == "engine/gateway" || rel == "engine/posix" ||
		strings.HasPrefix(rel, "engine/gateway/") || strings.HasPrefix(rel, "engine/posix/") {
		if to >= 0 && to <= 1 {
			return "the S3 server and the gateway reach storage only through engine/objlayer"
		}
		for _, m := range storageModules {
			if dep == m || strings.HasPrefix(dep, m+"/") {
				return "the S3 server reaches storage only through engine/objlayer (" + m + ")"
			}
		}
	}
	return ""
}

// TestEngineLayers: drive < erasure < S3 server < server and gateway < cmd,
// through every dependency, and the leaves stay leaves.
func TestEngineLayers(t *testing.T) {
	for _, p := range list(t, "./engine/...", "./cmd/...") {
		for _, d := range p.Deps {
			if why := layeringForbidden(p.ImportPath, d); why != "" {
				t.Errorf("%s depends on %s (%s)", p.ImportPath, d, why)
			}
		}
	}
}

// TestRules: the rules themselves, so a typo cannot make them pass anything.
func TestRules(t *testing.T) {
	for path, forbidden := range map[string]bool{
		"k8s.io/client-go/kubernetes":             true,
		"sigs.k8s.io/controller-runtime":          true,
		module + "/api/v1alpha1":                  true,
		module + "/controllers":                   true,
		module + "/internal/placement":            true,
		module + "/engine/erasure":                false,
		"github.com/versity/versitygw/s3api":      true,
		"github.com/valyala/fasthttp":             true,
		"github.com/gofiber/fiber/v3":             true,
		"github.com/strata-storage/strata-extras": false,
	} {
		if got := engineForbidden(path) != ""; got != forbidden {
			t.Errorf("engine rule for %s: forbidden=%v, want %v", path, got, forbidden)
		}
	}
	for path, forbidden := range map[string]bool{
		module + "/engine/adminclient":               false,
		module + "/engine/adminapi":                  false,
		module + "/engine/buildinfo":                 false,
		module + "/engine/erasure":                   true,
		module + "/engine/drive":                     true,
		module + "/engine/internode":                 true,
		"github.com/cockroachdb/pebble/v2":           true,
		"github.com/cockroachdb/pebble/v2/vfs":       true,
		"github.com/klauspost/reedsolomon":           true,
		"github.com/versity/versitygw/backend/posix": true,
		"k8s.io/api/core/v1":                         false,
		"github.com/aws/aws-sdk-go-v2/aws/signer/v4": false,
	} {
		if got := operatorForbidden(path) != ""; got != forbidden {
			t.Errorf("operator rule for %s: forbidden=%v, want %v", path, got, forbidden)
		}
	}
	for _, tc := range []struct {
		pkg, dep  string
		forbidden bool
	}{
		{"engine/erasure", "engine/drive", false},
		{"engine/drive", "engine/erasure", true},
		{"engine/erasure", "engine/objlayer", false},
		{"engine/objlayer", "engine/erasure", true},
		{"engine/s3api", "engine/erasure", true},
		{"engine/s3api", "engine/objlayer", false},
		{"engine/s3http", "engine/server", true},
		{"engine/s3sig", "engine/s3err", false},
		{"engine/posix", "engine/s3api", false},
		{"engine/server", "engine/erasure", false},
		{"engine/posix", "engine/drive", true},
		{"engine/gateway", "engine/erasure", true},
		{"engine/server", "cmd/strata", true},
		{"engine/s3api", "github.com/cockroachdb/pebble/v2", true},
		{"engine/erasure", "github.com/cockroachdb/pebble/v2", false},
	} {
		dep := tc.dep
		if strings.HasPrefix(dep, "engine/") || strings.HasPrefix(dep, "cmd/") {
			dep = module + "/" + dep
		}
		if got := layeringForbidden(module+"/"+tc.pkg, dep) != ""; got != tc.forbidden {
			t.Errorf("layering rule %s -> %s: forbidden=%v, want %v", tc.pkg, tc.dep, got, tc.forbidden)
		}
	}
}
