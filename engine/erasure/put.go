package erasure

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/bodymd5"
	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/vfs"
)

// PutObject stores an object of size bytes (-1 when unknown) read from r.
// Objects up to the inline limit go into the version record itself (one
// metadata write per drive); larger ones are striped into shard files staged
// on every drive and moved into place when the record commits. The write
// succeeds only when write quorum of drives committed it; otherwise what was
// committed is rolled back and ErrWriteQuorum returned. Drives much slower
// than the quorum are not waited for beyond the write's allowance
// (slowwrite.go).
func (s *Set) PutObject(ctx context.Context, bucket, object string, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	modTime := opts.ModTime
	if modTime.IsZero() {
		modTime = hlc.Now() // see package hlc: never older than what this node saw
	}
	rec := &drive.Record{
		VersionID: opts.VersionID,
		ModTime:   modTime.UnixNano(),
		Meta:      opts.Meta,
		Erasure:   s.erasureInfo(bucket, object),
	}
	drives := s.writeDrives()
	w := s.newWriteWait()

	// Decide inline or not without trusting an unknown size. Reading goes
	// one byte past the declared size so the body reaches EOF: verifying
	// readers (Content-MD5, checksums) report a mismatch only there.
	var head []byte
	if size < 0 || size <= s.inlineLimit {
		limit := s.inlineLimit + 1
		if size >= 0 {
			limit = size + 1
		}
		buf, err := readUpTo(r, limit)
		if err != nil {
			return objlayer.ObjectInfo{}, err
		}
		switch {
		case size >= 0 && int64(len(buf)) < size:
			return objlayer.ObjectInfo{}, objlayer.ErrIncompleteBody
		case size >= 0 && int64(len(buf)) > size:
			return objlayer.ObjectInfo{}, objlayer.ErrBodyTooLong
		case int64(len(buf)) <= s.inlineLimit:
			if err := s.afterBody(ctx, bucket, object, rec, opts); err != nil {
				return objlayer.ObjectInfo{}, err
			}
			return s.putInline(ctx, w, drives, bucket, object, rec, buf, opts.ETagFor(), !opts.ModTime.IsZero(), newWriteEvents(bucket, object, opts, drives))
		}
		head = buf
	}
	return s.putStreaming(ctx, w, drives, bucket, object, rec, io.MultiReader(bytes.NewReader(head), r), size, opts)
}

// afterBody runs the options' AfterBody on the record's metadata, then
// their Condition on the key's current version; either's error refuses
// the write.
func (s *Set) afterBody(ctx context.Context, bucket, object string, rec *drive.Record, opts objlayer.PutOptions) error {
	if opts.AfterBody != nil {
		if rec.Meta == nil {
			rec.Meta = map[string]string{}
		}
		if err := opts.AfterBody(rec.Meta); err != nil {
			return err
		}
	}
	return s.checkCondition(ctx, bucket, object, opts.Condition)
}

// checkCondition calls cond with the key's current version (nil when it
// has none), right before a commit.
func (s *Set) checkCondition(ctx context.Context, bucket, object string, cond func(*objlayer.ObjectInfo) error) error {
	if cond == nil {
		return nil
	}
	h, err := s.openObject(ctx, bucket, object, nil, openMeta)
	switch {
	case errors.Is(err, objlayer.ErrObjectNotFound):
		return cond(nil)
	case err != nil:
		return err
	}
	info := h.Info
	return cond(&info)
}

// readUpTo reads at most limit bytes into a buffer of that size: it
// decides whether a body is small enough to keep inline, so limit is at
// most the inline limit and one byte (a buffer grown by doubling copied
// the body up to three times).
func readUpTo(r io.Reader, limit int64) ([]byte, error) {
	buf := make([]byte, limit)
	n, err := readInto(r, buf)
	return buf[:n], err
}

// readInto fills b from r, or up to the end of the body: the bytes read,
// and ErrIncompleteBody when the connection ended inside the body.
func readInto(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		switch {
		case errors.Is(err, io.EOF):
			return n, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			return n, objlayer.ErrIncompleteBody
		case err != nil:
			return n, err
		}
	}
	return n, nil
}

