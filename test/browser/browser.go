// Package browser drives the web console (engine/console) in a real
// headless Chromium for the tests of test/engine and test/localcluster:
// Debian's chromium, which .ci/run installs, driven over the DevTools
// protocol with chromedp.
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// Tab is one page of a Chromium of its own.
type Tab struct {
	t   testing.TB
	ctx context.Context
	// Downloads is where the browser saves downloads, each named by its
	// download's GUID.
	Downloads string
	axe       string
}

// skipOutsideCI skips when a prerequisite is missing on a developer's
// machine; under .ci/run (STRATA_CI set), which installs them, it fails.
func skipOutsideCI(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("STRATA_CI") != "" {
		t.Fatal(why + " (STRATA_CI is set: CI must run this test)")
	}
	t.Skip(why)
}

// Path is Debian's Chromium (STRATA_CHROMIUM overrides it); without it the
// test skips outside CI.
func Path(t testing.TB) string {
	t.Helper()
	p := os.Getenv("STRATA_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		skipOutsideCI(t, "no Chromium at "+p+" (apt-get install chromium, or set STRATA_CHROMIUM)")
	}
	return p
}

// Start starts a headless Chromium with a fresh profile and returns its
// tab. The tests' certificates are their own, which this Chromium is told
// to accept; the pages are still secure contexts, so the console's
// __Host- cookie works as in a browser that trusts the CA. No background
// networking: this machine's closed network refuses it.
func Start(t testing.TB) *Tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Path(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("ignore-certificate-errors", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	tab := &Tab{t: t, ctx: ctx, Downloads: t.TempDir()}
	events := true
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: tab.Downloads, EventsEnabled: &events}); err != nil {
		t.Fatalf("setting Chromium's downloads: %v", err)
	}
	return tab
}

// Context is the tab's context, for chromedp calls of a test's own.
func (b *Tab) Context() context.Context { return b.ctx }

// Do runs browser actions within a minute, failing the test with what was
// being done and the page's error line.
func (b *Tab) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v (the page says: %q)", what, err, b.Eval(`document.getElementById('error').textContent`))
	}
}

// Eval evaluates a JavaScript expression of the page as a string ("" on
// error).
func (b *Tab) Eval(expr string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	return s
}

// Text is the text of the first element a CSS selector finds ("" when
// none).
func (b *Tab) Text(sel string) string {
	return b.Eval(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||''`, sel))
}

// WaitText waits up to a minute until the element's text contains want.
func (b *Tab) WaitText(sel, want string) {
	b.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = b.Text(sel); strings.Contains(last, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Fatalf("%s never showed %q (last %q; the page's error: %q)", sel, want, last, b.Text("#error"))
}

// SignIn opens the console at url and signs in through its form.
func (b *Tab) SignIn(url, access, secret string) {
	b.t.Helper()
	b.Do("opening the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login-form")))
	b.Do("signing in as "+access,
		chromedp.SetValue(chromedp.ID("access-key"), access), chromedp.SetValue(chromedp.ID("secret-key"), secret),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("buckets-view")))
	b.WaitText("#who", access)
}

// Screenshot saves the page as STRATA_CONSOLE_SCREENSHOTS/name.png when
// that is set (docs/console.md's pictures).
func (b *Tab) Screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("STRATA_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// axeSource is axe-core's script from the npm packages `make jsclients`
// installs (STRATA_JSCLIENTS); "" outside CI when they are missing.
func (b *Tab) axeSource() string {
	b.t.Helper()
	if b.axe != "" {
		return b.axe
	}
	dir := os.Getenv("STRATA_JSCLIENTS")
	src, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("STRATA_CI") != "" {
			b.t.Fatalf("axe-core not found (make jsclients; STRATA_JSCLIENTS=%q): %v", dir, err)
		}
		b.t.Logf("accessibility checks skipped: no axe-core (make jsclients, STRATA_JSCLIENTS=bin/node-clients)")
		return ""
	}
	b.axe = string(src)
	return b.axe
}

// Accessible runs axe-core on the page as it is now and fails the test on
// each serious or critical violation (lesser ones are logged).
func (b *Tab) Accessible(name string) {
	b.t.Helper()
	axe := b.axeSource()
	if axe == "" {
		return
	}
	if b.Eval(`typeof axe`) != "object" {
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[any](axe+"\n;undefined")); err != nil {
			b.t.Fatalf("loading axe-core: %v", err)
		}
	}
	res, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document).then(r => JSON.stringify({passes: r.passes.length,
		violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("axe on the %s page: %v", name, err)
	}
	var found struct {
		Passes     int
		Violations []struct {
			ID, Impact, Help string
			Nodes            []string
		}
	}
	if err := json.Unmarshal([]byte(res), &found); err != nil || found.Passes == 0 {
		b.t.Fatalf("axe's answer on the %s page %q: %v", name, res, err)
	}
	b.t.Logf("accessibility, %s page: %d rules passed, %d violated", name, found.Passes, len(found.Violations))
	for _, v := range found.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Errorf("accessibility, %s page: %s (%s): %s at %v", name, v.ID, v.Impact, v.Help, v.Nodes)
		} else {
			b.t.Logf("accessibility, %s page, %s: %s (%s) at %v", name, v.Impact, v.ID, v.Help, v.Nodes)
		}
	}
}

// Downloaded waits for the next download the action starts to complete and
// returns the file's path.
func (b *Tab) Downloaded(what string, action chromedp.Action[chromedp.Void]) string {
	b.t.Helper()
	done := make(chan string, 1)
	progress := chromedp.BrowserEvents(b.ctx, cdpbrowser.DownloadProgress)
	go func() {
		for p, err := range progress {
			if err != nil {
				return
			}
			if p.State == cdpbrowser.DownloadProgressStateCompleted {
				done <- p.GUID
				return
			}
		}
	}()
	b.Do(what, action)
	select {
	case guid := <-done:
		return filepath.Join(b.Downloads, guid)
	case <-time.After(5 * time.Minute):
		b.t.Fatalf("%s: the download did not complete", what)
		return ""
	}
}

// TenantUntil reloads the console's tenant page until its text satisfies
// done, for up to within.
func (b *Tab) TenantUntil(what string, within time.Duration, done func(page string) bool) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		page := b.Text("#tenant-body")
		if strings.Contains(page, "Pool ") && done(page) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the tenant page never showed %s:\n%s (error line %q)", what, page, b.Text("#error"))
		}
		time.Sleep(500 * time.Millisecond)
		b.Do("reloading the tenant page", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("tenant-view")))
		time.Sleep(300 * time.Millisecond)
	}
}

// Upload uploads a file through the objects page's form (the page is on a
// bucket's listing), waits until the page says it is uploaded and returns
// how many distinct values between 0 and 100 its progress bar showed on
// the way, and how long it took.
func (b *Tab) Upload(path string) (between int, took time.Duration) {
	b.t.Helper()
	name := filepath.Base(path)
	start := time.Now()
	b.Do("uploading "+name, chromedp.SetUploadFiles(chromedp.ID("upload-file"), []string{path}), chromedp.Click(chromedp.ID("upload-start")))
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		v := b.Eval(`String(document.getElementById('upload-progress').value)`)
		text := b.Text("#upload-text")
		if strings.HasPrefix(text, "Uploaded "+name) {
			took = time.Since(start)
			break
		}
		if strings.Contains(text, "failed") || time.Now().After(deadline) {
			b.t.Fatalf("the upload of %s did not finish: %q (the page's error: %q)", name, text, b.Text("#error"))
		}
		if v != "" && v != "0" && v != "100" {
			seen[v] = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return len(seen), took
}
