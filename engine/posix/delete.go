package posix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/google/uuid"
	"github.com/strata-storage/strata/engine/objlayer"
)

// DeleteObject removes a version, or without versionID acts as mode says:
// DeleteVersioned adds a delete marker with a new (time-ordered) ID,
// DeleteSuspended a null delete marker (replacing the null version), and
// DeleteUnversioned removes the null version. Deleting the current
// version brings back the newest archived one. Everything happens under
// the key's publish lock, so deletes exclude each other and commits on
// every replica. Deleting what does not exist succeeds.
func (l *Layer) DeleteObject(ctx context.Context, bucket, object string, versionID *[16]byte, mode objlayer.DeleteMode) (objlayer.DeleteResult, error) {
	if err := checkKey(object); err != nil {
		return objlayer.DeleteResult{}, err
	}
	if err := l.contain(bucket, object); err != nil {
		return objlayer.DeleteResult{}, err
	}
	unlock, err := l.lockKey(ctx, bucket, object)
	if err != nil {
		return objlayer.DeleteResult{}, err
	}
	defer unlock()
	if strings.HasSuffix(object, "/") {
		return l.deleteDirObject(bucket, object, versionID)
	}
	if mode == objlayer.DeleteMarkerAs && versionID != nil {
		return l.addMarker(bucket, object, *versionID)
	}
	if versionID == nil {
		switch mode {
		case objlayer.DeleteVersioned:
			return l.addMarker(bucket, object, uuid.Must(uuid.NewV7()))
		case objlayer.DeleteSuspended:
			return l.addMarker(bucket, object, objlayer.NullVersion)
		}
		versionID = &objlayer.NullVersion
	}
	res, err := l.deleteVersion(bucket, object, *versionID)
	if err != nil {
		return objlayer.DeleteResult{}, fmt.Errorf("deleting %s/%s: %w", bucket, object, mapNoSpace(err))
	}
	if l.fsync {
		if err := l.syncUp(bucket, object); err != nil {
			return objlayer.DeleteResult{}, err
		}
	}
	return res, nil
}

// deleteVersion removes one version: the current one (bringing back the
// newest archived one) or an archived one.
func (l *Layer) deleteVersion(bucket, key string, id [16]byte) (objlayer.DeleteResult, error) {
	res := objlayer.DeleteResult{VersionID: id}
	cur, err := l.readCurrent(bucket, key)
	if err != nil {
		return res, err
	}
	if cur != nil && !cur.st.badID && cur.st.versionID == id {
		res.DeleteMarker = cur.st.deleteMarker
		return res, l.removeCurrent(bucket, key, cur)
	}
	_, res.DeleteMarker, err = l.removeVersion(bucket, key, versionName(id))
	return res, err
}

// addMarker makes a delete marker the key's current version, archiving
// the version it hides as a write would (commit). The marker is a file of
// no bytes with the delete-marker attribute (versitygw turned the current
// file itself into the marker, bytes kept: POSIX users went on seeing the
// deleted object). A key that has no object gets a marker too, as in S3;
// one whose parent is an object cannot, and has nothing to delete.
func (l *Layer) addMarker(bucket, key string, id [16]byte) (objlayer.DeleteResult, error) {
	path := l.objectPath(bucket, key)
	if err := l.keyFree(bucket, key); err != nil {
		// A directory of other objects: no object of this key, and no
		// place for a marker.
		return objlayer.DeleteResult{}, nil
	}
	if err := mkdirBelow(l.bucketPath(bucket), filepath.Dir(path)); err != nil {
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EEXIST) {
			return objlayer.DeleteResult{}, nil // a parent is a file: no object here
		}
		return objlayer.DeleteResult{}, mapNoSpace(err)
	}
	tmp, err := createTemp(l.stagingPath(bucket), key)
	if err != nil {
		return objlayer.DeleteResult{}, err
	}
	defer tmp.discard()
	attrs := map[string][]byte{attrDeleteMarker: {}}
	if id != objlayer.NullVersion {
		attrs[attrVersionID] = []byte(versionName(id))
	}
	if err := l.prepare(tmp, attrs, time.Time{}); err != nil {
		return objlayer.DeleteResult{}, err
	}
	if err := l.replaceCurrent(bucket, key, tmp, attrs, id, nil); err != nil {
		return objlayer.DeleteResult{}, fmt.Errorf("delete marker of %s/%s: %w", bucket, key, err)
	}
	if l.fsync {
		if err := l.syncUp(bucket, key); err != nil {
			return objlayer.DeleteResult{}, err
		}
	}
	return objlayer.DeleteResult{VersionID: id, DeleteMarker: true}, nil
}

// deleteDirObject removes a directory object: its directory when empty
// (and the emptied directories above it), else only what makes it an
// object (its ETag and metadata), as versitygw did. A directory made in
// passing is no object: nothing to delete.
func (l *Layer) deleteDirObject(bucket, key string, versionID *[16]byte) (objlayer.DeleteResult, error) {
	if versionID != nil && *versionID != objlayer.NullVersion {
		return objlayer.DeleteResult{VersionID: *versionID}, nil
	}
	path := l.objectPath(bucket, key)
	fi, err := os.Lstat(path)
	switch {
	case notFound(err):
		return objlayer.DeleteResult{}, nil // nothing to delete
	case err != nil:
		return objlayer.DeleteResult{}, fmt.Errorf("deleting %s/%s: %w", bucket, key, mapNoSpace(err))
	case !fi.IsDir():
		return objlayer.DeleteResult{}, nil // no directory: no directory object
	}
	p := l.treePlace(bucket, key)
	attrs, err := l.attrs.all(p, nil)
	if err != nil {
		return objlayer.DeleteResult{}, err
	}
	if _, ok := attrs[attrETag]; !ok {
		return objlayer.DeleteResult{}, nil
	}
	if err := os.Remove(path); err == nil {
		if err := l.attrs.drop(p); err != nil {
			return objlayer.DeleteResult{}, err
		}
		l.pruneParents(bucket, key)
		return objlayer.DeleteResult{}, nil
	}
	for name := range attrs {
		if metaAttr(name) || name == attrETag {
			if err := l.attrs.remove(p, nil, name); err != nil {
				return objlayer.DeleteResult{}, err
			}
		}
	}
	return objlayer.DeleteResult{}, nil
}
