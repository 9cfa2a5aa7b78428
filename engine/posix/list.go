package posix

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// pastPrefix sorts after every UTF-8 key it is appended to a prefix of:
// 0xff never occurs in UTF-8.
const pastPrefix = "\xff"

// commonPrefix is the common prefix key rolls up into, if any.
func commonPrefix(key, prefix, delimiter string) (string, bool) {
	if delimiter == "" || !strings.HasPrefix(key, prefix) {
		return "", false
	}
	if i := strings.Index(key[len(prefix):], delimiter); i >= 0 {
		return key[:len(prefix)+i+len(delimiter)], true
	}
	return "", false
}

// listCursor turns a marker that is itself a common prefix (a NextMarker)
// into a cursor past everything under it.
func listCursor(marker, prefix, delimiter string) string {
	if cp, ok := commonPrefix(marker, prefix, delimiter); ok && cp == marker {
		return marker + pastPrefix
	}
	return marker
}

// ListObjects lists the latest versions (no delete markers) in key order
// after marker, grouping keys by delimiter after prefix, at most maxKeys
// entries; NextMarker is the last key or common prefix returned, and the
// list is truncated only when another entry follows. With delimiter '/' a
// directory is a common prefix without being read, as versitygw listed
// it: an empty directory (or one holding only delete markers) shows as
// one.
func (l *Layer) ListObjects(ctx context.Context, bucket, prefix, marker, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	s := &lister{l: l, bucket: bucket, prefix: prefix, delimiter: delimiter, max: maxKeys,
		cursor: listCursor(marker, prefix, delimiter)}
	return s.run(ctx)
}

// ListObjectVersions lists every version and delete marker in key order,
// each key's newest first (its current version, IsLatest, then the
// archived ones in versitygw's order), after (keyMarker, versionMarker).
// Only keys with a current version are listed: archived versions are
// found from the key, and a key is found in the bucket's tree.
func (l *Layer) ListObjectVersions(ctx context.Context, bucket, prefix, keyMarker string, versionMarker *[16]byte, delimiter string, maxKeys int) (objlayer.ListResult, error) {
	s := &lister{l: l, bucket: bucket, prefix: prefix, delimiter: delimiter, max: maxKeys, versions: true,
		cursor: listCursor(keyMarker, prefix, delimiter)}
	if err := l.contain(bucket, ""); err != nil {
		return objlayer.ListResult{}, err
	}
	if _, err := os.Stat(filepath.Join(l.versions, bucket)); err == nil {
		s.archives = true
	}
	if versionMarker != nil && keyMarker != "" && s.cursor == keyMarker && maxKeys > 0 && checkKey(keyMarker) == nil {
		// The rest of the marker key's versions first.
		vs, err := s.keyVersions(keyMarker)
		if err != nil {
			return objlayer.ListResult{}, err
		}
		rest := objlayer.VersionsAfter(vs, *versionMarker, func(v objlayer.ObjectInfo) ([16]byte, time.Time) {
			return v.VersionID, v.ModTime
		})
		if !s.emitVersions(keyMarker, rest) {
			return s.res, nil
		}
	}
	return s.run(ctx)
}

// lister is one page of a listing.
type lister struct {
	l                         *Layer
	bucket, prefix, delimiter string
	max                       int
	// cursor: every key up to it is listed (or skipped) already.
	cursor string
	// versions lists every version; archives: the bucket has a versions
	// directory.
	versions, archives bool
	res                objlayer.ListResult
	err                error
}

func (s *lister) run(ctx context.Context) (objlayer.ListResult, error) {
	if err := s.l.contain(s.bucket, ""); err != nil {
		return objlayer.ListResult{}, err
	}
	if s.max <= 0 || !prefixCanMatch(s.prefix) {
		return s.res, nil
	}
	relDir := s.prefix[:strings.LastIndexByte(s.prefix, '/')+1]
	if relDir != "" {
		switch err := s.l.contain(s.bucket, relDir); {
		case errors.Is(err, objlayer.ErrOutsideBucket), errors.Is(err, objlayer.ErrKeyTooLong):
			return s.res, nil // the prefix leads out of the bucket, or to no storable key: nothing to list
		case err != nil:
			return objlayer.ListResult{}, err
		}
	}
	bucketDir := s.l.bucketPath(s.bucket)
	if relDir != "" && relDir == s.prefix && relDir > s.cursor {
		// The prefix's own directory, as a directory object.
		if !s.dirObject(relDir) {
			return s.res, s.err
		}
	}
	_, err := s.l.walk(ctx, bucketDir, relDir, s.cursor, s.visit)
	if err == nil {
		err = s.err
	}
	if err != nil {
		return objlayer.ListResult{}, err
	}
	return s.res, nil
}

// full reports that the page has no room for another entry (and is
// therefore truncated: one is at hand).
func (s *lister) full() bool {
	if len(s.res.Objects)+len(s.res.CommonPrefixes) < s.max {
		return false
	}
	s.res.IsTruncated = true
	return true
}

