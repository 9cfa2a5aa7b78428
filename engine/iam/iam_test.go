package iam

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
)

func TestRootFromEnv(t *testing.T) {
	dir := t.TempDir()
	userFile := filepath.Join(dir, "user")
	_ = os.WriteFile(userFile, []byte("admin\n"), 0o600)
	cases := []struct {
		env  map[string]string
		want string // access key, or an error substring
	}{
		{map[string]string{EnvRootUser: "admin", EnvRootPassword: "secret123"}, "admin"},
		{map[string]string{EnvRootUserFile: userFile, EnvRootPassword: "secret123"}, "admin"},
		{map[string]string{EnvRootUser: "admin"}, "root credentials missing"},
		{map[string]string{EnvRootUser: "admin", EnvRootUserFile: userFile, EnvRootPassword: "secret123"}, "set one"},
		{map[string]string{EnvRootUser: "admin", EnvRootPassword: "short"}, "at least 8"},
		{map[string]string{EnvRootUserFile: filepath.Join(dir, "nope"), EnvRootPassword: "secret123"}, "no such file"},
	}
	for _, c := range cases {
		creds, err := RootFromEnv(func(k string) string { return c.env[k] })
		got := creds.AccessKey
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%v: got %q, want %q", c.env, got, c.want)
		}
	}
}

