package s3api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/admin"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// Bucket replication (engine/replicate): the configuration's API, the
// replication events a write stores with its version beside its
// notifications, the status a version answers, the replica writes a
// remote sends, and the front end as the remotes' Source.

func putBucketReplication(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if bk.Versioning != "Enabled" {
		return s3err.InvalidRequest.With("Versioning must be 'Enabled' on the bucket to apply a replication configuration")
	}
	body, err := r.document()
	if err != nil {
		return err
	}
	cfg, err := replicate.Parse(body, func(role string) bool {
		return strings.HasPrefix(role, notifytargets.RemoteARNPrefix) && r.s.cfg.Notifier != nil && r.s.cfg.Notifier.Known(role)
	})
	if err != nil {
		return configRefused(err)
	}
	doc := cfg.Marshal()
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Replication = doc }), http.StatusOK)
}

func getBucketReplication(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	if len(bk.Replication) == 0 {
		return s3err.ReplicationConfigurationNotFound.Field("BucketName", bk.Name)
	}
	return r.writeDoc(http.StatusOK, "application/xml", append([]byte(xmlHeader), bk.Replication...))
}

func deleteBucketReplication(r *request) error {
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Replication = nil }), http.StatusNoContent)
}

// replicationRules are the queue rules (target: the configuration's
// remote, ID: the rule's) for the replication event of a change of key
// (meta: the version's, for tag filters), none for a replica's change:
// replicas are not replicated again, so two buckets replicating to each
// other do not loop.
func (r *request) replicationRules(bk objlayer.BucketInfo, event, key string, meta map[string]string) []*notify.Rule {
	cfg := replicate.Cached(bk.Replication)
	if cfg == nil || r.replica || r.s.cfg.Notifier == nil {
		return nil
	}
	var tags map[string]string
	if v := meta[objlayer.MetaTagging]; v != "" {
		tags = s3rules.DecodeTagQuery(v)
	}
	var out []*notify.Rule
	for _, rule := range cfg.Match(key, tags) {
		switch {
		case strings.HasPrefix(event, "s3:ObjectCreated:"), strings.HasPrefix(event, "s3:ObjectTagging:"):
		case event == notify.ObjectRemovedDeleteMarker && rule.DeleteMarkers:
		case event == notify.ObjectRemovedDelete && rule.Deletes:
		default:
			continue
		}
		out = append(out, &notify.Rule{ID: rule.ID, Kind: "Replication", Target: cfg.Role})
	}
	return out
}

// replicationStatus is what x-amz-replication-status answers for a
// version: its stored status; "" when no rule covers it; else PENDING,
// or, for a version whose status follows its stored event
// (replicate.MetaEvent), COMPLETED once that event is gone.
func (s *Server) replicationStatus(ctx context.Context, bk objlayer.BucketInfo, key string, info objlayer.ObjectInfo) string {
	if st := info.Meta[replicate.MetaStatus]; st != "" {
		return st
	}
	cfg := replicate.Cached(bk.Replication)
	if cfg == nil || info.DeleteMarker {
		return ""
	}
	var tags map[string]string
	if v := info.Meta[objlayer.MetaTagging]; v != "" {
		tags = s3rules.DecodeTagQuery(v)
	}
	if len(cfg.Match(key, tags)) == 0 {
		return ""
	}
	if s.eventDelivered(ctx, bk.Name, key, info) {
		return replicate.StatusCompleted
	}
	return replicate.StatusPending
}

// eventDelivered reports whether info is a version whose status follows
// its stored replication event and that event is gone. Any doubt (no
// mark, a lookup that failed) answers false. An event found gone is
// remembered (s.delivered): its version's later reads ask no drive.
func (s *Server) eventDelivered(ctx context.Context, bucket, key string, info objlayer.ObjectInfo) bool {
	id, ok := objlayer.ParseEventMark(info.Meta[replicate.MetaEvent])
	es, isStore := s.layer.(objlayer.EventStore)
	if !ok || !isStore {
		return false
	}
	if s.delivered.has(id) {
		return true
	}
	stored, err := es.EventStored(ctx, objlayer.EventRef{Bucket: bucket, Object: key, ID: id})
	if err != nil || stored {
		return false
	}
	s.delivered.add(id)
	return true
}

