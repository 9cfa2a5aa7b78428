package vfs

import (
	"sync"
	"unsafe"
)

// DirectCreator is implemented by filesystems that can create a file whose
// writes bypass the page cache (O_DIRECT): large shard files are written
// once and read rarely, and copying them through the cache cost more CPU
// than the rest of a PUT (docs/benchmarks.md).
type DirectCreator interface {
	CreateDirect(name string) (File, error)
}

// CreateDirect creates name for writing past the page cache where fsys
// and the filesystem under it can, and as fsys.Create otherwise. The data
// still needs SyncData to be durable (the device's cache, the file's size).
func CreateDirect(fsys FS, name string) (File, error) {
	if dc, ok := fsys.(DirectCreator); ok {
		return dc.CreateDirect(name)
	}
	return fsys.Create(name)
}

// WriteGatherer is implemented by files that gather small writes into
// large ones themselves (an O_DIRECT file writes whole aligned buffers), so
// a writer needs no buffer of its own in front of them.
type WriteGatherer interface {
	GathersWrites() bool
}

// GathersWrites says whether f gathers small writes itself.
func GathersWrites(f File) bool {
	g, ok := f.(WriteGatherer)
	return ok && g.GathersWrites()
}

// directAlign is the alignment of O_DIRECT buffers, offsets and lengths
// (the logical block size of every device we expect; 4 KiB covers 512 too).
const directAlign = 4096

// directBufSize is how much a direct file gathers before one write.
const directBufSize = 512 << 10

var directBufs = sync.Pool{New: func() any {
	b := make([]byte, directBufSize+directAlign)
	off := 0
	if r := alignOf(b); r != 0 {
		off = directAlign - r
	}
	return b[off : off+directBufSize]
}}

func alignOf(b []byte) int { return int(uintptr(unsafe.Pointer(&b[0])) % directAlign) }
