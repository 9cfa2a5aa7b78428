package erasure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// Drive is what the object layer needs of a drive. *drive.Local implements
// it on this node; a remote drive (issue 5) implements it over internode RPC.
type Drive interface {
	Format(ctx context.Context) (drive.Format, error)
	DiskInfo(ctx context.Context) (vfs.Usage, error)

	MakeBucket(ctx context.Context, b drive.BucketInfo) error
	SetBucket(ctx context.Context, b drive.BucketInfo) error
	StatBucket(ctx context.Context, name string) (drive.BucketInfo, error)
	ListBuckets(ctx context.Context) ([]drive.BucketInfo, error)
	// BucketUsage is what the bucket's versions on the drive hold.
	BucketUsage(ctx context.Context, bucket string) (drive.Usage, error)
	DeleteBucket(ctx context.Context, name string, force bool) error

	PutVersion(ctx context.Context, bucket, object string, rec *drive.Record, stageID [16]byte) (drive.PutResult, error)
	GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error)
	// StatVersion is GetVersion where an inline object's data may be left
	// out (Inline nil): for a caller that reads no data.
	StatVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error)
	Versions(ctx context.Context, bucket, object string) ([]*drive.Record, error)
	SetVersionMeta(ctx context.Context, bucket, object string, rec *drive.Record, meta map[string]string) error
	DeleteVersion(ctx context.Context, bucket, object string, versionID [16]byte) (*drive.Record, error)
	RollbackVersion(ctx context.Context, bucket, object string, rec *drive.Record) (bool, error)
	WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(object string, versions []*drive.Record) bool) error

	CreateStaged(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error)
	AbortStaged(ctx context.Context, dataDir [16]byte) error
	OpenShard(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error)

	PutUpload(ctx context.Context, u *drive.Upload) error
	GetUpload(ctx context.Context, bucket, object string, id [16]byte) (*drive.Upload, error)
	WalkUploads(ctx context.Context, bucket, prefix string, after drive.UploadPos, fn func(u *drive.Upload) bool) error
	CommitPart(ctx context.Context, u *drive.Upload, p *drive.PartRecord) error
	ListParts(ctx context.Context, uploadID [16]byte) ([]drive.PartRecord, error)
	CompleteUpload(ctx context.Context, u *drive.Upload, chosen []drive.PartRecord, rec *drive.Record) (drive.PutResult, error)
	ReopenUpload(ctx context.Context, u *drive.Upload, chosen []drive.PartRecord, rec *drive.Record) (bool, error)
	AbortUpload(ctx context.Context, bucket, object string, id [16]byte) error
}

var _ Drive = (*drive.Local)(nil)

// Set is one erasure set: SetSize drives, each object striped over all of
// them. drives[i] is the drive at position i; nil when offline.
type Set struct {
	// drives is replaced wholesale (copy on write) when a drive goes
	// offline or comes back, so operations read a consistent snapshot
	// without locking.
	drives      atomic.Pointer[[]Drive]
	layout      Layout
	codec       *Codec
	inlineLimit int64
	// onPartial is told about writes that reached quorum but not every
	// drive, so they can be healed; nil = nobody listens.
	onPartial func(bucket, object string, versionID [16]byte)
	// lat times reads per position, to read slow drives last (slow.go).
	lat *latencies
	// lags remembers the drives writes left behind (slowwrite.go).
	lags *writeLags
	// ahead holds listings' walks ahead (readahead.go).
	ahead readAhead
}

// OnPartialWrite registers fn to hear of writes that missed a drive.
func (s *Set) OnPartialWrite(fn func(bucket, object string, versionID [16]byte)) { s.onPartial = fn }

func (s *Set) partialWrite(bucket, object string, versionID [16]byte) {
	if s.onPartial != nil {
		s.onPartial(bucket, object, versionID)
	}
}

// DefaultBlockSize is the object bytes per erasure block.
const DefaultBlockSize = 1 << 20

// DefaultInlineLimit is the largest object kept inside its version records.
const DefaultInlineLimit = 128 << 10

