package iam

// The directory's entities: users, groups and roles of an account, with
// their inline and attached policies, and the access keys of users and
// of account roots. One record shape serves the three kinds (they share
// IAM's naming, paths, IDs and policies); the fields of one kind only
// stay empty on the others.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Kind is an entity's kind.
type Kind string

// Kinds.
const (
	KindUser  Kind = "user"
	KindGroup Kind = "group"
	KindRole  Kind = "role"
)

var kinds = []Kind{KindUser, KindGroup, KindRole}

// idPrefix is the start of an entity's unique ID, as IAM's.
var idPrefix = map[Kind]string{KindUser: "AIDA", KindGroup: "AGPA", KindRole: "AROA"}

// maxInline is an inline policy document's size for each kind, IAM's.
var maxInline = map[Kind]int{KindUser: maxPolicyDocument, KindGroup: 5120, KindRole: maxRolePolicy}

// Entity is a user, group or role of an account ("" is the tenant's own).
type Entity struct {
	Kind    Kind      `json:"-"`
	Account string    `json:"account,omitempty"`
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
	// Policies are the inline policies, by name, as sent.
	Policies map[string]string `json:"policies,omitempty"`
	// Attached are the managed policies' ARNs, in the order attached.
	Attached []string `json:"attached,omitempty"`
	// Groups are a user's groups, by name.
	Groups []string `json:"groups,omitempty"`
	// Declared marks a user of the users file: the directory holds only
	// its policies and groups (its key and grant are the file's).
	Declared bool `json:"declared,omitempty"`
	// A role's description, longest session (seconds) and trust policy.
	Description        string `json:"description,omitempty"`
	MaxSessionDuration int    `json:"maxSessionDuration,omitempty"`
	Trust              string `json:"trust,omitempty"`
}

type entityKey struct {
	kind          Kind
	account, name string // the name lower-cased: IAM names ignore case
}

func (e Entity) key() entityKey { return entityKey{e.Kind, e.Account, strings.ToLower(e.Name)} }

// object is the entity's object in the reserved bucket.
func (e Entity) object() string {
	return string(e.Kind) + "s/" + accountSegment(e.Account) + "/" + strings.ToLower(e.Name)
}

// accountSegment names an account in object keys (account IDs are
// letters and digits, so "-" is no account's).
func accountSegment(account string) string {
	if account == "" {
		return "-"
	}
	return account
}

// empty reports a declared user's record with nothing left to keep.
func (e Entity) empty() bool {
	return e.Declared && len(e.Policies) == 0 && len(e.Attached) == 0 && len(e.Groups) == 0
}

// DirKey is an access key of a directory user, or of an account's root
// (User "").
type DirKey struct {
	ID      string    `json:"id"`
	Account string    `json:"account,omitempty"`
	User    string    `json:"user"`
	Status  string    `json:"status"` // Active or Inactive
	Created time.Time `json:"created"`
	// Sealed is the secret as stored, sealed with a key derived from the
	// master key SealedWith names; Secret is the secret in memory, never
	// stored.
	Sealed     []byte `json:"sealed"`
	SealedWith string `json:"sealedWith"`
	Secret     string `json:"-"`
}

// Key statuses.
const (
	KeyActive   = "Active"
	KeyInactive = "Inactive"
)

// KeyOwner is whom an access key signs for: a user of an account, or
// the account's root (User "").
type KeyOwner struct {
	Account string
	User    string
}

// Secret returns an active access key's secret and owner. A key this
// server does not know makes it refresh the directory first (one metadata
// read unless the directory changed; requests that miss at the same
// moment take turns, and find the key once one has loaded it), so a key
// made on another server works here at once.
func (d *Directory) Secret(ctx context.Context, access string) (secret string, owner KeyOwner, ok bool) {
	if k, ok := d.key(access); ok {
		return k.Secret, KeyOwner{k.Account, k.User}, k.Status == KeyActive
	}
	d.reload.Lock()
	if _, known := d.key(access); !known { // a refresh just done may have brought it
		if err := d.refresh(ctx); err != nil {
			d.log.Warn("IAM directory not refreshed for an unknown access key", "err", err)
		}
	}
	d.reload.Unlock()
	k, ok := d.key(access)
	return k.Secret, KeyOwner{k.Account, k.User}, ok && k.Status == KeyActive
}

