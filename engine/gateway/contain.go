package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/versity/versitygw/s3err"
	"golang.org/x/sys/unix"
)

// Errors of keys that cannot be stored as files, or that lead out of their
// bucket. They are S3 errors so the front end answers them as they are.
var (
	// ErrKeyNotAPath refuses keys that do not name exactly one file below
	// the bucket.
	ErrKeyNotAPath = s3err.APIError{
		Code: "InvalidArgument",
		Description: "This gateway stores objects as files: a key may not contain NUL bytes, '.' or '..' segments, " +
			"empty segments or a leading '/', nor start with the reserved directory " + stagingDir + ".",
		HTTPStatusCode: 400,
	}
	// ErrOutsideBucket refuses keys (and buckets) reached through a
	// symbolic link that leads out of the bucket.
	ErrOutsideBucket = s3err.APIError{
		Code:           "AccessDenied",
		Description:    "The path of this key leads out of its bucket through a symbolic link.",
		HTTPStatusCode: 403,
	}
)

// stagingDir is where the posix backend stages uploads inside each bucket
// (posix.MetaTmpDir). It is not part of the bucket's S3 namespace.
const stagingDir = ".sgwtmp"

// CheckKey refuses keys that do not map one-to-one onto a path below the
// bucket: NUL bytes (no file name holds one), '.' and '..' segments (they
// would alias or escape), empty segments (a leading '/' or '//' would
// alias), and the staging directory. A trailing '/' is allowed: it names a
// directory object.
func CheckKey(key string) error {
	if key == "" {
		return nil
	}
	if strings.IndexByte(key, 0) >= 0 {
		return ErrKeyNotAPath
	}
	rest := strings.TrimSuffix(key, "/")
	for i := 0; ; i++ {
		seg, tail, more := strings.Cut(rest, "/")
		switch seg {
		case "", ".", "..":
			return ErrKeyNotAPath
		case stagingDir:
			if i == 0 {
				return ErrKeyNotAPath
			}
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

// prefixCanMatch reports whether a listing prefix can match any storable
// key: its directory part must itself be a valid key path. A prefix that
// cannot match lists nothing (and is never handed to the filesystem).
func prefixCanMatch(prefix string) bool {
	if strings.IndexByte(prefix, 0) >= 0 {
		return false
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return true
	}
	return CheckKey(prefix[:i+1]) == nil
}

// volume resolves bucket and key paths below the gateway root and refuses
// those that leave their bucket through a symbolic link. It asks the
// kernel (openat2 with RESOLVE_BENEATH: one system call, no race inside
// the resolution) and falls back to resolving the links itself where
// openat2 is missing (kernels before 5.6, seccomp profiles that block it).
type volume struct {
	dir   string // absolute root directory
	fd    int    // O_PATH descriptor of dir
	noAt2 atomic.Bool
}

func openVolume(dir string) (*volume, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &volume{dir: dir, fd: fd}, nil
}

func (v *volume) close() { _ = unix.Close(v.fd) }

// Contain checks that bucket is a directory of the root reached without a
// symbolic link, and that key, if any, resolves inside it. Paths that do
// not exist (yet) are fine: the backend answers NoSuchBucket or NoSuchKey,
// or creates them below a directory that was checked. It cannot stop a
// user with write access to the volume from swapping a directory for a
// link between this check and the backend's use of the path.
func (v *volume) Contain(bucket, key string) error {
	if !v.noAt2.Load() {
		err := v.containAt2(bucket, key)
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return err
		}
		v.noAt2.Store(true)
	}
	return v.containWalk(bucket, key)
}

// Bucket reports whether bucket is a directory of the root, refusing one
// that is a symbolic link. One fstatat, cheaper than the stat and ACL read
// the posix backend would do for the same question.
func (v *volume) Bucket(bucket string) (bool, error) {
	if bucket == "" || strings.ContainsRune(bucket, '/') || bucket == "." || bucket == ".." {
		return false, nil
	}
	var st unix.Stat_t
	err := unix.Fstatat(v.fd, bucket, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return false, nil
	case err != nil:
		return false, &os.PathError{Op: "stat", Path: filepath.Join(v.dir, bucket), Err: err}
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return false, ErrOutsideBucket
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

func (v *volume) containAt2(bucket, key string) error {
	bfd, err := unix.Openat2(v.fd, bucket, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return resolveErr(err)
	}
	defer unix.Close(bfd)
	if key == "" {
		return nil
	}
	fd, err := unix.Openat2(bfd, key, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return resolveErr(err)
	}
	_ = unix.Close(fd)
	return nil
}

// resolveErr turns a resolution failure into ErrOutsideBucket when the
// path leaves its bucket (EXDEV), is or crosses a refused link (ELOOP), and
// into nil when the backend will answer it better (not found, not a
// directory, too long, no permission).
func resolveErr(err error) error {
	switch {
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return ErrOutsideBucket
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return err
	}
	return nil
}

// maxLinks bounds the links followed in one resolution (the kernel's
// limit).
const maxLinks = 40

// containWalk is Contain without openat2: it resolves the path one
// component at a time with lstat and readlink, refusing what openat2
// refuses (a linked bucket, absolute link targets, '..' above the bucket).
func (v *volume) containWalk(bucket, key string) error {
	bdir := filepath.Join(v.dir, bucket)
	fi, ok := lstat(bdir)
	if !ok {
		return nil
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return ErrOutsideBucket
	}
	pending := splitPath(key)
	var resolved []string
	links := 0
	for len(pending) > 0 {
		seg := pending[0]
		pending = pending[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return ErrOutsideBucket
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		p := filepath.Join(bdir, filepath.Join(resolved...), seg)
		fi, ok := lstat(p)
		if !ok {
			return nil // the rest does not exist: created below a checked directory
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = append(resolved, seg)
			continue
		}
		if links++; links > maxLinks {
			return ErrOutsideBucket
		}
		target, ok := readlink(p)
		if !ok {
			return nil
		}
		if filepath.IsAbs(target) {
			return ErrOutsideBucket
		}
		pending = append(splitPath(target), pending...)
	}
	return nil
}

// lstat and readlink report only whether they worked: a path the walk
// cannot read is the backend's to answer (not found, no permission).
func lstat(p string) (os.FileInfo, bool) {
	fi, err := os.Lstat(p)
	return fi, err == nil
}

func readlink(p string) (string, bool) {
	t, err := os.Readlink(p)
	return t, err == nil
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
