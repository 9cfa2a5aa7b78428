package internode

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/vfs"
)

// RemoteDrive is a drive of another node, used through its internode
// service. It implements erasure.Drive.
type RemoteDrive struct {
	peer *Peer
	path string
}

var (
	_ erasure.Drive   = (*RemoteDrive)(nil)
	_ erasure.Batched = (*RemoteDrive)(nil)
)

// Online implements erasure.Liveness: the node answers and says it serves
// the drive.
func (d *RemoteDrive) Online() bool { return d.peer.Online() && d.peer.Serves(d.path) }

// Batcher implements erasure.Batched.
func (d *RemoteDrive) Batcher() erasure.NodeBatcher { return d.peer.batcher() }

// Peer is the node the drive is on.
func (d *RemoteDrive) Peer() *Peer { return d.peer }

// Path is the drive's directory on its node.
func (d *RemoteDrive) Path() string { return d.path }

func (d *RemoteDrive) q(kv ...string) url.Values {
	q := url.Values{"drive": {d.path}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// Format implements erasure.Drive.
func (d *RemoteDrive) Format(ctx context.Context) (drive.Format, error) {
	return opFormat.call(ctx, d, none{})
}

// DiskInfo implements erasure.Drive.
func (d *RemoteDrive) DiskInfo(ctx context.Context) (vfs.Usage, error) {
	return opDiskInfo.call(ctx, d, none{})
}

// MakeBucket implements erasure.Drive.
func (d *RemoteDrive) MakeBucket(ctx context.Context, b drive.BucketInfo) error {
	_, err := opMakeBucket.call(ctx, d, bucketInfoReq{b})
	return err
}

// SetBucket implements erasure.Drive.
func (d *RemoteDrive) SetBucket(ctx context.Context, b drive.BucketInfo) error {
	_, err := opSetBucket.call(ctx, d, bucketInfoReq{b})
	return err
}

// StatBucket implements erasure.Drive.
func (d *RemoteDrive) StatBucket(ctx context.Context, name string) (drive.BucketInfo, error) {
	return opStatBucket.call(ctx, d, bucketReq{name})
}

// BucketUsage implements erasure.Drive.
func (d *RemoteDrive) BucketUsage(ctx context.Context, name string) (drive.Usage, error) {
	return opBucketUsage.call(ctx, d, bucketReq{name})
}

// ListBuckets implements erasure.Drive.
func (d *RemoteDrive) ListBuckets(ctx context.Context) ([]drive.BucketInfo, error) {
	return opListBuckets.call(ctx, d, none{})
}

// DeleteBucket implements erasure.Drive.
func (d *RemoteDrive) DeleteBucket(ctx context.Context, name string, force bool) error {
	_, err := opDeleteBucket.call(ctx, d, deleteBucketReq{name, force})
	return err
}

// PutVersion implements erasure.Drive.
//
// A record with events fails: a single call cannot carry them (they go in
// batches, batch/putevents), and storing the record without them would
// count this drive among those holding them.
func (d *RemoteDrive) PutVersion(ctx context.Context, bucket, object string, rec *drive.Record, stageID [16]byte) (drive.PutResult, error) {
	if len(rec.Events) > 0 {
		return drive.PutResult{}, fmt.Errorf("internode: %s on %s: a record with events goes in a batch, and the peer takes none now", d.path, d.peer.Host)
	}
	stage := ""
	if stageID != drive.NotStaged {
		stage = hexID(stageID)
	}
	var out supersededAnswer
	err := d.peer.call(ctx, opPutVersion.name, d.q("bucket", bucket, "object", object, "stage", stage),
		drive.MarshalRecord(nil, rec), opPutVersion.idempotent, func(r io.Reader) error { return json.NewDecoder(r).Decode(&out) })
	return drive.PutResult{Superseded: out.Superseded}, err
}

// GetVersion implements erasure.Drive.
func (d *RemoteDrive) GetVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	v := ""
	if versionID != nil {
		v = hexID(*versionID)
	}
	var rec *drive.Record
	err := d.peer.call(ctx, opGetVersion.name, d.q("bucket", bucket, "object", object, "version", v), nil,
		opGetVersion.idempotent, func(r io.Reader) error {
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			rec, err = recordAnswer.decode(b)
			return err
		})
	return rec, err
}

// StatVersion implements erasure.Drive: the record with its data (a peer
// that cannot batch reads gets no cheaper call).
func (d *RemoteDrive) StatVersion(ctx context.Context, bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	return d.GetVersion(ctx, bucket, object, versionID)
}

// Versions implements erasure.Drive.
func (d *RemoteDrive) Versions(ctx context.Context, bucket, object string) ([]*drive.Record, error) {
	return opVersions.call(ctx, d, objectReq{bucket, object})
}

// SetVersionMeta implements erasure.Drive.
func (d *RemoteDrive) SetVersionMeta(ctx context.Context, bucket, object string, rec *drive.Record, meta map[string]string) error {
	_, err := opSetVersionMeta.call(ctx, d, versionMetaReq{bucket, object, drive.MarshalRecord(nil, rec), meta})
	return err
}

// DeleteVersion implements erasure.Drive.
func (d *RemoteDrive) DeleteVersion(ctx context.Context, bucket, object string, versionID [16]byte) (*drive.Record, error) {
	return opDeleteVersion.call(ctx, d, objectIDReq{bucket, object, versionID})
}

// RollbackVersion implements erasure.Drive.
func (d *RemoteDrive) RollbackVersion(ctx context.Context, bucket, object string, rec *drive.Record) (bool, error) {
	req := rollbackReq{Bucket: bucket, Object: object, Record: drive.MarshalRecord(nil, rec)}
	if rec.EventID != ([16]byte{}) {
		req.EventID = &rec.EventID
	}
	out, err := opRollbackVersion.call(ctx, d, req)
	return out.Removed, err
}

// CarriesEvents implements erasure.EventDrive: whether the peer stores
// writes' events with their records.
func (d *RemoteDrive) CarriesEvents() bool { return d.peer.Version() >= eventsProtocol }

// eventsPage is how many writes' events a remote listing fetches per call.
const eventsPage = 1000

// ListEvents implements erasure.EventDrive, fetching pages from the peer.
func (d *RemoteDrive) ListEvents(ctx context.Context, after [16]byte, fn func(id [16]byte, events []byte) bool) error {
	for {
		page, err := opListEvents.call(ctx, d, listEventsReq{After: after, Limit: eventsPage})
		if err != nil {
			return err
		}
		for _, e := range page {
			if !fn(e.id, e.events) {
				return nil
			}
			after = e.id
		}
		if len(page) < eventsPage {
			return nil
		}
	}
}

// HasEvent implements erasure.EventDrive with the peer's event listing
// (eventsProtocol has no lookup of its own): the first event after the
// one just before id is id's when the peer holds it.
func (d *RemoteDrive) HasEvent(ctx context.Context, id [16]byte) (bool, error) {
	if id == ([16]byte{}) {
		return false, nil
	}
	before := id
	for i := len(before) - 1; i >= 0; i-- {
		before[i]--
		if before[i] != 0xff {
			break
		}
	}
	page, err := opListEvents.call(ctx, d, listEventsReq{After: before, Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page) > 0 && page[0].id == id, nil
}

// DeleteEvents implements erasure.EventDrive.
func (d *RemoteDrive) DeleteEvents(ctx context.Context, ids [][16]byte) error {
	_, err := opDeleteEvents.call(ctx, d, eventIDsReq{IDs: ids})
	return err
}

// walkPage is how many objects a remote walk fetches per call (a variable
// for tests).
var walkPage = 1000

// WalkObjects implements erasure.Drive, fetching pages from the peer.
func (d *RemoteDrive) WalkObjects(ctx context.Context, bucket, prefix, startAfter string, latestOnly bool, fn func(object string, versions []*drive.Record) bool) error {
	return d.walk(ctx, walkReq{Bucket: bucket, Prefix: prefix, After: startAfter, LatestOnly: latestOnly, Limit: walkPage}, fn)
}

// WalkDelimited is drive.Local's WalkDelimited on the peer's drive. A peer
// of an older build answers a plain walk instead; callers take either.
func (d *RemoteDrive) WalkDelimited(ctx context.Context, bucket, prefix, delimiter, startAfter string, fn func(object string, versions []*drive.Record) bool) error {
	return d.walk(ctx, walkReq{Bucket: bucket, Prefix: prefix, After: startAfter, LatestOnly: true, Limit: walkPage, Delimiter: delimiter}, fn)
}

func (d *RemoteDrive) walk(ctx context.Context, r walkReq, fn func(object string, versions []*drive.Record) bool) error {
	for {
		page, err := opWalkObjects.call(ctx, d, r)
		if err != nil {
			return err
		}
		for _, e := range page {
			if !fn(e.name, e.versions) {
				return nil
			}
			r.After = e.name
			// The next page starts where the peer's walk went on: past
			// the common prefix it skipped.
			if cp, ok := drive.CommonPrefix(e.name, r.Prefix, r.Delimiter); ok && len(e.versions) > 0 && !e.versions[0].IsDeleteMarker() {
				r.After = cp + drive.PastPrefix
			}
		}
		if len(page) < walkPage {
			return nil
		}
	}
}

// CreateStaged implements erasure.Drive: the shard streams to the peer,
// which stages it and answers when the file is closed (it is synced when
// it commits).
func (d *RemoteDrive) CreateStaged(ctx context.Context, id [16]byte, part int) (vfs.File, error) {
	if !d.peer.Online() {
		return nil, fmt.Errorf("%w: %s", ErrNodeOffline, d.peer.Host)
	}
	pr, pw := io.Pipe()
	w := &remoteWriter{pw: pw, done: make(chan error, 1), name: d.path + "/tmp/" + hexID(id)}
	q := d.q("id", hexID(id), "part", strconv.Itoa(part))
	// The stream ends with the caller's context or when the peer is next
	// found offline, whichever comes first.
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.peer.currentEpoch(), cancel)
	go func() {
		defer cancel()
		defer stop()
		err := d.peer.do(sctx, opShardWrite.name, q, nil, pr, nil)
		_ = pr.CloseWithError(err)
		if transportErr(err) && ctx.Err() == nil {
			d.peer.markOffline(err)
		}
		w.done <- err
	}()
	return w, nil
}

// AbortStaged implements erasure.Drive.
func (d *RemoteDrive) AbortStaged(ctx context.Context, id [16]byte) error {
	_, err := opAbortStaged.call(ctx, d, idReq{id})
	return err
}

// OpenShard implements erasure.Drive. No call is made until the first
// read: a shard that is never needed costs nothing.
func (d *RemoteDrive) OpenShard(ctx context.Context, dataDir [16]byte, part int) (vfs.File, error) {
	if !d.peer.Online() {
		return nil, fmt.Errorf("%w: %s", ErrNodeOffline, d.peer.Host)
	}
	return &remoteReader{ctx: ctx, d: d, dataDir: dataDir, part: part}, nil
}

// PutUpload implements erasure.Drive.
func (d *RemoteDrive) PutUpload(ctx context.Context, u *drive.Upload) error {
	_, err := opPutUpload.call(ctx, d, uploadReq{u})
	return err
}

// GetUpload implements erasure.Drive.
func (d *RemoteDrive) GetUpload(ctx context.Context, bucket, object string, id [16]byte) (*drive.Upload, error) {
	return opGetUpload.call(ctx, d, objectIDReq{bucket, object, id})
}

// WalkUploads implements erasure.Drive. The node answers in pages of
// walkUploadsPage; one of an older build answers every upload at once, so
// what it sends before after is skipped here.
func (d *RemoteDrive) WalkUploads(ctx context.Context, bucket, prefix string, after drive.UploadPos, fn func(u *drive.Upload) bool) error {
	for {
		us, err := opWalkUploads.call(ctx, d, uploadsReq{Bucket: bucket, Prefix: prefix, After: after, Limit: walkUploadsPage})
		if err != nil {
			return err
		}
		sent := 0
		for _, u := range us {
			if !after.Less(u.Pos()) {
				continue
			}
			after = u.Pos()
			sent++
			if !fn(u) {
				return nil
			}
		}
		if len(us) < walkUploadsPage || sent == 0 {
			return nil
		}
	}
}

// walkUploadsPage is how many uploads one call of a remote walk returns
// (a variable for tests).
var walkUploadsPage = 1000

// CommitPart implements erasure.Drive.
func (d *RemoteDrive) CommitPart(ctx context.Context, u *drive.Upload, p *drive.PartRecord) error {
	_, err := opCommitPart.call(ctx, d, commitPartReq{u, p})
	return err
}

// ListParts implements erasure.Drive.
func (d *RemoteDrive) ListParts(ctx context.Context, uploadID [16]byte) ([]drive.PartRecord, error) {
	return opListParts.call(ctx, d, idReq{uploadID})
}

// CompleteUpload implements erasure.Drive.
func (d *RemoteDrive) CompleteUpload(ctx context.Context, u *drive.Upload, chosen []drive.PartRecord, rec *drive.Record) (drive.PutResult, error) {
	out, err := opCompleteUpload.call(ctx, d, completeReq{u, chosen, drive.MarshalRecord(nil, rec)})
	return drive.PutResult{Superseded: out.Superseded}, err
}

// ReopenUpload implements erasure.Drive.
func (d *RemoteDrive) ReopenUpload(ctx context.Context, u *drive.Upload, chosen []drive.PartRecord, rec *drive.Record) (bool, error) {
	out, err := opReopenUpload.call(ctx, d, completeReq{u, chosen, drive.MarshalRecord(nil, rec)})
	return out.Reopened, err
}

// AbortUpload implements erasure.Drive.
func (d *RemoteDrive) AbortUpload(ctx context.Context, bucket, object string, id [16]byte) error {
	_, err := opAbortUpload.call(ctx, d, objectIDReq{bucket, object, id})
	return err
}

// remoteWriter streams a shard to a peer.
type remoteWriter struct {
	pw   *io.PipeWriter
	done chan error
	name string
	once sync.Once
	err  error
}

func (w *remoteWriter) Write(p []byte) (int, error) { return w.pw.Write(p) }

// Close ends the stream and waits for the peer to have synced the shard.
func (w *remoteWriter) Close() error {
	w.once.Do(func() {
		_ = w.pw.Close()
		w.err = <-w.done
	})
	return w.err
}
func (w *remoteWriter) Read([]byte) (int, error)          { return 0, errors.ErrUnsupported }
func (w *remoteWriter) ReadAt([]byte, int64) (int, error) { return 0, errors.ErrUnsupported }
func (w *remoteWriter) Sync() error                       { return nil }
func (w *remoteWriter) Stat() (fs.FileInfo, error)        { return nil, errors.ErrUnsupported }
func (w *remoteWriter) Name() string                      { return w.name }

// remoteReader reads a peer's shard by ranges; its reads end with the
// context it was opened with.
type remoteReader struct {
	ctx     context.Context
	d       *RemoteDrive
	dataDir [16]byte
	part    int
}

func (r *remoteReader) ReadAt(p []byte, off int64) (int, error) {
	if r.d.peer.Version() >= framesProtocol {
		body := appendString(nil, r.d.path)
		body = appendBytes(body, r.dataDir[:])
		body = binary.AppendUvarint(body, uint64(r.part))
		body = binary.AppendUvarint(body, uint64(off))
		body = binary.AppendUvarint(body, uint64(len(p)))
		n := 0
		peer := r.d.peer
		err := peer.retryBounded(r.ctx, true, framesBounded, func(ctx context.Context) error {
			b, err := peer.framesInto(ctx, opShardRead.frame, body, p)
			if err == nil {
				if n = len(b); n > 0 && &b[0] != &p[0] {
					n = copy(p, b) // too large for p: not read into it
				}
			}
			return err
		})
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return n, err
	}
	q := r.d.q("datadir", hexID(r.dataDir), "part", strconv.Itoa(r.part), "off", strconv.FormatInt(off, 10), "len", strconv.Itoa(len(p)))
	n := 0
	err := r.d.peer.call(r.ctx, opShardRead.name, q, nil, opShardRead.idempotent, func(rd io.Reader) error {
		var err error
		n, err = io.ReadFull(rd, p)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return io.EOF
		}
		return err
	})
	return n, err
}