// NewSet returns a set over drives with the given parity.
func NewSet(drives []Drive, parity int) (*Set, error) {
	l, err := NewLayout(len(drives), parity)
	if err != nil {
		return nil, err
	}
	c, err := NewCodec(l, DefaultBlockSize)
	if err != nil {
		return nil, err
	}
	s := &Set{layout: l, codec: c, inlineLimit: DefaultInlineLimit, lat: newLatencies(len(drives)), lags: newWriteLags(len(drives))}
	ds := append([]Drive(nil), drives...)
	s.drives.Store(&ds)
	return s, nil
}

// Liveness is implemented by drives that can be unreachable while present
// (a drive on another node).
type Liveness interface {
	Online() bool
}

// onlineMask has bit i set when the drive at position i can be used.
func (s *Set) onlineMask() uint32 {
	var m uint32
	for i, d := range s.Drives() {
		if d == nil {
			continue
		}
		if l, ok := d.(Liveness); ok && !l.Online() {
			continue
		}
		m |= 1 << i
	}
	return m
}

// Drives returns the set's drives by position (nil = offline).
func (s *Set) Drives() []Drive { return *s.drives.Load() }

// SetDrive puts d at position pos (nil takes the drive offline).
func (s *Set) SetDrive(pos int, d Drive) {
	for {
		old := s.drives.Load()
		ds := append([]Drive(nil), (*old)...)
		ds[pos] = d
		if s.drives.CompareAndSwap(old, &ds) {
			return
		}
	}
}

// Layout is the set's erasure shape.
func (s *Set) Layout() Layout { return s.layout }

// forEach runs fn on every online drive in parallel and returns the errors
// by position (errDriveOffline for offline drives).
func (s *Set) forEach(fn func(i int, d Drive) error) []error {
	return forEachDrive(s.Drives(), fn)
}

// forEachDrive runs fn on every non-nil drive of a snapshot in parallel.
func forEachDrive(drives []Drive, fn func(i int, d Drive) error) []error {
	errs := make([]error, len(drives))
	var wg sync.WaitGroup
	for i, d := range drives {
		if d == nil {
			errs[i] = errDriveOffline
			continue
		}
		wg.Add(1)
		driveWork.run(func() {
			defer wg.Done()
			errs[i] = fn(i, d)
		})
	}
	wg.Wait()
	return errs
}

var errDriveOffline = errors.New("drive offline")

// countNil counts successes.
func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}

// reduceErrors turns per-drive errors into one: nil when at least quorum
// drives succeeded; otherwise the error most drives agree on when at least
// quorum of them agree (NotFound, say), else quorumErr wrapped with detail.
func reduceErrors(errs []error, quorum int, quorumErr error) error {
	if countNil(errs) >= quorum {
		return nil
	}
	counts := map[error]int{}
	for _, err := range errs {
		for _, known := range []error{drive.ErrBucketNotFound, drive.ErrBucketExists, drive.ErrBucketNotEmpty, drive.ErrVersionNotFound} {
			if errors.Is(err, known) {
				counts[known]++
			}
		}
	}
	for known, n := range counts {
		if n >= quorum {
			return known
		}
	}
	return fmt.Errorf("%w: %d of %d drives answered, %d needed (%s)", quorumErr, countNil(errs), len(errs), quorum, detail(errs))
}

// detail is the first per-drive error as text, for messages. It is never
// wrapped: a quorum error must not match a drive's sentinel (a NotFound from
// one drive does not make the object missing).
func detail(errs []error) string {
	for _, err := range errs {
		if err != nil {
			return err.Error()
		}
	}
	return "no error"
}

// committing is the context of a commit or a clean-up across drives. It
// keeps the caller's values but not its end: a client that goes away (or a
// deadline that passes) while a version, a bucket or an upload is being
// written on the drives does not leave it on some and not others, and what
// a failed write staged is still removed. Reads and staging, which can be
// given up with nothing to undo, follow the caller's context.
func committing(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
