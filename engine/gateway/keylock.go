package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The posix backend commits a PUT (and a multipart completion) under a
// publish lock per key: flock on <root>/.vgwlocks/<sha256 of the bucket in
// hex>/<first byte of sha256 of the key in hex>, a file shared by every
// replica on the volume. Its deletes take no lock, and a delete of a version
// moves files too: deleting the newest version brings the one before it back
// to the key's path. Two deletes of one key's versions at once could so bring
// back a version the other had just deleted (both answered 204, the version
// listed again), and a delete beside a PUT's commit could leave a "null"
// version without an ETag (ceph/s3-tests'
// test_versioned_concurrent_object_create_and_remove failed about one run in
// three). So deletes here take the same lock, on the same file: they exclude
// each other and the backend's commits, on this replica (flock locks belong to
// open files, so two opens in one process exclude each other) and on the
// others (NFSv4 maps flock to byte-range locks; docs/gateway.md).
//
// The lock file's name is versitygw's layout (backend/posix/objlock.go at the
// version go.mod names); TestDeleteTakesThePublishLock fails if it moves.

const publishLockDir = ".vgwlocks"

// PublishLockPath is the lock file of bucket/key under root.
func PublishLockPath(root, bucket, key string) string {
	b := sha256.Sum256([]byte(bucket))
	k := sha256.Sum256([]byte(key))
	return filepath.Join(root, publishLockDir, hex.EncodeToString(b[:]), fmt.Sprintf("%02x", k[0]))
}

// lockKey takes bucket/key's publish lock; the function returned releases
// it. A filesystem without advisory locks (NFS mounted with nolock) leaves
// the delete unlocked, as the backend does its commits.
func (b *Backend) lockKey(ctx context.Context, bucket, key string) (func(), error) {
	path := PublishLockPath(b.vol.dir, bucket, key)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("publish lock of %s/%s: %w", bucket, key, err)
	}
	// Polled, not blocking: a blocked flock holds an OS thread and does not
	// see the request's context.
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			if errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) {
				return func() {}, nil
			}
			return nil, fmt.Errorf("publish lock of %s/%s: %w", bucket, key, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 16*time.Millisecond)
	}
}
