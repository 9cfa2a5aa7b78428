package replicate

import (
	"errors"
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
// in force (a target that cannot be opened is not tried again while the
// file stays as it is), and tells a file gone (refused) from one not there
// yet at start (no targets, events held).
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

	ts, list, err := loadTargets(path, notify.DefaultRegion, slog.New(slog.DiscardHandler))
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

	write(path, `{"targets":[`+hook+`,`+dr+`,{"id":"x","type":"pigeon","endpoint":"x"}]}`)
	for range 2 { // refused once; the same file again is not opened again
		if _, _, err := ts.read(); err == nil || ts.refusal == nil {
			t.Fatalf("a target that cannot be opened: %v", err)
		}
	}

	// A file gone after one was read is not a removal: refused, the
	// targets in force kept.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.read(); err == nil || len(ts.Remotes.All()) != 1 || ts.count.Load() != 2 {
		t.Fatalf("the file gone: %v, %d remotes, %d targets in force", err, len(ts.Remotes.All()), ts.count.Load())
	}

	// No file at start: no targets yet, the events held until there is one.
	fresh, list, err := loadTargets(path, notify.DefaultRegion, slog.New(slog.DiscardHandler))
	if err != nil || len(list) != 0 || !fresh.missing {
		t.Fatalf("no file at start: %v, %v, missing %v", notify.ARNs(list), err, fresh.missing)
	}
	if _, _, err := fresh.read(); !errors.Is(err, errStillMissing) {
		t.Fatalf("still no file: %v", err)
	}
	write(path, `{"targets":[`+hook+`]}`)
	if list, changed, err := fresh.read(); err != nil || !changed || len(list) != 1 || fresh.missing {
		t.Fatalf("the file there at last: changed %v, %v, %v", changed, notify.ARNs(list), err)
	}
	if _, _, err := loadTargets("", notify.DefaultRegion, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("no file named: no error")
	}
}
