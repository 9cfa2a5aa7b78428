package posix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// A bucket is a top-level directory with a valid bucket name; its record
// (objlayer.BucketInfo) is the directory's attributes. A directory made
// with mkdir is a bucket too: it has no attributes, and belongs to the
// root account.

// Bucket attribute names (versitygw's, unless said otherwise).
const (
	attrACL        = "acl"
	attrPolicy     = "policy"
	attrCORS       = "cors"
	attrBucketLock = "bucket-lock"
	attrOwnership  = "ownership"
	attrVersioning = "versioning" // one byte: 1 Enabled, 0 Suspended
	// The gateway's and ours.
	attrLifecycle    = "strata-lifecycle"
	attrEncryption   = "strata-encryption"
	attrPublicAccess = "strata-public-access-block"
	attrCreated      = "strata-created" // RFC 3339, when the bucket was created through S3
	attrNotification = "strata-notification"
	attrReplication  = "strata-replication"
)

// bucketAttr reports whether an attribute is part of a bucket's record
// (the others, versitygw's website among them, are left alone).
func bucketAttr(name string) bool {
	switch name {
	case attrACL, attrPolicy, attrCORS, attrBucketLock, attrOwnership, attrVersioning, attrTagging,
		attrLifecycle, attrEncryption, attrPublicAccess, attrCreated, attrNotification, attrReplication:
		return true
	}
	return false
}

// encodeBucket turns a bucket's record into its attributes. The owner is
// the Owner of the ACL document (versitygw's auth.ACL JSON, which the
// front end keeps): set into it when they differ, and an ACL granting the
// owner full control made when there is none.
func encodeBucket(b objlayer.BucketInfo, created bool) map[string][]byte {
	out := map[string][]byte{}
	put := func(name string, v []byte) {
		if len(v) > 0 {
			out[name] = v
		}
	}
	put(attrACL, aclWithOwner(b.ACL, b.Owner))
	put(attrPolicy, b.Policy)
	put(attrCORS, b.CORS)
	put(attrBucketLock, b.ObjectLock)
	put(attrOwnership, []byte(b.Ownership))
	switch b.Versioning {
	case "Enabled":
		out[attrVersioning] = []byte{1}
	case "Suspended":
		out[attrVersioning] = []byte{0}
	}
	if len(b.Tags) > 0 {
		out[attrTagging], _ = json.Marshal(b.Tags)
	}
	put(attrLifecycle, b.Lifecycle)
	put(attrEncryption, b.Encryption)
	put(attrPublicAccess, b.PublicAccessBlock)
	put(attrNotification, b.Notification)
	put(attrReplication, b.Replication)
	if created && !b.Created.IsZero() {
		out[attrCreated] = []byte(b.Created.UTC().Format(time.RFC3339Nano))
	}
	return out
}

// decodeBucket reads a bucket's record from its attributes; fi is its
// directory's (whose time is the creation time of a bucket made before
// the time was kept, as versitygw reported it).
func decodeBucket(name string, attrs map[string][]byte, fi os.FileInfo) objlayer.BucketInfo {
	b := objlayer.BucketInfo{
		Name: name, Created: fi.ModTime().UTC(),
		ACL: attrs[attrACL], Policy: attrs[attrPolicy], CORS: attrs[attrCORS], ObjectLock: attrs[attrBucketLock],
		Ownership: string(attrs[attrOwnership]), Lifecycle: attrs[attrLifecycle], Encryption: attrs[attrEncryption],
		PublicAccessBlock: attrs[attrPublicAccess], Notification: attrs[attrNotification],
		Replication: attrs[attrReplication],
	}
	if raw := attrs[attrCreated]; raw != nil {
		if t, err := time.Parse(time.RFC3339Nano, string(raw)); err == nil {
			b.Created = t.UTC()
		}
	}
	if v := attrs[attrVersioning]; len(v) > 0 {
		switch v[0] {
		case 1:
			b.Versioning = "Enabled"
		case 0:
			b.Versioning = "Suspended"
		}
	}
	if raw := attrs[attrTagging]; raw != nil {
		_ = json.Unmarshal(raw, &b.Tags)
	}
	b.Owner = aclOwner(b.ACL)
	return b
}

