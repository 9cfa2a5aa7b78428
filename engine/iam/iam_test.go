package iam

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for _, c := range []struct {
		user, action, bucket string
		allowed              bool
	}{
		{"reader", "s3:GetObject", "photos/a.jpg", true},
		{"reader", "s3:ListBucket", "photos", true},
		{"reader", "s3:PutObject", "photos/a.jpg", false},
		{"reader", "s3:GetObject", "other/a.jpg", false},
		{"reader", "s3:ListAllMyBuckets", "", true},
		{"reader", "s3:CreateBucket", "new", false},
		{"writer", "s3:PutObject", "any/x", true},
		{"writer", "s3:CreateBucket", "new", true},
		{"writer", "s3:DeleteBucketPolicy", "any", true},
		{"dropbox", "s3:PutObject", "in/x", true},
		{"dropbox", "s3:getobject", "in/x", false},
		{"dropbox", "S3:PUTOBJECT", "in/x", true},
		{"nobody", "s3:GetObject", "photos/a.jpg", false},
	} {
		if got := u.IdentityAllows(c.user, c.action, c.bucket); got != c.allowed {
			t.Errorf("%s %s in %q: allowed %v, want %v", c.user, c.action, c.bucket, got, c.allowed)
		}
	}
	for access, want := range map[string][2]bool{"reader": {false, false}, "writer": {false, true}, "ops": {true, true}, "nobody": {false, false}} {
		if admin, create := u.IsAdmin(access), u.CanCreateBuckets(access); admin != want[0] || create != want[1] {
			t.Errorf("%s: admin %v, creates buckets %v, want %v", access, admin, create, want)
		}
	}
	if secret, ok := u.Secret("reader"); !ok || secret != "12345678" {
		t.Error("a user's secret")
	}
	if !u.CanList("reader", "photos") || u.CanList("reader", "other") {
		t.Fatal("listing visibility")
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
	for _, c := range []struct {
		action, bucket string
		allowed        bool
	}{
		{"s3:PutObject", "teams/k", true},
		{"s3:DeleteBucket", "teams", true},
		{"s3:GetObject", "roots/k", false},
		{"s3:ListBucket", "roots", false},
		{"s3:CreateBucket", "new", true},
	} {
		if got := u.IdentityAllows("team", c.action, c.bucket); got != c.allowed {
			t.Errorf("owner %s in %s: allowed %v, want %v", c.action, c.bucket, got, c.allowed)
		}
	}
	if u.CanList("team", "roots") {
		t.Error("an owner lists another account's bucket")
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
