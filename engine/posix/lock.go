package posix

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

// Locks shared by every replica on a volume: flock on files of the volume
// (NFSv4 maps flock to byte-range locks held by the server). flock locks
// belong to open files, so two opens in one process exclude each other
// too; a process-local slot is taken first all the same, so that waiters
// of one process queue instead of polling the file.
//
// The publish lock of a key is versitygw's, on the same file: every
// commit of a key (PUT, completion) and every change of its versions
// (delete, archive, restore, metadata update) holds it, here and on
// replicas not yet upgraded, whose commits versitygw locked and whose
// deletes the gateway of earlier releases locked. Without it two
// deletes of one key's versions could bring back a version the other had
// just deleted, and a delete beside a commit could leave a version
// without its ETag.

// PublishLockPath is the lock file of bucket/key under root:
// <root>/.vgwlocks/<sha256 of the bucket, hex>/<first byte of sha256 of the key, hex>.
func PublishLockPath(root, bucket, key string) string {
	b := sha256.Sum256([]byte(bucket))
	k := sha256.Sum256([]byte(key))
	return filepath.Join(root, publishDir, hex.EncodeToString(b[:]), hex.EncodeToString(k[:1]))
}

// lockKey takes bucket/key's publish lock; the function returned releases
// it.
func (l *Layer) lockKey(ctx context.Context, bucket, key string) (func(), error) {
	k := sha256.Sum256([]byte(key))
	return l.flock(ctx, l.keySlots[k[0]], PublishLockPath(l.root, bucket, key))
}

// lockBucket takes the lock of a bucket's record (UpdateBucket's
// read-modify-write): <root>/.strata/locks/<bucket>, a file of ours.
func (l *Layer) lockBucket(ctx context.Context, bucket string) (func(), error) {
	v, _ := l.bucketSlots.LoadOrStore(bucket, newSlot())
	return l.flock(ctx, v.(chan struct{}), filepath.Join(l.root, hiddenDir, locksDir, bucket))
}

func newSlot() chan struct{} {
	s := make(chan struct{}, 1)
	s <- struct{}{}
	return s
}

// flock takes the process-local slot, then an exclusive flock on path
// (created with its directory as needed), polled so that a wait sees the
// context. A filesystem without advisory locks (NFS mounted with nolock)
// leaves only the local slot, as versitygw did, with a warning once.
func (l *Layer) flock(ctx context.Context, slot chan struct{}, path string) (func(), error) {
	select {
	case <-slot:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	local := func() { slot <- struct{}{} }
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		local()
		return nil, fmt.Errorf("lock %s: %w", path, mapNoSpace(err))
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close(); local() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			if errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
				l.noLocks.Do(func() {
					l.log.Warn("the volume has no advisory locks: writes of one key exclude each other only within this replica", "err", err)
				})
				return local, nil
			}
			local()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			local()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 16*time.Millisecond)
	}
}

// keySlots are the process-local slots of the publish locks, one per key
// shard (as the lock files are; buckets share them).
type keySlots [256]chan struct{}

func newKeySlots() *keySlots {
	var s keySlots
	for i := range s {
		s[i] = newSlot()
	}
	return &s
}