func (s *Set) erasureInfo(bucket, object string) drive.ErasureInfo {
	return drive.ErasureInfo{
		Data: s.layout.Data, Parity: s.layout.Parity, BlockSize: s.codec.BlockSize(),
		Distribution: Distribution(bucket, object, s.layout.SetSize()),
	}
}

// inlineShards erasure-codes a small object and frames each shard for
// storing in a record (nil for an empty object).
func (s *Set) inlineShards(data []byte) ([][]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	shards, err := s.codec.EncodeBlock(data)
	if err != nil {
		return nil, err
	}
	framed := make([][]byte, len(shards))
	for i, sh := range shards {
		framed[i] = drive.AppendBitrot(nil, sh, s.codec.ShardBlockSize())
	}
	return framed, nil
}

// ownRecord is rec as the drive at pos stores it: its shard index and, for
// an inline object, its shard.
func ownRecord(rec *drive.Record, pos int, inline [][]byte) *drive.Record {
	own := *rec
	if len(rec.Erasure.Distribution) == 0 {
		return &own // a delete marker has no shards
	}
	own.Erasure.Index = rec.Erasure.Distribution[pos]
	if inline != nil {
		own.Inline = inline[own.Erasure.Index]
	}
	return &own
}

func (s *Set) putInline(ctx context.Context, w *writeWait, drives []Drive, bucket, object string, rec *drive.Record, data []byte, etag string, moved bool,
	events *writeEvents) (objlayer.ObjectInfo, error) {
	rec.Flags |= drive.FlagInline
	if rec.DataDir == ([16]byte{}) {
		// No shard files, but an ID of the write all the same: a drive
		// tells a write stamped again from another write by it (what a
		// rollback puts back: drive.RollbackVersion).
		rec.DataDir = uuid.New()
	}
	rec.Size = int64(len(data))
	rec.ETag = etag
	if etag == "" {
		sum := md5.Sum(data)
		rec.ETag = hex.EncodeToString(sum[:])
	}
	shards, err := s.inlineShards(data)
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	errs := s.commitVersion(ctx, drives, bucket, object, rec, moved, events,
		s.commitRecords(ctx, w, drives, bucket, object, rec, func(pos int) *drive.Record { return events.own(ownRecord(rec, pos, shards), pos) }))
	return s.finishEvents(ctx, drives, bucket, object, events, rec, errs)
}

// finishEvents is finishPut for a write that may carry events: the answer
// names them when they are stored with the version (writeEvents.stored).
func (s *Set) finishEvents(ctx context.Context, drives []Drive, bucket, object string, events *writeEvents, rec *drive.Record, errs []error) (objlayer.ObjectInfo, error) {
	info, err := s.finishPut(ctx, drives, bucket, object, rec, errs)
	if err == nil && events.stored(ctx, s, drives, rec, errs) {
		info.EventID = rec.EventID
	}
	return info, err
}

// shardSink is one drive's staged shard file behind a bitrot writer, and
// a buffer between them unless the file gathers writes itself (an O_DIRECT
// file copies them into its aligned buffer: a second buffer in front of it
// cost a shard block's allocation and copy per shard and PUT).
type shardSink struct {
	ctx  context.Context
	d    Drive
	id   [16]byte
	file vfs.File
	buf  *bufio.Writer // nil when file gathers writes
	bw   *drive.BitrotWriter
}

// sinkBufs recycles the buffers of shard files that do not gather writes
// (relaxed mode's page-cache files, filesystems refusing O_DIRECT).
var sinkBufs sync.Pool

func newShardSink(ctx context.Context, d Drive, id [16]byte, f vfs.File, shardBlockSize int) *shardSink {
	s := &shardSink{ctx: ctx, d: d, id: id, file: f}
	if vfs.GathersWrites(f) {
		s.bw = drive.NewBitrotWriter(f)
		return s
	}
	size := shardBlockSize + drive.BitrotChecksumSize
	if b, ok := sinkBufs.Get().(*bufio.Writer); ok && b.Size() == size {
		b.Reset(f)
		s.buf = b
	} else {
		s.buf = bufio.NewWriterSize(f, size)
	}
	s.bw = drive.NewBitrotWriter(s.buf)
	return s
}

