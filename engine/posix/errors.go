package posix

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Filesystem errors as the contract's. Only what has a meaning of its own
// for the front end is mapped; the rest stays an internal fault, wrapped
// with what was being done.

// mapNoSpace marks a write that failed for want of space or quota as
// objlayer.ErrNoSpace, and a path too long for the filesystem as
// objlayer.ErrKeyTooLong.
func mapNoSpace(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: %w", objlayer.ErrNoSpace, err)
	case errors.Is(err, unix.ENAMETOOLONG):
		return fmt.Errorf("%w: %w", objlayer.ErrKeyTooLong, err)
	}
	return err
}

// notFound reports whether err says a path (or a component of it) does
// not exist as what was asked: missing, or a file where a directory was
// expected.
func notFound(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// readErr maps a failure to find or open a version for reading: gone is
// ErrObjectNotFound, a path too long ErrKeyTooLong.
func readErr(bucket, key string, err error) error {
	switch {
	case notFound(err):
		return fmt.Errorf("%w: %s/%s", objlayer.ErrObjectNotFound, bucket, key)
	case errors.Is(err, unix.ENAMETOOLONG):
		return fmt.Errorf("%w: %s", objlayer.ErrKeyTooLong, key)
	}
	return err
}
