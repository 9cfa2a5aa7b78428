package posix

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Versions. A key's current version is the file at its path; its
// version-id attribute holds its ID (none: the null version). Older
// versions are files of their own, with their attributes, in
// <versions>/<bucket>/<h[0:2]>/<h[2:4]>/<h[4:6]>/<h>/<ID or "null">, h
// the hex SHA-256 of the key. A delete marker is a version whose file
// carries the delete-marker attribute.
//
// Versions move between the key's path and the versions directory under
// the key's publish lock. versitygw copied their bytes both ways (and a
// delete marker kept the bytes of the object it hid); here a version is
// hard-linked (its inode, bytes, attributes and time stay as they were,
// at no cost for any size) and copied only where a link cannot be made
// (versions on another filesystem). An archived version therefore keeps
// its LastModified, which versitygw reset to the time it was archived.

// keyHash names the directories of a key's versions and uploads.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// versionDir is the directory of a key's archived versions.
func (l *Layer) versionDir(bucket, key string) string {
	h := keyHash(key)
	return filepath.Join(l.versions, bucket, h[:2], h[2:4], h[4:6], h)
}

// versionPlace is an archived version (its file and attributes); name is
// its version name (versionName).
func (l *Layer) versionPlace(bucket, key, name string) place {
	h := keyHash(key)
	rel := filepath.Join(bucket, h[:2], h[2:4], h[4:6], h, name)
	p := place{path: filepath.Join(l.versions, rel)}
	if l.sidecar != "" {
		p.side = filepath.Join(l.sidecar, l.versionsSide, rel, sidecarDir)
		p.stop = filepath.Join(l.sidecar, l.versionsSide, bucket)
	}
	return p
}

// versionsStaging is where versions of a bucket are staged.
func (l *Layer) versionsStaging(bucket string) string {
	return filepath.Join(l.versions, bucket, stagingDir)
}

// current is a key's current version as found under its publish lock.
type current struct {
	path  string
	fi    os.FileInfo // followed through a link
	link  bool        // the key's path is a symbolic link
	attrs map[string][]byte
	st    stored
}

// name is the version's name on the volume: its version-id as stored
// (as versitygw named the archive), or "null".
func (c *current) name() string {
	if raw, ok := c.attrs[attrVersionID]; ok {
		if s := string(raw); s != "" && s != "." && s != ".." && !strings.ContainsRune(s, '/') {
			return s
		}
	}
	return "null"
}

// readCurrent reads a key's current version; nil when there is none (no
// file, or a directory or other non-file at the path).
func (l *Layer) readCurrent(bucket, key string) (*current, error) {
	path := l.objectPath(bucket, key)
	lfi, err := os.Lstat(path)
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, mapNoSpace(err)
	}
	fi := lfi
	if lfi.Mode()&os.ModeSymlink != 0 {
		if fi, err = os.Stat(path); err != nil {
			if notFound(err) {
				return nil, nil // dangling
			}
			return nil, mapNoSpace(err)
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, nil
	}
	attrs, err := l.attrs.all(l.treePlace(bucket, key), nil)
	if err != nil {
		return nil, err
	}
	return &current{path: path, fi: fi, link: lfi.Mode()&os.ModeSymlink != 0, attrs: attrs, st: decodeObject(attrs, fi.Size())}, nil
}

// archived is one of a key's archived versions.
type archived struct {
	name string
	id   [16]byte
	fi   os.FileInfo
}

// archivedVersions lists a key's archived versions newest first, in the
// order versitygw lists them (replicas of both releases must page
// through one listing alike): by name, descending (IDs are time-ordered
// ULIDs), and the null version before the first whose file is older than
// its own, else last. Names that are no version ID are skipped.
func (l *Layer) archivedVersions(bucket, key string) ([]archived, error) {
	ents, err := os.ReadDir(l.versionDir(bucket, key))
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var null *archived
	out := make([]archived, 0, len(ents))
	for i := len(ents) - 1; i >= 0; i-- {
		fi, err := ents[i].Info()
		if err != nil {
			continue // removed meanwhile
		}
		name := ents[i].Name()
		if name == "null" {
			null = &archived{name: name, fi: fi}
			continue
		}
		id, err := objlayer.ParseVersionID(name)
		if err != nil || id == objlayer.NullVersion {
			continue
		}
		out = append(out, archived{name: name, id: id, fi: fi})
	}
	if null != nil {
		at := len(out)
		for i, a := range out {
			if null.fi.ModTime().After(a.fi.ModTime()) {
				at = i
				break
			}
		}
		out = append(out[:at], append([]archived{*null}, out[at:]...)...)
	}
	return out, nil
}

// archive moves a key's current version into its versions directory
// under its name, replacing a version of that name (a crash between an
// archive and what followed it left one). Under the key's publish lock.
func (l *Layer) archive(bucket, key string, cur *current) error {
	dst := l.versionPlace(bucket, key, cur.name())
	if err := os.MkdirAll(filepath.Dir(dst.path), 0o755); err != nil {
		return mapNoSpace(err)
	}
	staging := l.versionsStaging(bucket)
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return mapNoSpace(err)
	}
	err := errLinkRefused
	if !cur.link && !l.noLinks {
		err = linkReplace(cur.path, dst.path, staging)
	}
	switch {
	case err == nil:
		if l.attrs.isSidecar() {
			err = l.moveSidecar(l.treePlace(bucket, key), dst)
		}
	case linkRefused(err):
		err = l.copyVersion(cur.path, l.treePlace(bucket, key), dst, staging, key, l.versions)
	}
	if err != nil {
		return fmt.Errorf("archiving %s/%s: %w", bucket, key, mapNoSpace(err))
	}
	if l.fsync {
		return syncChain(filepath.Dir(dst.path), l.versions)
	}
	return nil
}

