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
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// ReservedBucket holds the directory's objects. Its name is no valid S3
// bucket name (the leading dot), so no S3 request can address it; the
// front end leaves it out of listings.
const ReservedBucket = ".strata-iam"

// The directory's objects: one per entity (users/, groups/, roles/
// under the account's segment), access key and OIDC provider, and the
// generation every change moves.
const (
	keysPrefix      = "keys/"
	providersPrefix = "oidc/"
	generationKey   = "generation"
)

// Limits, IAM's own (docs/research/iam-sts.md).
const (
	MaxKeysPerUser    = 2
	maxName           = 64
	maxPathLength     = 512
	maxPolicyName     = 128
	maxPolicyDocument = 2048 // an inline user policy's size in IAM
	maxRolePolicy     = 10240
	maxAttached       = 10 // managed policies on one user, group or role
	maxGroupsPerUser  = 10
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
	// ErrNotAttachable: a managed policy ARN the directory does not know.
	ErrNotAttachable = errors.New("policy not attachable")
)

// Directory is the tenant's IAM directory.
type Directory struct {
	store objlayer.Layer
	seal  sealer
	log   *slog.Logger
	now   func() time.Time

	// declared reports whether a users-file user of that name exists in
	// the account: such a user may be given identity policies here (its
	// keys and grant stay the users file's). Nil: none.
	declared func(account, name string) bool

	// change serialises this process's changes (read, edit, write of an
	// entity, then the generation).
	change sync.Mutex

	mu         sync.RWMutex
	entities   map[entityKey]Entity
	keys       map[string]DirKey   // by access key
	providers  map[string]Provider // by account and URL without its scheme
	generation string              // the generation object's ETag at the last load
	loaded     bool
	// objects are the directory's objects as last read, by name with
	// their ETags: a reload reads again only those whose ETag moved.
	objects map[string]dirObject
	// pending are the objects this process's change wrote (nil data:
	// removed), applied to the loaded directory once the generation moves
	// from the one it was made on (see bump).
	pending map[string]pendingObject
	// fullAt is when the directory was last listed whole.
	fullAt time.Time

	reload sync.Mutex // one reload at a time
}

// NewDirectory is the directory kept in store, its secrets sealed with
// keys derived from the tenant's master keys. Load it before use.
func NewDirectory(store objlayer.Layer, keys MasterKeys, log *slog.Logger) *Directory {
	return &Directory{store: store, seal: sealer{keys: keys, info: sealInfo}, log: log, now: time.Now,
		entities: map[entityKey]Entity{}, keys: map[string]DirKey{}, providers: map[string]Provider{}}
}

// SetDeclared tells the directory which users the users file declares
// (set once, before use).
func (d *Directory) SetDeclared(fn func(account, name string) bool) { d.declared = fn }

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
	d.mu.RLock()
	before := d.objects
	d.mu.RUnlock()
	objects := make(map[string]dirObject, len(before))
	prefixes := []string{keysPrefix, providersPrefix}
	for _, kind := range kinds {
		prefixes = append(prefixes, string(kind)+"s/")
	}
	for _, prefix := range prefixes {
		if err := d.each(ctx, prefix, before, func(name string, o dirObject) { objects[name] = o }); err != nil {
			return err
		}
	}
	d.install(objects, gen, true)
	return nil
}

// install makes objects, at generation gen, the directory served: the
// entities, keys and providers indexed from them (full: they were listed
// whole).
func (d *Directory) install(objects map[string]dirObject, gen string, full bool) {
	entities := map[entityKey]Entity{}
	keys := map[string]DirKey{}
	providers := map[string]Provider{}
	for _, o := range objects {
		switch {
		case o.entity != nil:
			entities[o.entity.key()] = *o.entity
		case o.key != nil:
			keys[o.key.ID] = *o.key
		case o.provider != nil:
			providers[providerKey(o.provider.Account, o.provider.URL)] = *o.provider
		}
	}
	d.mu.Lock()
	d.entities, d.keys, d.providers, d.generation, d.loaded, d.objects = entities, keys, providers, gen, true, objects
	if full {
		d.fullAt = d.now()
	}
	d.mu.Unlock()
}

// pendingObject is an object a change wrote (data nil: removed).
type pendingObject struct {
	data []byte
	etag string
}

// fullListEvery bounds how long a server may miss another's change in the
// one race conditional writes leave open (two servers moving the
// generation at the same moment): past it, the next refresh lists the
// directory whole.
const fullListEvery = 30 * time.Second

// applyPending applies this process's change to the loaded directory,
// now at generation gen: what it wrote is parsed, nothing is read.
func (d *Directory) applyPending(gen string, pending map[string]pendingObject) error {
	d.mu.RLock()
	objects := make(map[string]dirObject, len(d.objects)+len(pending))
	for name, o := range d.objects {
		objects[name] = o
	}
	d.mu.RUnlock()
	for name, p := range pending {
		if p.data == nil {
			delete(objects, name)
			continue
		}
		o, err := d.parse(name, p.data)
		if err != nil {
			return err
		}
		o.etag = p.etag
		objects[name] = o
	}
	d.install(objects, gen, false)
	return nil
}

// dirObject is one object of the directory, parsed.
type dirObject struct {
	etag     string
	entity   *Entity
	key      *DirKey
	provider *Provider
}

