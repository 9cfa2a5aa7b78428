package gateway

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/versity/versitygw/backend/meta"
)

// etagKey is the attribute the posix backend keeps an object's ETag in.
const etagKey = "etag"

// etagFiller gives files created on the filesystem (by NFS clients, HPC
// jobs, rsync) the ETag an S3 upload of the same bytes would have had:
// the MD5 of their content, computed on first HEAD or GET and stored like
// any other, so later listings show it. Files up to syncLimit are hashed
// before the answer; larger ones in the background, one at a time, so a
// HEAD never waits minutes (the answer then carries no ETag yet).
type etagFiller struct {
	root      string // absolute
	meta      meta.MetadataStorer
	syncLimit int64
	log       *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	queue   chan [2]string
}

func newETagFiller(root string, ms meta.MetadataStorer, syncLimit int64, log *slog.Logger) *etagFiller {
	e := &etagFiller{root: root, meta: ms, syncLimit: syncLimit, log: log, pending: map[string]bool{}, queue: make(chan [2]string, 256)}
	go e.background()
	return e
}

// ensure returns the stored ETag of bucket/key, computing and storing it
// first when there is none. "" when it is not known (yet): not a regular
// file, being written, too large to hash now, or not storable.
func (e *etagFiller) ensure(bucket, key string) string {
	f, err := os.Open(filepath.Join(e.root, bucket, key))
	if err != nil {
		return ""
	}
	defer f.Close()
	if b, err := e.meta.RetrieveAttribute(f, bucket, key, etagKey); err == nil && len(b) > 0 {
		return string(b)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	if fi.Size() > e.syncLimit {
		e.later(bucket, key)
		return ""
	}
	return e.compute(f, fi, bucket, key)
}

// compute hashes an open file and stores the ETag, unless the file changed
// while it was read (a writer is still at work: the next read retries).
func (e *etagFiller) compute(f *os.File, before os.FileInfo, bucket, key string) string {
	h := md5.New()
	buf := make([]byte, 256<<10)
	if _, err := io.CopyBuffer(h, f, buf); err != nil {
		return ""
	}
	after, err := f.Stat()
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return ""
	}
	etag := "\"" + hex.EncodeToString(h.Sum(nil)) + "\""
	if err := e.meta.StoreAttribute(f, bucket, key, etagKey, []byte(etag)); err != nil {
		// Read-only file or volume: serve it anyway, recomputing next time.
		e.log.Debug("computed ETag not stored", "bucket", bucket, "key", key, "err", err)
	}
	return etag
}

// later queues a large file for hashing in the background.
func (e *etagFiller) later(bucket, key string) {
	id := bucket + "/" + key
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[id] {
		return
	}
	select {
	case e.queue <- [2]string{bucket, key}:
		e.pending[id] = true
	default: // full: a later read asks again
	}
}

func (e *etagFiller) background() {
	for j := range e.queue {
		bucket, key := j[0], j[1]
		if f, err := os.Open(filepath.Join(e.root, bucket, key)); err == nil {
			_, err := e.meta.RetrieveAttribute(f, bucket, key, etagKey)
			if fi, serr := f.Stat(); errors.Is(err, meta.ErrNoSuchKey) && serr == nil && fi.Mode().IsRegular() {
				e.compute(f, fi, bucket, key)
			}
			f.Close()
		}
		e.mu.Lock()
		delete(e.pending, bucket+"/"+key)
		e.mu.Unlock()
	}
}