func (s *lister) visit(key string, e dirEntry) walkAction {
	if !strings.HasPrefix(key, s.prefix) {
		return walkSkip
	}
	if key <= s.cursor {
		if e.dir && within(s.cursor, key) {
			return walkOn // the cursor is inside
		}
		return walkSkip
	}
	if cp, ok := commonPrefix(key, s.prefix, s.delimiter); ok {
		// A directory's common prefix is every key's below it.
		if s.full() {
			return walkStop
		}
		s.res.CommonPrefixes = append(s.res.CommonPrefixes, cp)
		s.res.NextMarker, s.res.NextVersionMarker = cp, ""
		s.cursor = cp + pastPrefix
		return walkSkip
	}
	if e.dir {
		if !s.dirObject(key) {
			return walkStop
		}
		return walkOn
	}
	if !s.file(key, e) {
		return walkStop
	}
	return walkOn
}

// dirObject lists a directory that is a directory object; false when the
// page is full (or failed).
func (s *lister) dirObject(key string) bool {
	p := s.l.treePlace(s.bucket, key)
	attrs, err := s.l.attrs.all(p, nil)
	if err != nil {
		if notFound(err) {
			return true
		}
		s.err = err
		return false
	}
	if _, ok := attrs[attrETag]; !ok {
		return true
	}
	fi, err := os.Stat(p.path)
	if err != nil {
		return true
	}
	st := decodeObject(attrs, 0)
	info := objlayer.ObjectInfo{Bucket: s.bucket, Name: key, ModTime: fi.ModTime().UTC(), ETag: st.etag, Meta: st.meta, IsLatest: s.versions}
	return s.emitVersions(key, []objlayer.ObjectInfo{info})
}

// file lists a file's latest version, or all its versions; false when the
// page is full (or failed).
func (s *lister) file(key string, e dirEntry) bool {
	if e.link && s.l.contain(s.bucket, key) != nil {
		return true // leads out of the bucket: not listed
	}
	if !e.regular && !e.link {
		return true // a FIFO, a socket, a device
	}
	if s.versions {
		vs, err := s.keyVersions(key)
		if err != nil {
			s.err = err
			return false
		}
		return s.emitVersions(key, vs)
	}
	cur, err := s.l.readCurrent(s.bucket, key)
	if err != nil {
		s.err = err
		return false
	}
	if cur == nil || cur.st.deleteMarker {
		s.cursor = key
		return true
	}
	return s.emitVersions(key, []objlayer.ObjectInfo{infoOf(s.bucket, key, cur.fi, cur.st)})
}

// emitVersions adds versions of key to the page; false when the page
// filled first.
func (s *lister) emitVersions(key string, vs []objlayer.ObjectInfo) bool {
	for _, v := range vs {
		if s.full() {
			return false
		}
		s.res.Objects = append(s.res.Objects, v)
		s.res.NextMarker = key
		if s.versions {
			s.res.NextVersionMarker = objlayer.FormatVersionID(v.VersionID)
		}
	}
	s.cursor = key
	return true
}

// keyVersions are a key's versions, newest first: none without a current
// version (versitygw's listing did not see them either).
func (s *lister) keyVersions(key string) ([]objlayer.ObjectInfo, error) {
	if strings.HasSuffix(key, "/") {
		h, err := s.l.openDirObject(s.bucket, key, nil)
		switch {
		case errors.Is(err, objlayer.ErrObjectNotFound):
			return nil, nil // a directory made in passing, or gone
		case err != nil:
			return nil, err
		}
		info := h.Info()
		info.IsLatest = true
		return []objlayer.ObjectInfo{info}, nil
	}
	cur, err := s.l.readCurrent(s.bucket, key)
	if err != nil || cur == nil {
		return nil, err
	}
	latest := infoOf(s.bucket, key, cur.fi, cur.st)
	latest.IsLatest = true
	out := []objlayer.ObjectInfo{latest}
	if !s.archives {
		return out, nil
	}
	arch, err := s.l.archivedVersions(s.bucket, key)
	if err != nil {
		return nil, err
	}
	for _, a := range arch {
		attrs, err := s.l.attrs.all(s.l.versionPlace(s.bucket, key, a.name), nil)
		if err != nil {
			if notFound(err) {
				continue
			}
			return nil, err
		}
		info := infoOf(s.bucket, key, a.fi, decodeObject(attrs, a.fi.Size()))
		info.VersionID = a.id // named by its file, as versitygw listed it
		out = append(out, info)
	}
	return out, nil
}

// infoOf describes a version from its file and attributes.
func infoOf(bucket, key string, fi os.FileInfo, st stored) objlayer.ObjectInfo {
	info := objlayer.ObjectInfo{Bucket: bucket, Name: key, VersionID: st.versionID, ModTime: fi.ModTime().UTC(),
		Size: fi.Size(), ETag: st.etag, Meta: st.meta, DeleteMarker: st.deleteMarker, Parts: st.mp.parts()}
	if st.deleteMarker {
		info.Size, info.ETag, info.Parts = 0, "", nil
	}
	return info
}
