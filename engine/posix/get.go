package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/strata-storage/strata/engine/objlayer"
)

// OpenObject resolves a version (the latest when versionID is nil) and
// keeps its file open until the handle is closed: reads return that
// version's bytes even if it is overwritten, archived or deleted
// meanwhile (a file's inode outlives its names while it is open). A
// delete marker resolves too (Info().DeleteMarker); it has no bytes.
func (l *Layer) OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.Handle, error) {
	return l.open(bucket, object, versionID, true)
}

// OpenObjectMeta resolves a version whose bytes are not read (a HEAD):
// the file is closed once its attributes are read, and the handle's
// WriteRange fails (but for a version of no bytes).
func (l *Layer) OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.Handle, error) {
	return l.open(bucket, object, versionID, false)
}

func (l *Layer) open(bucket, key string, versionID *[16]byte, withData bool) (objlayer.Handle, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := l.contain(bucket, key); err != nil {
		return nil, err
	}
	if strings.HasSuffix(key, "/") {
		return l.openDirObject(bucket, key, versionID)
	}
	// Twice at most: a version may move between the key's path and the
	// versions directory between the two looks.
	for try := 0; ; try++ {
		cur, err := l.openVersionFile(l.treePlace(bucket, key))
		if err != nil {
			return nil, readErr(bucket, key, err)
		}
		if versionID == nil || cur != nil && !cur.st.badID && cur.st.versionID == *versionID {
			if cur == nil {
				return nil, fmt.Errorf("%w: %s/%s", objlayer.ErrObjectNotFound, bucket, key)
			}
			return l.handleFor(bucket, key, l.treePlace(bucket, key), cur, withData), nil
		}
		if cur != nil {
			cur.f.Close()
		}
		name := versionName(*versionID)
		p := l.versionPlace(bucket, key, name)
		v, err := l.openVersionFile(p)
		if err != nil {
			return nil, readErr(bucket, key, err)
		}
		if v != nil {
			return l.handleFor(bucket, key, p, v, withData), nil
		}
		if try == 1 {
			return nil, fmt.Errorf("%w: %s/%s version %s", objlayer.ErrObjectNotFound, bucket, key, objlayer.FormatVersionID(*versionID))
		}
	}
}

// opened is a version's file, open, with what its attributes say.
type opened struct {
	f  *os.File
	fi os.FileInfo
	st stored
}

// openVersionFile opens a version's file and reads its attributes: nil
// when there is no such file (or something else than a file is there).
// In sidecar mode attributes are read by path, so the path is checked to
// still name the file opened: attributes and bytes are one version's.
func (l *Layer) openVersionFile(p place) (*opened, error) {
	for try := 0; ; try++ {
		f, err := os.Open(p.path)
		if notFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return nil, nil
		}
		attrs, err := l.attrs.all(p, f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if l.attrs.isSidecar() && try < 3 {
			if again, err := os.Stat(p.path); err != nil || !os.SameFile(fi, again) {
				f.Close()
				continue
			}
		}
		return &opened{f: f, fi: fi, st: decodeObject(attrs, fi.Size())}, nil
	}
}

// handleFor makes the handle of an opened version; a file without an
// ETag (made through POSIX) gets one first (etag.go).
func (l *Layer) handleFor(bucket, key string, p place, v *opened, withData bool) *handle {
	info := objlayer.ObjectInfo{
		Bucket: bucket, Name: key, VersionID: v.st.versionID, ModTime: v.fi.ModTime().UTC(),
		Size: v.fi.Size(), ETag: v.st.etag, Meta: v.st.meta, DeleteMarker: v.st.deleteMarker, Parts: v.st.mp.parts(),
	}
	if info.DeleteMarker {
		// versitygw's markers kept the bytes of the version they hid.
		info.Size, info.ETag, info.Parts = 0, "", nil
		v.f.Close()
		return &handle{info: info}
	}
	if info.ETag == "" {
		info.ETag = l.etags.ensure(p, v.f, v.fi)
	}
	if !withData {
		v.f.Close()
		return &handle{info: info}
	}
	return &handle{info: info, f: v.f}
}

// openDirObject resolves a directory object: a directory with an ETag
// attribute. It has one version, the null one.
func (l *Layer) openDirObject(bucket, key string, versionID *[16]byte) (objlayer.Handle, error) {
	missing := fmt.Errorf("%w: %s/%s", objlayer.ErrObjectNotFound, bucket, key)
	if versionID != nil && *versionID != objlayer.NullVersion {
		return nil, missing
	}
	fi, err := os.Stat(l.objectPath(bucket, key))
	if err != nil {
		return nil, readErr(bucket, key, err)
	}
	if !fi.IsDir() {
		return nil, missing
	}
	attrs, err := l.attrs.all(l.treePlace(bucket, key), nil)
	if err != nil {
		return nil, err
	}
	if _, ok := attrs[attrETag]; !ok {
		return nil, missing // a directory made in passing is no object
	}
	st := decodeObject(attrs, 0)
	return &handle{info: objlayer.ObjectInfo{Bucket: bucket, Name: key, ModTime: fi.ModTime().UTC(), ETag: st.etag, Meta: st.meta}}, nil
}

// copyBufs are WriteRange's copy buffers.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// handle is a resolved version: its info, and (OpenObject) its open file.
type handle struct {
	info objlayer.ObjectInfo
	f    *os.File
	mu   sync.Mutex // the file's offset
}

// errNoData answers a read through a handle that holds no file.
var errNoData = errors.New("posix: this handle was opened without the version's data")

func (h *handle) Info() objlayer.ObjectInfo { return h.info }

// Direct reports a handle that reads its version's file (objlayer.DirectHandle).
func (h *handle) Direct() bool { return h.f != nil }

var _ objlayer.DirectHandle = (*handle)(nil)

// WriteRange writes length bytes from offset (length -1: to the end of the
// version as resolved).
func (h *handle) WriteRange(ctx context.Context, w io.Writer, offset, length int64) error {
	if length < 0 {
		length = h.info.Size - offset
	}
	if offset < 0 || length < 0 || offset+length > h.info.Size {
		return fmt.Errorf("posix: range %d+%d outside the version's %d bytes", offset, length, h.info.Size)
	}
	if length == 0 {
		return nil
	}
	if h.f == nil {
		return errNoData
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	// A writer that reads for itself (ReadFrom) gets the file; others get
	// it in large pieces (io.Copy's own are 32 KiB: a syscall pair each).
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	n, err := io.CopyBuffer(w, io.LimitReader(h.f, length), *bp)
	if err == nil && n < length {
		// Truncated in place through POSIX since it was resolved.
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Close releases the version's file.
func (h *handle) Close() error {
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
