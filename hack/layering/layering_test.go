// Package layering checks the module's layering: the engine (what the
// strata image runs) knows nothing of Kubernetes or the operator, and the
// operator reaches the engine only through its HTTP client and build info.
package layering

import (
	"bytes"
	"encoding/json"
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

// operatorForbidden says why the operator may not import path ("" if it may).
func operatorForbidden(path string) string {
	if !strings.HasPrefix(path, module+"/engine/") {
		return ""
	}
	switch path {
	case module + "/engine/adminclient", module + "/engine/buildinfo",
		// The keys file the operator writes and the engine reads: a format
		// defined once, on the standard library alone.
		module + "/engine/keysfile":
		return ""
	}
	return "the engine outside adminclient, buildinfo and keysfile"
}

// TestEngineStandsAlone: nothing the strata binary is built from, directly
// or through a dependency, is Kubernetes or operator code.
func TestEngineStandsAlone(t *testing.T) {
	for _, p := range list(t, "./engine/...", "./cmd/...") {
		for _, d := range p.Deps {
			if why := engineForbidden(d); why != "" {
				t.Errorf("%s depends on %s (%s)", p.ImportPath, d, why)
			}
		}
	}
}

// TestOperatorUsesEngineClientOnly: the operator's packages import no
// engine package but the admin client and the build info.
func TestOperatorUsesEngineClientOnly(t *testing.T) {
	for _, p := range list(t, ".", "./api/...", "./controllers/...", "./internal/...") {
		for _, d := range p.Imports {
			if why := operatorForbidden(d); why != "" {
				t.Errorf("%s imports %s (%s)", p.ImportPath, d, why)
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
		"github.com/versity/versitygw/s3api":      false,
		"github.com/strata-storage/strata-extras": false,
	} {
		if got := engineForbidden(path) != ""; got != forbidden {
			t.Errorf("engine rule for %s: forbidden=%v, want %v", path, got, forbidden)
		}
	}
	for path, forbidden := range map[string]bool{
		module + "/engine/adminclient": false,
		module + "/engine/buildinfo":   false,
		module + "/engine/erasure":     true,
		module + "/engine/internode":   true,
		"k8s.io/api/core/v1":           false,
	} {
		if got := operatorForbidden(path) != ""; got != forbidden {
			t.Errorf("operator rule for %s: forbidden=%v, want %v", path, got, forbidden)
		}
	}
}
