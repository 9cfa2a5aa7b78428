package metrics

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Token is the bearer token scrapers must present, read from a file (a
// mounted Secret) and re-read when the file changes, so a rotated Secret
// takes effect without a restart.
type Token struct {
	path string
	log  *slog.Logger
	// recheck bounds how often the file is looked at: a flood of requests
	// without a token costs one stat a second, not one per request.
	recheck time.Duration

	mu      sync.Mutex
	sum     [sha256.Size]byte // of the current token
	stamp   os.FileInfo       // of the file the token was read from
	checked time.Time
	failing bool // the last reload failed (logged once until it works)
}

// tokenRecheck is how often the token file is checked for a change.
const tokenRecheck = time.Second

// LoadToken reads the token in path (surrounding whitespace ignored, so a
// file written by `echo` works). An unreadable or empty file is an error:
// a process asked to protect its metrics does not start unprotected.
func LoadToken(path string, log *slog.Logger) (*Token, error) {
	t := &Token{path: path, log: log, recheck: tokenRecheck}
	sum, st, err := readToken(path)
	if err != nil {
		return nil, err
	}
	t.sum, t.stamp, t.checked = sum, st, time.Now()
	return t, nil
}

func readToken(path string) ([sha256.Size]byte, os.FileInfo, error) {
	var sum [sha256.Size]byte
	// Stat first: a file replaced between the two calls is read again at
	// the next check, never missed.
	st, err := os.Stat(path)
	if err != nil {
		return sum, nil, fmt.Errorf("metrics token: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return sum, nil, fmt.Errorf("metrics token: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return sum, nil, fmt.Errorf("metrics token: %s is empty", path)
	}
	return sha256.Sum256(b), st, nil
}

// current returns the hash of the token in force, re-reading the file when
// it changed (kubelet swaps a Secret's files, so the path then names a new
// file). A file that went missing or empty keeps the previous token: the
// metrics stay protected.
func (t *Token) current() [sha256.Size]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.checked) < t.recheck {
		return t.sum
	}
	t.checked = now
	st, err := os.Stat(t.path)
	if err == nil && os.SameFile(st, t.stamp) && st.ModTime().Equal(t.stamp.ModTime()) && st.Size() == t.stamp.Size() {
		return t.sum
	}
	sum, st, err := readToken(t.path)
	if err != nil {
		if !t.failing {
			t.log.Error("metrics token not reloaded; keeping the previous one", "err", err)
		}
		t.failing = true
		return t.sum
	}
	if sum != t.sum {
		t.log.Info("metrics token changed; scrapers must present the new one", "file", t.path)
	}
	t.sum, t.stamp, t.failing = sum, st, false
	return t.sum
}

// allowed reports whether an Authorization header carries the token. Both
// sides are hashed first, so the comparison takes the same time whatever
// the presented token's length or content.
func (t *Token) allowed(header string) bool {
	presented, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	want := t.current()
	got := sha256.Sum256([]byte(strings.TrimSpace(presented)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// Require serves next to requests that carry the token, and answers 401
// to the others.
func (t *Token) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.allowed(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata metrics"`)
			http.Error(w, "a bearer token is required (the one in --metrics-token-file)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler serves the registry in the Prometheus text format: to anyone
// when token is nil (no --metrics-token-file), else only to requests that
// present it.
func Handler(reg *prometheus.Registry, token *Token) http.Handler {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if token == nil {
		return h
	}
	return token.Require(h)
}

// OptionalToken loads the token in path, or returns nil when path is empty
// (metrics then served without authentication).
func OptionalToken(path string, log *slog.Logger) (*Token, error) {
	if path == "" {
		return nil, nil
	}
	t, err := LoadToken(path, log)
	if err != nil {
		return nil, fmt.Errorf("--metrics-token-file: %w", err)
	}
	return t, nil
}