// WriteBlock implements BlockWriter.
func (s *shardSink) WriteBlock(block []byte) error { return s.bw.WriteBlock(block) }

// finish flushes and closes a complete shard (it is synced when it
// commits, with its directory: PutVersion). An incomplete one, or one that
// fails to flush, is closed and its staging directory removed: a shard
// abandoned half-written is never left to commit.
func (s *shardSink) finish(complete bool) error {
	var err error
	if complete && s.buf != nil {
		err = s.buf.Flush()
	}
	if s.buf != nil {
		s.buf.Reset(nil)
		sinkBufs.Put(s.buf)
		s.buf = nil
	}
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	if !complete || err != nil {
		s.discard()
	}
	return err
}

// discard removes the shard's staging directory.
func (s *shardSink) discard() { _ = s.d.AbortStaged(committing(s.ctx), s.id) }

// staged is the outcome of erasure-coding a stream into staged shard files.
type staged struct {
	size int64
	etag string
	// errs[pos] is nil when the drive at pos holds its complete shard.
	errs []error
}

// stageShards erasure-codes r into shard file part (1-based) under tmp/<id>
// on every drive of the snapshot, flushed. The encode goes on while write
// quorum of drives keep up; otherwise everything staged is removed and the
// error returned. A drive more than the write's allowance behind is left
// behind (its shard removed; errLeftBehind). size < 0 means unknown; a
// body shorter or longer than a known size fails the same way.
func (s *Set) stageShards(ctx context.Context, w *writeWait, drives []Drive, id [16]byte, part int, dist []int, r io.Reader, size int64, withMD5 bool) (staged, error) {
	// Nothing is staged (a file and write buffers on every drive) until
	// the body's first block has arrived: a client that sends its header
	// and then trickles, or nothing, holds a small buffer and no
	// descriptor (TestSlowClientFlood).
	first := int64(s.codec.BlockSize())
	if size >= 0 {
		first = min(first, size)
	}
	head, err := s.codec.readHead(r, first)
	if err != nil {
		head.release(&s.codec.blocks)
		return staged{}, err
	}
	files, errs := forEachDriveWait(w, drives, func(pos int, d Drive) (vfs.File, error) {
		return d.CreateStaged(ctx, id, part)
	}, errLeftBehind, func(pos int, f vfs.File, err error) {
		if err == nil {
			_ = f.Close()
		}
		_ = drives[pos].AbortStaged(committing(ctx), id)
	})
	writers := make([]BlockWriter, len(drives))
	posOf := make([]int, len(drives))
	for pos, f := range files {
		posOf[dist[pos]] = pos
		if errs[pos] == nil {
			writers[dist[pos]] = newShardSink(ctx, drives[pos], id, f, s.codec.ShardBlockSize())
		}
	}

	// The MD5 of the stored bytes is the ETag, unless the caller has it
	// from elsewhere (an encrypted body's plaintext, a Content-MD5 the
	// payload checked): then it is not spent.
	src := r
	if size >= 0 {
		src = &exactly{r: r, left: size - int64(len(head.data))}
	}
	var sum bodymd5.Hash
	if withMD5 {
		sum = bodymd5.Shared.New()
		defer sum.Close()
	}
	n, writeErrs, err := s.codec.encode(head, src, writers, s.layout.WriteQuorum(), w, posOf, sum)
	for pos := range drives {
		if errs[pos] == nil {
			errs[pos] = writeErrs[dist[pos]]
		}
	}
	if err != nil {
		// The writers removed what they staged; a drive that failed to
		// open its file may hold the directory. Those left behind clean
		// up on their own.
		forEachDrive(drives, func(pos int, d Drive) error {
			if !errors.Is(errs[pos], errLeftBehind) {
				_ = d.AbortStaged(committing(ctx), id)
			}
			return nil
		})
		if errors.Is(err, objlayer.ErrWriteQuorum) {
			return staged{}, fmt.Errorf("%w: writing shards: %s", objlayer.ErrWriteQuorum, detail(errs))
		}
		return staged{}, err
	}
	return staged{size: n, etag: hexSum(sum), errs: errs}, nil
}