// parse decodes one of the directory's objects by its prefix.
func (d *Directory) parse(name string, data []byte) (dirObject, error) {
	switch {
	case strings.HasPrefix(name, keysPrefix):
		var k DirKey
		if err := json.Unmarshal(data, &k); err != nil {
			return dirObject{}, err
		}
		secret, err := d.seal.open(k.Sealed, k.SealedWith, k.ID)
		if err != nil {
			return dirObject{}, fmt.Errorf("access key %s: %w", k.ID, err)
		}
		k.Secret = string(secret)
		return dirObject{key: &k}, nil
	case strings.HasPrefix(name, providersPrefix):
		var p Provider
		err := json.Unmarshal(data, &p)
		return dirObject{provider: &p}, err
	}
	for _, kind := range kinds {
		if strings.HasPrefix(name, string(kind)+"s/") {
			var e Entity
			err := json.Unmarshal(data, &e)
			e.Kind = kind
			return dirObject{entity: &e}, err
		}
	}
	return dirObject{}, fmt.Errorf("an object of no known kind")
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

// each calls fn with every object under prefix, parsed: read again only
// when its ETag differs from the one in known.
func (d *Directory) each(ctx context.Context, prefix string, known map[string]dirObject, fn func(name string, o dirObject)) error {
	marker := ""
	for {
		res, err := d.store.ListObjects(ctx, ReservedBucket, prefix, marker, "", 1000)
		if errors.Is(err, objlayer.ErrBucketNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("IAM directory: listing %s: %w", prefix, err)
		}
		for _, info := range res.Objects {
			if o, ok := known[info.Name]; ok && o.etag == info.ETag && info.ETag != "" {
				fn(info.Name, o)
				continue
			}
			data, err := d.read(ctx, info.Name)
			if errors.Is(err, objlayer.ErrObjectNotFound) {
				continue // removed since the listing
			}
			var o dirObject
			if err == nil {
				o, err = d.parse(info.Name, data)
			}
			if err != nil {
				return fmt.Errorf("IAM directory: %s: %w", info.Name, err)
			}
			o.etag = info.ETag
			fn(info.Name, o)
		}
		if !res.IsTruncated {
			return nil
		}
		marker = res.NextMarker
	}
}

func (d *Directory) read(ctx context.Context, key string) ([]byte, error) {
	return objlayer.ReadObject(ctx, d.store, ReservedBucket, key)
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
	same := d.loaded && gen == d.generation && d.now().Sub(d.fullAt) < fullListEvery
	d.mu.RUnlock()
	if same {
		return nil
	}
	return d.load(ctx)
}

// changing runs a change of this process's, on the latest directory,
// then moves the generation so that every server reloads.
func (d *Directory) changing(ctx context.Context, fn func() error) error {
	d.change.Lock()
	defer d.change.Unlock()
	if err := d.Refresh(ctx); err != nil {
		return err
	}
	d.pending = map[string]pendingObject{}
	defer func() { d.pending = nil }()
	if err := fn(); err != nil {
		return err
	}
	return d.bump(ctx)
}

// errMoved: the generation moved under a change (another server changed
// the directory too).
var errMoved = errors.New("the IAM directory changed meanwhile")

// bump writes a new generation object, if the generation is still the
// one the change was made on, and applies the change to what was loaded
// (every other server lists the directory again, reading only the objects
// that changed); when another server moved it meanwhile, it lists the
// directory too.
func (d *Directory) bump(ctx context.Context) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	d.mu.RLock()
	base := d.generation
	d.mu.RUnlock()
	info, err := d.put(ctx, generationKey, fmt.Appendf(nil, "%x", b), func(cur *objlayer.ObjectInfo) error {
		if cur == nil && base == "" || cur != nil && !cur.DeleteMarker && cur.ETag == base {
			return nil
		}
		return errMoved
	})
	if err == nil {
		// Read back: of two servers moving it at once, the one whose
		// generation did not stay lists the directory.
		if gen, gerr := d.generationTag(ctx); gerr == nil && gen == info.ETag {
			return d.applyPending(gen, d.pending)
		}
	} else if !errors.Is(err, errMoved) {
		return err
	} else if _, err := d.put(ctx, generationKey, fmt.Appendf(nil, "%x", b), nil); err != nil {
		return err
	}
	return d.Load(ctx)
}

// write stores one of the directory's objects, making the reserved
// bucket first when it is missing (a StatBucket is a cached read).
func (d *Directory) write(ctx context.Context, key string, data []byte, cond func(*objlayer.ObjectInfo) error) error {
	info, err := d.put(ctx, key, data, cond)
	if err == nil && d.pending != nil {
		d.pending[key] = pendingObject{data: data, etag: info.ETag}
	}
	return err
}

func (d *Directory) put(ctx context.Context, key string, data []byte, cond func(*objlayer.ObjectInfo) error) (objlayer.ObjectInfo, error) {
	if err := objlayer.EnsureBucket(ctx, d.store, ReservedBucket); err != nil {
		return objlayer.ObjectInfo{}, fmt.Errorf("IAM directory: %w", err)
	}
	info, err := d.store.PutObject(ctx, ReservedBucket, key, bytes.NewReader(data), int64(len(data)),
		objlayer.PutOptions{Meta: map[string]string{"content-type": "application/json"}, Condition: cond})
	if err != nil && !errors.Is(err, ErrEntityExists) && !errors.Is(err, errMoved) {
		return info, fmt.Errorf("IAM directory: writing %s: %w", key, err)
	}
	return info, err
}

func (d *Directory) remove(ctx context.Context, key string) error {
	_, err := d.store.DeleteObject(ctx, ReservedBucket, key, nil, objlayer.DeleteUnversioned)
	if err != nil && !errors.Is(err, objlayer.ErrObjectNotFound) {
		return fmt.Errorf("IAM directory: removing %s: %w", key, err)
	}
	if d.pending != nil {
		d.pending[key] = pendingObject{}
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
