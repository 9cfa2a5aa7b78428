package iam

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Groups, roles and managed policies: what decides a user is its own
// policies and its groups'; a group with members, or an entity with
// policies, cannot be deleted; renames carry memberships along.
func TestDirectoryGroupsRolesPolicies(t *testing.T) {
	store, _ := storage(t)
	d := directory(t, store, testKey)
	ctx := t.Context()
	mustCreate := func(e Entity) Entity {
		t.Helper()
		got, err := d.Create(ctx, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	u := mustCreate(Entity{Kind: KindUser, Name: "ann"})
	g := mustCreate(Entity{Kind: KindGroup, Name: "Readers", Path: "/teams/"})
	if !strings.HasPrefix(u.ID, "AIDA") || !strings.HasPrefix(g.ID, "AGPA") {
		t.Errorf("IDs %s, %s: not IAM's shapes", u.ID, g.ID)
	}
	if _, err := d.Create(ctx, Entity{Kind: KindGroup, Name: "readers"}, nil); !errors.Is(err, ErrEntityExists) {
		t.Errorf("a group name taken but for case: %v", err)
	}
	// A user and a group may share a name: kinds are apart.
	mustCreate(Entity{Kind: KindGroup, Name: "ann"})

	if err := d.AddToGroup(ctx, "", "readers", "ANN"); err != nil {
		t.Fatal(err)
	}
	if err := d.AddToGroup(ctx, "", "Readers", "ann"); err != nil {
		t.Fatalf("adding again: %v", err)
	}
	if err := d.AddToGroup(ctx, "", "nobody", "ann"); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("an unknown group: %v", err)
	}
	if err := d.Attach(ctx, KindGroup, "", "readers", ArnS3ReadOnlyAccess); err != nil {
		t.Fatal(err)
	}
	if err := d.Attach(ctx, KindGroup, "", "readers", "arn:aws:iam::aws:policy/NoSuchPolicy"); !errors.Is(err, ErrNotAttachable) {
		t.Errorf("an unknown managed policy: %v", err)
	}
	own := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Action":"s3:DeleteObject","Resource":"*"}]}`
	if err := d.PutPolicy(ctx, KindUser, "", "ann", "nodelete", own, nil); err != nil {
		t.Fatal(err)
	}
	docs := d.IdentityPolicies("", "ann")
	managedDoc, _ := ManagedPolicy(ArnS3ReadOnlyAccess)
	if len(docs) != 2 || !slices.Contains(docs, own) || !slices.Contains(docs, managedDoc) {
		t.Errorf("ann's policies: %q", docs)
	}
	if err := d.Delete(ctx, KindGroup, "", "readers"); !errors.Is(err, ErrDeleteConflict) {
		t.Errorf("deleting a group with a member: %v", err)
	}
	if _, err := d.Edit(ctx, KindGroup, "", "readers", func(e *Entity) error { e.Name = "Viewers"; return nil }); err != nil {
		t.Fatal(err)
	}
	if m, err := d.Members("", "viewers"); err != nil || len(m) != 1 || m[0].Name != "ann" {
		t.Errorf("members after the group's rename: %+v, %v", m, err)
	}
	if got := d.IdentityPolicies("", "ann"); len(got) != 2 {
		t.Errorf("ann's policies after the group's rename: %q", got)
	}
	if err := d.RemoveFromGroup(ctx, "", "viewers", "ann"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, KindGroup, "", "viewers"); !errors.Is(err, ErrDeleteConflict) {
		t.Errorf("deleting a group with an attached policy: %v", err)
	}
	if err := d.Detach(ctx, KindGroup, "", "viewers", ArnS3ReadOnlyAccess); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, KindGroup, "", "viewers"); err != nil {
		t.Fatal(err)
	}

	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}`
	r := mustCreate(Entity{Kind: KindRole, Name: "app", Trust: trust, Description: "the app"})
	if !strings.HasPrefix(r.ID, "AROA") || r.MaxSessionDuration != 3600 {
		t.Errorf("role %+v: want an AROA ID and an hour's sessions by default", r)
	}
	for _, bad := range []Entity{
		{Kind: KindRole, Name: "x", Trust: trust, MaxSessionDuration: 60},
		{Kind: KindRole, Name: "x"},
	} {
		if _, err := d.Create(ctx, bad, nil); err == nil {
			t.Errorf("role %+v made", bad)
		}
	}
	if err := d.PutPolicy(ctx, KindRole, "", "app", "big", strings.Repeat(" ", maxRolePolicy), nil); err != nil {
		t.Errorf("a role policy of IAM's largest size: %v", err)
	}
	if got := d.RolePolicies("", "app"); len(got) != 1 {
		t.Errorf("role policies: %d", len(got))
	}
	if users, groups, roles, _ := d.Counts(""); users != 1 || groups != 1 || roles != 1 {
		t.Errorf("counts %d users, %d groups, %d roles; want 1, 1, 1", users, groups, roles)
	}
	// Everything reads back on another server.
	if got := directory(t, store, testKey).RolePolicies("", "APP"); len(got) != 1 {
		t.Errorf("a new server reads %d role policies", len(got))
	}
}

// Accounts are apart: the same names in two accounts, each listing its
// own; an account root's own keys; users of the users file hold policies
// here but are neither listed nor deletable, and have no keys here.
func TestDirectoryAccounts(t *testing.T) {
	store, _ := storage(t)
	d := directory(t, store, testKey)
	d.SetDeclared(func(account, name string) bool { return account == "" && strings.EqualFold(name, "filed") })
	ctx := t.Context()
	for _, acct := range []string{"", "RGW1", "RGW2"} {
		if _, err := d.Create(ctx, Entity{Kind: KindUser, Account: acct, Name: "same"}, nil); err != nil {
			t.Fatalf("account %q: %v", acct, err)
		}
	}
	if got := d.List(KindUser, "RGW1", "/"); len(got) != 1 || got[0].Account != "RGW1" {
		t.Errorf("account RGW1 lists %+v", got)
	}
	k, err := d.CreateAccessKey(ctx, "RGW1", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, owner, ok := d.Secret(ctx, k.ID); !ok || owner != (KeyOwner{Account: "RGW1"}) {
		t.Errorf("a root key signs for %+v (%v)", owner, ok)
	}
	if err := d.DeleteAccessKey(ctx, "RGW2", "", k.ID); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("another account deleting the key: %v", err)
	}
	if keys, _ := d.Keys("RGW1", ""); len(keys) != 1 {
		t.Errorf("the root's keys: %+v", keys)
	}

	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`
	if err := d.PutPolicy(ctx, KindUser, "", "Filed", "all", doc, nil); err != nil {
		t.Fatal(err)
	}
	if got := d.IdentityPolicies("", "filed"); len(got) != 1 {
		t.Errorf("the declared user's policies: %q", got)
	}
	if got := d.List(KindUser, "", "/"); len(got) != 1 {
		t.Errorf("the tenant's account lists %+v; a declared user is not listed", got)
	}
	if err := d.Delete(ctx, KindUser, "", "filed"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("deleting a declared user: %v", err)
	}
	if _, err := d.CreateAccessKey(ctx, "", "filed"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a key for a declared user: %v", err)
	}
	if _, err := d.Create(ctx, Entity{Kind: KindUser, Name: "FILED"}, nil); !errors.Is(err, ErrEntityExists) {
		t.Errorf("a directory user named as a declared one: %v", err)
	}
	// Its last policy gone, nothing of it is kept.
	if err := d.DeletePolicy(ctx, KindUser, "", "filed", "all"); err != nil {
		t.Fatal(err)
	}
	d.mu.RLock()
	_, kept := d.entities[entityKey{KindUser, "", "filed"}]
	d.mu.RUnlock()
	if kept {
		t.Error("a declared user's record is kept with nothing in it")
	}

	p, err := d.CreateProvider(ctx, Provider{Account: "RGW1", URL: "https://issuer.example/cluster", ClientIDs: []string{"a"},
		Thumbprints: []string{strings.Repeat("0", 40)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateProvider(ctx, p); !errors.Is(err, ErrEntityExists) {
		t.Errorf("the same provider twice: %v", err)
	}
	if _, err := d.Provider("RGW2", "issuer.example/cluster"); !errors.Is(err, ErrNoSuchEntity) {
		t.Errorf("another account's provider: %v", err)
	}
	if err := d.EditProvider(ctx, "RGW1", "issuer.example/cluster", func(p *Provider) error {
		p.ClientIDs = append(p.ClientIDs, "b")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := directory(t, store, testKey).Provider("RGW1", "https://issuer.example/cluster"); err != nil || len(got.ClientIDs) != 2 {
		t.Errorf("the provider read back: %+v, %v", got, err)
	}
	for _, bad := range []Provider{{URL: "issuer.example"}, {URL: "https://x/?q=1"}, {URL: "https://x", Thumbprints: []string{"short"}}} {
		if _, err := d.CreateProvider(ctx, bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("provider %+v: %v", bad, err)
		}
	}
}

// Session tokens: a token opens on any server of the tenant to the
// session it was issued for, and is refused once expired, when altered,
// or under another tenant's master key.
func TestSessions(t *testing.T) {
	s := NewSessions(testKey)
	sess := Session{Account: "RGW1", Role: "app", RoleID: "AROAX", Name: "job", Policies: []string{"{}"}}
	token, err := s.Issue(&sess, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sess.AccessKey, "ASIA") || len(sess.Secret) != 40 {
		t.Errorf("session credentials %q, %q: not STS's shapes", sess.AccessKey, sess.Secret)
	}
	if strings.Contains(token, sess.Secret) {
		t.Error("the token carries the secret in the clear")
	}
	got, err := NewSessions(testKey).Open(token)
	if err != nil || got.AccessKey != sess.AccessKey || got.Secret != sess.Secret || got.Role != "app" || len(got.Policies) != 1 {
		t.Errorf("opened %+v, %v", got, err)
	}
	later := NewSessions(testKey)
	later.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := later.Open(token); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("an expired token: %v", err)
	}
	other := masterKeys{keys: map[string][]byte{"k1": bytes.Repeat([]byte{1}, 32)}, def: "k1"}
	for name, tok := range map[string]string{
		"altered":        token[:len(token)-2] + "AA",
		"no key ID":      strings.TrimPrefix(token, "k1."),
		"another tenant": token,
	} {
		opener := NewSessions(testKey)
		if name == "another tenant" {
			opener = NewSessions(other)
		}
		if _, err := opener.Open(tok); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s token: %v", name, err)
		}
	}
}
