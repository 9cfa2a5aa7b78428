package faultfs

import (
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// MetaInjector applies f's rules to a drive's metadata store: wrap pebble's
// filesystem with it (errorfs.Wrap(pebblevfs.Default, f.MetaInjector()))
// and pass that as the drive's MetaFS, so one FS slows or fails both what a
// drive keeps in files and its store (a Delay of OpSync on the drive's
// path slows the store's log syncs, and so every commit on that drive).
func (f *FS) MetaInjector() errorfs.Injector { return metaInjector{f} }

type metaInjector struct{ f *FS }

func (m metaInjector) String() string { return "faultfs" }

// MaybeError implements errorfs.Injector: pebble's operations as this
// package names them.
func (m metaInjector) MaybeError(op errorfs.Op) error {
	var mine Op
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpReuseForWrite:
		mine = OpCreate
	case errorfs.OpOpen, errorfs.OpOpenDir:
		mine = OpOpen
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		mine = OpWrite
	case errorfs.OpFileRead, errorfs.OpFileReadAt:
		mine = OpRead
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileFlush:
		mine = OpSync
	case errorfs.OpRename:
		mine = OpRename
	case errorfs.OpRemove, errorfs.OpRemoveAll:
		mine = OpRemove
	case errorfs.OpMkdirAll:
		mine = OpMkdir
	default:
		return nil
	}
	return m.f.check(mine, op.Path)
}
