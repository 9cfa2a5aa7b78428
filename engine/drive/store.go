package drive

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strata-storage/strata/engine/vfs"
)

// ErrStoreFailed: the drive's metadata store failed fatally (its log or
// manifest could not be written: EIO, ENOSPC, a vanished directory) and is
// used no more. The drive is offline until it is reopened; the process and
// the other drives keep serving.
var ErrStoreFailed = errors.New("metadata store failed")

// ErrClosed: the drive was closed (the process is stopping, or the drive
// was taken offline); a call that comes after answers it instead of
// reaching the closed store.
var ErrClosed = errors.New("drive closed")

// store is a drive's metadata store with its failure. Pebble reports a
// failure it cannot continue from through its logger's Fatalf, from the
// goroutine that met it: a commit's (then Fatalf's return lets the commit
// answer success), or a flush's or compaction's in the background. Fatalf
// here marks the store failed instead of ending the process; every call
// checks the mark before touching pebble and again after it returns, so
// the call that met the failure answers ErrStoreFailed too and nothing the
// store may not have kept is acknowledged.
type store struct {
	db     *pebble.DB
	failed atomic.Pointer[string]
	log    *slog.Logger
	// lastBackground is when pebble last reported a background error
	// (unix nanoseconds), lastLogged when one was last logged.
	lastBackground, lastLogged atomic.Int64
	// writes counts the writes to the store, each counted once it is
	// applied (or failed): a reader that saw the same count before and
	// after reading something knows no write landed meanwhile (Changes).
	writes atomic.Uint64
	// stalls counts the times pebble held writes up; stallNanos is how
	// long in all, and stallBegun when the one going on began (0: none).
	stalls                 atomic.Uint64
	stallNanos, stallBegun atomic.Int64
	// closed is set as Close begins: no call reaches pebble after.
	closed atomic.Bool
	// users counts the calls inside pebble and the iterators and indexed
	// batches open over it; Close waits until none is left (idle closes
	// when the last leaves after Close began). A call that outlives the
	// request it served (a drive's late answer after quorum, a background
	// job stopping) then answers ErrClosed rather than meeting a closed
	// pebble, which panics.
	users    atomic.Int64
	idle     chan struct{}
	idleOnce sync.Once
}

func newStore(log *slog.Logger) *store { return &store{log: log, idle: make(chan struct{})} }

// enter begins a use of pebble, ended by leave: ErrClosed once Close
// began, the failure once the store failed.
func (s *store) enter() error {
	s.users.Add(1)
	if err := s.err(); err != nil {
		s.leave()
		return err
	}
	if s.closed.Load() {
		s.leave()
		return ErrClosed
	}
	return nil
}

func (s *store) leave() {
	if s.users.Add(-1) == 0 && s.closed.Load() {
		s.idleOnce.Do(func() { close(s.idle) })
	}
}

// use is one use of the store that outlives the call that began it (a
// read value, an iterator, an indexed batch): end runs its own close once
// and then leaves, however often it is called.
type use struct {
	s    *store
	done bool
}

func (u *use) end(closeFn func() error) error {
	if u.done {
		return nil
	}
	u.done = true
	defer u.s.leave()
	return closeFn()
}

// backgroundPause is how long a background error that follows another
// within it holds up the flush or compaction that met it. Pebble retries a
// failed flush at once, forever (a full or failing disk would otherwise
// spin a core and fill the log); it calls BackgroundError from the failing
// job, so pausing there paces the retries.
const backgroundPause = time.Second

// backgroundError is pebble's BackgroundError event: logged at most every
// backgroundPause, and a repeat is paced.
func (s *store) backgroundError(err error) {
	now := time.Now().UnixNano()
	last := s.lastBackground.Swap(now)
	if logged := s.lastLogged.Load(); now-logged >= int64(backgroundPause) && s.lastLogged.CompareAndSwap(logged, now) {
		s.log.Error("metadata store: background error (retried)", "err", err, "failed", s.err() != nil)
	}
	if now-last < int64(backgroundPause) {
		time.Sleep(backgroundPause)
	}
}

// fail marks the store failed (the first reason is kept); it reports
// whether this call did.
func (s *store) fail(reason string) bool {
	return s.failed.CompareAndSwap(nil, &reason)
}

// err is ErrStoreFailed with its reason once the store failed, else nil.
func (s *store) err() error {
	if r := s.failed.Load(); r != nil {
		return fmt.Errorf("%w: %s", ErrStoreFailed, *r)
	}
	return nil
}

// after is err once the store failed during a call, else the call's own
// error.
func (s *store) after(err error) error {
	if ferr := s.err(); ferr != nil {
		return ferr
	}
	return err
}

// Get reads a key; the value is valid until the closer is closed, and
// the store is held open until then (pebble's closer holds its state).
func (s *store) Get(key []byte) ([]byte, io.Closer, error) {
	if err := s.enter(); err != nil {
		return nil, nil, err
	}
	v, closer, err := s.db.Get(key)
	if ferr := s.err(); ferr != nil {
		if err == nil {
			_ = closer.Close()
		}
		s.leave()
		return nil, nil, ferr
	}
	if err != nil {
		s.leave()
		return nil, nil, err
	}
	return v, &getCloser{Closer: closer, use: use{s: s}}, nil
}

// getCloser ends a Get's use of the store when its value is let go.
type getCloser struct {
	io.Closer
	use
}

func (c *getCloser) Close() error { return c.end(c.Closer.Close) }

