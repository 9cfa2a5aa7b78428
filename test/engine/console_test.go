package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's Chromium (STRATA_CHROMIUM overrides), which
// .ci/run installs; without it the console's browser tests skip outside CI.
func chromiumPath(t *testing.T) string {
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

// browserFor starts a headless Chromium of its own (a fresh profile) and
// returns a tab's context. The console's certificate is the test's own,
// which this Chromium is told to accept; the page is still a secure
// context, so its __Host- cookie works as in a real browser.
func browserFor(t *testing.T, downloads string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("ignore-certificate-errors", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: downloads, EventsEnabled: &events}); err != nil {
		t.Fatalf("setting Chromium's downloads: %v", err)
	}
	return ctx
}

// run runs browser actions within a bound, failing the test with what
// was being done.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatalf("%s: %v (the page says: %q)", what, err, evalString(ctx, `document.getElementById('error').textContent`))
	}
}

// evalString evaluates a JavaScript expression of the page ("" on error).
func evalString(ctx context.Context, expr string) string {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, _ := chromedp.Run(tctx, chromedp.Evaluate[string](expr))
	return s
}

// textOf reads an element's text (CSS selector).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return evalString(ctx, fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||''`, sel))
}

// waitText waits until the element's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = textOf(t, ctx, sel); strings.Contains(last, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never showed %q (last %q; the page's error: %q)", sel, want, last, textOf(t, ctx, "#error"))
}