// replicaRequest reports whether the request is a replication remote's
// (it carries the replica headers), after checking the principal may
// replicate (action) into the bucket: the request is then not replicated
// again.
func (r *request) replicaRequest(bk objlayer.BucketInfo, action s3rules.Action) (bool, error) {
	if r.h(replicate.HeaderVersionID) == "" && r.h(replicate.HeaderReplica) == "" {
		return false, nil
	}
	if !r.signedReplicaHeaders() {
		return false, s3err.AccessDenied.With("Replica headers must be signed in the Authorization header (a presigned URL cannot carry them).")
	}
	if err := r.allowed(bk, r.key, "", []s3rules.Action{action}, s3rules.PermWrite, false); err != nil {
		return false, s3err.AccessDenied.With("Replica writes need " + string(action) + " on the bucket.")
	}
	r.replica = true
	return true, nil
}

// signedReplicaHeaders reports whether the request's Signature V4
// Authorization header signs every replica header it carries: S3 only
// requires x-amz-* headers to be signed, so an unsigned X-Strata-Replica-*
// header could be added to a request signed by someone else (a presigned
// URL's holder).
func (r *request) signedReplicaHeaders() bool {
	_, rest, ok := strings.Cut(r.h("Authorization"), "SignedHeaders=")
	if !ok {
		return false
	}
	signed, _, _ := strings.Cut(rest, ",")
	names := strings.Split(signed, ";")
	for _, h := range []string{replicate.HeaderVersionID, replicate.HeaderModTime, replicate.HeaderETag, replicate.HeaderReplica} {
		if r.h(h) != "" && !slices.Contains(names, strings.ToLower(h)) {
			return false
		}
	}
	return true
}

// errReplicaHeld is a replica write of a version the bucket holds already
// (a retry, a resync): nothing is written.
type errReplicaHeld struct{ info objlayer.ObjectInfo }

func (e *errReplicaHeld) Error() string { return "the replica is held already" }

// checkReplicaVersion refuses a replica write that would replace a
// version of the same ID and other content (a replica never changes a
// version: object lock and the data's integrity hold), and turns one of
// the same content into errReplicaHeld. size is the replica's (-1:
// not known, a multipart completion).
func (r *request) checkReplicaVersion(bk objlayer.BucketInfo, id [16]byte, marker bool, size int64) error {
	h, err := r.s.layer.OpenObjectMeta(r.ctx, bk.Name, r.key, &id)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	info := h.Info()
	h.Close()
	switch {
	case info.DeleteMarker && marker:
		return &errReplicaHeld{info: info}
	case marker || info.DeleteMarker:
		return s3err.InvalidRequest.With("The bucket holds this version ID as another kind of version.")
	}
	plain := plainInfo(info)
	if etag := r.h(replicate.HeaderETag); etag != "" && etag != plain.ETag || size >= 0 && size != plain.Size {
		return s3err.InvalidRequest.With("The bucket holds this version ID with other content: a replica does not replace a version.")
	}
	return &errReplicaHeld{info: plain}
}

// replicaVersion is the version ID a replica write keeps (the source's),
// in a bucket whose versioning is enabled.
func (r *request) replicaVersion(bk objlayer.BucketInfo) ([16]byte, error) {
	if bk.Versioning != "Enabled" {
		return [16]byte{}, s3err.InvalidRequest.With("A replication destination bucket must have versioning enabled.")
	}
	// The source's form: a UUID, a gateway's older ULID, or "null" (a
	// version written before the source's versioning was enabled).
	id, err := objlayer.ParseVersionID(r.h(replicate.HeaderVersionID))
	if err != nil {
		return [16]byte{}, s3err.InvalidArgumentNamed("Invalid replica version id", replicate.HeaderVersionID, r.h(replicate.HeaderVersionID))
	}
	return id, nil
}

// replicaWrite makes a write from a replication remote keep the source
// version's ID, time and ETag, and marks it REPLICA: a PUT of size bytes,
// or a multipart completion (size -1, opts.Meta nil: the upload's
// metadata is marked as the completion takes it).
func (r *request) replicaWrite(bk objlayer.BucketInfo, opts *objlayer.PutOptions, size int64) error {
	is, err := r.replicaRequest(bk, s3rules.ActReplicateObject)
	if !is || err != nil {
		return err
	}
	if r.h(replicate.HeaderVersionID) == "" {
		return nil
	}
	if opts.VersionID, err = r.replicaVersion(bk); err != nil {
		return err
	}
	if err := r.checkReplicaVersion(bk, opts.VersionID, false, size); err != nil {
		return err
	}
	if v := r.h(replicate.HeaderModTime); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return s3err.InvalidArgumentNamed("Invalid replica modification time", replicate.HeaderModTime, v)
		}
		opts.ModTime = t
	}
	if opts.Meta != nil {
		opts.Meta[replicate.MetaStatus] = replicate.StatusReplica
		return nil
	}
	complete := opts.CompleteParts
	opts.CompleteParts = func(parts []objlayer.PartInfo, meta map[string]string) error {
		if complete != nil {
			if err := complete(parts, meta); err != nil {
				return err
			}
		}
		meta[replicate.MetaStatus] = replicate.StatusReplica
		return nil
	}
	return nil
}

