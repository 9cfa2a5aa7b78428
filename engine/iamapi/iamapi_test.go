package iamapi

import (
	"bytes"
	"encoding/xml"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/internal/testlayer"
)

type masterKeys struct{}

func (masterKeys) Key(id string) ([]byte, bool) { return bytes.Repeat([]byte{1}, 32), id == "k" }
func (masterKeys) Default() string              { return "k" }

func handler(t *testing.T) *Handler {
	t.Helper()
	store, _ := testlayer.Erasure(t, 4, 2)
	dir := iam.NewDirectory(store, masterKeys{}, slog.New(slog.DiscardHandler))
	if err := dir.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &Handler{Dir: dir, Account: "123456789012"}
}

var admin = Caller{Admin: true}

// call runs one action and returns the status and body.
func call(t *testing.T, h *Handler, c Caller, kv ...string) (int, string) {
	t.Helper()
	form := url.Values{"Version": {Version}}
	for i := 0; i+1 < len(kv); i += 2 {
		form.Set(kv[i], kv[i+1])
	}
	w := httptest.NewRecorder()
	h.Serve(t.Context(), w, form, c, "req-1")
	if ct := w.Header().Get("Content-Type"); ct != "text/xml" {
		t.Errorf("%v: Content-Type %q", kv, ct)
	}
	return w.Code, w.Body.String()
}

// The Query protocol's envelopes, as botocore's parser reads them.
func TestAnswersAndErrors(t *testing.T) {
	h := handler(t)
	code, body := call(t, h, admin, "Action", "CreateUser", "UserName", "app", "Path", "/apps/")
	var created struct {
		XMLName xml.Name `xml:"CreateUserResponse"`
		User    struct {
			UserName, UserId, Arn, Path, CreateDate string
		} `xml:"CreateUserResult>User"`
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}
	if err := xml.Unmarshal([]byte(body), &created); code != 200 || err != nil {
		t.Fatalf("CreateUser: %d %v\n%s", code, err, body)
	}
	if u := created.User; u.UserName != "app" || u.Arn != "arn:aws:iam::123456789012:user/apps/app" || u.Path != "/apps/" ||
		!strings.HasPrefix(u.UserId, "AIDA") || u.CreateDate == "" || created.RequestID != "req-1" {
		t.Errorf("CreateUser answered %+v", created)
	}
	if !strings.Contains(body, `xmlns="https://iam.amazonaws.com/doc/2010-05-08/"`) {
		t.Errorf("no IAM namespace: %s", body)
	}

	code, body = call(t, h, admin, "Action", "CreateUser", "UserName", "APP")
	var e struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Type    string   `xml:"Error>Type"`
		Code    string   `xml:"Error>Code"`
		Message string   `xml:"Error>Message"`
		ID      string   `xml:"RequestId"`
	}
	if err := xml.Unmarshal([]byte(body), &e); err != nil || code != http.StatusConflict || e.Code != "EntityAlreadyExists" || e.Type != "Sender" || e.ID != "req-1" {
		t.Errorf("CreateUser of a taken name: %d %+v %v\n%s", code, e, err, body)
	}
	for _, c := range []struct {
		kv   []string
		code string
		http int
	}{
		{[]string{"Action", "GetUser", "UserName", "nobody"}, "NoSuchEntity", 404},
		{[]string{"Action", "CreateUser"}, "ValidationError", 400},
		{[]string{"Action", "CreateUser", "UserName", "bad name"}, "InvalidInput", 400},
		{[]string{"Action", "CreateSAMLProvider", "Name", "r"}, "InvalidAction", 400},
		{[]string{"Action", "CreateRole", "RoleName", "r"}, "MalformedPolicyDocument", 400},
		{[]string{"UserName", "x"}, "MissingAction", 400},
		{[]string{"Action", "PutUserPolicy", "UserName", "app", "PolicyName", "p", "PolicyDocument", strings.Repeat("x", 3000)}, "LimitExceeded", 409},
	} {
		code, body := call(t, h, admin, c.kv...)
		if code != c.http || !strings.Contains(body, "<Code>"+c.code+"</Code>") {
			t.Errorf("%v: %d\n%s\nwant %d %s", c.kv, code, body, c.http, c.code)
		}
	}
}

// Listing pages by name, ignoring case; policies come back as sent,
// percent-encoded; a caller that is no admin has what its policies allow.
func TestListingPoliciesAndCallers(t *testing.T) {
	h := handler(t)
	for _, n := range []string{"ac", "Ab", "aa"} {
		if code, body := call(t, h, admin, "Action", "CreateUser", "UserName", n); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	var names []string
	marker := ""
	for range 5 {
		_, body := call(t, h, admin, "Action", "ListUsers", "MaxItems", "1", "Marker", marker)
		var page struct {
			Names     []string `xml:"ListUsersResult>Users>member>UserName"`
			Truncated bool     `xml:"ListUsersResult>IsTruncated"`
			Marker    string   `xml:"ListUsersResult>Marker"`
		}
		if err := xml.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		names = append(names, page.Names...)
		if !page.Truncated {
			break
		}
		marker = page.Marker
	}
	if strings.Join(names, ",") != "aa,Ab,ac" {
		t.Errorf("pages of one: %v", names)
	}

	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"iam:*AccessKey*","Resource":"arn:aws:iam::123456789012:user/aa"}]}`
	if code, body := call(t, h, admin, "Action", "PutUserPolicy", "UserName", "aa", "PolicyName", "own-keys", "PolicyDocument", doc); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	_, body := call(t, h, admin, "Action", "GetUserPolicy", "UserName", "aa", "PolicyName", "own-keys")
	var got struct {
		Doc string `xml:"GetUserPolicyResult>PolicyDocument"`
	}
	if err := xml.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if back, err := url.QueryUnescape(got.Doc); err != nil || back != doc {
		t.Errorf("policy back %q (%v), want %q", back, err, doc)
	}

	// aa may manage its own keys (UserName omitted: itself), not others'.
	allows := func(action, resource string) bool {
		return strings.Contains(action, "AccessKey") && resource == "arn:aws:iam::123456789012:user/aa"
	}
	aa := Caller{User: "aa", Allows: allows}
	if code, body := call(t, h, aa, "Action", "CreateAccessKey"); code != 200 || !strings.Contains(body, "<UserName>aa</UserName>") || !strings.Contains(body, "<SecretAccessKey>") {
		t.Errorf("CreateAccessKey for itself: %d %s", code, body)
	}
	if code, body := call(t, h, aa, "Action", "CreateAccessKey", "UserName", "ac"); code != 403 || !strings.Contains(body, "<Code>AccessDenied</Code>") {
		t.Errorf("CreateAccessKey for another: %d %s", code, body)
	}
	if code, _ := call(t, h, aa, "Action", "ListUsers"); code != 403 {
		t.Errorf("ListUsers without a policy allowing it: %d", code)
	}
	if code, body := call(t, h, aa, "Action", "ListAccessKeys"); code != 200 || strings.Contains(body, "SecretAccessKey") {
		t.Errorf("ListAccessKeys: %d %s (secrets are shown once, at creation)", code, body)
	}
	if code, body := call(t, h, Caller{}, "Action", "GetUser"); code != 400 {
		t.Errorf("GetUser by a caller that is no IAM user: %d %s", code, body)
	}
	if _, body := call(t, h, admin, "Action", "GetUser"); !strings.Contains(body, "<Arn>arn:aws:iam::123456789012:root</Arn>") {
		t.Errorf("GetUser by the account's root: %s", body)
	}
}