func TestParseUsersRefusesWhatCannotWork(t *testing.T) {
	for doc, want := range map[string]string{
		`{"users":[{"accessKey":"ab","secretKey":"12345678","policy":"readwrite"}]}`:                                                                "shorter than 3",
		`{"users":[{"accessKey":"app","secretKey":"short","policy":"readwrite"}]}`:                                                                  "secret key shorter",
		`{"users":[{"accessKey":"root","secretKey":"12345678","policy":"readwrite"}]}`:                                                              "reuses the root",
		`{"users":[{"accessKey":"app","secretKey":"12345678","policy":"everything"}]}`:                                                              "is not readwrite",
		`{"users":[{"accessKey":"app","secretKey":"12345678","policy":"readonly"},{"accessKey":"app","secretKey":"12345678","policy":"readonly"}]}`: "listed twice",
		`{"users":[{"accessKey":"app","secretKey":"12345678","policy":"readonly","extra":1}]}`:                                                      "unknown field",
	} {
		if _, err := ParseUsers([]byte(doc), "root"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

func TestGrantsAreIdentityPolicies(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users.json")
	_ = os.WriteFile(f, []byte(`{"users":[
		{"accessKey":"reader","secretKey":"12345678","policy":"readonly","buckets":["photos"]},
		{"accessKey":"writer","secretKey":"12345678","policy":"readwrite"},
		{"accessKey":"dropbox","secretKey":"12345678","policy":"writeonly","buckets":["in"]},
		{"accessKey":"ops","secretKey":"12345678","policy":"admin"}]}`), 0o600)
	u, err := NewUsers(f, "root", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	arn := func(s string) string { return auth.ResourceArnPrefix + s }
	for _, c := range []struct {
		user     string
		action   auth.Action
		resource string
		allowed  bool
	}{
		{"reader", auth.GetObjectAction, arn("photos/a.jpg"), true},
		{"reader", auth.ListBucketAction, arn("photos"), true},
		{"reader", auth.PutObjectAction, arn("photos/a.jpg"), false},
		{"reader", auth.GetObjectAction, arn("other/a.jpg"), false},
		{"reader", auth.ListAllMyBucketsAction, arn("*"), true},
		{"reader", auth.CreateBucketAction, arn("new"), false},
		{"writer", auth.PutObjectAction, arn("any/x"), true},
		{"writer", auth.CreateBucketAction, arn("new"), true},
		{"writer", auth.DeleteBucketPolicyAction, arn("any"), true},
		{"dropbox", auth.PutObjectAction, arn("in/x"), true},
		{"dropbox", auth.GetObjectAction, arn("in/x"), false},
		{"nobody", auth.GetObjectAction, arn("photos/a.jpg"), false},
	} {
		ev, err := u.EvaluatePolicy(c.user, "", []auth.Action{c.action}, []string{c.resource}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.ValueOf(ev.Decisions).Index(0).Index(0).Int() == int64(decisionAllow)
		if got != c.allowed {
			t.Errorf("%s %s on %s: allowed %v, want %v", c.user, c.action, c.resource, got, c.allowed)
		}
	}
	for access, role := range map[string]auth.Role{"reader": auth.RoleUser, "writer": auth.RoleUserPlus, "ops": auth.RoleAdmin} {
		a, err := u.GetUserAccount(access)
		if err != nil || a.Role != role {
			t.Errorf("%s: role %s (%v), want %s", access, a.Role, err, role)
		}
	}
	if _, err := u.GetUserAccount("nobody"); !errors.Is(err, auth.ErrNoSuchUser) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := u.CreateAccount(auth.Account{Access: "x"}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("creating a user through S3: %v", err)
	}
	if !u.CanList("reader", "photos") || u.CanList("reader", "other") {
		t.Fatal("listing visibility")
	}
}

// TestEvaluationMeansWhatWeSay runs our decisions through the front end's
// own access check (the decision type is unexported there, so this is
// what pins the values evaluation() writes): an allowed user may create a
// bucket, one without the grant may not.
func TestEvaluationMeansWhatWeSay(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users.json")
	_ = os.WriteFile(f, []byte(`{"users":[
		{"accessKey":"reader","secretKey":"12345678","policy":"readonly"},
		{"accessKey":"writer","secretKey":"12345678","policy":"readwrite"}]}`), 0o600)
	u, err := NewUsers(f, "root", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	c := app.AcquireCtx(&fasthttp.RequestCtx{})
	defer app.ReleaseCtx(c)
	for user, allowed := range map[string]bool{"writer": true, "reader": false} {
		err := auth.VerifyCreateBucketAccess(c, u, false, auth.Account{Access: user, Role: auth.RoleUser}, "b")
		if (err == nil) != allowed {
			t.Errorf("%s creating a bucket: %v, want allowed=%v", user, err, allowed)
		}
	}
}

// TestOwnersAndIdentities: an owner user has its own buckets wholly and
// creates buckets, nothing else; identities default to the access key and
// may be named (root too); an ID taken twice is refused.
func TestOwnersAndIdentities(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users.json")
	_ = os.WriteFile(f, []byte(`{"root":{"id":"main","displayName":"Main"},"users":[
		{"accessKey":"team","secretKey":"12345678","policy":"owner","displayName":"Team A"},
		{"accessKey":"app","secretKey":"12345678","policy":"readwrite","id":"app-id"}]}`), 0o600)
	u, err := NewUsers(f, "root", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	u.SetBucketOwners(func(b string) (string, bool) {
		switch b {
		case "teams":
			return "team", true
		case "roots":
			return "root", true
		}
		return "", false
	})
	arn := func(s string) string { return auth.ResourceArnPrefix + s }
	for _, c := range []struct {
		action   auth.Action
		resource string
		allowed  bool
	}{
		{auth.PutObjectAction, arn("teams/k"), true},
		{auth.DeleteBucketAction, arn("teams"), true},
		{auth.GetObjectAction, arn("roots/k"), false},
		{auth.ListBucketAction, arn("roots"), false},
		{auth.CreateBucketAction, arn("new"), true},
	} {
		ev, err := u.EvaluatePolicy("team", "", []auth.Action{c.action}, []string{c.resource}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := reflect.ValueOf(ev).FieldByName("Decisions").Index(0).Index(0).Int() == int64(decisionAllow); got != c.allowed {
			t.Errorf("owner %s on %s: allowed %v, want %v", c.action, c.resource, got, c.allowed)
		}
	}
	if !u.Allows("team", auth.GetObjectAction, "teams") || u.Allows("team", auth.GetObjectAction, "roots") || u.CanList("team", "roots") {
		t.Error("Allows/CanList disagree with the owner's grant")
	}
	for access, want := range map[string]string{"root": "main/Main", "team": "team/Team A", "app": "app-id/app-id"} {
		id, name, ok := u.Identity(access)
		if !ok || id+"/"+name != want {
			t.Errorf("Identity(%s) = %s/%s %v, want %s", access, id, name, ok, want)
		}
		if back, ok := u.AccessOf(id); !ok || back != access {
			t.Errorf("AccessOf(%s) = %s %v, want %s", id, back, ok, access)
		}
	}
	if _, ok := u.AccessOf("root"); ok {
		t.Error("root's access key is not its ID once the file names one")
	}
	if _, err := ParseUsers([]byte(`{"root":{"id":"app"},"users":[{"accessKey":"app","secretKey":"12345678","policy":"readwrite"}]}`), "root"); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("an ID taken twice: %v", err)
	}
}
