package iam

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/internal/testlayer"
	"github.com/strata-storage/strata/engine/objlayer"
)

// storage is a real erasure-coded pool of four local drives (2+2), the
// object layer the server keeps the directory in.
func storage(t *testing.T) (objlayer.Layer, []string) { return testlayer.Erasure(t, 4, 2) }

// masterKeys are a keys file's keys, by ID, with a default.
type masterKeys struct {
	keys map[string][]byte
	def  string
}

func (k masterKeys) Key(id string) ([]byte, bool) { v, ok := k.keys[id]; return v, ok }
func (k masterKeys) Default() string              { return k.def }

var testKey = masterKeys{keys: map[string][]byte{"k1": bytes.Repeat([]byte{7}, 32)}, def: "k1"}

func directory(t *testing.T, store objlayer.Layer, key MasterKeys) *Directory {
	t.Helper()
	d := NewDirectory(store, key, slog.New(slog.DiscardHandler))
	if err := d.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

// Two servers over one storage: what one makes, the other signs with at
// once (an unknown key reloads), and a policy one sets reaches the other
// at its next refresh.
func TestDirectorySharedByServers(t *testing.T) {
	store, _ := storage(t)
	a, b := directory(t, store, testKey), directory(t, store, testKey)
	ctx := t.Context()

	if _, err := a.Create(ctx, Entity{Kind: KindUser, Name: "alice", Path: ""}, nil); err != nil {
		t.Fatal(err)
	}
	k, err := a.CreateAccessKey(ctx, "", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.ID, "AKIA") || len(k.ID) != 20 || len(k.Secret) != 40 {
		t.Errorf("key %q secret %q: not IAM's shapes", k.ID, k.Secret)
	}
	secret, owner, ok := b.Secret(ctx, k.ID)
	if !ok || secret != k.Secret || owner.User != "alice" {
		t.Fatalf("the other server: Secret(%s) = %q, %+v, %v", k.ID, secret, owner, ok)
	}

	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`
	if err := a.PutPolicy(ctx, KindUser, "", "ALICE", "all", doc, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := b.Get(KindUser, "", "Alice")
	if err != nil || u.Policies["all"] != doc {
		t.Fatalf("the other server after a refresh: %+v, %v", u, err)
	}

	if err := b.UpdateAccessKey(ctx, "", "alice", k.ID, KeyInactive); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := a.Secret(ctx, k.ID); ok {
		t.Error("an inactive key still signs")
	}
	// A server started now reads everything back, secrets included.
	c := directory(t, store, testKey)
	if got, err := c.Keys("", "alice"); err != nil || len(got) != 1 || got[0].Secret != k.Secret || got[0].Status != KeyInactive {
		t.Errorf("a new server: keys %+v, %v", got, err)
	}
}

// IAM's rules: names unique ignoring case and listed that way, two keys a
// user, no deleting a user that still has keys or policies, renames
// keeping the keys.
func TestDirectoryRules(t *testing.T) {
	store, _ := storage(t)
	d := directory(t, store, testKey)
	ctx := t.Context()
	for _, n := range []string{"ac", "Ab", "aa", "Ad"} {
		path := "/"
		if n == "Ab" {
			path = "/team/"
		}
		if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: n, Path: path}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: "AC", Path: ""}, nil); !errors.Is(err, ErrEntityExists) {
		t.Errorf("a name taken but for case: %v, want ErrEntityExists", err)
	}
	var names []string
	for _, u := range d.List(KindUser, "", "") {
		names = append(names, u.Name)
	}
	if got := strings.Join(names, ","); got != "aa,Ab,ac,Ad" {
		t.Errorf("users listed %s, want aa,Ab,ac,Ad", got)
	}
	if got := d.List(KindUser, "", "/team/"); len(got) != 1 || got[0].Name != "Ab" {
		t.Errorf("users under /team/: %+v", got)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", 65), "é"} {
		if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: bad, Path: ""}, nil); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("user name %q: %v, want ErrInvalidInput", bad, err)
		}
	}
	if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: "pathless", Path: "team"}, nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("path without slashes: %v, want ErrInvalidInput", err)
	}

	k1, err := d.CreateAccessKey(ctx, "", "aa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateAccessKey(ctx, "", "aa"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateAccessKey(ctx, "", "aa"); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("a third key: %v, want ErrLimitExceeded", err)
	}
	if err := d.Delete(ctx, KindUser, "", "aa"); !errors.Is(err, ErrDeleteConflict) {
		t.Errorf("deleting a user with keys: %v, want ErrDeleteConflict", err)
	}
	if err := d.DeleteAccessKey(ctx, "", "ac", k1.ID); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("deleting another user's key: %v, want ErrNoSuchEntity", err)
	}

	u, err := d.Edit(ctx, KindUser, "", "aa", func(e *Entity) error { e.Name, e.Path = "zz", "/moved/"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(KindUser, "", "aa"); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("the old name after a rename: %v", err)
	}
	if keys, _ := d.Keys("", "zz"); len(keys) != 2 || u.Path != "/moved/" {
		t.Errorf("renamed user %+v has keys %+v", u, keys)
	}
	if _, owner, ok := d.Secret(ctx, k1.ID); !ok || owner.User != "zz" {
		t.Errorf("a key of the renamed user names %+v (%v)", owner, ok)
	}

	if err := d.PutPolicy(ctx, KindUser, "", "zz", "p", "{}", nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range mustKeys(t, d, "zz") {
		if err := d.DeleteAccessKey(ctx, "", "zz", k.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Delete(ctx, KindUser, "", "zz"); !errors.Is(err, ErrDeleteConflict) {
		t.Errorf("deleting a user with a policy: %v, want ErrDeleteConflict", err)
	}
	if err := d.DeletePolicy(ctx, KindUser, "", "zz", "p"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, KindUser, "", "zz"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(KindUser, "", "zz"); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("a deleted user: %v", err)
	}
	if err := d.PutPolicy(ctx, KindUser, "", "ac", "big", strings.Repeat(" ", maxPolicyDocument+1), nil); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("a policy past IAM's size: %v, want ErrLimitExceeded", err)
	}
	refuse := func(string) error { return errors.New("no Statement") }
	if err := d.PutPolicy(ctx, KindUser, "", "ac", "bad", "{}", refuse); !errors.Is(err, ErrMalformedPolicy) {
		t.Errorf("a policy its check refuses: %v, want ErrMalformedPolicy", err)
	}
}

func mustKeys(t *testing.T, d *Directory, user string) []DirKey {
	t.Helper()
	keys, err := d.Keys("", user)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// Secrets are sealed on the drives: no drive file holds one in the clear,
// and a directory opened with another key refuses to load rather than
// serve keys it cannot read.
func TestDirectorySecretsSealed(t *testing.T) {
	store, roots := storage(t)
	d := directory(t, store, testKey)
	ctx := t.Context()
	if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: "bob", Path: ""}, nil); err != nil {
		t.Fatal(err)
	}
	k, err := d.CreateAccessKey(ctx, "", "bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return nil
			}
			if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(k.Secret)) {
				t.Errorf("%s holds the secret in the clear", p)
			}
			return nil
		})
	}
	wrong := masterKeys{keys: map[string][]byte{"k1": bytes.Repeat([]byte{8}, 32)}, def: "k1"}
	if err := NewDirectory(store, wrong, slog.New(slog.DiscardHandler)).Load(ctx); err == nil {
		t.Error("a directory whose master key is another loaded")
	}
	// A new default master key: older secrets open with the key they
	// name, new ones are sealed with the new default.
	rotated := masterKeys{keys: map[string][]byte{"k1": testKey.keys["k1"], "k2": bytes.Repeat([]byte{9}, 32)}, def: "k2"}
	r := directory(t, store, rotated)
	if secret, _, ok := r.Secret(ctx, k.ID); !ok || secret != k.Secret {
		t.Errorf("after a new default master key: %q, %v", secret, ok)
	}
	k2, err := r.CreateAccessKey(ctx, "", "bob")
	if err != nil {
		t.Fatal(err)
	}
	keys := mustKeys(t, directory(t, store, rotated), "bob")
	if len(keys) != 2 {
		t.Fatalf("keys after rotation: %+v", keys)
	}
	for _, got := range keys {
		if got.ID == k2.ID && (got.SealedWith != "k2" || got.Secret != k2.Secret) || got.ID == k.ID && got.SealedWith != "k1" {
			t.Errorf("key after rotation: %+v", got)
		}
	}
}
