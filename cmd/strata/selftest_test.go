package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The end-to-end behaviour of `strata selftest` (against real servers, over
// HTTP and verified TLS, with refused keys and a corrupting proxy) is
// tested in test/engine/selftest_test.go; these are the parts that need
// no server.

func TestCompareObject(t *testing.T) {
	want := []byte("0123456789")
	cases := []struct {
		got  string
		diff string // "" when equal
	}{
		{got: "0123456789"},
		{got: "012345678", diff: "9 bytes instead of 10"},
		{got: "01234567890", diff: "11 bytes instead of 10"},
		{got: "0123X56789", diff: "first difference at byte 4"},
		{got: "X123456789", diff: "first difference at byte 0"},
	}
	for _, c := range cases {
		err := compareObject(want, []byte(c.got))
		switch {
		case c.diff == "" && err != nil:
			t.Errorf("%q: %v, want equal", c.got, err)
		case c.diff != "" && (err == nil || !strings.Contains(err.Error(), c.diff)):
			t.Errorf("%q: %v, want %q", c.got, err, c.diff)
		}
	}
}

func TestSelftestCAFile(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STRATA_ROOT_USER": "selftest", "STRATA_ROOT_PASSWORD": "selftest-secret"}
	for file, want := range map[string]string{
		notPEM:                        "no PEM certificate in it",
		filepath.Join(dir, "missing"): "--ca-file: open",
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"selftest", "--endpoint", "https://127.0.0.1:1", "--ca-file", file}, &out, &errOut, func(k string) string { return env[k] })
		if code != 2 || !strings.Contains(errOut.String(), want) {
			t.Errorf("--ca-file %s: exit %d, stderr %q; want 2 and %q", file, code, errOut.String(), want)
		}
	}
}
