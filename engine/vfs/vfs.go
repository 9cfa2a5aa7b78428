// Package vfs is the filesystem seam of the storage engine. Everything the
// engine writes to a drive (format file, shard files, tmp area) goes through
// an FS, so tests can swap in a fault-injecting one (package vfs/faultfs) to
// fail a write, fill a disk or tear a rename.
package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// File is an open file.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync flushes the file's data to stable storage (fdatasync where the
	// platform has it).
	Sync() error
	Stat() (fs.FileInfo, error)
	Name() string
}

// FS is the subset of filesystem calls the engine makes.
type FS interface {
	// Create makes (or truncates) a file for writing.
	Create(name string) (File, error)
	// Open opens a file for reading.
	Open(name string) (File, error)
	// Rename moves oldname to newname atomically (POSIX rename).
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(path string) error
	MkdirAll(path string, perm fs.FileMode) error
	Stat(name string) (fs.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir makes the entries of a directory (creations, renames,
	// removals) durable.
	SyncDir(path string) error
	// SyncData makes a file's data (and size) durable, by name
	// (fdatasync where the platform has it).
	SyncData(name string) error
	// Usage reports the total and available bytes of the filesystem
	// holding path.
	Usage(path string) (Usage, error)
}

// Usage is a filesystem's capacity in bytes.
type Usage struct {
	Total, Free uint64
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return asFile(openFile(name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC, 0o644))
}
func (osFS) Open(name string) (File, error)               { return asFile(openFile(name, unix.O_RDONLY, 0)) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(path string) error                  { return os.RemoveAll(path) }
func (osFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) Usage(path string) (Usage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Usage{}, &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	// Blocks reserved for root count neither as free nor as capacity (as
	// df's Use% does): a filesystem with a large reserve is not "full"
	// while most of what an unprivileged writer may use is still free.
	usable := st.Blocks - (st.Bfree - st.Bavail)
	return Usage{Total: usable * uint64(st.Bsize), Free: st.Bavail * uint64(st.Bsize)}, nil
}

// openFile opens name as os.OpenFile does, in fewer system calls: a
// regular file cannot be polled, so it is opened blocking and left out of
// the runtime's poller (os.OpenFile makes it non-blocking, fails to add it
// and makes it blocking again: four calls more for each file a request
// opens).
func openFile(name string, flag int, perm uint32) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, perm)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), name), nil
		case err != unix.EINTR:
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// asFile is f as a File, nil (not a nil *os.File) on an error.
func asFile(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) SyncData(name string) error {
	f, err := openFile(name, unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	if err := fdatasync(f); err != nil {
		_ = f.Close()
		return &fs.PathError{Op: "fdatasync", Path: name, Err: err}
	}
	return f.Close()
}

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

func (osFS) SyncDir(path string) error {
	d, err := openFile(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// WriteFileAtomic writes data to name so that a crash leaves either the old
// content or the new, never a mix: it writes a temporary file in the same
// directory, syncs it, renames it over name and syncs the directory.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	dir := filepath.Dir(name)
	tmp := filepath.Join(dir, "."+filepath.Base(name)+".tmp")
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(dir)
}

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