// aclOwner is the Owner of an ACL document ("" without one: root's).
func aclOwner(acl []byte) string {
	var doc struct{ Owner string }
	if len(acl) == 0 || json.Unmarshal(acl, &doc) != nil {
		return ""
	}
	return doc.Owner
}

// aclWithOwner is an ACL document naming owner as its Owner: as given
// when it does, with the Owner replaced otherwise, and versitygw's
// document of a new bucket (the owner's full control) when there is none.
func aclWithOwner(acl []byte, owner string) []byte {
	if owner == "" || aclOwner(acl) == owner {
		return acl
	}
	if len(acl) == 0 {
		doc := vgwACL{Owner: owner, Grantees: []vgwGrantee{{Permission: "FULL_CONTROL", Access: owner, Type: "CanonicalUser"}}}
		b, _ := json.Marshal(doc)
		return b
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(acl, &doc) != nil {
		return acl
	}
	doc["Owner"], _ = json.Marshal(owner)
	b, _ := json.Marshal(doc)
	return b
}

// vgwACL is versitygw's auth.ACL document, fields in its order.
type vgwACL struct {
	Owner    string
	Grantees []vgwGrantee
}

type vgwGrantee struct {
	Permission, Access, Type string
}

// CreateBucket creates a bucket's directory with its record
// (ErrBucketExists when the name is taken, by a bucket or anything else).
// What a bucket of that name left behind when it was removed through
// POSIX (sidecar attributes, versions) is removed first: it is not the
// new bucket's.
func (l *Layer) CreateBucket(ctx context.Context, info objlayer.BucketInfo) error {
	name := info.Name
	if !validBucketName(name) && !objlayer.IsInternalBucket(name) {
		return fmt.Errorf("%w: %q is not a valid bucket name", objlayer.ErrInvalidKey, name)
	}
	unlock, err := l.lockBucket(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Lstat(l.bucketPath(name)); err == nil {
		return fmt.Errorf("%w: %s", objlayer.ErrBucketExists, name)
	}
	if err := l.removeBucketLeftovers(name); err != nil {
		return err
	}
	if err := os.Mkdir(l.bucketPath(name), 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", objlayer.ErrBucketExists, name)
		}
		return mapNoSpace(err)
	}
	if info.Created.IsZero() {
		info.Created = time.Now()
	}
	p := l.bucketPlace(name)
	for attr, v := range encodeBucket(info, true) {
		if err := l.attrs.set(p, nil, attr, v); err != nil {
			_ = os.Remove(l.bucketPath(name))
			_ = l.removeBucketLeftovers(name)
			return fmt.Errorf("creating bucket %s: %w", name, mapNoSpace(err))
		}
	}
	if l.fsync {
		if err := syncDir(l.bucketPath(name)); err != nil {
			return err
		}
		return syncDir(l.root)
	}
	return nil
}

// removeBucketLeftovers removes what a bucket keeps outside its
// directory: its versions and its sidecar attributes.
func (l *Layer) removeBucketLeftovers(name string) error {
	dirs := []string{filepath.Join(l.versions, name)}
	if l.sidecar != "" {
		dirs = append(dirs, filepath.Join(l.sidecar, name), filepath.Join(l.sidecar, l.versionsSide, name))
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	return nil
}

// StatBucket returns a bucket's record.
func (l *Layer) StatBucket(ctx context.Context, name string) (objlayer.BucketInfo, error) {
	if err := l.contain(name, ""); err != nil {
		return objlayer.BucketInfo{}, err
	}
	b, _, err := l.readBucket(name)
	return b, err
}

func (l *Layer) readBucket(name string) (objlayer.BucketInfo, map[string][]byte, error) {
	fi, err := os.Lstat(l.bucketPath(name))
	if err != nil || !fi.IsDir() {
		return objlayer.BucketInfo{}, nil, fmt.Errorf("%w: %s", objlayer.ErrBucketNotFound, name)
	}
	attrs, err := l.attrs.all(l.bucketPlace(name), nil)
	if err != nil {
		if notFound(err) {
			return objlayer.BucketInfo{}, nil, fmt.Errorf("%w: %s", objlayer.ErrBucketNotFound, name)
		}
		return objlayer.BucketInfo{}, nil, err
	}
	return decodeBucket(name, attrs, fi), attrs, nil
}

// UpdateBucket changes a bucket's record through fn as one
// read-modify-write, under the bucket's lock (shared by every replica):
// the attributes that changed are written, those emptied removed.
func (l *Layer) UpdateBucket(ctx context.Context, name string, fn func(b *objlayer.BucketInfo)) error {
	if err := l.contain(name, ""); err != nil {
		return err
	}
	unlock, err := l.lockBucket(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	b, have, err := l.readBucket(name)
	if err != nil {
		return err
	}
	old := b
	b.ACL, b.Policy, b.CORS, b.ObjectLock = bytes.Clone(b.ACL), bytes.Clone(b.Policy), bytes.Clone(b.CORS), bytes.Clone(b.ObjectLock)
	b.Lifecycle, b.Encryption, b.PublicAccessBlock = bytes.Clone(b.Lifecycle), bytes.Clone(b.Encryption), bytes.Clone(b.PublicAccessBlock)
	b.Notification, b.Replication = bytes.Clone(b.Notification), bytes.Clone(b.Replication)
	b.Tags = maps.Clone(b.Tags)
	fn(&b)
	b.Name = name
	_, hadCreated := have[attrCreated]
	want := encodeBucket(b, hadCreated || !b.Created.Equal(old.Created))
	if err := replaceAttrs(l.attrs, l.bucketPlace(name), nil, have, want, bucketAttr); err != nil {
		return fmt.Errorf("updating bucket %s: %w", name, mapNoSpace(err))
	}
	return nil
}

// ListBuckets lists every top-level directory with a valid bucket name
// (those made through POSIX too), in name order.
func (l *Layer) ListBuckets(ctx context.Context) ([]objlayer.BucketInfo, error) {
	ents, err := os.ReadDir(l.root)
	if err != nil {
		return nil, err
	}
	var out []objlayer.BucketInfo
	for _, e := range ents {
		if !e.IsDir() || !validBucketName(e.Name()) {
			continue
		}
		b, _, err := l.readBucket(e.Name())
		if errors.Is(err, objlayer.ErrBucketNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// DeleteBucket removes an empty bucket: nothing in it but the staging
// directory, nor in its versions directory (ErrBucketNotEmpty otherwise).
// Uploads in progress go with it. The directory is removed with rmdir, so
// an object written meanwhile keeps the bucket (ErrBucketNotEmpty).
func (l *Layer) DeleteBucket(ctx context.Context, name string) error {
	if err := l.contain(name, ""); err != nil {
		return err
	}
	unlock, err := l.lockBucket(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	versions := filepath.Join(l.versions, name)
	for _, d := range []string{l.bucketPath(name), versions} {
		empty, err := emptyBut(d, stagingDir)
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("%w: %s", objlayer.ErrBucketNotEmpty, name)
		}
	}
	if err := os.RemoveAll(l.stagingPath(name)); err != nil {
		return err
	}
	if err := os.Remove(l.bucketPath(name)); err != nil {
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%w: %s", objlayer.ErrBucketNotEmpty, name)
		}
		return err
	}
	if err := l.removeBucketLeftovers(name); err != nil {
		return err
	}
	if l.fsync {
		return syncDir(l.root)
	}
	return nil
}

// emptyBut reports whether a directory holds nothing but skip (a missing
// directory is empty).
func emptyBut(dir, skip string) (bool, error) {
	f, err := os.Open(dir)
	if notFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == skip })
	return len(names) == 0, nil
}
