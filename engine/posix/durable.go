package posix

import (
	"path/filepath"
	"strings"
)

// Durability (Options.Fsync). versitygw never synced anything: an
// acknowledged object survived a crash of the process, not of the machine
// (on NFS, close() already sends the data to the server). With Fsync a
// version's data and attributes are synced before it is published
// (fsync of the temp file covers its xattrs; sidecar files are synced as
// they are written), and after publication every directory from its
// parent up to the bucket, since a new prefix creates directories whose
// own entries are new too. Archived versions are synced before the
// version replacing them is published.

// syncUp syncs the directories of a key, from its parent (the directory
// itself for a directory object) up to the bucket.
func (l *Layer) syncUp(bucket, key string) error {
	bdir := l.bucketPath(bucket)
	dir := filepath.Dir(l.objectPath(bucket, key))
	if strings.HasSuffix(key, "/") {
		dir = l.objectPath(bucket, key)
	}
	for strings.HasPrefix(dir, bdir) {
		// A directory pruned meanwhile (the key deleted) has nothing to sync.
		if err := syncDir(dir); err != nil && !notFound(err) {
			return err
		}
		if dir == bdir {
			break
		}
		dir = filepath.Dir(dir)
	}
	return nil
}

// syncChain syncs dir and its parents up to and including stop (the
// directories of an archived version, made as it was archived).
func syncChain(dir, stop string) error {
	for strings.HasPrefix(dir, stop) {
		if err := syncDir(dir); err != nil && !notFound(err) {
			return err
		}
		if dir == stop {
			break
		}
		dir = filepath.Dir(dir)
	}
	return nil
}
