package posix

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Options configure a Layer.
type Options struct {
	// Root is the served directory: its top-level directories are
	// buckets.
	Root string
	// VersionsDir keeps older versions of objects; empty:
	// <Root>/.strata/versions.
	VersionsDir string
	// Metadata is where metadata lives on a fresh volume (auto: xattrs
	// when the filesystem stores them); a used volume keeps the mode its
	// marker records, and an explicit other choice is refused.
	Metadata MetadataMode
	// Fsync makes every write durable before it is acknowledged: data and
	// attributes synced before a version is published, the directory
	// entries up to the bucket after.
	Fsync bool
	// ETagSyncLimit is the largest file created through POSIX whose MD5
	// ETag is computed before its first HEAD or GET answers; larger ones
	// are hashed in the background (0: all of them).
	ETagSyncLimit int64
	// ClaimTimeout is how long, beyond its parts' size at 16 MiB/s, a
	// multipart completion claimed by another replica may take before
	// this one takes it over (the claimant died); 0: DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// LargeDirThreshold is the entry count from which a directory is
	// reported as large (LargeDirs, OnLargeDir); 0 turns the watch off.
	LargeDirThreshold int
	// LargeDirScanInterval is the pause between two scans of the whole
	// volume for large directories; 0: only directories written through
	// the layer are counted.
	LargeDirScanInterval time.Duration
	// OnLargeDir, when set, is told when a directory becomes large
	// (large true) and when it no longer is.
	OnLargeDir func(dir string, entries int, large bool)
	// Log receives what the layer reports (nil: discarded).
	Log *slog.Logger

	// probe tests for user xattrs (tests simulate filesystems without).
	probe func(dir string) error
	// largeDirRecount is how soon a directory written again is counted
	// again (a minute; tests shorten it).
	largeDirRecount time.Duration
}

// DefaultClaimTimeout is ClaimTimeout's default.
const DefaultClaimTimeout = 30 * time.Second

// Layer is a volume served as S3 objects. Its methods may be called
// concurrently, by any number of Layers on one volume (replicas).
type Layer struct {
	root string // absolute
	// rootFD is an O_PATH descriptor of root, for resolving keys beneath
	// it (contain.go).
	rootFD int
	noAt2  atomic.Bool
	id     string
	mode   MetadataMode
	attrs  attrStore
	// versions is the versions directory (absolute); sidecar the sidecar
	// directory ("" in xattr mode); versionsSide the path below sidecar
	// of the versions' attributes (layout.go).
	versions, sidecar, versionsSide string
	fsync                           bool
	// noLinks makes versions move by copy, as on filesystems without
	// hard links (tests).
	noLinks   bool
	claimBase time.Duration
	log       *slog.Logger

	keySlots    *keySlots
	bucketSlots sync.Map // bucket -> chan struct{}
	noLocks     sync.Once

	etags *etagFiller
	dirs  *dirWatch
	lists *dirCache
	// bufs are copy buffers (*[]byte).
	bufs sync.Pool

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

var _ objlayer.Layer = (*Layer)(nil)

// New opens the volume at opts.Root: on first use it decides the metadata
// mode and writes the volume's marker (<root>/.strata/gateway.json), as
// the gateway always has; later it reads the marker. Background work
// (ETag hashing, the large-directory watch) runs until Close.
func New(opts Options) (*Layer, error) {
	if opts.Root == "" {
		return nil, errors.New("posix: no root directory")
	}
	probe := opts.probe
	if probe == nil {
		probe = probeXattrs
	}
	lay, err := prepareLayout(opts.Root, opts.Metadata, probe)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	versions := opts.VersionsDir
	if versions == "" {
		versions = filepath.Join(lay.root, hiddenDir, versionsDir)
	} else if versions, err = filepath.Abs(versions); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(versions, 0o755); err != nil {
		return nil, fmt.Errorf("versions directory: %w", err)
	}
	fd, err := unix.Open(lay.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: lay.root, Err: err}
	}
	l := &Layer{
		root: lay.root, rootFD: fd, id: lay.id, mode: lay.metadata, attrs: xattrStore{},
		versions: versions, versionsSide: versionsSidecarPath(lay.root, versions),
		fsync: opts.Fsync, claimBase: cmp.Or(opts.ClaimTimeout, DefaultClaimTimeout), log: log,
		keySlots: newKeySlots(), lists: newDirCache(), stop: make(chan struct{}),
	}
	if lay.metadata == MetadataSidecar {
		l.sidecar = filepath.Join(lay.root, hiddenDir, sidecarDir)
		l.attrs = sidecarStore{fsync: opts.Fsync}
		if lay.why != "" { // detection chose sidecar, not the operator
			log.Warn("the filesystem does not store user xattrs: metadata goes to sidecar files", "dir", l.sidecar, "reason", lay.why)
		}
	}
	l.etags = newETagFiller(l, opts.ETagSyncLimit)
	l.dirs = newDirWatch(l.root, opts.LargeDirThreshold, cmp.Or(opts.largeDirRecount, time.Minute), opts.OnLargeDir, log)
	l.background(l.etags.run)
	if opts.LargeDirThreshold > 0 {
		l.background(func(stop <-chan struct{}) { l.dirs.run(stop, opts.LargeDirScanInterval) })
	}
	return l, nil
}

