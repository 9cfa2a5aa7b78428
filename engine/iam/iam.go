// Package iam holds the identities of a strata process: the root
// credentials (from the environment or mounted Secret files, never flags)
// and the tenant's users, read from a mounted file the operator renders and
// reloaded when it changes. A user's grant is an identity policy the S3
// front end (engine/s3api) combines with the bucket's policy and ACL.
package iam

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/s3rules"
)

// Credentials are an access key and its secret.
type Credentials struct {
	AccessKey string
	SecretKey string
}

// Environment variables holding the root credentials, or files that do.
const (
	EnvRootUser         = "STRATA_ROOT_USER"
	EnvRootPassword     = "STRATA_ROOT_PASSWORD"
	EnvRootUserFile     = "STRATA_ROOT_USER_FILE"
	EnvRootPasswordFile = "STRATA_ROOT_PASSWORD_FILE"
	// EnvIAMFile names the users file.
	EnvIAMFile = "STRATA_IAM_FILE"
)

// Length bounds S3 clients accept.
const (
	minAccessKey = 3
	minSecretKey = 8
)

// RootFromEnv reads the root credentials from STRATA_ROOT_USER and
// STRATA_ROOT_PASSWORD, or from the files their _FILE variants name (a
// mounted Secret). Setting both forms of one is refused as ambiguous.
func RootFromEnv(getenv func(string) string) (Credentials, error) {
	user, err := fromEnvOrFile(getenv, EnvRootUser, EnvRootUserFile)
	if err != nil {
		return Credentials{}, err
	}
	pass, err := fromEnvOrFile(getenv, EnvRootPassword, EnvRootPasswordFile)
	if err != nil {
		return Credentials{}, err
	}
	switch {
	case user == "" || pass == "":
		return Credentials{}, fmt.Errorf("root credentials missing: set %s and %s (or %s and %s pointing at files)",
			EnvRootUser, EnvRootPassword, EnvRootUserFile, EnvRootPasswordFile)
	case len(user) < minAccessKey:
		return Credentials{}, fmt.Errorf("root user must be at least %d characters", minAccessKey)
	case len(pass) < minSecretKey:
		return Credentials{}, fmt.Errorf("root password must be at least %d characters", minSecretKey)
	}
	return Credentials{AccessKey: user, SecretKey: pass}, nil
}

