package posix

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// A version is written into a file no one sees, given its attributes
// there, and published under its name in one step: readers see the old
// version or the new one, whole. Where the filesystem offers O_TMPFILE the
// file has no name until it is linked; elsewhere (NFS) it is a named temp
// file in the staging directory, renamed into place. Both as versitygw's.

// filePerm is the mode of every file written (not umasked, as versitygw
// set it).
const filePerm = 0o644

// tempFile is a file being written before it is published.
type tempFile struct {
	*os.File
	// named is the temp file's path; "" for an O_TMPFILE.
	named string
	// dir is the staging directory it was made in (same filesystem as
	// the name it gets).
	dir string
}

// createTemp makes a temp file in dir (created as needed) for key, whose
// hash names a fallback temp file as versitygw named it.
func createTemp(dir, key string) (*tempFile, error) {
	open := func() (int, error) { return unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, filePerm) }
	fd, err := open()
	if errors.Is(err, unix.ENOENT) {
		// One level: a bucket removed meanwhile is not made again.
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, mapNoSpace(err)
		}
		fd, err = open()
	}
	switch {
	case err == nil:
		f := os.NewFile(uintptr(fd), "/proc/self/fd/"+strconv.Itoa(fd))
		if err := f.Chmod(filePerm); err != nil {
			f.Close()
			return nil, err
		}
		return &tempFile{File: f, dir: dir}, nil
	case errors.Is(err, unix.EROFS), errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return nil, mapNoSpace(&os.PathError{Op: "open", Path: dir, Err: err})
	}
	// No O_TMPFILE here: a named temp file.
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, mapNoSpace(err)
	}
	sum := sha256.Sum256([]byte(key))
	f, err := os.CreateTemp(dir, hex.EncodeToString(sum[:])+".")
	if err != nil {
		return nil, mapNoSpace(err)
	}
	return &tempFile{File: f, named: f.Name(), dir: dir}, nil
}

// pendingTemp is a temp file made at its first write (or when asked for),
// so an upload whose body has not begun to arrive holds none: making one
// takes the filesystem's orphan-list lock (ext4), and 1,500 slow uploads
// made at once queued every other request of the gateway behind it.
type pendingTemp struct {
	dir, key string
	tmp      *tempFile
}

func (p *pendingTemp) Write(b []byte) (int, error) {
	t, err := p.file()
	if err != nil {
		return 0, err
	}
	return t.Write(b)
}

// file is the temp file, made now if no byte has come.
func (p *pendingTemp) file() (*tempFile, error) {
	if p.tmp == nil {
		t, err := createTemp(p.dir, p.key)
		if err != nil {
			return nil, err
		}
		p.tmp = t
	}
	return p.tmp, nil
}

// discard drops the temp file if one was made and not published.
func (p *pendingTemp) discard() {
	if p.tmp != nil {
		p.tmp.discard()
	}
}

// discard drops an unpublished temp file (a published one is left alone:
// its name is gone from the staging directory).
func (t *tempFile) discard() {
	t.Close()
	if t.named != "" {
		_ = os.Remove(t.named)
	}
}

// setMtime sets the file's modification time (its version's time).
func (t *tempFile) setMtime(mt time.Time) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mt.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, t.Name(), ts, 0)
}

// dirLocks keep this process's prunes of emptied directories off a
// directory a write has made (or found) for its file until the file is
// in it: a write holds the lock of its file's directory shared from
// making the directory to linking the file, a prune holds a directory's
// exclusively while it removes it. Striped by path; a prune holds one at
// a time and a write takes none while holding one, so they cannot
// deadlock. Other processes on a shared volume (gateway replicas) are
// met by the retries instead.
var dirLocks [64]sync.RWMutex

func dirLock(dir string) *sync.RWMutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dir))
	return &dirLocks[h.Sum32()%uint32(len(dirLocks))]
}

// removeEmptyDir removes dir if it is empty, under its lock.
func removeEmptyDir(dir string) error {
	l := dirLock(dir)
	l.Lock()
	defer l.Unlock()
	return os.Remove(dir)
}

// publish gives the temp file its name, replacing what was there. The
// parent directory must exist; with base, one removed meanwhile (an
// emptied key directory being pruned, by another process or before this
// write took its directory's lock) is made again below base.
func (t *tempFile) publish(target, base string) error {
	if base != "" {
		l := dirLock(filepath.Dir(target))
		l.RLock()
		defer l.RUnlock()
	}
	var err error
	for try := 0; try < 100; try++ {
		if t.named != "" {
			if err = os.Chmod(t.named, filePerm); err == nil {
				err = os.Rename(t.named, target)
				if err == nil {
					t.named = ""
				}
			}
		} else {
			err = linkReplace(t.Name(), target, t.dir)
		}
		if !errors.Is(err, os.ErrNotExist) || base == "" {
			break
		}
		if merr := mkdirBelow(base, filepath.Dir(target)); merr != nil {
			return merr
		}
	}
	return err
}

// mkdirBelow makes dir and the directories between it and base, which
// must exist: a bucket removed meanwhile is not made again by a write
// into it. A directory it made that a delete of a sibling key pruned
// (empty) before the next one went in is made again.
func mkdirBelow(base, dir string) error {
	// Each retry follows a prune that emptied the directory between two
	// system calls of this one: bounded generously, so a busy directory
	// being written and emptied by many clients still gets made.
	var err error
	for range 100 {
		if err = mkdirBelowOnce(base, dir); !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

func mkdirBelowOnce(base, dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	rel, err := filepath.Rel(base, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("posix: %s is not below %s", dir, base)
	}
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is gone", objlayer.ErrBucketNotFound, base)
	}
	cur := base
	for _, seg := range strings.Split(rel, "/") {
		if seg == "." {
			continue
		}
		cur = filepath.Join(cur, seg)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return mapNoSpace(err)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		return err // pruned again meanwhile: ErrNotExist, made again
	} else if !fi.IsDir() {
		return &os.PathError{Op: "mkdir", Path: dir, Err: unix.ENOTDIR}
	}
	return nil
}

// linkReplace links src (an O_TMPFILE's /proc name, or a file) as target,
// replacing what is there: link(2) does not replace, so over an existing
// name the link goes to a hidden name in staging first, renamed over the
// target. (versitygw linked it beside the target as .<name>.sgwtmp.<n>,
// which a crash left in the listing and names over 227 bytes could not
// take.)
func linkReplace(src, target, staging string) error {
	err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, target, unix.AT_SYMLINK_FOLLOW)
	if !errors.Is(err, unix.EEXIST) {
		return pathErr("link", target, err)
	}
	tmp := filepath.Join(staging, ".publish-"+randomHex(8))
	if err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
		return pathErr("link", tmp, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func pathErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
