package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/adminapi"
)

// strataAdmin runs `strata admin args...` with env as a user would, and
// returns its exit code and output.
func strataAdmin(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(strataBin, append([]string{"admin"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestAdminCLI: `strata admin` reads a real server's pools, drives,
// healing and users through the signed admin API, starts and reads a scan
// and a pool's decommission, never shows a user's secret, and fails
// clearly on wrong keys or a wrong command.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	if err := os.WriteFile(users, []byte(`{"users":[{"accessKey":"APPKEY0000000001","secretKey":"app-secret-never-shown","policy":"readwrite","buckets":["photos"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, serverOpts{drives: 4, env: []string{"STRATA_IAM_FILE=" + users}})
	env := append([]string{"STRATA_ENDPOINT=" + s.url()}, rootEnv...)

	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := strataAdmin(t, env, args...)
		if code != 0 {
			t.Fatalf("strata admin %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if strings.Contains(out, "app-secret-never-shown") {
			t.Fatalf("strata admin %s printed a user's secret key", strings.Join(args, " "))
		}
		return out
	}
	if out := run("info"); !strings.Contains(out, "POOL") || !strings.Contains(out, "4/4") || !strings.Contains(out, "usable") {
		t.Errorf("info:\n%s", out)
	}
	if out := run("drives"); strings.Count(out, "online") != 4 {
		t.Errorf("drives: want 4 online drives:\n%s", out)
	}
	if out := run("users"); !strings.Contains(out, "APPKEY0000000001") || !strings.Contains(out, "readwrite") || !strings.Contains(out, "photos") {
		t.Errorf("users:\n%s", out)
	}
	var listed []adminapi.UserInfo
	if err := json.Unmarshal([]byte(run("--json", "users")), &listed); err != nil || len(listed) != 1 || listed[0].Policy != "readwrite" {
		t.Errorf("users --json: %v %+v", err, listed)
	}
	if out := run("heal", "start"); !strings.Contains(out, "scan started") {
		t.Errorf("heal start: %s", out)
	}
	if out := run("heal"); !strings.Contains(out, "scanner:") {
		t.Errorf("heal:\n%s", out)
	}
	var info adminapi.Info
	if err := json.Unmarshal([]byte(run("--json", "info")), &info); err != nil || len(info.Pools) != 1 {
		t.Fatalf("info --json: %v %+v", err, info)
	}
	pool := info.Pools[0].Name
	// One pool: nothing to drain onto, and the server says so.
	if code, _, errOut := strataAdmin(t, env, "decommission", pool, "start"); code != 1 || errOut == "" {
		t.Errorf("decommissioning the only pool: exit %d %q", code, errOut)
	}
	if out := run("decommission", pool); !strings.Contains(out, "pool "+pool) {
		t.Errorf("decommission status:\n%s", out)
	}

	wrong := []string{"STRATA_ENDPOINT=" + s.url(), "STRATA_ROOT_USER=" + rootUser, "STRATA_ROOT_PASSWORD=not-the-password"}
	if code, _, errOut := strataAdmin(t, wrong, "info"); code != 1 || !strings.Contains(errOut, "signature does not match") {
		t.Errorf("wrong keys: exit %d %q", code, errOut)
	}
	if code, _, errOut := strataAdmin(t, env, "reboot"); code != 2 || !strings.Contains(errOut, `unknown command "reboot"`) {
		t.Errorf("unknown command: exit %d %q", code, errOut)
	}
	if code, _, errOut := strataAdmin(t, rootEnv, "info"); code != 2 || !strings.Contains(errOut, "--endpoint") {
		t.Errorf("no endpoint: exit %d %q", code, errOut)
	}
}