func (d *Directory) key(access string) (DirKey, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	k, ok := d.keys[access]
	return k, ok
}

// Get returns an entity by kind, account and name (ignoring case). A
// user the users file declares is found even before the directory holds
// anything of it.
func (d *Directory) Get(kind Kind, account, name string) (Entity, error) {
	d.mu.RLock()
	e, ok := d.entities[entityKey{kind, account, strings.ToLower(name)}]
	d.mu.RUnlock()
	if ok {
		return e, nil
	}
	if kind == KindUser && d.declared != nil && d.declared(account, name) {
		return Entity{Kind: kind, Account: account, Name: name, ID: name, Path: "/", Declared: true}, nil
	}
	return Entity{}, fmt.Errorf("%w: the %s with name %s cannot be found", ErrNoSuchEntity, kind, name)
}

// List returns an account's entities of a kind whose path starts with
// pathPrefix, sorted by name ignoring case (as IAM lists them); users of
// the users file are not listed.
func (d *Directory) List(kind Kind, account, pathPrefix string) []Entity {
	d.mu.RLock()
	var out []Entity
	for k, e := range d.entities {
		if k.kind == kind && k.account == account && !e.Declared && strings.HasPrefix(e.Path, pathPrefix) {
			out = append(out, e)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b Entity) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

// Create adds a user, group or role: e names its kind, account, name and
// path, and for a role its description, longest session and trust
// policy (checked by check).
func (d *Directory) Create(ctx context.Context, e Entity, check func(string) error) (Entity, error) {
	if e.Path == "" {
		e.Path = "/"
	}
	if err := checkName(string(e.Kind)+" name", e.Name, maxName); err != nil {
		return Entity{}, err
	}
	if err := checkPath(e.Path); err != nil {
		return Entity{}, err
	}
	if e.Kind == KindRole {
		if err := checkRole(&e, check); err != nil {
			return Entity{}, err
		}
	}
	err := d.changing(ctx, func() error {
		if _, err := d.Get(e.Kind, e.Account, e.Name); err == nil {
			return fmt.Errorf("%w: %s with name %s already exists", ErrEntityExists, e.Kind, e.Name)
		}
		e.ID, e.Created = newID(idPrefix[e.Kind]), d.now().UTC().Truncate(time.Second)
		return d.putEntity(ctx, e, true)
	})
	return e, err
}

// checkRole fills a role's defaults and checks its session length and
// trust policy.
func checkRole(e *Entity, check func(string) error) error {
	if e.MaxSessionDuration == 0 {
		e.MaxSessionDuration = 3600
	}
	if e.MaxSessionDuration < 3600 || e.MaxSessionDuration > 43200 {
		return fmt.Errorf("%w: MaxSessionDuration must be 3600 to 43200 seconds", ErrInvalidInput)
	}
	if len(e.Description) > 1000 {
		return fmt.Errorf("%w: the description is longer than 1000 characters", ErrInvalidInput)
	}
	if e.Trust == "" {
		return fmt.Errorf("%w: a role needs a trust policy (AssumeRolePolicyDocument)", ErrMalformedPolicy)
	}
	if len(e.Trust) > 2048 {
		return fmt.Errorf("%w: the trust policy is longer than 2048 characters", ErrLimitExceeded)
	}
	if check != nil {
		if err := check(e.Trust); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformedPolicy, err)
		}
	}
	return nil
}

// Edit changes an entity by fn, which may rename it (Name), move it
// (Path) or change its policies and, for a role, its description and
// longest session. A renamed user keeps its keys and groups; a renamed
// group its members.
func (d *Directory) Edit(ctx context.Context, kind Kind, account, name string, fn func(*Entity) error) (Entity, error) {
	var e Entity
	err := d.changing(ctx, func() error {
		old, err := d.Get(kind, account, name)
		if err != nil {
			return err
		}
		e = old
		e.Policies, e.Attached, e.Groups = cloneMap(old.Policies), slices.Clone(old.Attached), slices.Clone(old.Groups)
		if err := fn(&e); err != nil {
			return err
		}
		if e.Name != old.Name {
			if old.Declared {
				return fmt.Errorf("%w: user %s is declared in the Tenant; rename it there", ErrInvalidInput, old.Name)
			}
			if err := checkName(string(kind)+" name", e.Name, maxName); err != nil {
				return err
			}
			if other, err := d.Get(kind, account, e.Name); err == nil && !strings.EqualFold(other.Name, old.Name) {
				return fmt.Errorf("%w: %s with name %s already exists", ErrEntityExists, kind, e.Name)
			}
		}
		if e.Path != old.Path {
			if err := checkPath(e.Path); err != nil {
				return err
			}
		}
		if e.empty() {
			return d.remove(ctx, old.object())
		}
		if err := d.putEntity(ctx, e, false); err != nil {
			return err
		}
		if e.Name == old.Name {
			return nil
		}
		if err := d.renamed(ctx, old, e.Name); err != nil {
			return err
		}
		if old.object() != e.object() {
			return d.remove(ctx, old.object())
		}
		return nil
	})
	return e, err
}

