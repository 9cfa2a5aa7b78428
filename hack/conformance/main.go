// Command conformance runs the ceph/s3-tests suite (a read-only snapshot,
// see its README.md) against real strata processes, one per target, and fails
// when a target's results drop below test/conformance/floors.json, when a test
// it passed before fails twice (retry.go), or when the process prints
// anything that is not a structured (JSON) log line.
//
//	go run ./hack/conformance -strata bin/strata -targets gateway,server-https
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// target is one way of serving S3 that the suite runs against.
type target struct {
	name    string
	gateway bool // strata gateway (POSIX) instead of strata server (erasure-coded)
	tls     bool
}

var allTargets = []target{
	{name: "server-http"},
	{name: "server-https", tls: true},
	{name: "gateway", gateway: true},
	{name: "gateway-https", gateway: true, tls: true},
}

// defaultTargets are what `make test` runs: the server as deployed (TLS on)
// and the gateway; -targets server-http,gateway-https adds the others.
const defaultTargets = "server-https,gateway"

type config struct {
	suite, strata, venv, out, floors string
	work                             string // temp dir: binary snapshot, users file, data dirs
	// keycloak is Keycloak's distribution, for the web identity tests
	// ("" leaves them failing); kc the one running.
	keycloak             string
	kc                   *keycloak
	parallel             int
	report, updateFloors bool
}

// counts are the figures of the suite's summary line.
type counts struct{ passed, failed, errors, skipped int }

// floor is the least a target must reach: passed at least, errors at most.
type floor struct {
	Passed int `json:"passed"`
	Errors int `json:"errors"`
}

// result is what one target's run produced.
type result struct {
	target   string
	ran      bool // the suite printed its summary line
	counts   counts
	tests    []testResult
	retried  []string // listed as passing, failed, passed when run again
	problems []string // reasons to fail besides the floor
	duration time.Duration
}

func main() { os.Exit(run()) }

