package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// syncObject makes an acknowledged object durable when the gateway runs
// with --fsync: the posix backend never syncs (nor does VersityGW), so
// without it an object survives a crash of the process but not of the
// machine (on NFS, close() already sends the data to the server). It syncs
// the object's file (data and its xattr metadata) and every directory from
// its parent up to the bucket, since a new prefix creates directories
// whose entries are not yet durable either.
func (b *Backend) syncObject(bucket, key string) error {
	bdir := filepath.Join(b.vol.dir, bucket)
	p := filepath.Join(bdir, strings.TrimSuffix(key, "/"))
	if err := syncPath(p); err != nil {
		return err
	}
	for dir := filepath.Dir(p); strings.HasPrefix(dir, bdir); dir = filepath.Dir(dir) {
		if err := syncPath(dir); err != nil {
			return err
		}
		if dir == bdir {
			break
		}
	}
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}
