package posix

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Keys are paths below their bucket: each '/' a directory level. A key is
// stored only if it maps one-to-one onto such a path and back, and only
// where it resolves inside its bucket.

// maxNameLen is the longest file name component (NAME_MAX).
const maxNameLen = 255

// checkKey refuses keys that do not map one-to-one onto a path below the
// bucket: empty, not UTF-8 (no client could name it back), NUL bytes (no
// file name holds one), '.' and '..' segments (they would alias or
// escape), empty segments (a leading '/' or '//' would alias), and the
// staging directory's name as any segment (it is hidden from listings at
// any depth, as versitygw hid it). A trailing '/' is allowed: it names a
// directory object.
func checkKey(key string) error {
	if key == "" || !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: %q", objlayer.ErrInvalidKey, key)
	}
	rest := strings.TrimSuffix(key, "/")
	for {
		seg, tail, more := strings.Cut(rest, "/")
		switch {
		case seg == "" || seg == "." || seg == ".." || seg == stagingDir:
			return fmt.Errorf("%w: %q: a key is a path below its bucket, without empty, '.', '..' or %s segments",
				objlayer.ErrInvalidKey, key, stagingDir)
		case len(seg) > maxNameLen:
			return fmt.Errorf("%w: a segment of %q is over %d bytes", objlayer.ErrKeyTooLong, key, maxNameLen)
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
	if strings.IndexByte(prefix, 0) >= 0 || !utf8.ValidString(prefix) {
		return false
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return true
	}
	return checkKey(prefix[:i+1]) == nil
}

// validBucketName is S3's strict bucket naming (what versitygw's listing
// required of a directory to show it as a bucket): 3 to 63 characters of
// lower-case letters, digits, '.' and '-', starting and ending with a
// letter or digit, not an IP address. Every hidden directory of the
// layout fails it.
// validBucketName reports a name S3 allows for a bucket. The engine's own
// buckets (objlayer.IsInternalBucket) are not: they stay out of listings
// and out of S3's reach.
func validBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '.' && c != '-' || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return !isIPv4(name)
}

func isIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// errOutside refuses a key (or bucket) reached through a symbolic link
// that leads out of its bucket.
func errOutside(bucket, key string) error {
	return fmt.Errorf("%w: %s/%s leads out of its bucket through a symbolic link", objlayer.ErrOutsideBucket, bucket, key)
}

// contain checks that bucket is a directory of the root reached without
// a symbolic link (ErrOutsideBucket for a link, ErrBucketNotFound for
// nothing) and that key, if any,
// resolves inside it (ErrOutsideBucket when it leaves it). Paths that do not
// exist (yet) are fine: they are created below a directory that was
// checked. It asks the kernel (openat2 with RESOLVE_BENEATH: one system
// call, no race inside the resolution) and resolves links itself where
// openat2 is missing (kernels before 5.6, seccomp profiles that block
// it). It cannot stop a user with write access to the volume from
// swapping a directory for a link between this check and the use of the
// path.
func (l *Layer) contain(bucket, key string) error {
	if !validBucketName(bucket) && !objlayer.IsInternalBucket(bucket) {
		return fmt.Errorf("%w: %q", objlayer.ErrBucketNotFound, bucket)
	}
	if !l.noAt2.Load() {
		err := l.containAt2(bucket, key)
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return err
		}
		l.noAt2.Store(true)
	}
	return l.containWalk(bucket, key)
}

func (l *Layer) containAt2(bucket, key string) error {
	bfd, err := unix.Openat2(l.rootFD, bucket, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return err
	case errors.Is(err, unix.ELOOP):
		return errOutside(bucket, "") // the bucket is a symbolic link
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %s", objlayer.ErrBucketNotFound, bucket)
	case err != nil:
		return &os.PathError{Op: "open", Path: filepath.Join(l.root, bucket), Err: err}
	}
	defer unix.Close(bfd)
	if key == "" {
		return nil
	}
	fd, err := unix.Openat2(bfd, key, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		_ = unix.Close(fd)
		return nil
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return errOutside(bucket, key)
	case errors.Is(err, unix.ENAMETOOLONG):
		return fmt.Errorf("%w: %s", objlayer.ErrKeyTooLong, key)
	}
	// Not found, not a directory, no permission: the operation answers.
	return nil
}

// maxLinks bounds the links followed in one resolution (the kernel's
// limit).
const maxLinks = 40

// containWalk is contain without openat2: it resolves the path one
// component at a time with lstat and readlink, refusing what openat2
// refuses (a linked bucket, absolute link targets, '..' above the bucket).
func (l *Layer) containWalk(bucket, key string) error {
	bdir := filepath.Join(l.root, bucket)
	fi, err := os.Lstat(bdir)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return errOutside(bucket, "")
	}
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s", objlayer.ErrBucketNotFound, bucket)
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
				return errOutside(bucket, key)
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		entry, target := lookAt(filepath.Join(bdir, filepath.Join(resolved...), seg))
		switch entry {
		case entryUnseen:
			return nil // contained so far, and the operation answers for the rest
		case entryPlain:
			resolved = append(resolved, seg)
			continue
		}
		if links++; links > maxLinks {
			return errOutside(bucket, key)
		}
		if filepath.IsAbs(target) {
			return errOutside(bucket, key)
		}
		pending = append(splitPath(target), pending...)
	}
	return nil
}

// pathEntry is what containWalk finds at one component of a path.
type pathEntry int

const (
	// entryUnseen: nothing lstat or readlink can see, where resolving
	// stops, contained. What does not exist is created below a checked
	// directory; what cannot be looked at (not a directory, no
	// permission, a link that went meanwhile) the operation meets and
	// answers, as after openat2.
	entryUnseen pathEntry = iota
	// entryPlain: a directory or file, resolved past.
	entryPlain
	// entryLink: a symbolic link, followed through its target.
	entryLink
)

// lookAt looks at p without following it: what is there, and a symbolic
// link's target.
func lookAt(p string) (pathEntry, string) {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return entryUnseen, ""
	case fi.Mode()&os.ModeSymlink == 0:
		return entryPlain, ""
	}
	target, err := os.Readlink(p)
	if err != nil {
		return entryUnseen, ""
	}
	return entryLink, target
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