// signIn signs in through the form.
func signIn(t *testing.T, ctx context.Context, url, access, secret string) {
	t.Helper()
	run(t, ctx, "opening the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login-form")))
	run(t, ctx, "signing in as "+access,
		chromedp.SetValue(chromedp.ID("access-key"), access), chromedp.SetValue(chromedp.ID("secret-key"), secret),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("buckets-view")))
	waitText(t, ctx, "#who", access)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("STRATA_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestConsole drives the web console in a real browser against `strata
// server` over TLS: sign in, create a bucket, upload a 50 MiB file (a
// multipart upload, its progress shown), browse, download it and compare
// checksums, tags and a presigned link, the tenant's drives; then a
// read-only user finds every write refused and the tenant page closed.
func TestConsole(t *testing.T) {
	usersFile := filepath.Join(t.TempDir(), "users.json")
	users, _ := json.Marshal(map[string]any{"users": []map[string]any{
		{"accessKey": "viewer", "secretKey": "viewer-secret-key", "policy": "readonly"},
	}})
	if err := os.WriteFile(usersFile, users, 0o600); err != nil {
		t.Fatal(err)
	}
	consoleAddr := freeAddr(t)
	tg := startTLSTargetWith(t, "server", []string{"STRATA_IAM_FILE=" + usersFile}, "--console-address", consoleAddr)
	url := "https://" + consoleAddr + "/"
	downloads := t.TempDir()
	ctx := browserFor(t, downloads)
	axe := axeSource(t)

	run(t, ctx, "opening the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login-form")))
	accessible(t, ctx, axe, "sign-in")
	screenshot(t, ctx, "sign-in")
	signIn(t, ctx, url, rootUser, rootPassword)

	// A bucket.
	run(t, ctx, "creating a bucket", chromedp.SetValue(chromedp.ID("bucket-name"), "console-demo"),
		chromedp.Click(chromedp.ID("bucket-versioning")), chromedp.Click(chromedp.ID("bucket-create")))
	waitText(t, ctx, "#bucket-table", "console-demo")
	accessible(t, ctx, axe, "buckets")
	screenshot(t, ctx, "buckets")
	if _, err := tg.sdkClient(nil).HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("console-demo")}); err != nil {
		t.Fatalf("the bucket the console made is not there for S3: %v", err)
	}

	// A 50 MiB file, uploaded from the browser in parts with progress.
	src := filepath.Join(t.TempDir(), "big-file.bin")
	if err := os.WriteFile(src, randomBytes(50<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "opening the bucket", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	run(t, ctx, "choosing the file", chromedp.SetUploadFiles(chromedp.ID("upload-file"), []string{src}),
		chromedp.Click(chromedp.ID("upload-start")))
	seen := map[float64]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.getElementById('upload-progress').value`))
		text := evalString(ctx, `document.getElementById('upload-text').textContent`)
		seen[v] = true
		if strings.HasPrefix(text, "Uploaded big-file.bin") {
			break
		}
		if strings.Contains(text, "failed") || time.Now().After(deadline) {
			t.Fatalf("the upload did not finish: %q (page error %q)", text, textOf(t, ctx, "#error"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	between := 0
	for v := range seen {
		if v > 0 && v < 100 {
			between++
		}
	}
	if between == 0 {
		t.Errorf("the progress bar showed no value between 0 and 100 during a 50 MiB upload (saw %v)", seen)
	}
	t.Logf("progress values seen during the upload: %d distinct between 0 and 100", between)
	waitText(t, ctx, "#object-table", "big-file.bin")
	accessible(t, ctx, axe, "objects")
	screenshot(t, ctx, "objects")

	// What S3 holds is the file, uploaded in parts.
	head, err := tg.sdkClient(nil).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(head.ContentLength) != 50<<20 || !strings.Contains(aws.ToString(head.ETag), "-") {
		t.Errorf("uploaded object: %d bytes, ETag %s (want 50 MiB from a multipart upload)", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag))
	}

	// Its page, tags, a link, and the download.
	run(t, ctx, "opening the object", chromedp.Click(chromedp.CSS(`#object-table a`)), chromedp.WaitVisible(chromedp.ID("object-view")))
	waitText(t, ctx, "#object-facts", "52428800 bytes")
	waitText(t, ctx, "#version-table", "(latest)")
	run(t, ctx, "saving tags", chromedp.SetValue(chromedp.ID("tags-text"), "team=media\nstage=raw"), chromedp.Click(chromedp.ID("tags-save")))
	waitText(t, ctx, "#status", "Tags saved")
	tagging, err := tg.sdkClient(nil).GetObjectTagging(context.Background(), &s3.GetObjectTaggingInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
	if err != nil || len(tagging.TagSet) != 2 {
		t.Errorf("tags after saving them in the console: %v %v", tagging, err)
	}
	run(t, ctx, "making a link", chromedp.Click(chromedp.ID("object-presign")))
	waitText(t, ctx, "#status", "Link made")
	link := evalString(ctx, `document.getElementById('presign-url').value`)
	resp, err := tg.httpClient().Get(link)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || hex.EncodeToString(h.Sum(nil)) != sha256File(t, src) {
		t.Errorf("the presigned link answered %d with other bytes", resp.StatusCode)
	}
	accessible(t, ctx, axe, "object")
	screenshot(t, ctx, "object")
	done := make(chan string, 1)
	progress := chromedp.BrowserEvents(ctx, browser.DownloadProgress)
	go func() {
		for p, err := range progress {
			if err != nil {
				return
			}
			if p.State == browser.DownloadProgressStateCompleted {
				done <- p.GUID
				return
			}
		}
	}()
	run(t, ctx, "downloading", chromedp.Click(chromedp.ID("object-download")))
	select {
	case guid := <-done:
		if got, want := sha256File(t, filepath.Join(downloads, guid)), sha256File(t, src); got != want {
			t.Errorf("downloaded file's SHA-256 %s, uploaded %s", got, want)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the download did not complete")
	}

	// The tenant: four drives, all ok, and the certificate's expiry.
	run(t, ctx, "opening the tenant page", chromedp.Click(chromedp.ID("nav-tenant")), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	waitText(t, ctx, "#tenant-body", "Pool")
	if got := strings.Count(textOf(t, ctx, "#tenant-body"), "online"); got != 4 {
		t.Errorf("tenant page shows %d drives ok, want 4 online:\n%s", got, textOf(t, ctx, "#tenant-body"))
	}
	waitText(t, ctx, "#tenant-body", "expires")
	accessible(t, ctx, axe, "tenant")
	screenshot(t, ctx, "tenant")
	run(t, ctx, "opening the users page", chromedp.Click(chromedp.ID("nav-users")), chromedp.WaitVisible(chromedp.ID("users-view")))
	waitText(t, ctx, "#users-body", "viewer")
	accessible(t, ctx, axe, "users")
	screenshot(t, ctx, "users")

	// A read-only user: everything is visible, every write is refused by S3.
	run(t, ctx, "signing out", chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-form")))
	signIn(t, ctx, url, "viewer", "viewer-secret-key")
	waitText(t, ctx, "#bucket-table", "console-demo")
	run(t, ctx, "creating a bucket as the viewer", chromedp.SetValue(chromedp.ID("bucket-name"), "viewer-bucket"),
		chromedp.Click(chromedp.ID("bucket-create")))
	waitText(t, ctx, "#error", "AccessDenied")
	small := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(small, []byte("not allowed"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "opening the bucket as the viewer", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	waitText(t, ctx, "#object-table", "big-file.bin")
	run(t, ctx, "uploading as the viewer", chromedp.SetUploadFiles(chromedp.ID("upload-file"), []string{small}), chromedp.Click(chromedp.ID("upload-start")))
	waitText(t, ctx, "#error", "AccessDenied")
	run(t, ctx, "opening the object as the viewer", chromedp.Click(chromedp.CSS(`#object-table a`)), chromedp.WaitVisible(chromedp.ID("object-view")))
	waitText(t, ctx, "#object-facts", "52428800 bytes")
	run(t, ctx, "deleting as the viewer", chromedp.Click(chromedp.ID("object-delete")), chromedp.Click(chromedp.ID("object-delete")))
	waitText(t, ctx, "#error", "AccessDenied")
	if hidden := evalString(ctx, `String(document.getElementById('nav-tenant').hidden)`); hidden != "true" {
		t.Error("the tenant page is offered to a read-only user")
	}
	accessible(t, ctx, axe, "refused")
	screenshot(t, ctx, "refused")
	out, err := tg.sdkClient(nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("console-demo")})
	if err != nil || len(out.Contents) != 1 {
		t.Errorf("after the viewer's refused writes the bucket holds %v (%v), want big-file.bin only", out, err)
	}
	if _, err := tg.sdkClient(nil).HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("viewer-bucket")}); err == nil {
		t.Error("the viewer's bucket was created")
	}
	if strings.Contains(tg.s.logs(), rootPassword) || strings.Contains(tg.s.logs(), "viewer-secret-key") {
		t.Error("a secret key is in the server's log")
	}
}

// TestConsoleSessions checks the console's defences without a browser: a
// wrong key is refused, the session cookie is HttpOnly, Secure and
// SameSite=Strict and holds no secret in the clear, a change without the
// CSRF token or from another origin is refused, every answer carries a
// strict Content-Security-Policy, and a session ends on time.
func TestConsoleSessions(t *testing.T) {
	consoleAddr := freeAddr(t)
	tg := startTLSTargetWith(t, "server", nil, "--console-address", consoleAddr, "--console-session-ttl", "3s")
	base := "https://" + consoleAddr
	jar, _ := cookiejar.New(nil)
	hc := tg.httpClient()
	hc.Jar = jar
	post := func(path, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("/api/login", `{"accessKey":"`+rootUser+`","secretKey":"wrong"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong secret signs in: %d", resp.StatusCode)
	}
	resp = post("/api/login", `{"accessKey":"`+rootUser+`","secretKey":"`+rootPassword+`"}`, nil)
	var info struct {
		CSRF  string `json:"csrf"`
		Admin bool   `json:"admin"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if resp.StatusCode != 200 || info.CSRF == "" || !info.Admin {
		t.Fatalf("root sign-in: %d %+v", resp.StatusCode, info)
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"__Host-strata-console=", "HttpOnly", "Secure", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, rootPassword) || strings.Contains(cookie, rootUser) {
		t.Errorf("the session cookie shows the credentials: %s", cookie)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	bucket := `{"name":"csrf-test"}`
	for name, hdr := range map[string]map[string]string{
		"no token":      nil,
		"wrong token":   {"X-Strata-CSRF": "forged"},
		"other origin":  {"X-Strata-CSRF": info.CSRF, "Origin": "https://evil.example"},
		"cross-site":    {"X-Strata-CSRF": info.CSRF, "Sec-Fetch-Site": "cross-site"},
		"presign, none": nil,
	} {
		path := "/api/buckets"
		if strings.HasPrefix(name, "presign") {
			path = "/api/presign"
		}
		resp := post(path, bucket, hdr)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: a change answered %d, want 403", name, resp.StatusCode)
		}
	}
	if _, err := tg.sdkClient(nil).HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("csrf-test")}); err == nil {
		t.Error("a forged request created a bucket")
	}
	resp = post("/api/buckets", bucket, map[string]string{"X-Strata-CSRF": info.CSRF, "Origin": base, "Sec-Fetch-Site": "same-origin"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the page's own request: %d", resp.StatusCode)
	}
	time.Sleep(3500 * time.Millisecond)
	r2, err := hc.Get(base + "/api/session")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session past its TTL answered %d", r2.StatusCode)
	}
	// An expired cookie replayed by hand is refused too (the expiry is
	// sealed inside it, not left to the browser).
	req, _ := http.NewRequest(http.MethodGet, base+"/api/buckets", nil)
	req.Header.Set("Cookie", strings.SplitN(cookie, ";", 2)[0])
	r3, err := tg.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if r3.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replayed expired cookie answered %d", r3.StatusCode)
	}
}

// TestConsoleShowsANodeLost: the tenant page of a two-node cluster (two
// drives each, one 2+2 set) shows all four drives online, then, once the
// other node's process is killed as a pod would be, its two drives
// offline, and objects still browse (read quorum holds).
func TestConsoleShowsANodeLost(t *testing.T) {
	c := newCluster(t)
	nodes := []int{11, 12}
	consoleAddr := net.JoinHostPort(c.ip(11), strconv.Itoa(freePort(t)))
	c.extra = map[int][]string{11: {"--console-address", consoleAddr}}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	mustCreateBucket(t, c.nodes[11].aws(), "kept")
	put(t, c.nodes[11].aws(), "kept", "still-here.txt", []byte("read quorum holds"))

	ctx := browserFor(t, t.TempDir())
	signIn(t, ctx, "http://"+consoleAddr+"/", rootUser, rootPassword)
	run(t, ctx, "opening the tenant page", chromedp.Click(chromedp.ID("nav-tenant")), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	tenantUntil(t, ctx, "all four drives online", func(page string) bool { return strings.Count(page, "online") == 4 })
	c.nodes[12].kill()
	tenantUntil(t, ctx, "the killed node's two drives offline", func(page string) bool {
		return strings.Count(page, "offline") == 2 && strings.Count(page, "online") == 2
	})
	screenshot(t, ctx, "tenant-node-lost")
	run(t, ctx, "browsing with a node lost", chromedp.Click(chromedp.ID("nav-buckets")), chromedp.WaitVisible(chromedp.ID("buckets-view")))
	waitText(t, ctx, "#bucket-table", "kept")
	run(t, ctx, "opening the bucket", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	waitText(t, ctx, "#object-table", "still-here.txt")
}

// tenantUntil reloads the tenant page until its text satisfies done.
func tenantUntil(t *testing.T, ctx context.Context, what string, done func(page string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		waitText(t, ctx, "#tenant-body", "Pool ")
		page := textOf(t, ctx, "#tenant-body")
		if done(page) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant page never showed %s:\n%s", what, page)
		}
		time.Sleep(500 * time.Millisecond)
		run(t, ctx, "reloading the tenant page", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	}
}

// axeSource is axe-core's script from the npm packages `make jsclients`
// installs (STRATA_JSCLIENTS); "" outside CI when they are missing.
func axeSource(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STRATA_JSCLIENTS")
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("STRATA_CI") != "" {
			t.Fatalf("axe-core not found (make jsclients; STRATA_JSCLIENTS=%q): %v", dir, err)
		}
		t.Logf("accessibility checks skipped: no axe-core (make jsclients, STRATA_JSCLIENTS=bin/node-clients)")
		return ""
	}
	return string(b)
}

// accessible runs axe-core on the page as it is now and fails the test on
// each serious or critical violation.
func accessible(t *testing.T, ctx context.Context, axe, name string) {
	t.Helper()
	if axe == "" {
		return
	}
	if evalString(ctx, `typeof axe`) != "object" {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](axe+"\n;undefined")); err != nil {
			t.Fatalf("loading axe-core: %v", err)
		}
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document).then(r => JSON.stringify({passes: r.passes.length,
		violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on the %s page: %v", name, err)
	}
	var found struct {
		Passes     int
		Violations []struct {
			ID, Impact, Help string
			Nodes            []string
		}
	}
	if err := json.Unmarshal([]byte(res), &found); err != nil || found.Passes == 0 {
		t.Fatalf("axe's answer on the %s page %q: %v", name, res, err)
	}
	t.Logf("accessibility, %s page: %d rules passed, %d violated", name, found.Passes, len(found.Violations))
	for _, v := range found.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("accessibility, %s page: %s (%s): %s at %v", name, v.ID, v.Impact, v.Help, v.Nodes)
		} else {
			t.Logf("accessibility, %s page, %s: %s (%s) at %v", name, v.Impact, v.ID, v.Help, v.Nodes)
		}
	}
}
