package replicate

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-storage/strata/engine/internal/testcerts"
	"github.com/strata-storage/strata/engine/notify"
)

// TestTargetsReadAgain: the targets file read again opens only what
// changed (an entry, or the CA file a remote names), keeps the targets of
// entries unchanged, refuses a broken file without touching the targets
// in force, and reads a missing file as no targets.
func TestTargetsReadAgain(t *testing.T) {
	dir := t.TempDir()
	path, caPath := filepath.Join(dir, "targets.json"), filepath.Join(dir, "ca-dr.crt")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caOf := func() string { // a new CA each time
		t.Helper()
		d := t.TempDir()
		testcerts.Write(t, d)
		b, err := os.ReadFile(filepath.Join(d, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hook := `{"id":"hook","type":"webhook","endpoint":"http://127.0.0.1:1/h"}`
	dr := `{"id":"dr","type":"s3","endpoint":"https://127.0.0.1:2","username":"a","password":"b","caFile":"` + caPath + `"}`
	write(caPath, caOf())
	write(path, `{"targets":[`+hook+`]}`)

	ts, list, err := LoadTargets(path, notify.DefaultRegion, slog.New(slog.DiscardHandler))
	if err != nil || len(list) != 1 || len(ts.Remotes.All()) != 0 {
		t.Fatalf("first read: %v targets, %d remotes, %v", notify.ARNs(list), len(ts.Remotes.All()), err)
	}
	webhook := list[0]
	if _, changed, err := ts.read(); changed || err != nil {
		t.Fatalf("the same file read again: changed %v, %v", changed, err)
	}

	write(path, `{"targets":[`+hook+`,`+dr+`]}`)
	list, changed, err := ts.read()
	if err != nil || !changed || len(list) != 2 || list[0] != webhook || len(ts.Remotes.All()) != 1 {
		t.Fatalf("a remote added: changed %v, %v, %d remotes, %v (the webhook kept: %v)", changed, notify.ARNs(list), len(ts.Remotes.All()), err, list[0] == webhook)
	}
	remote := ts.Remotes.All()[0]

	write(caPath, caOf()) // the peer's CA rotated: the remote is opened again
	list, changed, err = ts.read()
	if err != nil || !changed || list[0] != webhook || list[1] == remote || ts.Remotes.All()[0] != list[1] {
		t.Fatalf("the CA changed: changed %v, %v, webhook kept %v, remote reopened %v", changed, err, list[0] == webhook, list[1] != remote)
	}

	for _, broken := range []string{`{"targets":[`, `{"targets":[` + hook + `,` + hook + `]}`, `{"targets":[{"id":"x","type":"pigeon","endpoint":"x"}]}`} {
		write(path, broken)
		if _, _, err := ts.read(); err == nil {
			t.Fatalf("%s read without an error", broken)
		}
		if len(ts.Remotes.All()) != 1 || ts.count.Load() != 2 {
			t.Fatalf("a refused file changed the targets in force: %d remotes, %d targets", len(ts.Remotes.All()), ts.count.Load())
		}
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	list, changed, err = ts.read()
	if err != nil || !changed || len(list) != 0 || len(ts.Remotes.All()) != 0 {
		t.Fatalf("no file: changed %v, %v, %d remotes, %v", changed, notify.ARNs(list), len(ts.Remotes.All()), err)
	}
}