func (r *remoteReader) Stat() (fs.FileInfo, error) {
	var out struct{ Size int64 }
	q := r.d.q("datadir", hexID(r.dataDir), "part", strconv.Itoa(r.part))
	err := r.d.peer.call(r.ctx, opShardStat.name, q, nil, opShardStat.idempotent, func(rd io.Reader) error { return json.NewDecoder(rd).Decode(&out) })
	if err != nil {
		return nil, err
	}
	return sizeInfo(out.Size), nil
}

func (r *remoteReader) Read([]byte) (int, error)  { return 0, errors.ErrUnsupported }
func (r *remoteReader) Write([]byte) (int, error) { return 0, errors.ErrUnsupported }
func (r *remoteReader) Close() error              { return nil }
func (r *remoteReader) Sync() error               { return nil }
func (r *remoteReader) Name() string              { return r.d.path + "/data/" + hexID(r.dataDir) }

// sizeInfo is the fs.FileInfo of a remote shard: only its size is known.
type sizeInfo int64

func (s sizeInfo) Name() string       { return "" }
func (s sizeInfo) Size() int64        { return int64(s) }
func (s sizeInfo) Mode() fs.FileMode  { return 0o644 }
func (s sizeInfo) ModTime() time.Time { return time.Time{} }
func (s sizeInfo) IsDir() bool        { return false }
func (s sizeInfo) Sys() any           { return nil }
