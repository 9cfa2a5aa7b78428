package posix

import (
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/strata-storage/strata/engine/bodymd5"
)

// etagFiller gives files created on the filesystem (by NFS clients, HPC
// jobs, rsync) the ETag an S3 upload of the same bytes would have had:
// the MD5 of their content, computed on first read and stored like any
// other, so later listings show it. Files up to syncLimit are hashed
// before the answer; larger ones in the background, one at a time, so a
// HEAD never waits minutes (the answer then carries no ETag yet).
type etagFiller struct {
	l         *Layer
	syncLimit int64

	mu      sync.Mutex
	pending map[string]bool
	queue   chan place
}

func newETagFiller(l *Layer, syncLimit int64) *etagFiller {
	return &etagFiller{l: l, syncLimit: syncLimit, pending: map[string]bool{}, queue: make(chan place, 256)}
}

// ensure returns the ETag of an open version without one, computing and
// storing it when the file is small enough; "" when it is not known yet.
func (e *etagFiller) ensure(p place, f *os.File, fi os.FileInfo) string {
	if fi.Size() > e.syncLimit {
		e.later(p)
		return ""
	}
	return e.compute(p, f, fi)
}

// compute hashes a file and stores the ETag, unless the file changed
// while it was read (a writer is still at work: a later read retries).
func (e *etagFiller) compute(p place, f *os.File, before os.FileInfo) string {
	h := bodymd5.Shared.New()
	defer h.Close()
	bp := e.l.buffer()
	defer e.l.bufs.Put(bp)
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, before.Size()+1), *bp); err != nil {
		return ""
	}
	after, err := f.Stat()
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return ""
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if e.l.attrs.isSidecar() {
		// Stored by path: only while the path still names this file.
		if now, err := os.Stat(p.path); err != nil || !os.SameFile(now, after) {
			return etag
		}
	}
	if err := e.l.attrs.set(p, f, attrETag, quote(etag)); err != nil {
		// A read-only file or volume: served anyway, computed again next time.
		e.l.log.Debug("computed ETag not stored", "path", p.path, "err", err)
	}
	return etag
}

// later queues a large file for hashing in the background.
func (e *etagFiller) later(p place) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending[p.path] {
		return
	}
	select {
	case e.queue <- p:
		e.pending[p.path] = true
	default: // full: a later read asks again
	}
}

// run hashes queued files until stop.
func (e *etagFiller) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case p := <-e.queue:
			e.background(p)
		}
	}
}

func (e *etagFiller) background(p place) {
	defer func() {
		e.mu.Lock()
		delete(e.pending, p.path)
		e.mu.Unlock()
	}()
	f, err := os.Open(p.path)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	if _, err := e.l.attrs.get(p, f, attrETag); errors.Is(err, errNoAttr) {
		e.compute(p, f, fi)
	}
}
