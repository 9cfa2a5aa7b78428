package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/buildinfo"
)

func TestRun(t *testing.T) {
	cases := []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{args: []string{"version"}, code: 0, wantStdout: "strata " + buildinfo.Release + " ("},
		{args: nil, code: 2, wantStderr: "usage: strata"},
		{args: []string{"bogus"}, code: 2, wantStderr: `unknown command "bogus"`},
		{args: []string{"server"}, code: 2, wantStderr: "usage: strata server"},
		{args: []string{"server", "/tmp/d{1...4}"}, code: 2, wantStderr: "root credentials missing"},
		{args: []string{"server", "relative/d{1...4}"}, code: 2, wantStderr: "must be absolute"},
		{args: []string{"server", "--log-level", "loud", "/d"}, code: 2, wantStderr: "--log-level"},
		{args: []string{"gateway"}, code: 2, wantStderr: "--root is required"},
		{args: []string{"gateway", "--root", "/tmp", "extra"}, code: 2, wantStderr: "usage: strata gateway"},
		{args: []string{"gateway", "--root", "/tmp"}, code: 2, wantStderr: "root credentials missing"},
		{args: []string{"gateway", "--root", "/tmp", "--large-dir-threshold", "-1"}, code: 2, wantStderr: "--large-dir-threshold"},
		{args: []string{"selftest"}, code: 2, wantStderr: "--endpoint is required"},
		{args: []string{"selftest", "--endpoint", "media.storage.svc:443"}, code: 2, wantStderr: "want http://HOST:PORT or https://HOST:PORT"},
		{args: []string{"selftest", "--endpoint", "ftp://media"}, code: 2, wantStderr: "want http://HOST:PORT"},
		{args: []string{"selftest", "--endpoint", "http://media", "--ca-file", "/ca.crt"}, code: 2, wantStderr: "only used with an https endpoint"},
		{args: []string{"selftest", "--endpoint", "https://media", "extra"}, code: 2, wantStderr: "usage: strata selftest"},
		{args: []string{"selftest", "--endpoint", "https://media"}, code: 2, wantStderr: "root credentials missing"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		noEnv := func(string) string { return "" }
		if got := run(c.args, &out, &errOut, noEnv); got != c.code {
			t.Errorf("run(%q) = %d, want %d", c.args, got, c.code)
		}
		if !strings.Contains(out.String(), c.wantStdout) {
			t.Errorf("run(%q) stdout %q, want it to contain %q", c.args, out.String(), c.wantStdout)
		}
		if !strings.Contains(errOut.String(), c.wantStderr) {
			t.Errorf("run(%q) stderr %q, want it to contain %q", c.args, errOut.String(), c.wantStderr)
		}
	}
}

// TestProfilerOnLoopbackOnly: STRATA_PPROF_ADDR serves only on loopback.
func TestProfilerOnLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:6060": true,
		"[::1]:6060":     true,
		"localhost:6060": true,
		":6060":          false,
		"0.0.0.0:6060":   false,
		"10.1.2.3:6060":  false,
		"[::]:6060":      false,
		"pod-name:6060":  false,
		"6060":           false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("%q: loopback %v, want %v", addr, got, want)
		}
	}
}
