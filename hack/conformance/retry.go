package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A handful of the suite's tests depend on timing (threads racing one key,
// sleeps against expiry times), and on a loaded 2-core machine one of them
// fails now and then. A count floor with no margin then fails CI for nothing,
// and a floor with a margin lets a real regression of a few tests through.
// So each target also has the list of tests it passed before
// (test/conformance/passing-TARGET.txt, written by -update-floors). A listed
// test that does not pass is run once more against the same server; passing
// then, it counts as passed and is named in the output; failing again, the
// target fails whatever its count.

// maxRetried bounds the second run: more lost tests than this is a
// regression, not timing.
const maxRetried = 25

func passingPath(cfg *config, target string) string {
	return filepath.Join(filepath.Dir(cfg.floors), "passing-"+target+".txt")
}

// readPassing reads a passing list, one MODULE::TEST per line; a target
// without a list has none.
func readPassing(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	known := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			known[line] = true
		}
	}
	return known, sc.Err()
}

// retryLost runs r's lost tests (listed as passing, not passing now) once
// more against addr, counts those that pass as passed and returns the
// problems left.
func retryLost(ctx context.Context, cfg *config, t target, addr, outDir, tmpDir string, r *result,
	logf func(string, ...any)) []string {
	known, err := readPassing(passingPath(cfg, t.name))
	if err != nil {
		return []string{fmt.Sprintf("passing list: %v", err)}
	}
	var lost []string
	for _, tc := range r.tests {
		if known[tc.name] && tc.status != "pass" {
			lost = append(lost, tc.name)
		}
	}
	switch {
	case len(lost) == 0:
		return nil
	case len(lost) > maxRetried:
		return []string{fmt.Sprintf("%d tests listed as passing in %s do not pass (not run again, more than %d):\n%s",
			len(lost), passingPath(cfg, t.name), maxRetried, indent(strings.Join(lost, "\n")))}
	}
	logf("%d tests listed as passing do not pass; running them once more: %s", len(lost), strings.Join(lost, " "))
	retryDir := filepath.Join(outDir, "retry")
	if err := os.MkdirAll(retryDir, 0o755); err != nil {
		return []string{err.Error()}
	}
	// The script's own -k is overridden: its object-lock pass runs the same
	// selection again, and only the first pass is read.
	if _, err := runSuite(ctx, cfg, t, addr, retryDir, tmpDir, "-k", keywordExpr(lost)); err != nil {
		return []string{fmt.Sprintf("running lost tests again: %v", err)}
	}
	again, err := readJUnit(retryDir, "main.xml")
	if err != nil {
		return []string{fmt.Sprintf("running lost tests again: %v", err)}
	}
	still := countRetried(r, known, again)
	if len(r.retried) > 0 {
		logf("passed when run again: %s", strings.Join(r.retried, " "))
	}
	if len(still) > 0 {
		return []string{fmt.Sprintf("%d tests listed as passing failed twice (JUnit XML in %s):\n%s",
			len(still), retryDir, indent(strings.Join(still, "\n")))}
	}
	return nil
}

// countRetried counts r's lost tests that passed when run again (again) as
// passed, names them in r.retried and returns those that did not.
func countRetried(r *result, known map[string]bool, again []testResult) (still []string) {
	passedAgain := map[string]bool{}
	for _, tc := range again {
		passedAgain[tc.name] = tc.status == "pass"
	}
	for i, tc := range r.tests {
		if !known[tc.name] || tc.status == "pass" {
			continue
		}
		if !passedAgain[tc.name] {
			still = append(still, tc.name)
			continue
		}
		switch tc.status {
		case "failure":
			r.counts.failed--
		case "error":
			r.counts.errors--
		case "skipped":
			r.counts.skipped--
		}
		r.counts.passed++
		r.tests[i].status = "pass"
		r.retried = append(r.retried, tc.name)
	}
	return still
}

// keywordExpr is pytest's -k expression selecting tests by MODULE::TEST
// name; a parametrized test is selected with all its cases (-k matches
// names, not parameters).
func keywordExpr(tests []string) string {
	var names []string
	for _, name := range tests {
		name = name[strings.Index(name, "::")+2:]
		if i := strings.IndexByte(name, '['); i >= 0 {
			name = name[:i]
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}

// addPassing adds the tests r passed to its target's list; none is removed
// (a test the suite no longer has is never looked for).
func addPassing(cfg *config, r result) error {
	path := passingPath(cfg, r.target)
	known, err := readPassing(path)
	if err != nil {
		return err
	}
	if known == nil {
		known = map[string]bool{}
	}
	added := 0
	for _, tc := range r.tests {
		if tc.status == "pass" && !known[tc.name] {
			known[tc.name] = true
			added++
		}
	}
	if added == 0 {
		return nil
	}
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)
	header := "# Tests strata " + r.target + " passed (go run ./hack/conformance -update-floors adds to it).\n" +
		"# One that fails is run once more; failing twice, the target fails.\n"
	fmt.Printf("passing list %s: %d tests (%d added)\n", path, len(names), added)
	return os.WriteFile(path, []byte(header+strings.Join(names, "\n")+"\n"), 0o644)
}
