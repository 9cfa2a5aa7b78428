package posix

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/strata-storage/strata/engine/objlayer"
)

// UpdateObjectMeta changes a version's metadata through fn (tags,
// retention, legal hold, an object ACL: all metadata here), under the
// key's publish lock: the attributes whose value changed are written, and
// those whose key went are removed. The version's bytes, ETag, ID and
// time stay. A delete marker has no metadata to change
// (ErrObjectNotFound, with its info).
func (l *Layer) UpdateObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte, fn func(meta map[string]string) map[string]string) (objlayer.ObjectInfo, error) {
	if err := checkKey(object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if err := l.contain(bucket, object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	unlock, err := l.lockKey(ctx, bucket, object)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	defer unlock()
	p, fi, attrs, err := l.locateVersion(bucket, object, versionID)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	size := fi.Size()
	if fi.IsDir() {
		size = 0
	}
	st := decodeObject(attrs, size)
	info := objlayer.ObjectInfo{Bucket: bucket, Name: object, VersionID: st.versionID, ModTime: fi.ModTime().UTC(),
		Size: size, ETag: st.etag, Meta: st.meta, DeleteMarker: st.deleteMarker, Parts: st.mp.parts()}
	if st.deleteMarker {
		info.Size, info.ETag, info.Parts = 0, "", nil
		return info, fmt.Errorf("%w: %s/%s version %s is a delete marker", objlayer.ErrObjectNotFound, bucket, object,
			objlayer.FormatVersionID(st.versionID))
	}
	meta := fn(maps.Clone(st.meta))
	want := encodeMeta(meta, st.mp, bindOf(st.etag, size))
	managed := func(name string) bool { return metaAttr(name) || name == attrMPMeta && st.mp != nil }
	if err := replaceAttrs(l.attrs, p, nil, attrs, want, managed); err != nil {
		return objlayer.ObjectInfo{}, fmt.Errorf("updating the metadata of %s/%s: %w", bucket, object, mapNoSpace(err))
	}
	info.Meta = meta
	return info, nil
}

// locateVersion finds a version for a change under the key's publish
// lock: where its attributes are, its file's (or directory object's)
// info, and its attributes.
func (l *Layer) locateVersion(bucket, key string, versionID *[16]byte) (place, os.FileInfo, map[string][]byte, error) {
	missing := fmt.Errorf("%w: %s/%s", objlayer.ErrObjectNotFound, bucket, key)
	if strings.HasSuffix(key, "/") {
		p := l.treePlace(bucket, key)
		fi, err := os.Stat(p.path)
		if err != nil || !fi.IsDir() || versionID != nil && *versionID != objlayer.NullVersion {
			return p, nil, nil, missing
		}
		attrs, err := l.attrs.all(p, nil)
		if err != nil {
			return p, nil, nil, err
		}
		if _, ok := attrs[attrETag]; !ok {
			return p, nil, nil, missing
		}
		return p, fi, attrs, nil
	}
	cur, err := l.readCurrent(bucket, key)
	if err != nil {
		return place{}, nil, nil, err
	}
	if versionID == nil || cur != nil && !cur.st.badID && cur.st.versionID == *versionID {
		if cur == nil {
			return place{}, nil, nil, missing
		}
		return l.treePlace(bucket, key), cur.fi, cur.attrs, nil
	}
	p := l.versionPlace(bucket, key, versionName(*versionID))
	fi, err := os.Stat(p.path)
	if err != nil {
		return p, nil, nil, readErr(bucket, key, err)
	}
	attrs, err := l.attrs.all(p, nil)
	if err != nil {
		return p, nil, nil, err
	}
	return p, fi, attrs, nil
}