func run() int {
	repo := repoRoot()
	var cfg config
	var targetList string
	flag.StringVar(&cfg.suite, "suite", "", "conformance suite directory (default: $STRATA_CONFORMANCE_DIR, REPO/../shared/conformance, /work/shared/conformance)")
	flag.StringVar(&targetList, "targets", defaultTargets, "comma-separated targets: server-http, server-https, gateway, gateway-https")
	flag.StringVar(&cfg.strata, "strata", filepath.Join(repo, "bin", "strata"), "strata binary")
	flag.StringVar(&cfg.venv, "venv", filepath.Join(repo, "bin", "venv-s3tests"), "Python venv for the suite (created when missing)")
	flag.StringVar(&cfg.out, "out", filepath.Join(repo, "bin", "conformance"), "results go to OUT/TARGET (wiped before each run)")
	flag.StringVar(&cfg.floors, "floors", filepath.Join(repo, "test", "conformance", "floors.json"), "floors file")
	flag.StringVar(&cfg.keycloak, "keycloak", "", "Keycloak's distribution directory (make keycloak): the web identity tests' issuer on localhost:8080; empty: those tests fail")
	flag.IntVar(&cfg.parallel, "parallel", 1, "targets run at the same time")
	flag.BoolVar(&cfg.report, "report", false, "print the failing tests of each target grouped by feature")
	flag.BoolVar(&cfg.updateFloors, "update-floors", false, "raise the floors to the measured figures (passed up, errors down; never lowered) and add the tests passed to test/conformance/passing-TARGET.txt")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	targets, err := pickTargets(targetList)
	var floors map[string]floor
	if err == nil {
		floors, err = readFloors(cfg.floors, cfg.updateFloors)
	}
	if err == nil {
		err = prepare(ctx, &cfg, repo)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 2
	}
	defer os.RemoveAll(cfg.work)
	if cfg.kc != nil {
		defer cfg.kc.Stop()
	}

	results := make([]result, len(targets))
	sem := make(chan struct{}, max(cfg.parallel, 1))
	var wg sync.WaitGroup
	start := time.Now()
	for i, t := range targets {
		sem <- struct{}{} // targets start in the order given
		if ctx.Err() != nil {
			results[i] = result{target: t.name, problems: []string{"interrupted"}}
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = runTarget(ctx, &cfg, t)
		}()
	}
	wg.Wait()

	failed := printSummary(results, floors)
	fmt.Printf("total wall time %s (parallel %d)\n", time.Since(start).Round(time.Second), cfg.parallel)
	if cfg.report {
		for _, r := range results {
			printReport(os.Stdout, r)
		}
	}
	if cfg.updateFloors {
		err := raiseFloors(cfg.floors, floors, results)
		for _, r := range results {
			if err == nil && r.ran {
				err = addPassing(&cfg, r)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			return 1
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

// prepare resolves the paths, checks the suite and the binary, snapshots the
// binary (it may be rebuilt while the suite runs) and makes sure the venv exists.
func prepare(ctx context.Context, cfg *config, repo string) error {
	suite, err := findSuite(cfg.suite, repo)
	if err != nil {
		return err
	}
	cfg.suite = suite
	for _, p := range []*string{&cfg.strata, &cfg.venv, &cfg.out, &cfg.floors} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if st, err := os.Stat(cfg.strata); err != nil || st.IsDir() {
		return fmt.Errorf("strata binary %s not found (make build)", cfg.strata)
	}
	if cfg.work, err = os.MkdirTemp("", "strata-conformance-"); err != nil {
		return err
	}
	bin, err := os.ReadFile(cfg.strata)
	if err == nil {
		cfg.strata = filepath.Join(cfg.work, "strata")
		err = os.WriteFile(cfg.strata, bin, 0o755)
	}
	if err == nil {
		err = ensureVenv(ctx, cfg.venv, cfg.suite)
	}
	if err == nil && cfg.keycloak != "" {
		err = withKeycloak(ctx, cfg)
	}
	if err != nil {
		os.RemoveAll(cfg.work)
	}
	return err
}

// withKeycloak starts Keycloak and points cfg.suite at a copy of the
// suite's script and configuration template with a [webidentity] section
// added (the tests themselves stay where they are).
func withKeycloak(ctx context.Context, cfg *config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s keycloak: starting (log in %s)\n", time.Now().Format("15:04:05"), filepath.Join(cfg.out, "keycloak.log"))
	kc, err := startKeycloak(ctx, cfg.keycloak, filepath.Join(cfg.out, "keycloak.log"))
	if err != nil {
		return err
	}
	suite := filepath.Join(cfg.work, "suite")
	script, err := os.ReadFile(filepath.Join(cfg.suite, "run-s3-tests.sh"))
	var template []byte
	if err == nil {
		template, err = os.ReadFile(filepath.Join(cfg.suite, "s3tests.conf.template"))
	}
	if err == nil {
		err = os.MkdirAll(suite, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(suite, "run-s3-tests.sh"), script, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(suite, "s3tests.conf.template"), append(template, kc.section...), 0o644)
	}
	if err == nil {
		err = os.Symlink(filepath.Join(cfg.suite, "s3-tests"), filepath.Join(suite, "s3-tests"))
	}
	if err != nil {
		kc.Stop()
		return err
	}
	cfg.suite, cfg.kc = suite, kc
	fmt.Fprintf(os.Stderr, "%s keycloak: realm %s ready at %s\n", time.Now().Format("15:04:05"), keycloakRealm, keycloakIssuer)
	return nil
}

// repoRoot is the nearest directory above the working directory holding go.mod.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

// findSuite picks the suite directory: the flag, the environment, then two
// conventional places. A directory named explicitly must hold the script.
func findSuite(flagValue, repo string) (string, error) {
	hasScript := func(dir string) bool {
		st, err := os.Stat(filepath.Join(dir, "run-s3-tests.sh"))
		return err == nil && !st.IsDir()
	}
	for _, named := range []struct{ how, dir string }{
		{"-suite", flagValue}, {"STRATA_CONFORMANCE_DIR", os.Getenv("STRATA_CONFORMANCE_DIR")},
	} {
		if named.dir == "" {
			continue
		}
		if !hasScript(named.dir) {
			return "", fmt.Errorf("%s %s: no run-s3-tests.sh there", named.how, named.dir)
		}
		return filepath.Abs(named.dir)
	}
	candidates := []string{filepath.Join(repo, "..", "shared", "conformance"), "/work/shared/conformance"}
	for _, dir := range candidates {
		if hasScript(dir) {
			return filepath.Abs(dir)
		}
	}
	return "", fmt.Errorf("conformance suite not found (looked in %s); pass -suite DIR or set STRATA_CONFORMANCE_DIR",
		strings.Join(candidates, ", "))
}

func pickTargets(list string) ([]target, error) {
	var picked []target
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(allTargets, func(t target) bool { return t.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown target %q (known: server-http, server-https, gateway, gateway-https)", name)
		}
		if !slices.ContainsFunc(picked, func(t target) bool { return t.name == name }) {
			picked = append(picked, allTargets[i])
		}
	}
	return picked, nil
}

// ensureVenv creates the suite's venv when it has no pytest yet. The script
// would do it too, but two targets running at once would race, and the
// script hides pip's errors.
func ensureVenv(ctx context.Context, venv, suite string) error {
	if st, err := os.Stat(filepath.Join(venv, "bin", "pytest")); err == nil && st.Mode()&0o111 != 0 {
		return nil
	}
	// Debian's python3 has the venv module but not ensurepip, which venv needs.
	if out, err := exec.CommandContext(ctx, "python3", "-c", "import venv, ensurepip").CombinedOutput(); err != nil {
		return fmt.Errorf("python3 cannot create a venv (%w %s); on Debian/Ubuntu: apt-get install python3-venv",
			err, strings.TrimSpace(string(out)))
	}
	fmt.Fprintf(os.Stderr, "creating the suite's venv in %s (once)\n", venv)
	steps := [][]string{
		{"python3", "-m", "venv", venv},
		{filepath.Join(venv, "bin", "pip"), "install", "-q", "-r", filepath.Join(suite, "s3-tests", "requirements.txt"), "pytest-timeout"},
	}
	for _, step := range steps {
		out, err := exec.CommandContext(ctx, step[0], step[1:]...).CombinedOutput()
		if err != nil {
			os.RemoveAll(venv) // a half-made venv would be taken as ready next time
			return fmt.Errorf("%s: %w\n%s\n(python3 -m venv missing: apt-get install python3-venv; pip failing: check access to PyPI)",
				strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

func readFloors(path string, creating bool) (map[string]floor, error) {
	floors := map[string]floor{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && creating {
		return floors, nil
	}
	if err != nil {
		return nil, fmt.Errorf("floors: %w (run with -update-floors to create it)", err)
	}
	if err := json.Unmarshal(data, &floors); err != nil {
		return nil, fmt.Errorf("floors %s: %w", path, err)
	}
	return floors, nil
}

// raiseFloors tightens each measured target's floor to its figures; a floor
// is never loosened.
func raiseFloors(path string, floors map[string]floor, results []result) error {
	changed := false
	for _, r := range results {
		if !r.ran {
			continue
		}
		f, ok := floors[r.target]
		next := floor{Passed: r.counts.passed, Errors: r.counts.errors}
		if ok {
			next = floor{Passed: max(f.Passed, next.Passed), Errors: min(f.Errors, next.Errors)}
		}
		if !ok || next != f {
			fmt.Printf("floor %s: %d passed / %d errors\n", r.target, next.Passed, next.Errors)
			floors[r.target] = next
			changed = true
		}
	}
	if !changed {
		fmt.Println("floors unchanged")
		return nil
	}
	data, err := json.MarshalIndent(floors, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// printSummary prints one line per target and the reasons of each failure;
// it reports whether any target failed.
func printSummary(results []result, floors map[string]floor) bool {
	anyFailed := false
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tPASSED\tFAILED\tERRORS\tSKIPPED\tFLOOR (passed/errors)\tTIME\tRESULT")
	var reasons []string
	for _, r := range results {
		problems := r.problems
		f, ok := floors[r.target]
		floorText := "none"
		if ok {
			floorText = fmt.Sprintf("%d/%d", f.Passed, f.Errors)
			if r.counts.passed < f.Passed {
				problems = append(problems, fmt.Sprintf("%d passed, below the floor of %d", r.counts.passed, f.Passed))
			}
			if r.counts.errors > f.Errors {
				problems = append(problems, fmt.Sprintf("%d errors, above the floor of %d", r.counts.errors, f.Errors))
			}
		}
		if len(r.retried) > 0 {
			reasons = append(reasons, fmt.Sprintf("%s: passed when run again (counted as passed): %s",
				r.target, strings.Join(r.retried, " ")))
		}
		verdict := "OK"
		if len(problems) > 0 {
			verdict, anyFailed = "FAIL", true
			for _, p := range problems {
				reasons = append(reasons, r.target+": "+p)
			}
		}
		c := r.counts
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", r.target, c.passed, c.failed, c.errors, c.skipped,
			floorText, r.duration.Round(time.Second), verdict)
	}
	tw.Flush()
	for _, reason := range reasons {
		fmt.Println("  " + reason)
	}
	return anyFailed
}

// featureGroups sort failing tests in -report; the first group with a
// matching keyword wins. A keyword with "_" matches anywhere in the name,
// one without matches the start of a word of the name.
var featureGroups = []struct {
	name     string
	keywords []string
}{
	{"object_lock", []string{"object_lock"}},
	{"sse/encryption", []string{"sse", "kms", "encrypt"}},
	{"policy", []string{"polic"}},
	{"acl", []string{"acl", "grant"}},
	{"post_object", []string{"post_object"}},
	{"lifecycle", []string{"lifecycle"}},
	{"cors", []string{"cors"}},
	{"sts/iam", []string{"sts", "iam", "assume", "role"}},
	{"select", []string{"s3select", "select"}},
	{"multipart", []string{"multipart"}},
	{"list", []string{"list"}},
	{"versioning", []string{"version"}},
	{"copy", []string{"copy"}},
	{"tagging", []string{"tag"}},
	{"other", nil},
}

func featureGroup(test string) string {
	lower := strings.ToLower(test)
	words := strings.FieldsFunc(lower, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') })
	for _, g := range featureGroups {
		for _, kw := range g.keywords {
			if strings.Contains(kw, "_") && strings.Contains(lower, kw) ||
				slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, kw) }) {
				return g.name
			}
		}
	}
	return "other"
}

// printReport lists r's failed and erroring tests by feature group.
func printReport(w io.Writer, r result) {
	byGroup := map[string][]testResult{}
	failing := 0
	for _, t := range r.tests {
		if t.status == "failure" || t.status == "error" {
			g := featureGroup(t.name)
			byGroup[g] = append(byGroup[g], t)
			failing++
		}
	}
	fmt.Fprintf(w, "\n== %s: %d failing tests (%d failures, %d errors in the summary)\n",
		r.target, failing, r.counts.failed, r.counts.errors)
	for _, g := range featureGroups {
		tests := byGroup[g.name]
		if len(tests) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s (%d)\n", g.name, len(tests))
		for _, t := range tests {
			fmt.Fprintf(w, "  %-7s %s\n", t.status, t.name)
		}
	}
}