// exactly reads a body of a known size: ErrIncompleteBody when it ends
// short of it, ErrBodyTooLong as soon as it runs past.
type exactly struct {
	r    io.Reader
	left int64
}

func (e *exactly) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case e.left < 0:
		return n, objlayer.ErrBodyTooLong
	case e.left > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		return n, objlayer.ErrIncompleteBody
	}
	return n, err
}

func (s *Set) putStreaming(ctx context.Context, w *writeWait, drives []Drive, bucket, object string, rec *drive.Record, r io.Reader, size int64, opts objlayer.PutOptions) (objlayer.ObjectInfo, error) {
	rec.DataDir = uuid.New()
	st, err := s.stageShards(ctx, w, drives, rec.DataDir, 1, rec.Erasure.Distribution, r, size, opts.BodyETag == nil && opts.ETag == "")
	if err != nil {
		return objlayer.ObjectInfo{}, err
	}
	if opts.ModTime.IsZero() {
		// The version's time is when it commits, not when its upload
		// began: last writer wins by completion, as S3 reports it.
		rec.ModTime = hlc.Default.Now()
	}
	if err := s.afterBody(ctx, bucket, object, rec, opts); err != nil {
		for pos, d := range drives {
			if st.errs[pos] == nil && d != nil {
				_ = d.AbortStaged(committing(ctx), rec.DataDir)
			}
		}
		return objlayer.ObjectInfo{}, err
	}
	rec.Size = st.size
	rec.ETag = st.etag
	if etag := opts.ETagFor(); etag != "" {
		rec.ETag = etag
	}
	events := newWriteEvents(bucket, object, opts, drives)
	errs := s.commitVersion(ctx, drives, bucket, object, rec, !opts.ModTime.IsZero(), events, func(committed []bool) []error {
		return putVersions(ctx, w, drives, bucket, object, func(pos int) (*drive.Record, [16]byte, error) {
			switch {
			case st.errs[pos] != nil:
				return nil, drive.NotStaged, st.errs[pos]
			case committed[pos]: // its files are in place already
				return events.own(ownRecord(rec, pos, nil), pos), drive.NotStaged, nil
			}
			return events.own(ownRecord(rec, pos, nil), pos), rec.DataDir, nil
		}, func(pos int, err error) {
			if err != nil {
				_ = drives[pos].AbortStaged(committing(ctx), rec.DataDir)
				s.partialWrite(bucket, object, rec.VersionID)
			}
		})
	})
	for pos, err := range errs {
		if err != nil && !errors.Is(err, errStillCommitting) && st.errs[pos] == nil && drives[pos] != nil {
			_ = drives[pos].AbortStaged(committing(ctx), rec.DataDir)
		}
	}
	return s.finishEvents(ctx, drives, bucket, object, events, rec, errs)
}