// background runs fn until Close.
func (l *Layer) background(fn func(stop <-chan struct{})) {
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		fn(l.stop)
	}()
}

// Close stops the background work and releases the root; no call may be
// in flight.
func (l *Layer) Close() error {
	l.closeOnce.Do(func() {
		close(l.stop)
		l.done.Wait()
		_ = unix.Close(l.rootFD)
	})
	return nil
}

// Root is the served directory (absolute).
func (l *Layer) Root() string { return l.root }

// DeploymentID is the volume's ID, from its marker.
func (l *Layer) DeploymentID() string { return l.id }

// Metadata is the volume's metadata mode (xattr or sidecar).
func (l *Layer) Metadata() MetadataMode { return l.mode }

// Paths of the layout.

func (l *Layer) bucketPath(bucket string) string { return filepath.Join(l.root, bucket) }

// objectPath is a key's file (or directory, for a key ending in '/').
func (l *Layer) objectPath(bucket, key string) string { return filepath.Join(l.root, bucket, key) }

// stagingPath is a bucket's staging directory: temp files of writes.
func (l *Layer) stagingPath(bucket string) string { return filepath.Join(l.root, bucket, stagingDir) }

// bucketPlace is where a bucket's attributes live.
func (l *Layer) bucketPlace(bucket string) place {
	p := place{path: l.bucketPath(bucket)}
	if l.sidecar != "" {
		p.side = filepath.Join(l.sidecar, bucket, sidecarDir)
	}
	return p
}

// treePlace is where the attributes of a path inside a bucket live (an
// object, an upload, a part): rel is relative to the bucket. The sidecar
// path is cleaned as versitygw's was (a directory object's trailing '/'
// goes).
func (l *Layer) treePlace(bucket, rel string) place {
	p := place{path: filepath.Join(l.root, bucket, rel)}
	if l.sidecar != "" {
		p.side = filepath.Join(l.sidecar, bucket, rel, sidecarDir)
		p.stop = filepath.Join(l.sidecar, bucket)
	}
	return p
}

// sideTree is the sidecar directory mirroring a path inside a bucket (its
// attributes and those of everything below it); "" in xattr mode.
func (l *Layer) sideTree(bucket, rel string) string {
	if l.sidecar == "" {
		return ""
	}
	return filepath.Join(l.sidecar, bucket, rel)
}

// MarkerPath is the volume's marker file: a probe that stats it finds out
// whether the volume answers.
func (l *Layer) MarkerPath() string { return filepath.Join(l.root, hiddenDir, markerFile) }
