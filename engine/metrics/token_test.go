package metrics

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// scrape returns the status of a GET with the given Authorization header
// ("" sends none).
func scrape(t *testing.T, h http.Handler, authorization string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/strata/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a Bearer challenge")
	}
	return rec.Code
}

func protectedHandler(t *testing.T, path string) (http.Handler, *Token) {
	t.Helper()
	tok, err := LoadToken(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tok.recheck = 0 // look at the file on every request
	reg := NewRegistry()
	NewS3(reg)
	return Handler(reg, tok), tok
}

func TestMetricsTokenRequired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeFile(t, path, "s3cr3t-token\n") // as `echo` writes it
	h, _ := protectedHandler(t, path)
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"wrong token", "Bearer wrong", http.StatusUnauthorized},
		{"a prefix of the token", "Bearer s3cr3t", http.StatusUnauthorized},
		{"the token as Basic", "Basic s3cr3t-token", http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"the token", "Bearer s3cr3t-token", http.StatusOK},
	} {
		if got := scrape(t, h, tc.header); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestMetricsWithoutTokenAreOpen(t *testing.T) {
	reg := NewRegistry()
	if got := scrape(t, Handler(reg, nil), ""); got != http.StatusOK {
		t.Fatalf("no token configured: %d, want 200", got)
	}
	if tok, err := OptionalToken("", nil); tok != nil || err != nil {
		t.Fatalf("OptionalToken(\"\") = %v, %v; want nil, nil", tok, err)
	}
}

func TestMetricsTokenFileMustHoldAToken(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, " \n")
	for name, path := range map[string]string{"missing": filepath.Join(dir, "missing"), "empty": empty} {
		if _, err := OptionalToken(path, slog.Default()); err == nil || !strings.Contains(err.Error(), "--metrics-token-file") {
			t.Errorf("%s file: %v, want an error naming the flag", name, err)
		}
	}
}

// TestMetricsTokenRotation: a token rewritten in place, or swapped the way
// kubelet updates a mounted Secret (a new directory behind a symlink), is
// in force at the next request; a file that goes empty keeps the old one.
func TestMetricsTokenRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	writeFile(t, path, "first")
	h, _ := protectedHandler(t, path)
	if scrape(t, h, "Bearer first") != http.StatusOK {
		t.Fatal("first token refused")
	}

	writeFile(t, path, "second")
	if scrape(t, h, "Bearer second") != http.StatusOK || scrape(t, h, "Bearer first") != http.StatusUnauthorized {
		t.Fatal("a token rewritten in place is not the one in force")
	}

	// Kubelet's layout: token -> ..data/token, ..data -> ..<timestamp>.
	mounted := filepath.Join(dir, "mounted")
	for i, token := range []string{"third", "fourth"} {
		ts := filepath.Join(mounted, fmt.Sprintf("..v%d", i+1))
		if err := os.MkdirAll(ts, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ts, "token"), token)
		tmp := filepath.Join(mounted, "..data_tmp")
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mounted, "..data")); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(mounted, "token")); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, tok := protectedHandler(t, filepath.Join(mounted, "token"))
	if scrape(t, h, "Bearer fourth") != http.StatusOK {
		t.Fatal("the token behind kubelet's symlinks is refused")
	}
	ts := filepath.Join(mounted, "..v3")
	if err := os.MkdirAll(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ts, "token"), "fifth")
	tmp := filepath.Join(mounted, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(mounted, "..data")); err != nil {
		t.Fatal(err)
	}
	if scrape(t, h, "Bearer fifth") != http.StatusOK || scrape(t, h, "Bearer fourth") != http.StatusUnauthorized {
		t.Fatal("a token swapped in by kubelet is not the one in force")
	}

	writeFile(t, filepath.Join(ts, "token"), "")
	if scrape(t, h, "Bearer fifth") != http.StatusOK || scrape(t, h, "") != http.StatusUnauthorized {
		t.Fatal("an emptied token file must keep the previous token in force")
	}

	// Without recheck 0 the file is looked at once a second at most.
	tok.recheck = time.Hour
	writeFile(t, filepath.Join(ts, "token"), "sixth")
	if scrape(t, h, "Bearer fifth") != http.StatusOK {
		t.Fatal("the token changed before the recheck interval")
	}
}
