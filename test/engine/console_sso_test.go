package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/chromedp"

	"github.com/strata-storage/strata/internal/keycloak"
	"github.com/strata-storage/strata/test/browser"
)

// iamAdmin is an IAM client of the target signing as root.
func (tg *tlsTarget) iamAdmin() *iam.Client {
	return iam.New(iam.Options{BaseEndpoint: aws.String(tg.endpoint()), Region: "us-east-1", HTTPClient: tg.httpClient(),
		Credentials: credentials.NewStaticCredentialsProvider(rootUser, rootPassword, "")})
}

// TestConsoleSingleSignOn signs in to the console through a real Keycloak
// (the authorization code flow with PKCE, then STS's
// AssumeRoleWithWebIdentity on the server itself) in a real browser: the
// person the role trusts gets the role's rights and no more; one it does
// not trust is refused with a reason; forged or stale callbacks start no
// session.
func TestConsoleSingleSignOn(t *testing.T) {
	dir := os.Getenv("STRATA_KEYCLOAK")
	if dir == "" {
		skipOutsideCI(t, "STRATA_KEYCLOAK names no Keycloak distribution (make keycloak)")
	}
	browser.Path(t)
	started := time.Now()
	kc, err := keycloak.Start(ctx, dir, freeAddr(t), filepath.Join(t.TempDir(), "keycloak.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Stop)
	t.Logf("Keycloak answered after %s", time.Since(started).Round(time.Second))

	const realm, clientID = "console", "strata-console"
	consoleAddr := freeAddr(t)
	callback := "https://" + consoleAddr + "/api/oidc/callback"
	secret, alicePassword, bobPassword := keycloak.RandomText(), keycloak.RandomText(), keycloak.RandomText()
	user := func(name, password string) map[string]any {
		return map[string]any{"username": name, "enabled": true, "email": name + "@example.com", "emailVerified": true,
			"firstName": name, "lastName": "Example",
			"credentials": []any{map[string]any{"type": "password", "value": password, "temporary": false}}}
	}
	for _, step := range []struct {
		path string
		body any
	}{
		{"", map[string]any{"realm": realm, "enabled": true}},
		{"/" + realm + "/clients", map[string]any{"clientId": clientID, "enabled": true, "publicClient": false, "secret": secret,
			"standardFlowEnabled": true, "directAccessGrantsEnabled": false, "redirectUris": []string{callback},
			"attributes": map[string]string{"pkce.code.challenge.method": "S256"}}},
		{"/" + realm + "/users", user("alice", alicePassword)},
		{"/" + realm + "/users", user("bob", bobPassword)},
	} {
		if err := kc.Admin(ctx, step.path, step.body); err != nil {
			t.Fatal(err)
		}
	}
	var found []struct {
		ID string `json:"id"`
	}
	if err := kc.AdminGet(ctx, "/"+realm+"/users?exact=true&username=alice", &found); err != nil || len(found) != 1 {
		t.Fatalf("finding alice in Keycloak: %v %v", found, err)
	}
	issuer := kc.Issuer(realm)

	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startTLSTargetWith(t, "server", []string{"STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1")},
		"--console-address", consoleAddr, "--console-oidc-client-secret-file", secretFile, "--console-oidc-issuer", issuer, "--console-oidc-client-id", clientID,
		"--console-oidc-role-arn", "arn:aws:iam:::role/console-team")

	// The tenant trusts the issuer for the console's client, and a role
	// trusts alice (by her subject) with one bucket.
	admin := tg.iamAdmin()
	if _, err := admin.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String(issuer),
		ClientIDList: []string{clientID}, ThumbprintList: []string{strings.Repeat("a", 40)}}); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(issuer, "http://")
	trust := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam:::oidc-provider/%s"},
		"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{%q:%q,%q:%q}}}]}`, name, name+":aud", clientID, name+":sub", found[0].ID)
	if _, err := admin.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("console-team"), AssumeRolePolicyDocument: aws.String(trust)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("console-team"), PolicyName: aws.String("team"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:ListAllMyBuckets","Resource":"*"},
			{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::team-data","arn:aws:s3:::team-data/*"]}]}`)}); err != nil {
		t.Fatal(err)
	}
	root := tg.sdkClient(nil)
	if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("team-data")}); err != nil {
		t.Fatal(err)
	}

	base := "https://" + consoleAddr + "/"
	kcURL, _ := url.Parse(issuer)
	kcHost := kcURL.Host
	signInAt := func(b *browser.Tab, who, password string) {
		t.Helper()
		b.Do("opening the console", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("sso-start")))
		b.WaitText("#sso-issuer", kcHost)
		b.Do("signing in at Keycloak as "+who, chromedp.Click(chromedp.ID("sso-start")), chromedp.WaitVisible(chromedp.ID("kc-login")),
			chromedp.SetValue(chromedp.ID("username"), who), chromedp.SetValue(chromedp.ID("password"), password),
			chromedp.Click(chromedp.ID("kc-login")))
	}

	// Alice: signed in as herself in the role, sees the buckets, writes
	// into the team's, and is refused a bucket of her own.
	b := browser.Start(t)
	b.Do("opening the console", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("sso-start")))
	b.Accessible("sign-in with single sign-on")
	b.Screenshot("sign-in-sso")
	took := time.Now()
	signInAt(b, "alice", alicePassword)
	b.Do("coming back signed in", chromedp.WaitVisible(chromedp.ID("buckets-view")))
	t.Logf("single sign-on through Keycloak took %s in the browser", time.Since(took).Round(time.Millisecond))
	b.WaitText("#who", "alice (role console-team)")
	b.WaitText("#bucket-table", "team-data")
	b.Screenshot("single-sign-on")
	if h := b.Eval(`location.hash`); h != "#/buckets" {
		t.Errorf("after the sign-in the page's address ends in %q, want #/buckets", h)
	}
	src := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(src, randomBytes(300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Do("opening the team's bucket", chromedp.Navigate(base+"#/b/team-data/"), chromedp.WaitVisible(chromedp.ID("objects-view")))
	b.Upload(src)
	b.WaitText("#object-table", "notes.txt")
	if _, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("team-data"), Key: aws.String("notes.txt")}); err != nil {
		t.Errorf("alice's upload is not in S3: %v", err)
	}
	b.Do("creating a bucket outside the role", chromedp.Navigate(base+"#/buckets"), chromedp.WaitVisible(chromedp.ID("bucket-form")),
		chromedp.SetValue(chromedp.ID("bucket-name"), "alice-own"), chromedp.Click(chromedp.ID("bucket-create")))
	b.WaitText("#error", "AccessDenied")
	if _, err := root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("alice-own")}); err == nil {
		t.Error("a bucket the role does not allow was created")
	}
	b.Do("opening the users page", chromedp.Click(chromedp.ID("nav-users")), chromedp.WaitVisible(chromedp.ID("users-view")))
	b.WaitText("#users-body", "Not listed: AccessDenied")

	// Bob: Keycloak knows him, the role does not trust him.
	b2 := browser.Start(t)
	signInAt(b2, "bob", bobPassword)
	b2.Do("coming back refused", chromedp.WaitVisible(chromedp.ID("login-form")))
	b2.WaitText("#error", "the role does not trust this identity")
	if got := b2.Eval(`document.cookie + '|' + location.href`); strings.Contains(got, "code=") || strings.Contains(got, "state=") {
		t.Errorf("the refused sign-in left the issuer's code in the page's address: %q", got)
	}

	// A link to the page with a made-up reason shows no text of its own.
	b2.Do("opening a crafted sign-in error", chromedp.Navigate(base+"#oidc-error=Call%20+1-555-0100%20to%20restore%20access"),
		chromedp.WaitVisible(chromedp.ID("login-form")))
	b2.WaitText("#error", "The single sign-on failed.")
	if strings.Contains(b2.Text("#error"), "555") {
		t.Errorf("the page shows a crafted fragment's text: %q", b2.Text("#error"))
	}

	// Without a browser: a callback this client did not start, a start
	// that is not the page's JSON, from another site or without the
	// page's hash, start no session.
	hc := tg.httpClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hash := `{"csrfHash":"` + strings.Repeat("a", 43) + `"}`
	for _, c := range []struct {
		what, method, path, body string
		header                   map[string]string
		status                   int
		location                 string
	}{
		{"a callback with no sign-in started", http.MethodGet, "api/oidc/callback?state=x&code=y", "", nil, http.StatusSeeOther, "/#oidc-error=expired"},
		{"a start without the page's hash", http.MethodPost, "api/oidc/start", `{}`, map[string]string{"Content-Type": "application/json"}, http.StatusBadRequest, ""},
		{"a start from another site", http.MethodPost, "api/oidc/start", hash,
			map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, ""},
		{"a start as a form", http.MethodPost, "api/oidc/start", hash, map[string]string{"Content-Type": "text/plain"}, http.StatusForbidden, ""},
		{"a start naming another origin", http.MethodPost, "api/oidc/start", hash,
			map[string]string{"Content-Type": "application/json", "Origin": "https://elsewhere.example"}, http.StatusForbidden, ""},
		{"a start by navigation", http.MethodGet, "api/oidc/start?csrfHash=" + strings.Repeat("a", 43), "", nil, http.StatusNotFound, ""},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s: %d %q, want %d %q", c.what, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
		for _, ck := range resp.Cookies() {
			if ck.Value != "" {
				t.Errorf("%s set cookie %s", c.what, ck.Name)
			}
		}
	}
	// A start answers the issuer's URL with PKCE, a state and the
	// callback, never the client's secret.
	req, _ := http.NewRequest(http.MethodPost, base+"api/oidc/start", strings.NewReader(hash))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var start struct {
		URL string `json:"url"`
	}
	err = json.NewDecoder(resp.Body).Decode(&start)
	resp.Body.Close()
	loc, _ := url.Parse(start.URL)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(start.URL, issuer+"/") || loc.Query().Get("code_challenge_method") != "S256" ||
		loc.Query().Get("state") == "" || loc.Query().Get("redirect_uri") != callback || strings.Contains(start.URL, secret) {
		t.Errorf("a start answered %d, %v: %s", resp.StatusCode, err, start.URL)
	}
	if logs := tg.s.logs(); strings.Contains(logs, secret) || strings.Contains(logs, alicePassword) || !strings.Contains(logs, "console sign-in") {
		t.Error("the server's log holds the client's secret or a password, or no sign-in line")
	}
}