func fromEnvOrFile(getenv func(string) string, name, fileName string) (string, error) {
	v, file := getenv(name), getenv(fileName)
	if v != "" && file != "" {
		return "", fmt.Errorf("both %s and %s are set; set one", name, fileName)
	}
	if file == "" {
		return v, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileName, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Policy names what a user may do in its buckets.
type Policy string

// Policies.
const (
	PolicyReadWrite Policy = "readwrite"
	PolicyReadOnly  Policy = "readonly"
	PolicyWriteOnly Policy = "writeonly"
	// PolicyAdmin is root's rights under another key (every bucket, every
	// operation, the admin calls of the S3 front end).
	PolicyAdmin Policy = "admin"
	// PolicyOwner is an account of its own inside the tenant: the user
	// creates buckets and has every right on the buckets it owns, and on
	// other buckets only what their ACLs and bucket policies grant it (as
	// another AWS account would).
	PolicyOwner Policy = "owner"
)

// User is one entry of the users file.
type User struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	Policy    Policy `json:"policy"`
	// Buckets the policy applies to; empty means every bucket.
	Buckets []string `json:"buckets,omitempty"`
	// Account makes an owner the root of an IAM account of that ID: it
	// manages the account's users, groups, roles and providers through
	// the IAM API, and what they create is its own. Other users belong
	// to the tenant's account.
	Account string `json:"account,omitempty"`
	Identity
}

// Identity is how ACLs and listings name a principal: its canonical user
// ID (the access key when empty) and display name (the ID when empty).
type Identity struct {
	ID          string `json:"id,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

// named is the identity with its defaults filled in for an access key.
func (i Identity) named(access string) Identity {
	if i.ID == "" {
		i.ID = access
	}
	if i.DisplayName == "" {
		i.DisplayName = i.ID
	}
	return i
}

type usersFile struct {
	// Root names the root account's identity.
	Root  Identity `json:"root,omitempty"`
	Users []User   `json:"users"`
}

// ParseUsers decodes and checks a users file.
func ParseUsers(data []byte, root string) ([]User, error) {
	f, err := parseUsersFile(data, root)
	return f.Users, err
}

// parseUsersFile decodes and checks a users file: the root's identity and
// the users.
func parseUsersFile(data []byte, root string) (usersFile, error) {
	var f usersFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return usersFile{}, fmt.Errorf("users file: %w", err)
	}
	users, err := checkUsers(f, root)
	f.Users = users
	return f, err
}

func checkUsers(f usersFile, root string) ([]User, error) {
	seen := map[string]bool{}
	ids := map[string]string{f.Root.named(root).ID: root}
	accounts := map[string]string{}
	for i, u := range f.Users {
		switch {
		case len(u.AccessKey) < minAccessKey:
			return nil, fmt.Errorf("users file: user %d: access key shorter than %d characters", i, minAccessKey)
		case len(u.SecretKey) < minSecretKey:
			return nil, fmt.Errorf("users file: user %s: secret key shorter than %d characters", u.AccessKey, minSecretKey)
		case u.AccessKey == root:
			return nil, fmt.Errorf("users file: user %s: reuses the root access key", u.AccessKey)
		case seen[u.AccessKey]:
			return nil, fmt.Errorf("users file: access key %s listed twice", u.AccessKey)
		}
		switch u.Policy {
		case PolicyReadWrite, PolicyReadOnly, PolicyWriteOnly, PolicyAdmin, PolicyOwner:
		default:
			return nil, fmt.Errorf("users file: user %s: policy %q is not readwrite, readonly, writeonly, admin or owner", u.AccessKey, u.Policy)
		}
		if u.Account != "" {
			if u.Policy != PolicyOwner {
				return nil, fmt.Errorf("users file: user %s: an account's root (account %q) must have policy owner", u.AccessKey, u.Account)
			}
			if !s3rules.ValidAccountID(u.Account) {
				return nil, fmt.Errorf("users file: user %s: account %q must be 1 to 64 letters and digits", u.AccessKey, u.Account)
			}
			if other, taken := accounts[u.Account]; taken {
				return nil, fmt.Errorf("users file: user %s: account %q is already %s's", u.AccessKey, u.Account, other)
			}
			accounts[u.Account] = u.AccessKey
		}
		id := u.Identity.named(u.AccessKey).ID
		if other, taken := ids[id]; taken {
			return nil, fmt.Errorf("users file: user %s: ID %q is already %s's", u.AccessKey, id, other)
		}
		seen[u.AccessKey], ids[id] = true, u.AccessKey
	}
	return f.Users, nil
}

// Users is the tenant's user list, read-only: users are managed by the
// operator through the users file.
type Users struct {
	root string
	path string
	log  *slog.Logger

	mu       sync.RWMutex
	users    map[string]User
	byID     map[string]string // canonical user ID -> access key
	rootName Identity
	sum      [32]byte

	// ownerOf names a bucket's owner (PolicyOwner); nil: no bucket is a
	// user's own.
	ownerOf func(bucket string) (string, bool)
}

// NewUsers loads the users file at path (empty: no users besides root).
func NewUsers(path, rootAccess string, log *slog.Logger) (*Users, error) {
	u := &Users{root: rootAccess, path: path, log: log, users: map[string]User{},
		byID: map[string]string{rootAccess: rootAccess}, rootName: Identity{}.named(rootAccess)}
	if path != "" {
		if err := u.reload(); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// reload reads the file and swaps the user list when its content changed.
// A broken file is reported and the previous list kept.
func (u *Users) reload() error {
	data, err := os.ReadFile(u.path)
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	sum := sha256.Sum256(data)
	u.mu.RLock()
	same := sum == u.sum
	u.mu.RUnlock()
	if same {
		return nil
	}
	f, err := parseUsersFile(data, u.root)
	if err != nil {
		return err
	}
	m := make(map[string]User, len(f.Users))
	rootName := f.Root.named(u.root)
	byID := map[string]string{rootName.ID: u.root}
	for _, usr := range f.Users {
		m[usr.AccessKey] = usr
		byID[usr.Identity.named(usr.AccessKey).ID] = usr.AccessKey
	}
	u.mu.Lock()
	u.users, u.byID, u.rootName, u.sum = m, byID, rootName, sum
	u.mu.Unlock()
	u.log.Info("users loaded", "file", u.path, "users", len(m))
	return nil
}

// Watch re-reads the users file every interval until stop closes. Kubelet
// replaces a mounted Secret's files atomically, so a read sees the old or
// the new content.
func (u *Users) Watch(interval time.Duration, stop <-chan struct{}) {
	if u.path == "" {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := u.reload(); err != nil {
				u.log.Error("users file not reloaded; keeping the previous users", "err", err)
			}
		}
	}
}

// CanList reports whether a user sees a bucket in ListBuckets (an owner
// sees the buckets it owns, which ListBuckets shows anyway).
func (u *Users) CanList(access, bucket string) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	usr, ok := u.users[access]
	return ok && usr.Policy != PolicyOwner && (len(usr.Buckets) == 0 || slices.Contains(usr.Buckets, bucket))
}

// SetBucketOwners tells the users which account owns a bucket (for
// PolicyOwner); set once, before requests are served.
func (u *Users) SetBucketOwners(ownerOf func(bucket string) (string, bool)) { u.ownerOf = ownerOf }

// Identity returns the canonical user ID and display name ACLs and
// listings show for an access key; ok is false for a key that is neither
// root nor a user.
func (u *Users) Identity(access string) (id, displayName string, ok bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if access == u.root {
		return u.rootName.ID, u.rootName.DisplayName, true
	}
	usr, ok := u.users[access]
	if !ok {
		return "", "", false
	}
	n := usr.named(access)
	return n.ID, n.DisplayName, true
}

// AccessOf returns the access key of a canonical user ID.
func (u *Users) AccessOf(id string) (string, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	a, ok := u.byID[id]
	return a, ok
}

// AccountOf returns the IAM account a key of the users file belongs to
// ("" the tenant's) and whether it is that account's root.
func (u *Users) AccountOf(access string) (account string, root bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	usr, ok := u.users[access]
	if !ok || usr.Account == "" {
		return "", false
	}
	return usr.Account, true
}

// RootOf returns the access key of an account's root ("" for the
// tenant's account: its root is the tenant's root).
func (u *Users) RootOf(account string) (string, bool) {
	if account == "" {
		return u.root, true
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	for _, usr := range u.users {
		if usr.Account == account {
			return usr.AccessKey, true
		}
	}
	return "", false
}

// Declares reports whether the users file has a user of the tenant's
// account with that IAM name (its canonical ID, ignoring case).
func (u *Users) Declares(account, name string) bool {
	if account != "" {
		return false
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	for _, usr := range u.users {
		if usr.Account == "" && strings.EqualFold(usr.named(usr.AccessKey).ID, name) {
			return true
		}
	}
	return false
}

// Name returns a users-file user's IAM name (its canonical ID).
func (u *Users) Name(access string) string {
	id, _, _ := u.Identity(access)
	return id
}

// Grants lists the users with their policies and buckets, sorted by access
// key, without their secret keys (the admin API's user listing).
func (u *Users) Grants() []User {
	u.mu.RLock()
	defer u.mu.RUnlock()
	out := make([]User, 0, len(u.users))
	for _, usr := range u.users {
		usr.SecretKey = ""
		usr.Buckets = slices.Clone(usr.Buckets)
		out = append(out, usr)
	}
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.AccessKey, b.AccessKey) })
	return out
}
