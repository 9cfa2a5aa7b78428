package iam

// The IAM directory: users, their access keys and inline policies, made
// through the IAM API and kept by the tenant's own storage, as objects of
// a reserved bucket written through the object layer (docs/iam.md says
// why: quorum, heal, node loss and pools come with it, on the server and
// the gateway alike). Each server holds the whole directory in memory and
// reloads it when the generation object changes, or at once when a
// request is signed with a key it does not know.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// ReservedBucket holds the directory's objects. Its name is no valid S3
// bucket name (the leading dot), so no S3 request can address it; the
// front end leaves it out of listings.
const ReservedBucket = ".strata-iam"

// The directory's objects.
const (
	usersPrefix   = "users/"
	keysPrefix    = "keys/"
	generationKey = "generation"
)

// Limits, IAM's own (docs/research/iam-sts.md).
const (
	MaxKeysPerUser    = 2
	maxUserName       = 64
	maxPathLength     = 512
	maxPolicyName     = 128
	maxPolicyDocument = 2048 // an inline user policy's size in IAM
)

// Directory errors; the IAM API maps each to its code.
var (
	ErrNoSuchEntity   = errors.New("no such entity")
	ErrEntityExists   = errors.New("entity already exists")
	ErrLimitExceeded  = errors.New("limit exceeded")
	ErrDeleteConflict = errors.New("delete conflict")
	ErrInvalidInput   = errors.New("invalid input")
	// ErrMalformedPolicy: a policy document that is no identity policy.
	ErrMalformedPolicy = errors.New("malformed policy document")
)

// DirUser is a user of the directory.
type DirUser struct {
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
	// Policies are the user's inline policies, by name, as sent.
	Policies map[string]string `json:"policies,omitempty"`
}