func (s *store) Set(key, value []byte, o *pebble.WriteOptions) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	defer s.writes.Add(1)
	return s.after(s.db.Set(key, value, o))
}

func (s *store) Delete(key []byte, o *pebble.WriteOptions) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	defer s.writes.Add(1)
	return s.after(s.db.Delete(key, o))
}

// iterator walks keys in order: a store's or an indexed batch's.
type iterator interface {
	First() bool
	Next() bool
	Valid() bool
	SeekGE(key []byte) bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// storeIter is an iterator over the store, held open against Close until
// it is closed.
type storeIter struct {
	*pebble.Iterator
	use
}

func (it *storeIter) Close() error { return it.end(it.Iterator.Close) }

// NewIter opens an iterator; whoever walks it ends with after(it.Error())
// and closes it.
func (s *store) NewIter(o *pebble.IterOptions) (iterator, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIter(o)
	if err != nil {
		s.leave()
		return nil, err
	}
	return &storeIter{Iterator: it, use: use{s: s}}, nil
}

// NewBatch starts a batch of writes, committed with Commit (it reads
// nothing from the store).
func (s *store) NewBatch() *pebble.Batch { return s.db.NewBatch() }

// indexedBatch is a batch that can be read, its own writes included; its
// reads reach the store, so it is held open against Close until closed.
type indexedBatch struct {
	*pebble.Batch
	use
}

// NewIndexedBatch starts an indexed batch.
func (s *store) NewIndexedBatch() (*indexedBatch, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	return &indexedBatch{Batch: s.db.NewIndexedBatch(), use: use{s: s}}, nil
}

func (b *indexedBatch) NewIter(o *pebble.IterOptions) (iterator, error) {
	it, err := b.Batch.NewIter(o)
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (b *indexedBatch) Close() error { return b.end(b.Batch.Close) }

// kvReader reads keys: the store, or an indexed batch over it.
type kvReader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (iterator, error)
}

func (s *store) Commit(b *pebble.Batch, o *pebble.WriteOptions) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	defer s.writes.Add(1)
	return s.after(b.Commit(o))
}

// closeFailedWait bounds the close of a failed store: pebble's Close waits
// for its background work, which a failed disk may hold up. A store that
// does not close in time is left open, and its lock with it: the drive
// then stays offline until the process restarts.
const closeFailedWait = 10 * time.Second

// closeWait bounds how long Close waits for the calls, iterators and
// batches still using the store.
var closeWait = 10 * time.Second

// Close closes the store once nothing uses it (calls that come after
// answer ErrClosed); a failed one gets closeFailedWait. A store still in
// use after closeWait is closed in the background once it is not, and
// Close answers an error meanwhile (its lock is held until then).
func (s *store) Close() error {
	s.closed.Store(true)
	if s.users.Load() == 0 {
		s.idleOnce.Do(func() { close(s.idle) })
	}
	select {
	case <-s.idle:
		return s.closeDB()
	case <-time.After(closeWait):
		go func() {
			<-s.idle
			if err := s.closeDB(); err != nil {
				s.log.Error("closing a metadata store once its last user left", "err", err)
			}
		}()
		return fmt.Errorf("metadata store still in use (%d) after %s; it closes when its last user leaves", s.users.Load(), closeWait)
	}
}

// closeDB closes pebble; a failed store gets closeFailedWait.
func (s *store) closeDB() error {
	if s.err() == nil {
		return s.db.Close()
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil { // pebble asserts its invariants on close
				done <- fmt.Errorf("closing a failed metadata store: %v", p)
			}
		}()
		done <- s.db.Close()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(closeFailedWait):
		return fmt.Errorf("a failed metadata store did not close in %s; the drive stays offline until the process restarts", closeFailedWait)
	}
}

// storeLogger sends the metadata store's messages to the server's log:
// its informational chatter at debug level, its errors as errors, and a
// fatal error marks the store failed (see store).
type storeLogger struct {
	log   *slog.Logger
	store *store
}

func (l storeLogger) Infof(format string, args ...any) {
	l.log.Debug("metadata store: " + fmt.Sprintf(format, args...))
}

func (l storeLogger) Errorf(format string, args ...any) {
	if l.store.err() == nil { // a failed store's complaints were said once
		l.log.Error("metadata store: " + fmt.Sprintf(format, args...))
	}
}

func (l storeLogger) Fatalf(format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	if l.store.fail(reason) {
		l.log.Error("metadata store failed: the drive is offline until it is reopened", "err", reason)
	}
}

// ProbeFree is the free space a drive needs before its metadata store is
// opened again after a failure: opening replays the store's log into a
// table file, and pebble waits for that flush without end while the disk
// refuses it (64 MiB: four times the memtables of 16 MiB this was sized
// for, and eight of today's).
const ProbeFree = 64 << 20

// Probe checks that the drive at root can be written again: ProbeFree
// bytes free, and a small file written, synced and removed.
func Probe(root string) error {
	fsys := vfs.Default
	if st, err := fsys.Stat(root); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("drive %s: not a directory", root)
	}
	dir := filepath.Join(root, metaDir, "tmp")
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	u, err := fsys.Usage(root)
	if err != nil {
		return err
	}
	if u.Free < ProbeFree {
		return fmt.Errorf("drive %s: %d bytes free, %d needed", root, u.Free, ProbeFree)
	}
	name := filepath.Join(dir, "probe")
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 64<<10))
	err = errors.Join(err, f.Sync(), f.Close(), fsys.Remove(name))
	if err != nil {
		return fmt.Errorf("drive %s: probe write: %w", root, err)
	}
	return nil
}