// keepReplicaETag has a replica keep the source version's ETag (a
// multipart one's "-N" form, which a single PUT would not make).
func (r *request) keepReplicaETag(opts *objlayer.PutOptions) {
	if !r.replica {
		return
	}
	if etag := r.h(replicate.HeaderETag); etag != "" {
		opts.ETag, opts.BodyETag = etag, nil
	}
}

// ReplicationSource is the front end as the replication remotes read the
// versions they copy (decrypted) and record what became of them.
func (s *Server) ReplicationSource() replicate.Source { return replicationSource{s} }

type replicationSource struct{ s *Server }

func (rs replicationSource) Config(ctx context.Context, bucket string) (*replicate.Config, error) {
	bk, err := rs.s.layer.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	return replicate.Cached(bk.Replication), nil
}

// describe is a stored version (not a delete marker) as a copy of it
// carries it, and the key that decrypts it (nil when not encrypted).
func (rs replicationSource) describe(bucket, key, versionID string, stored objlayer.ObjectInfo) (*replicate.Version, []byte, error) {
	info := plainInfo(stored)
	meta := info.Meta
	v := &replicate.Version{VersionID: versionID, Header: http.Header{}, Size: info.Size, ModTime: info.ModTime,
		ETag: info.ETag, Status: meta[replicate.MetaStatus], Tags: s3rules.DecodeTagQuery(meta[objlayer.MetaTagging]),
		StatusFollowsEvent: meta[replicate.MetaEvent] != ""}
	if !strings.Contains(info.ETag, "-") {
		v.MD5 = info.ETag
	}
	// The parts' ETags are their plaintext's MD5s unencrypted and under
	// SSE-S3 (SSE-KMS's are keyed hashes; the gateway keeps none).
	md5s := !encrypted(meta) || sseMode(meta[metaSSE]) == sseS3
	for _, p := range info.Parts {
		v.Parts = append(v.Parts, p.Size)
		v.PartMD5s = append(v.PartMD5s, p.ETag)
		md5s = md5s && len(p.ETag) == 32
	}
	if !md5s {
		v.PartMD5s = nil
	}
	for _, k := range storedHeaders {
		if val, ok := meta[k]; ok {
			v.Header[k] = []string{val}
		}
	}
	setUserMeta(v.Header, meta)
	if t := meta[objlayer.MetaTagging]; t != "" {
		v.Header.Set("X-Amz-Tagging", t)
	}
	// A retention that has ended is not copied (a write may only set one
	// in the future, and it protects nothing any more).
	if ret := s3rules.StoredRetention(meta[objlayer.MetaRetention]); ret != nil && ret.RetainUntilDate != nil && ret.RetainUntilDate.After(rs.s.cfg.Now()) {
		v.Header.Set("X-Amz-Object-Lock-Mode", ret.Mode)
		v.Header.Set("X-Amz-Object-Lock-Retain-Until-Date", ret.RetainUntilDate.UTC().Format(time.RFC3339))
	}
	if lh := meta[objlayer.MetaLegalHold]; lh != "" {
		v.Header.Set("X-Amz-Object-Lock-Legal-Hold", lh)
	}
	if checksumType(meta) == s3rules.ChecksumFullObject {
		setChecksumHeaders(v.Header, meta)
		v.Header.Del("X-Amz-Checksum-Type")
	}
	if !encrypted(meta) {
		return v, nil, nil
	}
	if sseMode(meta[metaSSE]) == sseCustomer {
		return nil, nil, &replicate.NotReplicable{Reason: "an SSE-C object's key is its owner's: it is not replicated"}
	}
	dek, err := rs.s.openDataKey(bucket, key, meta, nil)
	if err != nil {
		return nil, nil, err
	}
	// Encrypted again at the destination, with its own key.
	v.Header.Set("X-Amz-Server-Side-Encryption", "AES256")
	return v, dek, nil
}

func (rs replicationSource) MaxPut() int64 { return rs.s.maxPutSize() }