// finishPut checks write quorum and rolls back a write that missed it, so a
// failed PUT leaves no visible version. A write that reached quorum but not
// every drive is reported to the heal hook (a drive still committing, only
// if its commit fails: putVersions' late).
//
// A write that drives dropped because they hold a newer null version
// (drive.ErrSuperseded) is not done either: it would answer success and
// never be seen. That happens to a write stamped in the same instant as
// another, or through a node whose clock lags one that wrote before it by
// more than the pings have yet told it (see package hlc). The write fails
// with ErrWriteQuorum (503 SlowDown, which clients retry) after this
// node's clock has moved past the newer version's stamp, so a retry wins;
// commitVersion has stamped it again first, so that is left to a write
// that lost maxRestamps races in a row.
func (s *Set) finishPut(ctx context.Context, drives []Drive, bucket, object string, rec *drive.Record, errs []error) (objlayer.ObjectInfo, error) {
	if countNil(errs) >= s.layout.WriteQuorum() {
		if countNil(errs)+countIs(errs, errStillCommitting) < len(errs) {
			s.partialWrite(bucket, object, rec.VersionID)
		}
		return infoFromRecord(bucket, object, rec), nil
	}
	forEachDrive(drives, func(pos int, d Drive) error {
		if errs[pos] == nil {
			_, _ = d.RollbackVersion(committing(ctx), bucket, object, rec)
		}
		return nil
	})
	if countIs(errs, drive.ErrSuperseded) > 0 {
		observeNewest(ctx, drives, bucket, object)
		return objlayer.ObjectInfo{}, fmt.Errorf("%w: %w: %s/%s was written with a later stamp while this write committed (%d of %d drives hold the newer one); retry",
			objlayer.ErrWriteQuorum, drive.ErrSuperseded, bucket, object, countIs(errs, drive.ErrSuperseded), len(errs))
	}
	return objlayer.ObjectInfo{}, fmt.Errorf("%w: %d of %d drives committed %s/%s, %d needed (%s)",
		objlayer.ErrWriteQuorum, countNil(errs), len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
}

// commitVersion commits a version on every drive: commit runs one round
// (committed marks the drives that took an earlier stamp of this version
// in a round before). When drives dropped it as older than a null version
// they hold (drive.ErrSuperseded) and it missed quorum, it is stamped
// again, past the newest stamp the drives hold, and committed once more
// (up to maxRestamps times): a write concurrent with another, or through a
// node whose clock lags, ends as the latest instead of failing. A drive
// that dropped it kept its staged files (or upload) for this; one that
// committed an earlier stamp takes the new one over it, its files already
// in place. A moved version (its own time) is not stamped again: the newer
// one rightly wins, and the move counts as done. events, when not nil,
// sets the version's events (drive.Record.Events) before each round, from
// its stamp of that round.
func (s *Set) commitVersion(ctx context.Context, drives []Drive, bucket, object string, rec *drive.Record, moved bool,
	events *writeEvents, commit func(committed []bool) []error) []error {
	committed := make([]bool, len(drives))
	events.stamp(rec)
	errs := commit(committed)
	if moved {
		acceptSuperseded(errs)
		return errs
	}
	for range maxRestamps {
		if countNil(errs) >= s.layout.WriteQuorum() || countIs(errs, drive.ErrSuperseded) == 0 {
			break
		}
		for pos, err := range errs {
			committed[pos] = committed[pos] || err == nil
		}
		observeNewest(ctx, drives, bucket, object)
		rec.ModTime = hlc.Default.Now()
		events.stamp(rec)
		errs = commit(committed)
	}
	return errs
}

// commitRecords is a commitVersion round for a version whose drives take
// only its record (an inline object, a delete marker), within the write's
// budget w: a drive whose late commit fails is healed.
func (s *Set) commitRecords(ctx context.Context, w *writeWait, drives []Drive, bucket, object string, rec *drive.Record, own func(pos int) *drive.Record) func([]bool) []error {
	return func([]bool) []error {
		return putVersions(ctx, w, drives, bucket, object, func(pos int) (*drive.Record, [16]byte, error) {
			return own(pos), drive.NotStaged, nil
		}, func(_ int, err error) {
			if err != nil {
				s.partialWrite(bucket, object, rec.VersionID)
			}
		})
	}
}

// maxRestamps bounds commitVersion's new stamps: each loses only to a
// write committed meanwhile with a later one (writers racing on one key).
// A variable for tests.
var maxRestamps = 8

// observeNewest moves this node's clock past the stamps of the latest
// versions the drives hold.
func observeNewest(ctx context.Context, drives []Drive, bucket, object string) {
	recs, _ := getVersionsTimed(ctx, drives, GetItem{Bucket: bucket, Object: object, WithoutData: true}, nil)
	for _, r := range recs {
		if r != nil {
			hlc.Default.Observe(r.ModTime)
		}
	}
}

// acceptSuperseded counts a drive that held a newer null version as done,
// for writes that carry their own time (a version moved by a
// decommission): the newer version rightly wins there.
func acceptSuperseded(errs []error) {
	for pos, err := range errs {
		if errors.Is(err, drive.ErrSuperseded) {
			errs[pos] = nil
		}
	}
}

// countIs counts the errors that are target.
func countIs(errs []error, target error) int {
	n := 0
	for _, err := range errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

func hexSum(h hash.Hash) string {
	if h == nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
