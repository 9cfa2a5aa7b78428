package posix

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/bodymd5"
	"github.com/strata-storage/strata/engine/objlayer"
)

// emptyMD5 is the ETag of no bytes: a directory object's.
const emptyMD5 = "d41d8cd98f00b204e9800998ecf8427e"

// dirContentType is what a directory object's Content-Type defaults to
// (AWS's and versitygw's).
const dirContentType = "application/x-directory"

// PutObject stores an object version read from r (size -1: unknown): the
// body goes to a temp file with its attributes, which is published at the
// key's path under the key's publish lock, after the version it replaces
// was archived as versioning asks. A versioned write (opts.VersionID set)
// archives the current version whatever it is; a null one archives a
// current version that has an ID (a bucket whose versioning is suspended)
// and replaces the null version wherever it is. Nothing is stored when
// the body fails, is shorter or longer than size, or AfterBody refuses it.
func (l *Layer) PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	if err := checkKey(object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if err := l.contain(bucket, object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if strings.HasSuffix(object, "/") {
		return l.putDirObject(ctx, bucket, object, r, size, opts)
	}
	if err := l.keyFree(bucket, object); err != nil {
		return objlayer.ObjectInfo{}, err
	}
	pending := &pendingTemp{dir: l.stagingPath(bucket), key: object}
	defer pending.discard()
	n, sum, err := l.readBody(pending, r, size, opts.ETag == "" && opts.BodyETag == nil)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	tmp, err := pending.file()
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	meta := cloneMeta(opts.Meta)
	if opts.AfterBody != nil {
		if err := opts.AfterBody(meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	etag := opts.ETagFor()
	if etag == "" {
		etag = sum
	}
	attrs := encodeMeta(meta, nil, bindOf(etag, n))
	attrs[attrETag] = quote(etag)
	if opts.VersionID != objlayer.NullVersion {
		attrs[attrVersionID] = []byte(versionName(opts.VersionID))
	}
	fi, err := l.commit(ctx, bucket, object, tmp, attrs, opts.VersionID, opts.ModTime, opts.Condition)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	return objlayer.ObjectInfo{Bucket: bucket, Name: object, VersionID: opts.VersionID, ModTime: fi.ModTime().UTC(),
		Size: n, ETag: etag, Meta: meta}, nil
}

func cloneMeta(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// keyFree refuses early (before a body is read) a key whose place is
// taken: a parent that is a file, or a directory at the key itself that
// is a directory object or holds entries. An empty directory made in
// passing is no object: the version replaces it.
func (l *Layer) keyFree(bucket, key string) error {
	path := l.objectPath(bucket, key)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: a parent of %s is an object", objlayer.ErrKeyConflict, key)
	case errors.Is(err, unix.ENAMETOOLONG):
		return fmt.Errorf("%w: %s", objlayer.ErrKeyTooLong, key)
	case notFound(err):
		return nil // nothing there: the key is free
	case err != nil:
		return fmt.Errorf("looking at %s/%s: %w", bucket, key, mapNoSpace(err))
	case !fi.IsDir():
		return nil // a version replaces a file
	}
	if _, err := l.attrs.get(l.treePlace(bucket, key), nil, attrETag); err == nil || !dirEmpty(path) {
		return fmt.Errorf("%w: %s is a directory holding other objects", objlayer.ErrKeyConflict, key)
	}
	return nil
}

// dirEmpty reports whether a directory has no entries.
func dirEmpty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// commit publishes a written temp file as the key's current version,
// attributes attrs: under the key's publish lock it archives the version
// it replaces as versioning asks (see PutObject), removes a null version
// it replaces from the versions directory, and links the file at the
// key's path. A multipart completion commits the same way.
func (l *Layer) commit(ctx context.Context, bucket, key string, tmp *tempFile, attrs map[string][]byte, versionID [16]byte, modTime time.Time,
	cond func(*objlayer.ObjectInfo) error) (os.FileInfo, error) {
	if err := l.prepare(tmp, attrs, modTime); err != nil {
		return nil, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return nil, err
	}
	path := l.objectPath(bucket, key)
	if err := mkdirBelow(l.bucketPath(bucket), filepath.Dir(path)); err != nil {
		return nil, conflictErr(key, err)
	}
	unlock, err := l.lockKey(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	err = l.replaceCurrent(bucket, key, tmp, attrs, versionID, cond)
	unlock()
	if err != nil {
		return nil, err
	}
	if l.fsync {
		if err := l.syncUp(bucket, key); err != nil {
			return nil, err
		}
	}
	l.dirs.wrote(parentRel(bucket, key))
	return fi, nil
}

// prepare readies a temp file for publication: its attributes (xattr
// mode: on the inode before it has a name, so the version appears with
// them or not at all), its time (zero: now) and, in durable mode, all of
// it on disk.
func (l *Layer) prepare(tmp *tempFile, attrs map[string][]byte, modTime time.Time) error {
	if !l.attrs.isSidecar() {
		for name, v := range attrs {
			if err := l.attrs.set(place{path: tmp.Name()}, tmp.File, name, v); err != nil {
				return mapNoSpace(err)
			}
		}
	}
	if !modTime.IsZero() {
		if err := tmp.setMtime(modTime); err != nil {
			return err
		}
	}
	if l.fsync {
		if err := tmp.Sync(); err != nil {
			return mapNoSpace(err)
		}
	}
	return nil
}

// replaceCurrent is commit's part under the lock; cond, when set, is
// asked first about the version it would replace.
func (l *Layer) replaceCurrent(bucket, key string, tmp *tempFile, attrs map[string][]byte, versionID [16]byte, cond func(*objlayer.ObjectInfo) error) error {
	path := l.objectPath(bucket, key)
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if err := l.keyFree(bucket, key); err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return conflictErr(key, err)
		}
	}
	cur, err := l.readCurrent(bucket, key)
	if err != nil {
		return err
	}
	if cond != nil {
		var info *objlayer.ObjectInfo
		if cur != nil {
			i := infoOf(bucket, key, cur.fi, cur.st)
			info = &i
		}
		if err := cond(info); err != nil {
			return err
		}
	}
	if cur != nil {
		if _, versioned := cur.attrs[attrVersionID]; versioned || versionID != objlayer.NullVersion {
			if err := l.archive(bucket, key, cur); err != nil {
				return err
			}
		}
	}
	if versionID == objlayer.NullVersion {
		if _, _, err := l.removeVersion(bucket, key, "null"); err != nil {
			return err
		}
	}
	if l.attrs.isSidecar() {
		// Attributes are files beside the data: the new version's
		// replace the old one's (versitygw left those it did not set).
		p := l.treePlace(bucket, key)
		have, err := l.attrs.all(p, nil)
		if err != nil {
			return err
		}
		if err := replaceAttrs(l.attrs, p, nil, have, attrs, func(string) bool { return true }); err != nil {
			return mapNoSpace(err)
		}
	}
	if err := tmp.publish(path, l.bucketPath(bucket)); err != nil {
		return conflictErr(key, err)
	}
	return nil
}

// conflictErr maps a failure to make a key's path: a file where a
// directory must be, or a directory where the file goes.
func conflictErr(key string, err error) error {
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		return fmt.Errorf("%w: %s: %w", objlayer.ErrKeyConflict, key, err)
	}
	return mapNoSpace(err)
}

// parentRel is the directory (relative to the root) a key's file is in.
func parentRel(bucket, key string) string {
	key = strings.TrimSuffix(key, "/")
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return bucket + "/" + key[:i]
	}
	return bucket
}