// renamed carries a rename to what names the entity: a user's keys, a
// group's members' lists.
func (d *Directory) renamed(ctx context.Context, old Entity, name string) error {
	switch old.Kind {
	case KindUser:
		keys, _ := d.Keys(old.Account, old.Name)
		for _, k := range keys {
			k.User = name
			if err := d.putKey(ctx, k); err != nil {
				return err
			}
		}
	case KindGroup:
		for _, u := range d.members(old.Account, old.Name) {
			for i, g := range u.Groups {
				if strings.EqualFold(g, old.Name) {
					u.Groups[i] = name
				}
			}
			if err := d.putEntity(ctx, u, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes an entity that nothing hangs on any more (IAM's rule,
// DeleteConflict otherwise): no keys, policies or attached policies for a
// user; no members or policies for a group; no policies for a role. A
// user's group memberships go with it (IAM refuses; Ceph's RGW, whose
// conformance suite deletes users before their groups, does not).
func (d *Directory) Delete(ctx context.Context, kind Kind, account, name string) error {
	return d.changing(ctx, func() error {
		e, err := d.Get(kind, account, name)
		if err != nil {
			return err
		}
		conflict := func(what string) error {
			return fmt.Errorf("%w: cannot delete entity, must %s first", ErrDeleteConflict, what)
		}
		switch {
		case e.Declared:
			return fmt.Errorf("%w: user %s is declared in the Tenant; remove it there", ErrInvalidInput, e.Name)
		case kind == KindUser && len(d.keysOf(account, e.Name)) > 0:
			return conflict("delete access keys")
		case len(e.Policies) > 0:
			return conflict("delete policies")
		case len(e.Attached) > 0:
			return conflict("detach all policies")
		case kind == KindGroup && len(d.members(account, e.Name)) > 0:
			return conflict("remove all users from group")
		}
		return d.remove(ctx, e.object())
	})
}

// PutPolicy sets (or replaces) one of an entity's inline policies; check
// validates the document first.
func (d *Directory) PutPolicy(ctx context.Context, kind Kind, account, name, policy, doc string, check func(string) error) error {
	if err := checkName("policy name", policy, maxPolicyName); err != nil {
		return err
	}
	if len(doc) > maxInline[kind] {
		return fmt.Errorf("%w: the policy document is longer than %d characters", ErrLimitExceeded, maxInline[kind])
	}
	if check != nil {
		if err := check(doc); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformedPolicy, err)
		}
	}
	_, err := d.Edit(ctx, kind, account, name, func(e *Entity) error {
		e.Policies[policy] = doc
		return nil
	})
	return err
}

// DeletePolicy removes one of an entity's inline policies.
func (d *Directory) DeletePolicy(ctx context.Context, kind Kind, account, name, policy string) error {
	_, err := d.Edit(ctx, kind, account, name, func(e *Entity) error {
		if _, ok := e.Policies[policy]; !ok {
			return fmt.Errorf("%w: the %s policy with name %s cannot be found", ErrNoSuchEntity, kind, policy)
		}
		delete(e.Policies, policy)
		return nil
	})
	return err
}

// Attach attaches a managed policy to an entity (again is no change).
func (d *Directory) Attach(ctx context.Context, kind Kind, account, name, arn string) error {
	if _, ok := ManagedPolicy(arn); !ok {
		return fmt.Errorf("%w: policy %s does not exist or is not attachable", ErrNotAttachable, arn)
	}
	_, err := d.Edit(ctx, kind, account, name, func(e *Entity) error {
		if slices.Contains(e.Attached, arn) {
			return nil
		}
		if len(e.Attached) >= maxAttached {
			return fmt.Errorf("%w: cannot exceed quota for PoliciesPer%s: %d", ErrLimitExceeded, titleKind(kind), maxAttached)
		}
		e.Attached = append(e.Attached, arn)
		return nil
	})
	return err
}

// Detach detaches a managed policy from an entity.
func (d *Directory) Detach(ctx context.Context, kind Kind, account, name, arn string) error {
	_, err := d.Edit(ctx, kind, account, name, func(e *Entity) error {
		i := slices.Index(e.Attached, arn)
		if i < 0 {
			return fmt.Errorf("%w: policy %s was not found", ErrNoSuchEntity, arn)
		}
		e.Attached = slices.Delete(e.Attached, i, i+1)
		return nil
	})
	return err
}

func titleKind(k Kind) string { return strings.ToUpper(string(k[:1])) + string(k[1:]) }

// AddToGroup makes a user a member of a group (again is no change).
func (d *Directory) AddToGroup(ctx context.Context, account, group, user string) error {
	g, err := d.Get(KindGroup, account, group)
	if err != nil {
		return err
	}
	_, err = d.Edit(ctx, KindUser, account, user, func(e *Entity) error {
		if slices.ContainsFunc(e.Groups, func(n string) bool { return strings.EqualFold(n, g.Name) }) {
			return nil
		}
		if len(e.Groups) >= maxGroupsPerUser {
			return fmt.Errorf("%w: cannot exceed quota for GroupsPerUser: %d", ErrLimitExceeded, maxGroupsPerUser)
		}
		e.Groups = append(e.Groups, g.Name)
		return nil
	})
	return err
}

// RemoveFromGroup ends a user's membership of a group.
func (d *Directory) RemoveFromGroup(ctx context.Context, account, group, user string) error {
	if _, err := d.Get(KindGroup, account, group); err != nil {
		return err
	}
	_, err := d.Edit(ctx, KindUser, account, user, func(e *Entity) error {
		i := slices.IndexFunc(e.Groups, func(n string) bool { return strings.EqualFold(n, group) })
		if i < 0 {
			return fmt.Errorf("%w: user %s is not in group %s", ErrNoSuchEntity, e.Name, group)
		}
		e.Groups = slices.Delete(e.Groups, i, i+1)
		return nil
	})
	return err
}

// Members lists a group's users, sorted by name ignoring case.
func (d *Directory) Members(account, group string) ([]Entity, error) {
	if _, err := d.Get(KindGroup, account, group); err != nil {
		return nil, err
	}
	return d.members(account, group), nil
}

func (d *Directory) members(account, group string) []Entity {
	d.mu.RLock()
	var out []Entity
	for k, e := range d.entities {
		if k.kind == KindUser && k.account == account && slices.ContainsFunc(e.Groups, func(n string) bool { return strings.EqualFold(n, group) }) {
			out = append(out, e)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b Entity) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

// IdentityPolicies are the documents that decide what a user may do:
// its inline and attached policies and those of its groups.
//
// It is asked on every request of a user with policies of its own or of
// a users-file user, so it reads the records alone: a declared user
// without a record has none (Get's lookup in the users file is not
// needed).
func (d *Directory) IdentityPolicies(account, user string) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	u, ok := d.entities[entityKey{KindUser, account, strings.ToLower(user)}]
	if !ok {
		return nil
	}
	out := policyDocs(u)
	for _, g := range u.Groups {
		if ge, ok := d.entities[entityKey{KindGroup, account, strings.ToLower(g)}]; ok {
			out = append(out, policyDocs(ge)...)
		}
	}
	return out
}

// RolePolicies are the documents that decide what a role's sessions may
// do (before their session policy narrows it).
func (d *Directory) RolePolicies(account, role string) []string {
	r, err := d.Get(KindRole, account, role)
	if err != nil {
		return nil
	}
	return policyDocs(r)
}

func policyDocs(e Entity) []string {
	out := make([]string, 0, len(e.Policies)+len(e.Attached))
	for _, doc := range e.Policies {
		out = append(out, doc)
	}
	for _, arn := range e.Attached {
		if doc, ok := ManagedPolicy(arn); ok {
			out = append(out, doc)
		}
	}
	return out
}

// Counts are an account's entities for GetAccountSummary.
func (d *Directory) Counts(account string) (users, groups, roles, providers int) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for k, e := range d.entities {
		if k.account != account || e.Declared {
			continue
		}
		switch k.kind {
		case KindUser:
			users++
		case KindGroup:
			groups++
		case KindRole:
			roles++
		}
	}
	for _, p := range d.providers {
		if p.Account == account {
			providers++
		}
	}
	return users, groups, roles, providers
}

// Keys lists the access keys of a user of an account, or of the
// account's root (user ""), oldest first.
func (d *Directory) Keys(account, user string) ([]DirKey, error) {
	if user != "" {
		u, err := d.Get(KindUser, account, user)
		if err != nil {
			return nil, err
		}
		user = u.Name
	}
	return d.keysOf(account, user), nil
}

func (d *Directory) keysOf(account, user string) []DirKey {
	d.mu.RLock()
	var out []DirKey
	for _, k := range d.keys {
		if k.Account == account && strings.EqualFold(k.User, user) {
			out = append(out, k)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b DirKey) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// CreateAccessKey makes a new active key for a user of an account, or for
// the account's root (user ""), at most MaxKeysPerUser each. A users-file
// user's keys are the file's.
func (d *Directory) CreateAccessKey(ctx context.Context, account, user string) (DirKey, error) {
	var k DirKey
	err := d.changing(ctx, func() error {
		if user != "" {
			u, err := d.Get(KindUser, account, user)
			if err != nil {
				return err
			}
			if u.Declared {
				return fmt.Errorf("%w: user %s is declared in the Tenant, which holds its keys", ErrInvalidInput, u.Name)
			}
			user = u.Name
		}
		if len(d.keysOf(account, user)) >= MaxKeysPerUser {
			return fmt.Errorf("%w: cannot exceed quota for AccessKeysPerUser: %d", ErrLimitExceeded, MaxKeysPerUser)
		}
		k = DirKey{ID: newAccessKey(), Account: account, User: user, Status: KeyActive,
			Created: d.now().UTC().Truncate(time.Second), Secret: newSecretKey()}
		return d.putKey(ctx, k)
	})
	return k, err
}

// UpdateAccessKey makes a key Active or Inactive.
func (d *Directory) UpdateAccessKey(ctx context.Context, account, user, id, status string) error {
	if status != KeyActive && status != KeyInactive {
		return fmt.Errorf("%w: status must be Active or Inactive", ErrInvalidInput)
	}
	return d.changing(ctx, func() error {
		k, err := d.userKey(account, user, id)
		if err != nil {
			return err
		}
		k.Status = status
		return d.putKey(ctx, k)
	})
}

// DeleteAccessKey removes a key.
func (d *Directory) DeleteAccessKey(ctx context.Context, account, user, id string) error {
	return d.changing(ctx, func() error {
		if _, err := d.userKey(account, user, id); err != nil {
			return err
		}
		return d.remove(ctx, keysPrefix+id)
	})
}

func (d *Directory) userKey(account, user, id string) (DirKey, error) {
	if user != "" {
		if _, err := d.Get(KindUser, account, user); err != nil {
			return DirKey{}, err
		}
	}
	k, ok := d.key(id)
	if !ok || k.Account != account || !strings.EqualFold(k.User, user) {
		return DirKey{}, fmt.Errorf("%w: the access key with id %s cannot be found", ErrNoSuchEntity, id)
	}
	return k, nil
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (d *Directory) putEntity(ctx context.Context, e Entity, create bool) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	var cond func(*objlayer.ObjectInfo) error
	if create {
		// Refused when another server made the name since this one
		// loaded (docs/iam.md: this narrows the window, the erasure
		// layer's conditional writes do not close it).
		cond = func(cur *objlayer.ObjectInfo) error {
			if cur != nil && !cur.DeleteMarker {
				return fmt.Errorf("%w: %s with name %s already exists", ErrEntityExists, e.Kind, e.Name)
			}
			return nil
		}
	}
	return d.write(ctx, e.object(), data, cond)
}

func (d *Directory) putKey(ctx context.Context, k DirKey) error {
	sealed, keyID, err := d.seal.seal([]byte(k.Secret), k.ID)
	if err != nil {
		return fmt.Errorf("IAM directory: sealing a secret: %w", err)
	}
	k.Sealed, k.SealedWith = sealed, keyID
	data, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return d.write(ctx, keysPrefix+k.ID, data, nil)
}
