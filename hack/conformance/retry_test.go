package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKeywordExprNamesEachTestOnce(t *testing.T) {
	got := keywordExpr([]string{
		"test_s3::test_copy_enc[sse-c-sse-s3-STANDARD-STANDARD-1]",
		"test_s3::test_copy_enc[sse-c-sse-c-STANDARD-STANDARD-1]",
		"test_headers::test_object_create_bad_md5_none",
	})
	if want := "test_copy_enc or test_object_create_bad_md5_none"; got != want {
		t.Fatalf("keywordExpr = %q, want %q", got, want)
	}
}

func TestPassingListsOnlyGrow(t *testing.T) {
	dir := t.TempDir()
	cfg := &config{floors: filepath.Join(dir, "floors.json")}
	if known, err := readPassing(passingPath(cfg, "gateway")); err != nil || known != nil {
		t.Fatalf("missing list: %v, %v; want none and no error", known, err)
	}
	run := func(tests ...testResult) {
		t.Helper()
		if err := addPassing(cfg, result{target: "gateway", ran: true, tests: tests}); err != nil {
			t.Fatal(err)
		}
	}
	run(testResult{"test_s3::a", "pass"}, testResult{"test_s3::b", "failure"})
	run(testResult{"test_s3::a", "error"}, testResult{"test_s3::c", "pass"}, testResult{"test_s3::d", "skipped"})
	known, err := readPassing(passingPath(cfg, "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 2 || !known["test_s3::a"] || !known["test_s3::c"] {
		t.Fatalf("list = %v, want test_s3::a (kept though it failed later) and test_s3::c", known)
	}
	if _, err := os.Stat(passingPath(cfg, "server-https")); err == nil {
		t.Fatal("a target that did not run got a list")
	}
}

func TestRetriedTestsCountOnlyWhenTheyPassAgain(t *testing.T) {
	r := result{
		counts: counts{passed: 1, failed: 2, errors: 1},
		tests: []testResult{
			{"test_s3::listed_pass", "pass"},
			{"test_s3::listed_flaky", "failure"},
			{"test_s3::listed_broken", "error"},
			{"test_s3::unlisted", "failure"},
		},
	}
	known := map[string]bool{"test_s3::listed_pass": true, "test_s3::listed_flaky": true, "test_s3::listed_broken": true}
	again := []testResult{
		{"test_s3::listed_flaky", "pass"},
		{"test_s3::listed_broken", "failure"},
		{"test_s3::unlisted", "pass"}, // selected by -k's substring match: not counted
	}
	still := countRetried(&r, known, again)
	if len(still) != 1 || still[0] != "test_s3::listed_broken" {
		t.Fatalf("still failing = %v, want [test_s3::listed_broken]", still)
	}
	if want := (counts{passed: 2, failed: 1, errors: 1}); r.counts != want {
		t.Fatalf("counts = %+v, want %+v", r.counts, want)
	}
	if len(r.retried) != 1 || r.retried[0] != "test_s3::listed_flaky" {
		t.Fatalf("retried = %v, want [test_s3::listed_flaky]", r.retried)
	}
}
