package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/chromedp/chromedp"

	"github.com/strata-storage/strata/test/browser"
)

// TestConsole drives the web console in a real browser against `strata
// server` over TLS: sign in, create a bucket, upload a 50 MiB file (a
// multipart upload, its progress shown), browse, download it and compare
// checksums, tags and a presigned link, the tenant's drives; then a
// read-only user finds every write refused and the tenant page closed.
func TestConsole(t *testing.T) {
	t.Parallel()
	usersFile := filepath.Join(t.TempDir(), "users.json")
	users, _ := json.Marshal(map[string]any{"users": []map[string]any{
		{"accessKey": "viewer", "secretKey": "viewer-secret-key", "policy": "readonly"},
	}})
	if err := os.WriteFile(usersFile, users, 0o600); err != nil {
		t.Fatal(err)
	}
	consoleAddr := freeAddr(t)
	// A keys file: the IAM directory (users, keys, policies) seals its
	// secrets with it.
	tg := startTLSTargetWith(t, "server", []string{"STRATA_IAM_FILE=" + usersFile, "STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1")},
		"--console-address", consoleAddr)
	url := "https://" + consoleAddr + "/"
	b := browser.Start(t)
	b.Do("opening the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("login-form")))
	b.Accessible("sign-in")
	b.Screenshot("sign-in")
	// Signed out, the sections' links are not shown, nor single sign-on
	// where none is set up.
	if shown := b.Eval(`['nav', 'sso'].filter((id) => getComputedStyle(document.getElementById(id)).display !== 'none').join(',')`); shown != "" {
		t.Errorf("the sign-in page shows %s", shown)
	}
	b.SignIn(url, rootUser, rootPassword)

	// A bucket.
	b.Do("creating a bucket", chromedp.SetValue(chromedp.ID("bucket-name"), "console-demo"),
		chromedp.Click(chromedp.ID("bucket-versioning")), chromedp.Click(chromedp.ID("bucket-create")))
	b.WaitText("#bucket-table", "console-demo")
	b.Accessible("buckets")
	b.Screenshot("buckets")
	if _, err := tg.sdkClient(nil).HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("console-demo")}); err != nil {
		t.Fatalf("the bucket the console made is not there for S3: %v", err)
	}

	// A 50 MiB file, uploaded from the browser in parts with progress.
	src := filepath.Join(t.TempDir(), "big-file.bin")
	if err := os.WriteFile(src, randomBytes(50<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do("opening the bucket", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	if between, took := b.Upload(src); between == 0 {
		t.Errorf("the progress bar showed no value between 0 and 100 during a 50 MiB upload")
	} else {
		t.Logf("50 MiB uploaded from the browser in %s; the progress bar showed %d values between 0 and 100", took.Round(time.Millisecond), between)
	}
	b.WaitText("#object-table", "big-file.bin")
	b.Accessible("objects")
	b.Screenshot("objects")

	// What S3 holds is the file, uploaded in parts.
	head, err := tg.sdkClient(nil).HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(head.ContentLength) != 50<<20 || !strings.Contains(aws.ToString(head.ETag), "-") {
		t.Errorf("uploaded object: %d bytes, ETag %s (want 50 MiB from a multipart upload)", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag))
	}

	// Its page, tags, a link, and the download.
	b.Do("opening the object", chromedp.Click(chromedp.CSS(`#object-table a`)), chromedp.WaitVisible(chromedp.ID("object-view")))
	b.WaitText("#object-facts", "52428800 bytes")
	b.WaitText("#version-table", "(latest)")
	b.Do("saving tags", chromedp.SetValue(chromedp.ID("tags-text"), "team=media\nstage=raw"), chromedp.Click(chromedp.ID("tags-save")))
	b.WaitText("#status", "Tags saved")
	tagging, err := tg.sdkClient(nil).GetObjectTagging(context.Background(), &s3.GetObjectTaggingInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
	if err != nil || len(tagging.TagSet) != 2 {
		t.Errorf("tags after saving them in the console: %v %v", tagging, err)
	}
	b.Do("making a link", chromedp.Click(chromedp.ID("object-presign")))
	b.WaitText("#status", "Link made")
	link := b.Eval(`document.getElementById('presign-url').value`)
	resp, err := tg.httpClient().Get(link)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || [32]byte(h.Sum(nil)) != fileSum(t, src) {
		t.Errorf("the presigned link answered %d with other bytes", resp.StatusCode)
	}
	b.Accessible("object")
	b.Screenshot("object")
	got := b.Downloaded("downloading", chromedp.Click(chromedp.ID("object-download")))
	if fileSum(t, got) != fileSum(t, src) {
		t.Errorf("the downloaded file's SHA-256 differs from the uploaded one's")
	}

	// The tenant: four drives, all ok, and the certificate's expiry.
	b.Do("opening the tenant page", chromedp.Click(chromedp.ID("nav-tenant")), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	b.WaitText("#tenant-body", "Pool")
	if got := strings.Count(b.Text("#tenant-body"), "online"); got != 4 {
		t.Errorf("tenant page shows %d drives ok, want 4 online:\n%s", got, b.Text("#tenant-body"))
	}
	b.WaitText("#tenant-body", "expires")
	b.Accessible("tenant")
	b.Screenshot("tenant")
	b.Do("opening the users page", chromedp.Click(chromedp.ID("nav-users")), chromedp.WaitVisible(chromedp.ID("users-view")))
	b.WaitText("#users-body", "viewer")

	// IAM: a user, a key shown once, an inline policy that lets the key
	// read the bucket, then the key and the user deleted.
	b.Do("creating an IAM user", chromedp.SetValue(chromedp.ID("user-name"), "app-team"), chromedp.Click(chromedp.ID("user-create")))
	b.WaitText("#user-table", "app-team")
	b.Do("making an access key", chromedp.Click(chromedp.CSS(`button[aria-label="New access key for app-team"]`)))
	b.WaitText("#new-key", "shown this once")
	keyID, keySecret := b.Text("#new-key-id"), b.Text("#new-key-secret")
	app := tg.userClient(keyID, keySecret)
	if _, err := app.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")}); err == nil {
		t.Error("a new user without a policy reads the bucket")
	}
	b.Do("saving a policy", chromedp.SetValue(chromedp.ID("policy-user"), "app-team"), chromedp.SetValue(chromedp.ID("policy-name"), "read-demo"),
		chromedp.SetValue(chromedp.ID("policy-doc"), `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::console-demo/*"]}]}`),
		chromedp.Click(chromedp.ID("policy-save")))
	b.WaitText("#status", "Policy read-demo of app-team saved")
	b.WaitText("#user-table", "read-demo")
	waitFor(t, "the new key to read the bucket", 10*time.Second, func() bool {
		_, err := app.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
		return err == nil
	})
	b.Accessible("users")
	b.Screenshot("users")
	if strings.Contains(tg.s.logs(), keySecret) {
		t.Error("the new key's secret is in the server's log")
	}
	b.Do("deleting the key", chromedp.Click(chromedp.CSS(`button[aria-label="Delete key `+keyID+`"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Delete key `+keyID+`"]`)))
	b.WaitText("#status", "Access key "+keyID+" deleted")
	waitFor(t, "the deleted key to be refused", 10*time.Second, func() bool {
		_, err := app.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("console-demo"), Key: aws.String("big-file.bin")})
		return err != nil
	})
	b.Do("deleting the user", chromedp.Click(chromedp.CSS(`button[aria-label="Delete user app-team"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Delete user app-team"]`)))
	b.WaitText("#status", "User app-team deleted")

	// Claims: a bucket and a user the operator made for a namespace's
	// claims (marked as it marks them) are on the claims page, and the
	// bucket is not deleted from the console.
	root := tg.sdkClient(nil)
	if _, err := root.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("team-a-photos"),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{Tags: []s3types.Tag{
			{Key: aws.String("strata.dev/claim-uid"), Value: aws.String("0b7c3a52-uid")}, {Key: aws.String("strata.dev/claim"), Value: aws.String("team-a/photos")}}}}); err != nil {
		t.Fatal(err)
	}
	iamRoot := tg.iamAdmin()
	if _, err := iamRoot.CreateUser(context.Background(), &iam.CreateUserInput{UserName: aws.String("team-a.uploader"), Path: aws.String("/strata-claims/team-a/")}); err != nil {
		t.Fatal(err)
	}
	if _, err := iamRoot.PutUserPolicy(context.Background(), &iam.PutUserPolicyInput{UserName: aws.String("team-a.uploader"), PolicyName: aws.String("claim-access"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::team-a-photos/*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	b.Do("opening the claims page", chromedp.Click(chromedp.ID("nav-claims")), chromedp.WaitVisible(chromedp.ID("claims-view")))
	b.WaitText("#claims-body", "Namespace team-a")
	b.WaitText("#claims-body", "BucketClaim team-a/photos")
	b.WaitText("#claims-body", "team-a.uploader")
	b.WaitText("#claims-body", "claim-access")
	if strings.Contains(b.Text("#claims-body"), "console-demo") {
		t.Error("the claims page lists a bucket no claim made")
	}
	b.Accessible("claims")
	b.Screenshot("claims")
	b.Do("deleting a claim's bucket", chromedp.Click(chromedp.ID("nav-buckets")), chromedp.WaitVisible(chromedp.ID("buckets-view")))
	b.WaitText("#bucket-table", "team-a-photos")
	b.Do("deleting a claim's bucket", chromedp.Click(chromedp.CSS(`button[aria-label="Delete bucket team-a-photos"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Delete bucket team-a-photos"]`)))
	b.WaitText("#error", "BucketClaim team-a/photos owns it")
	if _, err := root.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("team-a-photos")}); err != nil {
		t.Errorf("the claim's bucket is gone after the console refused to delete it: %v", err)
	}

	// A read-only user: everything is visible, every write is refused by S3.
	b.Do("signing out", chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-form")))
	b.SignIn(url, "viewer", "viewer-secret-key")
	b.WaitText("#bucket-table", "console-demo")
	b.Do("creating a bucket as the viewer", chromedp.SetValue(chromedp.ID("bucket-name"), "viewer-bucket"),
		chromedp.Click(chromedp.ID("bucket-create")))
	b.WaitText("#error", "AccessDenied")
	small := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(small, []byte("not allowed"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do("opening the bucket as the viewer", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	b.WaitText("#object-table", "big-file.bin")
	b.Do("uploading as the viewer", chromedp.SetUploadFiles(chromedp.ID("upload-file"), []string{small}), chromedp.Click(chromedp.ID("upload-start")))
	b.WaitText("#error", "AccessDenied")
	b.Do("opening the object as the viewer", chromedp.Click(chromedp.CSS(`#object-table a`)), chromedp.WaitVisible(chromedp.ID("object-view")))
	b.WaitText("#object-facts", "52428800 bytes")
	b.Do("deleting as the viewer", chromedp.Click(chromedp.ID("object-delete")), chromedp.Click(chromedp.ID("object-delete")))
	b.WaitText("#error", "AccessDenied")
	b.Do("opening the users page as the viewer", chromedp.Click(chromedp.ID("nav-users")), chromedp.WaitVisible(chromedp.ID("users-view")))
	b.Do("creating an IAM user as the viewer", chromedp.SetValue(chromedp.ID("user-name"), "viewer-made"), chromedp.Click(chromedp.ID("user-create")))
	b.WaitText("#error", "AccessDenied")
	if hidden := b.Eval(`String(document.getElementById('nav-tenant').hidden)`); hidden != "true" {
		t.Error("the tenant page is offered to a read-only user")
	}
	b.Accessible("refused")
	b.Screenshot("refused")
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
	// send makes one request of the signed-in client (cookie jar), JSON
	// bodies for POST.
	send := func(method, path, body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	post := func(path, body string, hdr map[string]string) *http.Response {
		return send(http.MethodPost, path, body, hdr)
	}
	get := func(path string, hdr map[string]string) *http.Response { return send(http.MethodGet, path, "", hdr) }
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
	// Reads need the token too (a cookie planted by another port of the
	// host holds a session whose token the page does not have), and the
	// session's description never hands it out again.
	noToken := get("/api/buckets", nil)
	noToken.Body.Close()
	if noToken.StatusCode != http.StatusForbidden {
		t.Errorf("a listing without the CSRF token: %d", noToken.StatusCode)
	}
	resp = get("/api/session", map[string]string{"X-Strata-CSRF": info.CSRF})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), info.CSRF) {
		t.Errorf("/api/session: %d %s (the token is given at sign-in only)", resp.StatusCode, body)
	}
	// A sign-in forged by another site's form (text/plain) is refused.
	req, _ := http.NewRequest(http.MethodPost, base+"/api/login", strings.NewReader(`{"accessKey":"`+rootUser+`","secretKey":"`+rootPassword+`"}`))
	req.Header.Set("Content-Type", "text/plain")
	formed, err := tg.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	formed.Body.Close()
	if formed.StatusCode != http.StatusForbidden {
		t.Errorf("a text/plain sign-in answered %d", formed.StatusCode)
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
	req, _ = http.NewRequest(http.MethodGet, base+"/api/buckets", nil)
	req.Header.Set("Cookie", strings.SplitN(cookie, ";", 2)[0])
	req.Header.Set("X-Strata-CSRF", info.CSRF)
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
	t.Parallel()
	c := newCluster(t)
	nodes := []int{11, 12}
	consoleAddr := net.JoinHostPort(c.ip(11), strconv.Itoa(freePort(t)))
	c.extra = map[int][]string{11: {"--console-address", consoleAddr}}
	c.writeTopology(c.poolSpec("pool-a", nodes, 2))
	c.start(nodes)
	mustCreateBucket(t, c.nodes[11].aws(), "kept")
	put(t, c.nodes[11].aws(), "kept", "still-here.txt", []byte("read quorum holds"))

	b := browser.Start(t)
	b.SignIn("http://"+consoleAddr+"/", rootUser, rootPassword)
	b.Do("opening the tenant page", chromedp.Click(chromedp.ID("nav-tenant")), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	b.TenantUntil("all four drives online", 30*time.Second, func(page string) bool { return strings.Count(page, "online") == 4 })
	c.nodes[12].kill()
	b.TenantUntil("the killed node's two drives offline", 30*time.Second, func(page string) bool {
		return strings.Count(page, "offline") == 2 && strings.Count(page, "online") == 2
	})
	b.Screenshot("tenant-node-lost")
	b.Do("browsing with a node lost", chromedp.Click(chromedp.ID("nav-buckets")), chromedp.WaitVisible(chromedp.ID("buckets-view")))
	b.WaitText("#bucket-table", "kept")
	b.Do("opening the bucket", chromedp.Click(chromedp.CSS(`#bucket-table a`)), chromedp.WaitVisible(chromedp.ID("objects-view")))
	b.WaitText("#object-table", "still-here.txt")
}

// TestConsoleLong is the console's measurement behind `make console-long`
// (skipped unless STRATA_TEST_CONSOLE_LONG is set): a prefix of 100,000
// objects, the time from opening it in the browser to its first page
// shown, and a 1 GiB upload from the browser (a multipart upload of 128
// parts) downloaded back and compared.
func TestConsoleLong(t *testing.T) {
	if os.Getenv("STRATA_TEST_CONSOLE_LONG") == "" {
		t.Skip("the console's long measurement: make console-long (STRATA_TEST_CONSOLE_LONG=1)")
	}
	consoleAddr := freeAddr(t)
	tg := startTLSTargetWith(t, "server", nil, "--console-address", consoleAddr)
	url := "https://" + consoleAddr + "/"
	cl := tg.sdkClient(nil)
	mustCreateBucket(t, cl, "many")
	const objects = 100_000
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < objects; i += 16 {
				key := fmt.Sprintf("big/obj-%06d", i)
				if _, err := cl.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("many"), Key: &key, Body: strings.NewReader("x")}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d objects written in %s", objects, time.Since(start).Round(time.Second))

	b := browser.Start(t)
	b.SignIn(url, rootUser, rootPassword)
	var firstPage []time.Duration
	for range 5 {
		b.Do("back to the buckets", chromedp.Navigate(url+"#/buckets"), chromedp.WaitVisible(chromedp.ID("buckets-view")))
		opened := time.Now()
		b.Do("opening the prefix", chromedp.Navigate(url+"#/b/many/big/"), chromedp.WaitVisible(chromedp.ID("objects-view")))
		b.WaitText("#object-table", "obj-000099")
		firstPage = append(firstPage, time.Since(opened))
	}
	b.Do("the second page", chromedp.Click(chromedp.ID("more")))
	b.WaitText("#object-table", "obj-000199")
	slices.Sort(firstPage)
	t.Logf("first page of a prefix of %d objects shown in %s (median of 5; min %s, max %s)", objects,
		firstPage[2].Round(time.Millisecond), firstPage[0].Round(time.Millisecond), firstPage[4].Round(time.Millisecond))

	src := filepath.Join(t.TempDir(), "one-gib.bin")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	chunk := randomBytes(16 << 20)
	for i := range 64 {
		chunk[0] = byte(i)
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustCreateBucket(t, cl, "large")
	b.Do("opening the bucket", chromedp.Navigate(url+"#/b/large/"), chromedp.WaitVisible(chromedp.ID("objects-view")))
	between, took := b.Upload(src)
	t.Logf("1 GiB uploaded from the browser in %s (%.0f MiB/s; %d progress values shown)", took.Round(time.Millisecond), 1024/took.Seconds(), between)
	b.Do("opening the object", chromedp.Navigate(url+"#/o/large/one-gib.bin"), chromedp.WaitVisible(chromedp.ID("object-view")))
	b.WaitText("#object-facts", "1073741824 bytes")
	dl := time.Now()
	got := b.Downloaded("downloading 1 GiB", chromedp.Click(chromedp.ID("object-download")))
	t.Logf("1 GiB downloaded by the browser in %s", time.Since(dl).Round(time.Millisecond))
	if fileSum(t, got) != fileSum(t, src) {
		t.Error("the 1 GiB download differs from the upload")
	}
}

// TestConsoleOnTheGateway: `strata gateway` serves the same console: sign
// in, a bucket, a file uploaded and listed, downloaded and compared, and
// the tenant page naming the gateway.
func TestConsoleOnTheGateway(t *testing.T) {
	t.Parallel()
	consoleAddr := freeAddr(t)
	startTLSTargetWith(t, "gateway", nil, "--console-address", consoleAddr)
	url := "https://" + consoleAddr + "/"
	b := browser.Start(t)
	b.SignIn(url, rootUser, rootPassword)
	b.Do("creating a bucket", chromedp.SetValue(chromedp.ID("bucket-name"), "on-posix"), chromedp.Click(chromedp.ID("bucket-create")))
	b.WaitText("#bucket-table", "on-posix")
	src := filepath.Join(t.TempDir(), "twelve-mib.bin")
	if err := os.WriteFile(src, randomBytes(12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do("opening the bucket", chromedp.Navigate(url+"#/b/on-posix/"), chromedp.WaitVisible(chromedp.ID("objects-view")))
	b.Upload(src)
	b.WaitText("#object-table", "twelve-mib.bin")
	b.Do("opening the object", chromedp.Navigate(url+"#/o/on-posix/twelve-mib.bin"), chromedp.WaitVisible(chromedp.ID("object-view")))
	got := b.Downloaded("downloading", chromedp.Click(chromedp.ID("object-download")))
	if fileSum(t, got) != fileSum(t, src) {
		t.Error("the download from the gateway differs from the upload")
	}
	b.Do("opening the tenant page", chromedp.Click(chromedp.ID("nav-tenant")), chromedp.WaitVisible(chromedp.ID("tenant-view")))
	b.WaitText("#tenant-body", "gateway")
}