func (rs replicationSource) Open(ctx context.Context, bucket, key, versionID string, withBody bool) (*replicate.Version, error) {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return nil, &replicate.NotReplicable{Reason: "version id " + versionID + " does not parse"}
	}
	var h objlayer.Handle
	if withBody {
		h, err = rs.s.layer.OpenObject(ctx, bucket, key, vid)
	} else {
		h, err = rs.s.layer.OpenObjectMeta(ctx, bucket, key, vid)
	}
	if isNotFound(err) {
		return nil, replicate.ErrGone
	}
	if err != nil {
		return nil, err
	}
	stored := h.Info()
	if stored.DeleteMarker {
		h.Close()
		if withBody {
			return nil, replicate.ErrGone
		}
		return &replicate.Version{VersionID: versionID, DeleteMarker: true, ModTime: stored.ModTime}, nil
	}
	v, dek, err := rs.describe(bucket, key, versionID, stored)
	if err != nil {
		h.Close()
		return nil, err
	}
	if !withBody {
		h.Close()
		return v, nil
	}
	v.Body = rs.pipe(ctx, h, dek, 0, v.Size)
	v.Reopen = func(ctx context.Context, offset, length int64) (io.ReadCloser, error) {
		h, err := rs.s.layer.OpenObject(ctx, bucket, key, vid)
		if isNotFound(err) {
			return nil, replicate.ErrGone
		}
		if err != nil {
			return nil, err
		}
		// A version ID names one content, but a null version can be
		// written again in place (a gateway's file changed by hand):
		// then the copy starts over rather than mix two contents.
		if now := h.Info(); now.ETag != stored.ETag || now.Size != stored.Size || !now.ModTime.Equal(stored.ModTime) {
			h.Close()
			return nil, fmt.Errorf("replication: %s/%s version %s changed while it was copied", bucket, key, versionID)
		}
		return rs.pipe(ctx, h, dek, offset, length), nil
	}
	return v, nil
}

// pipe reads bytes [offset, offset+length) of an open version (its
// plaintext, with its data key when encrypted) and closes the handle.
func (rs replicationSource) pipe(ctx context.Context, h objlayer.Handle, dek []byte, offset, length int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer h.Close()
		var err error
		if dek != nil {
			err = decryptRange(&request{s: rs.s, ctx: ctx}, h, dek, pw, offset, length)
		} else {
			err = h.WriteRange(ctx, pw, offset, length)
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// FromSnapshot implements replicate.Source: the version a write described
// (encodeSnapshot) as Open would answer it.
func (rs replicationSource) FromSnapshot(bucket, key string, snap *replicate.Snapshot) (*replicate.Version, error) {
	info, err := decodeSnapshot(snap.Desc)
	if err != nil {
		return nil, err
	}
	v, dek, err := rs.describe(bucket, key, snap.VersionID, info)
	if err != nil {
		return nil, err
	}
	if dek != nil {
		return nil, errors.New("replication: an encrypted version has no snapshot")
	}
	return v, nil
}

// encodeSnapshot is what describe reads of a version, in one byte slice:
// size, time, ETag and metadata, each string length-prefixed.
func encodeSnapshot(info *objlayer.ObjectInfo) []byte {
	n := 2*binary.MaxVarintLen64 + len(info.ETag) + binary.MaxVarintLen64
	for k, v := range info.Meta {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = binary.AppendVarint(b, info.Size)
	b = binary.AppendVarint(b, info.ModTime.UnixNano())
	b = appendSnapString(b, info.ETag)
	b = binary.AppendUvarint(b, uint64(len(info.Meta)))
	for k, v := range info.Meta {
		b = appendSnapString(appendSnapString(b, k), v)
	}
	return b
}

func appendSnapString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errSnapshot = errors.New("replication: a snapshot that does not decode")

func decodeSnapshot(b []byte) (objlayer.ObjectInfo, error) {
	var info objlayer.ObjectInfo
	next := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return "", false
		}
		s := string(b[n : n+int(l)])
		b = b[n+int(l):]
		return s, true
	}
	size, ok1 := next()
	at, ok2 := next()
	etag, ok3 := str()
	count, n := binary.Uvarint(b)
	if !ok1 || !ok2 || !ok3 || n <= 0 || count > uint64(len(b)) {
		return info, errSnapshot
	}
	b = b[n:]
	info.Size, info.ModTime, info.ETag = size, time.Unix(0, at), etag
	info.Meta = make(map[string]string, count)
	for range count {
		k, ok := str()
		v, ok2 := str()
		if !ok || !ok2 {
			return info, errSnapshot
		}
		info.Meta[k] = v
	}
	if len(b) != 0 {
		return info, errSnapshot
	}
	return info, nil
}

func (rs replicationSource) SetStatus(ctx context.Context, bucket, key, versionID, status string) error {
	vid, err := parseVersionID(versionID)
	if err != nil {
		return err
	}
	// The status can be made again (a resync copies a version that shows
	// PENDING): it is not worth a wait for the disk.
	_, err = rs.s.layer.UpdateObjectMeta(objlayer.WithoutSync(ctx), bucket, key, vid, func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		m[replicate.MetaStatus] = status
		return m
	})
	if isNotFound(err) {
		return replicate.ErrGone
	}
	return err
}