// DirKey is an access key of a directory user.
type DirKey struct {
	ID      string    `json:"id"`
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

// Directory is the tenant's IAM directory.
type Directory struct {
	store objlayer.Layer
	seal  sealer
	log   *slog.Logger
	now   func() time.Time

	// change serialises this process's changes (read, edit, write of an
	// entity, then the generation).
	change sync.Mutex

	mu         sync.RWMutex
	users      map[string]DirUser // by lower-cased name
	keys       map[string]DirKey  // by access key
	generation string             // the generation object's ETag at the last load
	loaded     bool

	reload sync.Mutex // one reload at a time
}

// NewDirectory is the directory kept in store, its secrets sealed with
// keys derived from the tenant's master keys. Load it before use.
func NewDirectory(store objlayer.Layer, keys MasterKeys, log *slog.Logger) *Directory {
	return &Directory{store: store, seal: sealer{keys: keys}, log: log, now: time.Now,
		users: map[string]DirUser{}, keys: map[string]DirKey{}}
}

// Load reads the whole directory (an absent reserved bucket is an empty
// directory).
func (d *Directory) Load(ctx context.Context) error {
	d.reload.Lock()
	defer d.reload.Unlock()
	return d.load(ctx)
}

func (d *Directory) load(ctx context.Context) error {
	gen, err := d.generationTag(ctx)
	if err != nil {
		return err
	}
	users := map[string]DirUser{}
	keys := map[string]DirKey{}
	if err := d.each(ctx, usersPrefix, func(data []byte) error {
		var u DirUser
		if err := json.Unmarshal(data, &u); err != nil {
			return err
		}
		users[strings.ToLower(u.Name)] = u
		return nil
	}); err != nil {
		return err
	}
	if err := d.each(ctx, keysPrefix, func(data []byte) error {
		var k DirKey
		if err := json.Unmarshal(data, &k); err != nil {
			return err
		}
		secret, err := d.seal.open(k.Sealed, k.SealedWith, k.ID)
		if err != nil {
			return fmt.Errorf("access key %s: %w", k.ID, err)
		}
		k.Secret = string(secret)
		keys[k.ID] = k
		return nil
	}); err != nil {
		return err
	}
	d.mu.Lock()
	d.users, d.keys, d.generation, d.loaded = users, keys, gen, true
	d.mu.Unlock()
	return nil
}

// generationTag is the generation object's ETag ("" when there is none).
func (d *Directory) generationTag(ctx context.Context) (string, error) {
	h, err := d.store.OpenObjectMeta(ctx, ReservedBucket, generationKey, nil)
	switch {
	case errors.Is(err, objlayer.ErrObjectNotFound), errors.Is(err, objlayer.ErrBucketNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("IAM directory: %w", err)
	}
	defer h.Close()
	return h.Info().ETag, nil
}

// each calls fn with the content of every object under prefix.
func (d *Directory) each(ctx context.Context, prefix string, fn func([]byte) error) error {
	marker := ""
	for {
		res, err := d.store.ListObjects(ctx, ReservedBucket, prefix, marker, "", 1000)
		if errors.Is(err, objlayer.ErrBucketNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("IAM directory: listing %s: %w", prefix, err)
		}
		for _, o := range res.Objects {
			data, err := d.read(ctx, o.Name)
			if errors.Is(err, objlayer.ErrObjectNotFound) {
				continue // removed since the listing
			}
			if err == nil {
				err = fn(data)
			}
			if err != nil {
				return fmt.Errorf("IAM directory: %s: %w", o.Name, err)
			}
		}
		if !res.IsTruncated {
			return nil
		}
		marker = res.NextMarker
	}
}

func (d *Directory) read(ctx context.Context, key string) ([]byte, error) {
	h, err := d.store.OpenObject(ctx, ReservedBucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var b bytes.Buffer
	if err := h.WriteRange(ctx, &b, 0, -1); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Refresh reloads the directory when another server changed it (its
// generation object's ETag moved): one metadata read when it did not.
func (d *Directory) Refresh(ctx context.Context) error {
	d.reload.Lock()
	defer d.reload.Unlock()
	return d.refresh(ctx)
}

func (d *Directory) refresh(ctx context.Context) error {
	gen, err := d.generationTag(ctx)
	if err != nil {
		return err
	}
	d.mu.RLock()
	same := d.loaded && gen == d.generation
	d.mu.RUnlock()
	if same {
		return nil
	}
	return d.load(ctx)
}

// Secret returns an active access key's secret and its user's name. A key
// this server does not know makes it refresh the directory first (one
// metadata read unless the directory changed; requests that miss at the
// same moment take turns, and find the key once one has loaded it), so a
// key made on another server works here at once.
func (d *Directory) Secret(ctx context.Context, access string) (secret, user string, ok bool) {
	if k, ok := d.key(access); ok {
		return k.Secret, k.User, k.Status == KeyActive
	}
	d.reload.Lock()
	if _, known := d.key(access); !known { // a refresh just done may have brought it
		if err := d.refresh(ctx); err != nil {
			d.log.Warn("IAM directory not refreshed for an unknown access key", "err", err)
		}
	}
	d.reload.Unlock()
	k, ok := d.key(access)
	return k.Secret, k.User, ok && k.Status == KeyActive
}

func (d *Directory) key(access string) (DirKey, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	k, ok := d.keys[access]
	return k, ok
}

// User returns a user by name (IAM names ignore case).
func (d *Directory) User(name string) (DirUser, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	u, ok := d.users[strings.ToLower(name)]
	if !ok {
		return DirUser{}, fmt.Errorf("%w: the user with name %s cannot be found", ErrNoSuchEntity, name)
	}
	return u, nil
}

// Policies returns a user's inline policy documents (none for a name
// that is no user's).
func (d *Directory) Policies(user string) []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	u := d.users[strings.ToLower(user)]
	out := make([]string, 0, len(u.Policies))
	for _, doc := range u.Policies {
		out = append(out, doc)
	}
	return out
}

// Users lists the users whose path starts with pathPrefix, sorted by name
// ignoring case (as IAM lists them).
func (d *Directory) Users(pathPrefix string) []DirUser {
	d.mu.RLock()
	out := make([]DirUser, 0, len(d.users))
	for _, u := range d.users {
		if strings.HasPrefix(u.Path, pathPrefix) {
			out = append(out, u)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(out, func(a, b DirUser) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

// Keys lists a user's access keys, oldest first.
func (d *Directory) Keys(user string) ([]DirKey, error) {
	u, err := d.User(user)
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	var out []DirKey
	for _, k := range d.keys {
		if strings.EqualFold(k.User, u.Name) {
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
	return out, nil
}

// CreateUser adds a user.
func (d *Directory) CreateUser(ctx context.Context, name, path string) (DirUser, error) {
	if path == "" {
		path = "/"
	}
	if err := checkName("user name", name, maxUserName); err != nil {
		return DirUser{}, err
	}
	if err := checkPath(path); err != nil {
		return DirUser{}, err
	}
	var u DirUser
	err := d.changing(ctx, func() error {
		if _, err := d.User(name); err == nil {
			return fmt.Errorf("%w: user with name %s already exists", ErrEntityExists, name)
		}
		u = DirUser{Name: name, ID: newID("AIDA"), Path: path, Created: d.now().UTC().Truncate(time.Second)}
		return d.putUser(ctx, u, true)
	})
	return u, err
}

// UpdateUser renames a user or moves it to another path ("" keeps
// either). Its ID, keys and policies stay.
func (d *Directory) UpdateUser(ctx context.Context, name, newName, newPath string) (DirUser, error) {
	if newName != "" {
		if err := checkName("user name", newName, maxUserName); err != nil {
			return DirUser{}, err
		}
	}
	if newPath != "" {
		if err := checkPath(newPath); err != nil {
			return DirUser{}, err
		}
	}
	var u DirUser
	err := d.changing(ctx, func() error {
		var err error
		if u, err = d.User(name); err != nil {
			return err
		}
		old := u.Name
		if newPath != "" {
			u.Path = newPath
		}
		renamed := newName != "" && newName != u.Name
		if renamed {
			if other, err := d.User(newName); err == nil && !strings.EqualFold(other.Name, old) {
				return fmt.Errorf("%w: user with name %s already exists", ErrEntityExists, newName)
			}
			u.Name = newName
		}
		if err := d.putUser(ctx, u, false); err != nil {
			return err
		}
		if !renamed {
			return nil
		}
		keys, _ := d.Keys(old)
		for _, k := range keys {
			k.User = u.Name
			if err := d.putKey(ctx, k); err != nil {
				return err
			}
		}
		if !strings.EqualFold(old, u.Name) {
			return d.remove(ctx, usersPrefix+strings.ToLower(old))
		}
		return nil
	})
	return u, err
}

// DeleteUser removes a user that has no access keys and no policies left
// (IAM's rule: DeleteConflict otherwise).
func (d *Directory) DeleteUser(ctx context.Context, name string) error {
	return d.changing(ctx, func() error {
		u, err := d.User(name)
		if err != nil {
			return err
		}
		if keys, _ := d.Keys(name); len(keys) > 0 {
			return fmt.Errorf("%w: cannot delete entity, must delete access keys first", ErrDeleteConflict)
		}
		if len(u.Policies) > 0 {
			return fmt.Errorf("%w: cannot delete entity, must delete policies first", ErrDeleteConflict)
		}
		return d.remove(ctx, usersPrefix+strings.ToLower(u.Name))
	})
}

// CreateAccessKey makes a new active key for a user (at most
// MaxKeysPerUser).
func (d *Directory) CreateAccessKey(ctx context.Context, user string) (DirKey, error) {
	var k DirKey
	err := d.changing(ctx, func() error {
		u, err := d.User(user)
		if err != nil {
			return err
		}
		if keys, _ := d.Keys(user); len(keys) >= MaxKeysPerUser {
			return fmt.Errorf("%w: cannot exceed quota for AccessKeysPerUser: %d", ErrLimitExceeded, MaxKeysPerUser)
		}
		k = DirKey{ID: newAccessKey(), User: u.Name, Status: KeyActive,
			Created: d.now().UTC().Truncate(time.Second), Secret: newSecretKey()}
		return d.putKey(ctx, k)
	})
	return k, err
}

// UpdateAccessKey makes a user's key Active or Inactive.
func (d *Directory) UpdateAccessKey(ctx context.Context, user, id, status string) error {
	if status != KeyActive && status != KeyInactive {
		return fmt.Errorf("%w: status must be Active or Inactive", ErrInvalidInput)
	}
	return d.changing(ctx, func() error {
		k, err := d.userKey(user, id)
		if err != nil {
			return err
		}
		k.Status = status
		return d.putKey(ctx, k)
	})
}

// DeleteAccessKey removes a user's key.
func (d *Directory) DeleteAccessKey(ctx context.Context, user, id string) error {
	return d.changing(ctx, func() error {
		if _, err := d.userKey(user, id); err != nil {
			return err
		}
		return d.remove(ctx, keysPrefix+id)
	})
}

func (d *Directory) userKey(user, id string) (DirKey, error) {
	u, err := d.User(user)
	if err != nil {
		return DirKey{}, err
	}
	k, ok := d.key(id)
	if !ok || !strings.EqualFold(k.User, u.Name) {
		return DirKey{}, fmt.Errorf("%w: the access key with id %s cannot be found", ErrNoSuchEntity, id)
	}
	return k, nil
}

// PutUserPolicy sets (or replaces) one of a user's inline policies; check
// validates the document first.
func (d *Directory) PutUserPolicy(ctx context.Context, user, name, doc string, check func(string) error) error {
	if err := checkName("policy name", name, maxPolicyName); err != nil {
		return err
	}
	if len(doc) > maxPolicyDocument {
		return fmt.Errorf("%w: the policy document is longer than %d characters", ErrLimitExceeded, maxPolicyDocument)
	}
	if check != nil {
		if err := check(doc); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformedPolicy, err)
		}
	}
	return d.changing(ctx, func() error {
		u, err := d.User(user)
		if err != nil {
			return err
		}
		u.Policies = cloneMap(u.Policies)
		u.Policies[name] = doc
		return d.putUser(ctx, u, false)
	})
}

// DeleteUserPolicy removes one of a user's inline policies.
func (d *Directory) DeleteUserPolicy(ctx context.Context, user, name string) error {
	return d.changing(ctx, func() error {
		u, err := d.User(user)
		if err != nil {
			return err
		}
		if _, ok := u.Policies[name]; !ok {
			return fmt.Errorf("%w: the user policy with name %s cannot be found", ErrNoSuchEntity, name)
		}
		u.Policies = cloneMap(u.Policies)
		delete(u.Policies, name)
		return d.putUser(ctx, u, false)
	})
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// changing runs a change of this process's, on the latest directory,
// then moves the generation so that every server reloads.
func (d *Directory) changing(ctx context.Context, fn func() error) error {
	d.change.Lock()
	defer d.change.Unlock()
	if err := d.Refresh(ctx); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	return d.bump(ctx)
}

// bump writes a new generation object, then reloads.
func (d *Directory) bump(ctx context.Context) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if err := d.write(ctx, generationKey, fmt.Appendf(nil, "%x", b), nil); err != nil {
		return err
	}
	return d.Load(ctx)
}

func (d *Directory) putUser(ctx context.Context, u DirUser, create bool) error {
	data, err := json.Marshal(u)
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
				return fmt.Errorf("%w: user with name %s already exists", ErrEntityExists, u.Name)
			}
			return nil
		}
	}
	return d.write(ctx, usersPrefix+strings.ToLower(u.Name), data, cond)
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

// write stores one of the directory's objects, making the reserved
// bucket first when it is missing (a StatBucket is a cached read).
func (d *Directory) write(ctx context.Context, key string, data []byte, cond func(*objlayer.ObjectInfo) error) error {
	// The object layer leaves checking that a bucket exists to its
	// caller.
	if _, err := d.store.StatBucket(ctx, ReservedBucket); errors.Is(err, objlayer.ErrBucketNotFound) {
		if err := d.store.CreateBucket(ctx, objlayer.BucketInfo{Name: ReservedBucket}); err != nil && !errors.Is(err, objlayer.ErrBucketExists) {
			return fmt.Errorf("IAM directory: creating its bucket: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("IAM directory: %w", err)
	}
	_, err := d.store.PutObject(ctx, ReservedBucket, key, bytes.NewReader(data), int64(len(data)),
		objlayer.PutOptions{Meta: map[string]string{"content-type": "application/json"}, Condition: cond})
	if err != nil && !errors.Is(err, ErrEntityExists) {
		return fmt.Errorf("IAM directory: writing %s: %w", key, err)
	}
	return err
}

func (d *Directory) remove(ctx context.Context, key string) error {
	_, err := d.store.DeleteObject(ctx, ReservedBucket, key, nil, objlayer.DeleteUnversioned)
	if err != nil && !errors.Is(err, objlayer.ErrObjectNotFound) {
		return fmt.Errorf("IAM directory: removing %s: %w", key, err)
	}
	return nil
}

// checkName applies IAM's rule for user, group and role names (and,
// looser, policy names): 1 to max characters of letters, digits and
// +=,.@_-.
func checkName(what, name string, maxLen int) error {
	if name == "" || len(name) > maxLen {
		return fmt.Errorf("%w: the %s must be 1 to %d characters long", ErrInvalidInput, what, maxLen)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+=,.@_-", c)
		if !ok {
			return fmt.Errorf("%w: the %s %q may hold only letters, digits and +=,.@_-", ErrInvalidInput, what, name)
		}
	}
	return nil
}

// checkPath applies IAM's rule for paths: "/" or "/a/b/", printable
// ASCII, at most 512 characters.
func checkPath(p string) error {
	if len(p) > maxPathLength || !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") {
		return fmt.Errorf("%w: the path must begin and end with / and be at most %d characters", ErrInvalidInput, maxPathLength)
	}
	for _, c := range p {
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: the path may hold only printable ASCII characters", ErrInvalidInput)
		}
	}
	return nil
}
