package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDirWatch(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"bkt/flat", "bkt/small", ".strata/versions/bkt", "bkt/.sgwtmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(dir string, n int) {
		for i := range n {
			if err := os.WriteFile(filepath.Join(root, dir, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch("bkt/flat", 30)
	touch("bkt/small", 3)
	touch(".strata/versions/bkt", 40) // hidden: never reported
	touch("bkt/.sgwtmp", 40)
	w := newDirWatch(root, 25, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	w.scan(context.Background())
	want := `
# HELP strata_gateway_large_directories Directories with at least strata_gateway_large_directory_threshold entries (listing them and writing into them is slow).
# TYPE strata_gateway_large_directories gauge
strata_gateway_large_directories 1
# HELP strata_gateway_large_directory_entries Entries of a directory past the threshold (the 20 largest), as bucket/prefix.
# TYPE strata_gateway_large_directory_entries gauge
strata_gateway_large_directory_entries{directory="bkt/flat"} 30
`
	if err := testutil.CollectAndCompare(w, strings.NewReader(want), "strata_gateway_large_directories", "strata_gateway_large_directory_entries"); err != nil {
		t.Fatal(err)
	}
	// Emptied below the threshold: no longer reported.
	for i := range 10 {
		_ = os.Remove(filepath.Join(root, "bkt/flat", fmt.Sprintf("f%d", i)))
	}
	w.scan(context.Background())
	if err := testutil.CollectAndCompare(w, strings.NewReader(`
# HELP strata_gateway_large_directories Directories with at least strata_gateway_large_directory_threshold entries (listing them and writing into them is slow).
# TYPE strata_gateway_large_directories gauge
strata_gateway_large_directories 0
`), "strata_gateway_large_directories"); err != nil {
		t.Fatalf("after shrinking: %v", err)
	}
	// The write path counts a directory at most once per recount interval.
	touch("bkt/small", 26)
	w.wrote("bkt/small")
	w.wrote("bkt/small")
	if len(w.queue) != 1 {
		t.Fatalf("queued counts: %d", len(w.queue))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go w.run(ctx, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		n := w.large["bkt/small"]
		w.mu.Unlock()
		if n == 26 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("write path never counted bkt/small")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Writes inside the recount interval are not lost: the directory is
	// counted again once the interval has passed.
	cancel()
	w2 := newDirWatch(root, 25, 200*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel = context.WithCancel(context.Background())
	go w2.run(ctx, 0)
	touch("bkt/small", 40)
	w2.wrote("bkt/small") // counted now...
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		w2.mu.Lock()
		n := w2.large["bkt/small"]
		w2.mu.Unlock()
		if n == 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first count: %d", n)
		}
	}
	for i := range 4 {
		_ = os.WriteFile(filepath.Join(root, "bkt/small", fmt.Sprintf("late%d", i)), nil, 0o644)
		w2.wrote("bkt/small") // ...these only mark it dirty
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		w2.mu.Lock()
		n := w2.large["bkt/small"]
		w2.mu.Unlock()
		if n == 44 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late writes never counted: %d entries recorded", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
}
