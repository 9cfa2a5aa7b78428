package posix

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Where attributes live. A volume keeps every attribute of a bucket, an
// object, a version, an upload or a part in one of two stores, chosen once
// per volume (layout.go):
//
//   - xattr: the extended attribute user.<name> of the thing's inode, read
//     and written through an open file when there is one (how a temp file
//     gets its attributes before it is published) and by path otherwise
//     (following symbolic links, as versitygw did);
//   - sidecar: the file <sidecar>/<thing's path>/meta/<name>, holding the
//     raw value, written as a temp file renamed into place.
//
// Names are versitygw's without a prefix (etag, version-id, ...); values
// are raw bytes. Both stores answer errNoAttr for an attribute that is not
// set.

// errNoAttr: the attribute is not set.
var errNoAttr = errors.New("attribute not set")

// xattrPrefix is the namespace of the attributes in xattr mode (Linux).
const xattrPrefix = "user."

// place names where a thing's attributes live.
type place struct {
	// path is the thing itself (absolute): its inode holds the xattrs.
	path string
	// side is its sidecar directory (sidecar mode): <...>/meta.
	side string
	// stop is the sidecar directory below which emptied directories are
	// pruned (a bucket's, or a bucket's versions'); "" prunes nothing.
	stop string
}

// attrStore reads and writes attributes. f, when not nil, is the thing's
// open file: the xattr store uses it (an unlinked temp file has no path),
// the sidecar store ignores it.
type attrStore interface {
	get(p place, f *os.File, name string) ([]byte, error)
	// all returns every attribute (in xattr mode every user.* one,
	// foreign ones included, as versitygw copied them).
	all(p place, f *os.File) (map[string][]byte, error)
	set(p place, f *os.File, name string, value []byte) error
	// remove removes an attribute; removing one that is not set is fine.
	remove(p place, f *os.File, name string) error
	// drop removes every attribute of a thing that is gone (sidecar: its
	// files and emptied directories; xattr: nothing, they went with the
	// inode).
	drop(p place) error
	// isSidecar reports whether attributes are files beside the data
	// (written by path, not carried by the inode).
	isSidecar() bool
}

// xattrStore keeps attributes as user xattrs.
type xattrStore struct{}

func (xattrStore) isSidecar() bool { return false }

func (xattrStore) get(p place, f *os.File, name string) ([]byte, error) {
	return getXattr(p.path, f, xattrPrefix+name)
}

// getXattr reads one xattr, growing the buffer when it is too small (a
// value may change size between the size query and the read).
func getXattr(path string, f *os.File, name string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		var n int
		var err error
		if f != nil {
			n, err = unix.Fgetxattr(int(f.Fd()), name, buf)
		} else {
			n, err = unix.Getxattr(path, name, buf)
		}
		switch {
		case err == nil:
			return buf[:n], nil
		case errors.Is(err, unix.ENODATA):
			return nil, errNoAttr
		case errors.Is(err, unix.ERANGE):
			if f != nil {
				n, err = unix.Fgetxattr(int(f.Fd()), name, nil)
			} else {
				n, err = unix.Getxattr(path, name, nil)
			}
			if err != nil {
				return nil, xattrErr("getxattr", path, err)
			}
			buf = make([]byte, n+64)
			continue
		}
		return nil, xattrErr("getxattr", path, err)
	}
}

func (xattrStore) all(p place, f *os.File) (map[string][]byte, error) {
	names, err := listXattrs(p.path, f)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		v, err := getXattr(p.path, f, xattrPrefix+n)
		if errors.Is(err, errNoAttr) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}

// listXattrs lists the names of the user.* xattrs, without the prefix.
func listXattrs(path string, f *os.File) ([]string, error) {
	buf := make([]byte, 1024)
	for {
		var n int
		var err error
		if f != nil {
			n, err = unix.Flistxattr(int(f.Fd()), buf)
		} else {
			n, err = unix.Listxattr(path, buf)
		}
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if err != nil {
			return nil, xattrErr("listxattr", path, err)
		}
		var names []string
		for _, raw := range strings.Split(string(buf[:n]), "\x00") {
			if name, ok := strings.CutPrefix(raw, xattrPrefix); ok && name != "" {
				names = append(names, name)
			}
		}
		return names, nil
	}
}

