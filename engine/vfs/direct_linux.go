package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// CreateDirect opens name with O_DIRECT; a filesystem refusing it
// (tmpfs, some FUSE ones) gets an ordinary file.
func (osFS) CreateDirect(name string) (File, error) {
	f, err := openFile(name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return osFS{}.Create(name)
	}
	if err != nil {
		return nil, err
	}
	return &directFile{f: f, buf: directBufs.Get().([]byte)}, nil
}

// directFile gathers writes into an aligned buffer and writes it whole;
// the unaligned tail is written after O_DIRECT is turned off for the file
// (at Sync, Close or the first read).
// The *os.File is not embedded: its ReadFrom and WriteString would write
// past the buffer, unaligned.
type directFile struct {
	f   *os.File
	buf []byte
	n   int
	off int64
	// cached: O_DIRECT was turned off (the tail is written).
	cached bool
	err    error
}

func (d *directFile) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.buf == nil {
		return 0, fs.ErrClosed
	}
	total := len(p)
	for len(p) > 0 {
		c := copy(d.buf[d.n:], p)
		d.n += c
		p = p[c:]
		if d.n == len(d.buf) {
			if err := d.writeOut(d.n); err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// writeOut writes the first n buffered bytes (aligned unless O_DIRECT is
// off) and keeps the rest.
func (d *directFile) writeOut(n int) error {
	for w := 0; w < n; {
		k, err := d.f.WriteAt(d.buf[w:n], d.off)
		d.off += int64(k)
		w += k
		if err != nil {
			d.err = err
			return err
		}
	}
	d.n = copy(d.buf, d.buf[n:d.n])
	return nil
}

// finish writes everything buffered and leaves the file in ordinary mode.
func (d *directFile) finish() error {
	if d.err != nil || d.buf == nil {
		return d.err
	}
	if aligned := d.n &^ (directAlign - 1); aligned > 0 {
		if err := d.writeOut(aligned); err != nil {
			return err
		}
	}
	if !d.cached {
		d.cached = true
		flags, err := unix.FcntlInt(d.f.Fd(), unix.F_GETFL, 0)
		if err == nil {
			_, err = unix.FcntlInt(d.f.Fd(), unix.F_SETFL, flags&^unix.O_DIRECT)
		}
		if err != nil {
			d.err = &fs.PathError{Op: "fcntl", Path: d.Name(), Err: err}
			return d.err
		}
	}
	if d.n > 0 {
		return d.writeOut(d.n)
	}
	return nil
}

// GathersWrites implements WriteGatherer: writes are copied into the
// aligned buffer and written out whole.
func (d *directFile) GathersWrites() bool { return true }

func (d *directFile) Name() string               { return d.f.Name() }
func (d *directFile) Stat() (fs.FileInfo, error) { return d.f.Stat() }

func (d *directFile) Sync() error {
	if err := d.finish(); err != nil {
		return err
	}
	return fdatasync(d.f)
}

func (d *directFile) Read(p []byte) (int, error) {
	if err := d.finish(); err != nil {
		return 0, err
	}
	return d.f.Read(p)
}

func (d *directFile) ReadAt(p []byte, off int64) (int, error) {
	if err := d.finish(); err != nil {
		return 0, err
	}
	return d.f.ReadAt(p, off)
}

func (d *directFile) Close() error {
	err := d.finish()
	if d.buf != nil {
		directBufs.Put(d.buf) //nolint:staticcheck // a slice header is cheap beside the buffer
		d.buf = nil
	}
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	return err
}
