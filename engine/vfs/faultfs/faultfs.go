// Package faultfs wraps a vfs.FS and injects failures, for tests of what the
// engine does when a drive misbehaves: a write that fails, a disk that
// fills up, a rename that never happens, a sync that errors, a disk that
// answers slowly. Its rules can also be applied to a drive's metadata store
// (MetaInjector), whose filesystem seam is pebble's.
package faultfs

import (
	"errors"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/engine/vfs"
)

// Op names a filesystem operation that can be failed.
type Op string

// Operations that can be failed.
const (
	OpCreate  Op = "create"
	OpOpen    Op = "open"
	OpWrite   Op = "write"
	OpRead    Op = "read"
	OpSync    Op = "sync"
	OpRename  Op = "rename"
	OpRemove  Op = "remove"
	OpMkdir   Op = "mkdir"
	OpSyncDir Op = "syncdir"
)

// ErrInjected is the error returned by a Fail rule unless it names another.
var ErrInjected = errors.New("faultfs: injected failure")

// FS is a vfs.FS with failures injected by rules.
type FS struct {
	inner vfs.FS

	mu    sync.Mutex
	rules []rule
	// free is the number of bytes that may still be written; <0 = unlimited.
	free int64
}

type rule struct {
	op       Op
	contains string
	err      error
	delay    time.Duration // a Delay rule: wait, then run the operation
	times    int           // remaining hits; <0 = forever
}

// New wraps inner with no failures.
func New(inner vfs.FS) *FS { return &FS{inner: inner, free: -1} }

// Fail makes op fail with err (ErrInjected when nil) on paths containing
// substr, the next times calls (times < 0: every call).
func (f *FS) Fail(op Op, substr string, err error, times int) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, rule{op: op, contains: substr, err: err, times: times})
}

// Delay makes op wait d before it runs, on paths containing substr, the
// next times calls (times < 0: every call): a disk that answers, but
// slowly. Reset ends it (calls already waiting finish their wait).
func (f *FS) Delay(op Op, substr string, d time.Duration, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, rule{op: op, contains: substr, delay: d, times: times})
}

// SetFree limits the bytes that may still be written before writes fail with
// ENOSPC, like a disk filling up. A negative value removes the limit.
func (f *FS) SetFree(bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free = bytes
}

// Reset removes every rule and the space limit.
func (f *FS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.free = nil, -1
}

// check applies the first rule that matches op on path: it waits for a
// Delay rule (without holding the lock) and returns a Fail rule's error.
func (f *FS) check(op Op, path string) error {
	f.mu.Lock()
	var delay time.Duration
	var err error
	for i := range f.rules {
		r := &f.rules[i]
		if r.op != op || r.times == 0 || !strings.Contains(path, r.contains) {
			continue
		}
		if r.times > 0 {
			r.times--
		}
		if delay = r.delay; delay == 0 {
			err = &fs.PathError{Op: string(op), Path: path, Err: r.err}
		}
		break
	}
	f.mu.Unlock()
	time.Sleep(delay)
	return err
}

// reserve takes n bytes of free space, or as many as are left.
func (f *FS) reserve(n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free < 0 {
		return n, nil
	}
	if int64(n) <= f.free {
		f.free -= int64(n)
		return n, nil
	}
	got := int(f.free)
	f.free = 0
	return got, syscall.ENOSPC
}

// Create implements vfs.FS.
func (f *FS) Create(name string) (vfs.File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Open implements vfs.FS.
func (f *FS) Open(name string) (vfs.File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Rename implements vfs.FS.
func (f *FS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements vfs.FS.
func (f *FS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// RemoveAll implements vfs.FS.
func (f *FS) RemoveAll(path string) error {
	if err := f.check(OpRemove, path); err != nil {
		return err
	}
	return f.inner.RemoveAll(path)
}

// MkdirAll implements vfs.FS.
func (f *FS) MkdirAll(path string, perm fs.FileMode) error {
	if err := f.check(OpMkdir, path); err != nil {
		return err
	}
	return f.inner.MkdirAll(path, perm)
}

// Stat implements vfs.FS.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.inner.Stat(name) }

// ReadDir implements vfs.FS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) { return f.inner.ReadDir(name) }

// Usage implements vfs.FS: the free space is the injected limit when one
// is set.
func (f *FS) Usage(path string) (vfs.Usage, error) {
	u, err := f.inner.Usage(path)
	if err != nil {
		return u, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free >= 0 && uint64(f.free) < u.Free {
		u.Free = uint64(f.free)
	}
	return u, nil
}

// SyncData implements vfs.FS (failed by OpSync rules).
func (f *FS) SyncData(name string) error {
	if err := f.check(OpSync, name); err != nil {
		return err
	}
	return f.inner.SyncData(name)
}

// SyncDir implements vfs.FS.
func (f *FS) SyncDir(path string) error {
	if err := f.check(OpSyncDir, path); err != nil {
		return err
	}
	return f.inner.SyncDir(path)
}

type faultFile struct {
	vfs.File
	fs *FS
}

func (ff *faultFile) Write(p []byte) (int, error) {
	if err := ff.fs.check(OpWrite, ff.Name()); err != nil {
		return 0, err
	}
	n, errSpace := ff.fs.reserve(len(p))
	w, err := ff.File.Write(p[:n])
	if err != nil {
		return w, err
	}
	return w, errSpace
}

func (ff *faultFile) Read(p []byte) (int, error) {
	if err := ff.fs.check(OpRead, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.Read(p)
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.check(OpRead, ff.Name()); err != nil {
		return 0, err
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultFile) Sync() error {
	if err := ff.fs.check(OpSync, ff.Name()); err != nil {
		return err
	}
	return ff.File.Sync()
}