// resyncBatch is how many versions' events a resync stores at once.
const resyncBatch = 500

// ResyncReplication queues the bucket's versions (and delete markers,
// where a rule replicates them) that its configuration covers and that
// are not yet replicated: all but replicas and versions COMPLETED. The
// remote copies them as it copies new writes; what the destination holds
// already is written again with the same version ID.
func (s *Server) ResyncReplication(ctx context.Context, bucket string) (queued, versions int64, err error) {
	bk, err := s.layer.StatBucket(ctx, bucket)
	if err != nil {
		return 0, 0, err
	}
	cfg := replicate.Cached(bk.Replication)
	if cfg == nil || s.cfg.Notifier == nil {
		return 0, 0, fmt.Errorf("%w: bucket %s has no replication configuration", admin.ErrInvalid, bucket)
	}
	var items []notify.Item
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		err := s.cfg.Notifier.Add(ctx, items)
		items = items[:0]
		if errors.Is(err, notify.ErrKept) {
			return nil // stored again by the queue
		}
		return err
	}
	// A key's versions are listed newest first and queued oldest first, as
	// they were written: a destination that orders a key's versions by
	// arrival (a gateway) ends with the source's newest as its current.
	var group []notify.Item
	queueGroup := func() error {
		slices.Reverse(group)
		items = append(items, group...)
		group = group[:0]
		if len(items) >= resyncBatch {
			return flush()
		}
		return nil
	}
	lastKey := ""
	keyMarker, versionMarker := "", (*[16]byte)(nil)
	for {
		page, err := s.layer.ListObjectVersions(ctx, bucket, "", keyMarker, versionMarker, "", 1000)
		if err != nil {
			return queued, versions, err
		}
		for _, v := range page.Objects {
			if v.Name != lastKey {
				if err := queueGroup(); err != nil {
					return queued, versions, err
				}
				lastKey = v.Name
			}
			versions++
			info := v
			if !v.DeleteMarker && v.Meta == nil {
				h, err := s.layer.OpenObjectMeta(ctx, bucket, v.Name, &v.VersionID)
				if isNotFound(err) {
					continue
				}
				if err != nil {
					return queued, versions, err
				}
				info = h.Info()
				h.Close()
			}
			if st := info.Meta[replicate.MetaStatus]; st == replicate.StatusCompleted || st == replicate.StatusReplica ||
				st == "" && s.eventDelivered(ctx, bucket, v.Name, info) {
				continue
			}
			event := notify.ObjectCreatedPut
			var tags map[string]string
			if info.DeleteMarker {
				event = notify.ObjectRemovedDeleteMarker
			} else if t := info.Meta[objlayer.MetaTagging]; t != "" {
				tags = s3rules.DecodeTagQuery(t)
			}
			plain := plainInfo(info)
			e := notify.Event{Name: event, Bucket: bucket, Key: v.Name, Size: plain.Size, ETag: plain.ETag,
				VersionID: versionIDOut(v.VersionID, bk.Versioning), Sequencer: notify.Sequencer(info.ModTime.UnixNano()),
				Time: s.cfg.Now(), Region: s.cfg.Region}
			for _, rule := range cfg.Match(v.Name, tags) {
				if info.DeleteMarker && !rule.DeleteMarkers {
					continue
				}
				group = append(group, notify.Item{Target: cfg.Role, Key: v.Name, Msg: notify.Message(e, rule.ID)})
				queued++
			}
		}
		if !page.IsTruncated {
			break
		}
		var next *[16]byte
		if page.NextVersionMarker != "" {
			id, err := objlayer.ParseVersionID(page.NextVersionMarker)
			if err != nil {
				return queued, versions, err
			}
			next = &id
		}
		if page.NextMarker == keyMarker && next != nil && versionMarker != nil && *next == *versionMarker {
			break // a layer that does not advance must not loop
		}
		keyMarker, versionMarker = page.NextMarker, next
	}
	if err := queueGroup(); err != nil {
		return queued, versions, err
	}
	return queued, versions, flush()
}
