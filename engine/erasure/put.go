package erasure

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// PutOptions qualify a PUT.
type PutOptions struct {
	// VersionID of the new version; all zero writes the null version
	// (unversioned or versioning-suspended buckets).
	VersionID [16]byte
	// Meta is user metadata and stored system headers.
	Meta map[string]string
	// ModTime overrides the version time (tests, replication); zero = now.
	ModTime time.Time
}

// PutObject stores an object of size bytes (-1 when unknown) read from r.
// Objects up to the inline limit go into the version record itself (one
// metadata write per drive); larger ones are striped into shard files staged
// on every drive and moved into place when the record commits. The write
// succeeds only when write quorum of drives committed it; otherwise what was
// committed is rolled back and ErrWriteQuorum returned.
func (s *Set) PutObject(bucket, object string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	modTime := opts.ModTime
	if modTime.IsZero() {
		modTime = time.Now()
	}
	rec := &drive.Record{
		VersionID: opts.VersionID,
		ModTime:   modTime.UnixNano(),
		Meta:      opts.Meta,
		Erasure: drive.ErasureInfo{
			Data: s.layout.Data, Parity: s.layout.Parity, BlockSize: s.codec.BlockSize(),
			Distribution: Distribution(bucket, object, s.layout.SetSize()),
		},
	}

	// Decide inline or not without trusting an unknown size. Reading goes
	// one byte past the declared size so the body reaches EOF: verifying
	// readers (Content-MD5, checksums) report a mismatch only there.
	var head []byte
	if size < 0 || size <= s.inlineLimit {
		limit := s.inlineLimit + 1
		if size >= 0 {
			limit = size + 1
		}
		buf, err := io.ReadAll(io.LimitReader(r, limit))
		if err != nil {
			return ObjectInfo{}, err
		}
		switch {
		case size >= 0 && int64(len(buf)) < size:
			return ObjectInfo{}, ErrIncompleteBody
		case size >= 0 && int64(len(buf)) > size:
			return ObjectInfo{}, ErrBodyTooLong
		case int64(len(buf)) <= s.inlineLimit:
			return s.putInline(bucket, object, rec, buf)
		}
		head = buf
	}
	return s.putStreaming(bucket, object, rec, io.MultiReader(bytes.NewReader(head), r), size)
}

func (s *Set) putInline(bucket, object string, rec *drive.Record, data []byte) (ObjectInfo, error) {
	sum := md5.Sum(data)
	rec.Flags |= drive.FlagInline
	rec.Size = int64(len(data))
	rec.ETag = hex.EncodeToString(sum[:])
	var shards [][]byte
	if len(data) > 0 {
		var err error
		if shards, err = s.codec.EncodeBlock(data); err != nil {
			return ObjectInfo{}, err
		}
	}
	errs := s.forEach(func(pos int, d Drive) error {
		own := *rec
		own.Erasure.Index = rec.Erasure.Distribution[pos]
		if shards != nil {
			own.Inline = drive.AppendBitrot(nil, shards[own.Erasure.Index], s.codec.ShardBlockSize())
		}
		_, err := d.PutVersion(bucket, object, &own, false)
		return err
	})
	return s.finishPut(bucket, object, rec, errs)
}

// shardSink is one drive's staged shard file behind a buffered bitrot writer.
type shardSink struct {
	file vfs.File
	buf  *bufio.Writer
	bw   *drive.BitrotWriter
}

func (s *Set) putStreaming(bucket, object string, rec *drive.Record, r io.Reader, size int64) (ObjectInfo, error) {
	rec.DataDir = uuid.New()
	sinks := make([]*shardSink, len(s.drives))
	writers := make([]BlockWriter, len(s.drives))
	openErrs := s.forEach(func(pos int, d Drive) error {
		f, err := d.CreateStaged(rec.DataDir, 1)
		if err != nil {
			return err
		}
		buf := bufio.NewWriterSize(f, s.codec.ShardBlockSize()+drive.BitrotChecksumSize)
		sinks[pos] = &shardSink{file: f, buf: buf, bw: drive.NewBitrotWriter(buf)}
		return nil
	})
	for pos, sink := range sinks {
		if openErrs[pos] == nil {
			writers[rec.Erasure.Distribution[pos]] = sink.bw
		}
	}
	abort := func() {
		s.forEach(func(pos int, d Drive) error {
			if sinks[pos] != nil {
				_ = sinks[pos].file.Close()
			}
			return d.AbortStaged(rec.DataDir)
		})
	}

	md5sum := md5.New()
	n, writeErrs, err := s.codec.Encode(io.TeeReader(r, md5sum), writers, s.layout.WriteQuorum())
	switch {
	case err == nil && size >= 0 && n < size:
		err = ErrIncompleteBody
	case err == nil && size >= 0 && n > size:
		err = ErrBodyTooLong
	}
	if err != nil {
		abort()
		if errors.Is(err, ErrWriteQuorum) {
			return ObjectInfo{}, fmt.Errorf("%w: writing shards: %s", ErrWriteQuorum, detail(writeErrs))
		}
		return ObjectInfo{}, err
	}
	rec.Size = n
	rec.ETag = hexSum(md5sum)

	errs := s.forEach(func(pos int, d Drive) error {
		if openErrs[pos] != nil {
			return openErrs[pos]
		}
		sink := sinks[pos]
		if werr := writeErrs[rec.Erasure.Distribution[pos]]; werr != nil {
			_ = sink.file.Close()
			_ = d.AbortStaged(rec.DataDir)
			return werr
		}
		if err := sink.buf.Flush(); err != nil {
			_ = sink.file.Close()
			_ = d.AbortStaged(rec.DataDir)
			return err
		}
		if err := d.SyncFile(sink.file); err != nil {
			_ = sink.file.Close()
			_ = d.AbortStaged(rec.DataDir)
			return err
		}
		if err := sink.file.Close(); err != nil {
			_ = d.AbortStaged(rec.DataDir)
			return err
		}
		own := *rec
		own.Erasure.Index = rec.Erasure.Distribution[pos]
		_, err := d.PutVersion(bucket, object, &own, true)
		if err != nil {
			_ = d.AbortStaged(rec.DataDir)
		}
		return err
	})
	return s.finishPut(bucket, object, rec, errs)
}

// finishPut checks write quorum and rolls back a write that missed it, so a
// failed PUT leaves no visible version.
func (s *Set) finishPut(bucket, object string, rec *drive.Record, errs []error) (ObjectInfo, error) {
	if countNil(errs) >= s.layout.WriteQuorum() {
		return infoFromRecord(bucket, object, rec), nil
	}
	s.forEach(func(pos int, d Drive) error {
		if errs[pos] == nil {
			_, _ = d.RollbackVersion(bucket, object, rec)
		}
		return nil
	})
	return ObjectInfo{}, fmt.Errorf("%w: %d of %d drives committed %s/%s, %d needed (%s)",
		ErrWriteQuorum, countNil(errs), len(errs), bucket, object, s.layout.WriteQuorum(), detail(errs))
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