// readBody writes a request body to f: exactly size bytes when size >= 0
// (ErrIncompleteBody, ErrBodyTooLong), and always on to the body's end,
// where the front end's verifying readers report a bad checksum or
// signature instead of io.EOF. It returns the bytes written and, with
// hashMD5, their MD5 in hex.
//
// The body's first headBytes are gathered in a small buffer before any
// is written, and the layer's 256 KiB copy buffer is taken only once they
// have come: a client trickling its body holds a few KiB, and, when f is
// a pendingTemp, no file (1,500 such uploads holding a copy buffer and a
// temp file each stalled every other request of a gateway).
func (l *Layer) readBody(f io.Writer, r io.Reader, size int64, hashMD5 bool) (int64, string, error) {
	head := headBufs.Get().(*[headBytes]byte)
	var bp *[]byte
	defer func() {
		headBufs.Put(head)
		if bp != nil {
			l.bufs.Put(bp)
		}
	}()
	var h hash.Hash
	if hashMD5 {
		sum := bodymd5.Shared.New()
		defer sum.Close()
		h = sum
	}
	var n int64
	held := 0 // bytes of the head gathered, not yet written
	for {
		var k int
		var rerr error
		if bp == nil {
			k, rerr = r.Read(head[held:])
		} else {
			k, rerr = r.Read(*bp)
		}
		n += int64(k)
		if size >= 0 && n > size {
			return n, "", fmt.Errorf("%w: more than %d bytes", objlayer.ErrBodyTooLong, size)
		}
		var out []byte
		if bp == nil {
			held += k
			if held < headBytes && rerr == nil {
				continue
			}
			out = head[:held]
		} else {
			out = (*bp)[:k]
		}
		// A body that failed or came short is not stored: what came of it
		// is not written (nor a temp file made for it).
		whole := rerr == nil || errors.Is(rerr, io.EOF) && (size < 0 || n == size)
		if len(out) > 0 && whole {
			if h != nil {
				h.Write(out)
			}
			if _, err := f.Write(out); err != nil {
				return n, "", mapNoSpace(err)
			}
		}
		switch {
		case rerr == nil:
			if bp == nil {
				bp = l.buffer()
			}
			continue
		case errors.Is(rerr, io.EOF):
			if size >= 0 && n < size {
				return n, "", fmt.Errorf("%w: %d of %d bytes", objlayer.ErrIncompleteBody, n, size)
			}
			if h == nil {
				return n, "", nil
			}
			return n, hex.EncodeToString(h.Sum(nil)), nil
		case errors.Is(rerr, io.ErrUnexpectedEOF):
			return n, "", fmt.Errorf("%w: %w", objlayer.ErrIncompleteBody, rerr)
		default:
			return n, "", rerr
		}
	}
}