// errLinkRefused stands for a version that is copied, not linked (a
// symbolic link at the key's path: its target's bytes are the version).
var errLinkRefused = errors.New("not linked")

// linkRefused reports whether a hard link failed for want of support (the
// versions directory on another filesystem, no links allowed, too many),
// not for a reason a copy would meet too.
func linkRefused(err error) bool {
	return errors.Is(err, errLinkRefused) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.EMLINK) || errors.Is(err, unix.EOPNOTSUPP)
}

// moveSidecar makes dst's sidecar attributes src's (a version linked to
// a new place keeps its xattrs; its sidecar files are copied).
func (l *Layer) moveSidecar(src, dst place) error {
	want, err := l.attrs.all(src, nil)
	if err != nil {
		return err
	}
	have, err := l.attrs.all(dst, nil)
	if err != nil {
		return err
	}
	return replaceAttrs(l.attrs, dst, nil, have, want, func(string) bool { return true })
}

// copyVersion copies a version's bytes, attributes and time from path
// (attributes at from) to dst (below base), through a temp file in
// staging.
func (l *Layer) copyVersion(path string, from, dst place, staging, key, base string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	tmp, err := createTemp(staging, key)
	if err != nil {
		return err
	}
	defer tmp.discard()
	if _, err := io.Copy(tmp.File, src); err != nil {
		return err
	}
	if l.attrs.isSidecar() {
		if err := l.moveSidecar(from, dst); err != nil {
			return err
		}
	} else if err := copyAttrs(l.attrs, from, src, dst, tmp.File); err != nil {
		return err
	}
	if err := tmp.setMtime(fi.ModTime()); err != nil {
		return err
	}
	if l.fsync {
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	return tmp.publish(dst.path, base)
}

// removeVersion removes an archived version (its file, attributes and the
// directories that emptied); gone is false when there was none, marker
// whether it was a delete marker. Under the key's publish lock.
func (l *Layer) removeVersion(bucket, key, name string) (gone, marker bool, err error) {
	p := l.versionPlace(bucket, key, name)
	if _, err := l.attrs.get(p, nil, attrDeleteMarker); err == nil {
		marker = true
	}
	if err := os.Remove(p.path); err != nil {
		if notFound(err) {
			return false, false, nil
		}
		return false, false, err
	}
	if err := l.attrs.drop(p); err != nil {
		return true, marker, err
	}
	l.pruneVersionDirs(bucket, key)
	return true, marker, nil
}

// pruneVersionDirs removes a key's versions directories that emptied.
func (l *Layer) pruneVersionDirs(bucket, key string) {
	stop := filepath.Join(l.versions, bucket)
	for dir := l.versionDir(bucket, key); dir != stop && strings.HasPrefix(dir, stop+"/"); dir = filepath.Dir(dir) {
		if removeEmptyDir(dir) != nil {
			return
		}
	}
}

// removeCurrent deletes a key's current version and brings back its
// newest archived version in its place (the first archivedVersions
// lists, which is what the listing showed next; versitygw brought back
// the last by name, which is "null" whenever a null version is archived,
// however old). Without archived versions the key's emptied directories
// go too, up to the first directory object. Under the key's publish lock.
func (l *Layer) removeCurrent(bucket, key string, cur *current) error {
	arch, err := l.archivedVersions(bucket, key)
	if err != nil {
		return err
	}
	objPlace := l.treePlace(bucket, key)
	if len(arch) == 0 {
		if err := os.Remove(cur.path); err != nil && !notFound(err) {
			return err
		}
		if err := l.attrs.drop(objPlace); err != nil {
			return err
		}
		l.pruneParents(bucket, key)
		return nil
	}
	next := l.versionPlace(bucket, key, arch[0].name)
	staging := l.stagingPath(bucket)
	if err := mkdirBelow(l.bucketPath(bucket), staging); err != nil {
		return err
	}
	err = errLinkRefused
	if !l.noLinks {
		err = linkReplace(next.path, cur.path, staging)
	}
	switch {
	case err == nil:
		if l.attrs.isSidecar() {
			err = l.moveSidecar(next, objPlace)
		}
	case linkRefused(err):
		err = l.copyVersion(next.path, next, objPlace, staging, key, l.bucketPath(bucket))
	}
	if err != nil {
		return fmt.Errorf("restoring %s/%s version %s: %w", bucket, key, arch[0].name, mapNoSpace(err))
	}
	if err := os.Remove(next.path); err != nil && !notFound(err) {
		return err
	}
	if err := l.attrs.drop(next); err != nil {
		return err
	}
	l.pruneVersionDirs(bucket, key)
	if l.fsync {
		return l.syncUp(bucket, key)
	}
	return nil
}

// pruneParents removes the directories of a key that emptied, from its
// parent up to the bucket, stopping at a directory object (a directory
// with an ETag), as versitygw did.
func (l *Layer) pruneParents(bucket, key string) {
	rel := filepath.Dir(strings.TrimSuffix(key, "/"))
	for rel != "." && rel != "/" {
		if _, err := l.attrs.get(l.treePlace(bucket, rel), nil, attrETag); err == nil {
			return
		}
		if removeEmptyDir(filepath.Join(l.root, bucket, rel)) != nil {
			return
		}
		rel = filepath.Dir(rel)
	}
}
