package iam

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestGrantsBecomePoliciesAndRoles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "users.json")
	_ = os.WriteFile(f, []byte(`{"users":[
		{"accessKey":"reader","secretKey":"12345678","policy":"readonly","buckets":["photos"]},
		{"accessKey":"writer","secretKey":"12345678","policy":"readwrite"},
		{"accessKey":"ops","secretKey":"12345678","policy":"admin"}]}`), 0o600)
	u, err := NewUsers(f, "root", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Statement []struct {
			Principal map[string][]string
			Action    []string
		}
	}
	if err := json.Unmarshal(u.BucketPolicy("photos"), &doc); err != nil || len(doc.Statement) != 2 {
		t.Fatalf("policy of photos: %s (%v)", u.BucketPolicy("photos"), err)
	}
	if p := string(u.BucketPolicy("other")); strings.Contains(p, "reader") || !strings.Contains(p, "writer") {
		t.Fatalf("policy of another bucket: %s", p)
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