// headBytes is how much of a body is read before a copy buffer is taken.
const headBytes = 16 << 10

var headBufs = sync.Pool{New: func() any { return new([headBytes]byte) }}

// buffer is a copy buffer from the layer's pool.
func (l *Layer) buffer() *[]byte {
	if b, ok := l.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 256<<10)
	return &b
}

// putDirObject stores a directory object ("a/b/"): a directory with an
// ETag attribute (what tells it from a directory made in passing), no
// data, no versions (versitygw kept none for them: the version is always
// the null one). Its Content-Type defaults to application/x-directory.
func (l *Layer) putDirObject(ctx context.Context, bucket, key string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	n, _, err := l.readBody(io.Discard, r, size, false)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if n > 0 {
		return objlayer.ObjectInfo{}, fmt.Errorf("%w: %s names a directory, which holds no data", objlayer.ErrInvalidKey, key)
	}
	meta := cloneMeta(opts.Meta)
	if opts.AfterBody != nil {
		if err := opts.AfterBody(meta); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	if _, ok := meta[objlayer.MetaContentType]; !ok {
		meta[objlayer.MetaContentType] = dirContentType
	}
	etag := opts.ETagFor()
	if etag == "" {
		etag = emptyMD5
	}
	attrs := encodeMeta(meta, nil, bindOf(etag, 0))
	attrs[attrETag] = quote(etag)
	path := l.objectPath(bucket, key)
	unlock, err := l.lockKey(ctx, bucket, key)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	err = l.writeDirObject(bucket, key, path, attrs, opts.ModTime)
	unlock()
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if l.fsync {
		if err := l.syncUp(bucket, key); err != nil {
			return objlayer.ObjectInfo{}, err
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	l.dirs.wrote(parentRel(bucket, key))
	return objlayer.ObjectInfo{Bucket: bucket, Name: key, ModTime: fi.ModTime().UTC(), ETag: etag, Meta: meta}, nil
}

func (l *Layer) writeDirObject(bucket, key, path string, attrs map[string][]byte, modTime time.Time) error {
	if err := mkdirBelow(l.bucketPath(bucket), path); err != nil {
		return conflictErr(key, err)
	}
	p := l.treePlace(bucket, key)
	have, err := l.attrs.all(p, nil)
	if err != nil {
		return err
	}
	managed := func(name string) bool { return metaAttr(name) || name == attrETag }
	if err := replaceAttrs(l.attrs, p, nil, have, attrs, managed); err != nil {
		return mapNoSpace(err)
	}
	if !modTime.IsZero() {
		return os.Chtimes(path, time.Time{}, modTime)
	}
	return nil
}