func (xattrStore) set(p place, f *os.File, name string, value []byte) error {
	var err error
	if f != nil {
		err = unix.Fsetxattr(int(f.Fd()), xattrPrefix+name, value, 0)
	} else {
		err = unix.Setxattr(p.path, xattrPrefix+name, value, 0)
	}
	if err != nil {
		return xattrErr("setxattr "+name, p.path, err)
	}
	return nil
}

func (xattrStore) remove(p place, f *os.File, name string) error {
	var err error
	if f != nil {
		err = unix.Fremovexattr(int(f.Fd()), xattrPrefix+name)
	} else {
		err = unix.Removexattr(p.path, xattrPrefix+name)
	}
	if err != nil && !errors.Is(err, unix.ENODATA) {
		return xattrErr("removexattr "+name, p.path, err)
	}
	return nil
}

func (xattrStore) drop(place) error { return nil }

// xattrErr keeps the errno (so callers can tell ENOENT and ENOSPC) and says
// what failed.
func xattrErr(op, path string, err error) error {
	return &os.PathError{Op: op, Path: path, Err: err}
}

// sidecarStore keeps attributes as files under a sidecar directory.
type sidecarStore struct {
	// fsync syncs each attribute file and its directory before it counts
	// as written (the volume's durable mode).
	fsync bool
}

func (sidecarStore) isSidecar() bool { return true }

func (sidecarStore) get(p place, _ *os.File, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(p.side, name))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil, errNoAttr
	}
	return b, err
}

// all reads every attribute file. Directories in there are the sidecars
// of other keys (key "p/meta/x" keeps its attributes below those of "p"),
// not attributes.
func (sidecarStore) all(p place, _ *os.File) (map[string][]byte, error) {
	ents, err := os.ReadDir(p.side)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.side, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}

// set writes the value to a temp file named after the attribute (mode
// 0600, as versitygw's) and renames it into place: a reader sees the old
// value or the new one.
func (s sidecarStore) set(p place, _ *os.File, name string, value []byte) error {
	if err := os.MkdirAll(p.side, 0o777); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(p.side, name)
	if err != nil {
		return err
	}
	_, err = tmp.Write(value)
	if err == nil && s.fsync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(p.side, name))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("sidecar attribute %s: %w", filepath.Join(p.side, name), err)
	}
	if s.fsync {
		return syncDir(p.side)
	}
	return nil
}

func (s sidecarStore) remove(p place, _ *os.File, name string) error {
	err := os.Remove(filepath.Join(p.side, name))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	s.prune(p)
	return nil
}

// drop removes the attribute files of a thing that is gone, then the
// directories that emptied. Only files: a directory in there is the
// sidecar of another key.
func (s sidecarStore) drop(p place) error {
	ents, err := os.ReadDir(p.side)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(p.side, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	s.prune(p)
	return nil
}

// prune removes the sidecar directory when empty, and its parents up to
// p.stop.
func (sidecarStore) prune(p place) {
	if p.stop == "" {
		_ = os.Remove(p.side)
		return
	}
	for dir := p.side; dir != p.stop && strings.HasPrefix(dir, p.stop+"/"); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			return
		}
	}
}

// replaceAttrs makes a thing's attributes exactly want among those managed
// says are the layer's: changed values are written, managed ones missing
// from want removed; any other (a POSIX user's xattr) is left alone. have
// is what it holds now.
func replaceAttrs(st attrStore, p place, f *os.File, have, want map[string][]byte, managed func(string) bool) error {
	for name, v := range want {
		if old, ok := have[name]; ok && string(old) == string(v) {
			continue
		}
		if err := st.set(p, f, name, v); err != nil {
			return err
		}
	}
	for name := range have {
		if _, keep := want[name]; !keep && managed(name) {
			if err := st.remove(p, f, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyAttrs copies every attribute of src onto dst (a version archived or
// restored by copying its bytes).
func copyAttrs(st attrStore, src place, srcFile *os.File, dst place, dstFile *os.File) error {
	attrs, err := st.all(src, srcFile)
	if err != nil {
		return err
	}
	for name, v := range attrs {
		if err := st.set(dst, dstFile, name, v); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
