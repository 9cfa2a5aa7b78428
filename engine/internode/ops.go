package internode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/vfs"
)

// The operations of the protocol, each defined once here and used by both
// sides: the client calls op.call, the server dispatches to op.handle by
// name (driveOps, nodeOps). An operation has its name on the wire, whether
// a client may retry it after a transport failure, its own request and
// answer types and its handler.
//
// Wire compatibility: requests are JSON objects whose field names are
// those of the protocol's first version (one shared argument object), so
// older servers decode them and older clients' requests decode here;
// unknown fields are ignored both ways. Operations whose arguments travel
// in the query or whose bodies stream (putversion, getversion, shard/*)
// and the per-node ones keep their encodings, also registered here.

// none is the request or answer of operations that carry nothing.
type none struct{}

// codec carries one operation's answer.
type codec[T any] struct {
	encode func(T) ([]byte, error)
	decode func([]byte) (T, error)
}

func jsonAnswer[T any]() codec[T] {
	return codec[T]{
		encode: func(v T) ([]byte, error) { return json.Marshal(v) },
		decode: func(b []byte) (T, error) {
			var v T
			if len(b) == 0 {
				return v, nil
			}
			return v, json.Unmarshal(b, &v)
		},
	}
}

var noAnswer = codec[none]{
	encode: func(none) ([]byte, error) { return nil, nil },
	decode: func([]byte) (none, error) { return none{}, nil },
}

var recordAnswer = codec[*drive.Record]{
	encode: func(r *drive.Record) ([]byte, error) { return drive.MarshalRecord(nil, r), nil },
	decode: drive.UnmarshalRecord,
}

var versionsAnswer = codec[[]*drive.Record]{
	encode: func(recs []*drive.Record) ([]byte, error) { return drive.EncodeVersions(recs), nil },
	decode: func(b []byte) ([]*drive.Record, error) {
		if len(b) == 0 {
			return nil, nil
		}
		return drive.DecodeVersions(b, -1)
	},
}

// walkEntry is one object of a walk page: its name and versions.
type walkEntry struct {
	name     string
	versions []*drive.Record
}

var walkAnswer = codec[[]walkEntry]{
	encode: func(es []walkEntry) ([]byte, error) {
		var out []byte
		for _, e := range es {
			out = appendString(out, e.name)
			out = appendBytes(out, drive.EncodeVersions(e.versions))
		}
		return out, nil
	},
	decode: func(b []byte) ([]walkEntry, error) {
		var es []walkEntry
		in := reader{buf: b}
		for len(in.buf) > 0 {
			name := in.string()
			vb := in.bytes()
			if in.err != nil {
				return nil, in.err
			}
			versions, err := drive.DecodeVersions(vb, -1)
			if err != nil {
				return nil, err
			}
			es = append(es, walkEntry{name, versions})
		}
		return es, nil
	},
}

// eventEntry is one write's events a drive holds (listevents).
type eventEntry struct {
	id     [16]byte
	events []byte
}

var eventsAnswer = codec[[]eventEntry]{
	encode: func(es []eventEntry) ([]byte, error) {
		var out []byte
		for _, e := range es {
			out = appendBytes(out, e.id[:])
			out = appendBytes(out, e.events)
		}
		return out, nil
	},
	decode: func(b []byte) ([]eventEntry, error) {
		var es []eventEntry
		in := reader{buf: b}
		for len(in.buf) > 0 {
			id := in.id()
			events := in.bytes()
			if in.err != nil {
				return nil, in.err
			}
			es = append(es, eventEntry{id, events})
		}
		return es, nil
	},
}

// op is a drive operation whose request is JSON.
type op[Req, Resp any] struct {
	name       string
	idempotent bool
	answer     codec[Resp]
	serve      func(ctx context.Context, d *drive.Local, req Req) (Resp, error)
}

// call runs the operation on a peer's drive.
func (o op[Req, Resp]) call(ctx context.Context, d *RemoteDrive, req Req) (Resp, error) {
	var out Resp
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	err = d.peer.call(ctx, o.name, d.q(), body, o.idempotent, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		out, err = o.answer.decode(b)
		return err
	})
	return out, err
}

func (o op[Req, Resp]) opName() string { return o.name }

// wireFields are the JSON names the request carries (for the wire test).
func (o op[Req, Resp]) wireFields() []string {
	var names []string
	t := reflect.TypeFor[Req]()
	for i := range t.NumField() {
		names = append(names, t.Field(i).Name)
	}
	return names
}

func (o op[Req, Resp]) handle(_ *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	var req Req
	if err := readJSON(r, &req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	resp, err := o.serve(r.Context(), d, req)
	if err != nil {
		return err
	}
	b, err := o.answer.encode(resp)
	if err != nil || len(b) == 0 {
		return err
	}
	_, err = w.Write(b)
	return err
}

// rawOp is a drive operation with its own encoding (query arguments, a
// streamed body).
type rawOp struct {
	name       string
	idempotent bool
	frame      byte // its opcode on the framed channel (0: none)
	serve      func(s *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error
}

func (o rawOp) opName() string { return o.name }

func (o rawOp) handle(s *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	return o.serve(s, d, w, r)
}

// nodeOp is an operation on the node rather than one of its drives.
type nodeOp struct {
	name        string
	idempotent  bool
	minProtocol int  // the oldest protocol that has it
	frame       byte // its opcode on the framed channel (0: none)
	serve       func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// driveOperation is what the server dispatches drive operations through.
type driveOperation interface {
	opName() string
	handle(s *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error
}

// Requests, named by what they carry. Field names are the wire's.
type (
	bucketInfoReq   struct{ BucketInfo drive.BucketInfo }
	bucketReq       struct{ Bucket string }
	deleteBucketReq struct {
		Bucket string
		Force  bool
	}
	objectReq   struct{ Bucket, Object string }
	objectIDReq struct {
		Bucket, Object string
		VersionID      [16]byte // a version or an upload
	}
	idReq          struct{ VersionID [16]byte } // a staging area or an upload
	versionMetaReq struct {
		Bucket, Object string
		Record         []byte
		Meta           map[string]string
	}
	// walkReq: Delimiter came later; a node of an older build ignores it
	// and answers a plain walk, which the caller merges all the same.
	walkReq struct {
		Bucket, Prefix, After string
		LatestOnly            bool
		Limit                 int
		Delimiter             string `json:",omitempty"`
	}
	// uploadsReq: After and Limit came later; a node of an older build
	// ignores them and answers every upload under the prefix.
	uploadsReq struct {
		Bucket, Prefix string
		After          drive.UploadPos
		Limit          int
	}
	uploadReq     struct{ Upload *drive.Upload }
	commitPartReq struct {
		Upload *drive.Upload
		Part   *drive.PartRecord
	}
	completeReq struct {
		Upload *drive.Upload
		Chosen []drive.PartRecord
		Record []byte
	}
	// rollbackReq: EventID came later (eventsProtocol); an older node
	// ignores it, and stored no events to remove.
	rollbackReq struct {
		Bucket, Object string
		Record         []byte
		EventID        *[16]byte `json:",omitempty"`
	}
	listEventsReq struct {
		After [16]byte
		Limit int
	}
	eventIDsReq      struct{ IDs [][16]byte }
	supersededAnswer struct{ Superseded bool }
	removedAnswer    struct{ Removed bool }
	reopenedAnswer   struct{ Reopened bool }
)

// The drive operations whose requests are JSON.
var (
	opFormat = op[none, drive.Format]{"format", true, jsonAnswer[drive.Format](),
		func(ctx context.Context, d *drive.Local, _ none) (drive.Format, error) { return d.Format(ctx) }}
	opDiskInfo = op[none, vfs.Usage]{"diskinfo", true, jsonAnswer[vfs.Usage](),
		func(ctx context.Context, d *drive.Local, _ none) (vfs.Usage, error) { return d.DiskInfo(ctx) }}
	opMakeBucket = op[bucketInfoReq, none]{"makebucket", false, noAnswer,
		func(ctx context.Context, d *drive.Local, r bucketInfoReq) (none, error) {
			return none{}, d.MakeBucket(ctx, r.BucketInfo)
		}}
	opSetBucket = op[bucketInfoReq, none]{"setbucket", true, noAnswer,
		func(ctx context.Context, d *drive.Local, r bucketInfoReq) (none, error) {
			return none{}, d.SetBucket(ctx, r.BucketInfo)
		}}
	opStatBucket = op[bucketReq, drive.BucketInfo]{"statbucket", true, jsonAnswer[drive.BucketInfo](),
		func(ctx context.Context, d *drive.Local, r bucketReq) (drive.BucketInfo, error) {
			return d.StatBucket(ctx, r.Bucket)
		}}
	opBucketUsage = op[bucketReq, drive.Usage]{"bucketusage", true, jsonAnswer[drive.Usage](),
		func(ctx context.Context, d *drive.Local, r bucketReq) (drive.Usage, error) {
			return d.BucketUsage(ctx, r.Bucket)
		}}
	opListBuckets = op[none, []drive.BucketInfo]{"listbuckets", true, jsonAnswer[[]drive.BucketInfo](),
		func(ctx context.Context, d *drive.Local, _ none) ([]drive.BucketInfo, error) {
			return d.ListBuckets(ctx)
		}}
	opDeleteBucket = op[deleteBucketReq, none]{"deletebucket", false, noAnswer,
		func(ctx context.Context, d *drive.Local, r deleteBucketReq) (none, error) {
			return none{}, d.DeleteBucket(ctx, r.Bucket, r.Force)
		}}
	opVersions = op[objectReq, []*drive.Record]{"versions", true, versionsAnswer,
		func(ctx context.Context, d *drive.Local, r objectReq) ([]*drive.Record, error) {
			return d.Versions(ctx, r.Bucket, r.Object)
		}}
	opSetVersionMeta = op[versionMetaReq, none]{"setversionmeta", true, noAnswer,
		func(ctx context.Context, d *drive.Local, r versionMetaReq) (none, error) {
			rec, err := drive.UnmarshalRecord(r.Record)
			if err != nil {
				return none{}, err
			}
			return none{}, d.SetVersionMeta(ctx, r.Bucket, r.Object, rec, r.Meta)
		}}
	opDeleteVersion = op[objectIDReq, *drive.Record]{"deleteversion", false, recordAnswer,
		func(ctx context.Context, d *drive.Local, r objectIDReq) (*drive.Record, error) {
			return d.DeleteVersion(ctx, r.Bucket, r.Object, r.VersionID)
		}}
	opRollbackVersion = op[rollbackReq, removedAnswer]{"rollbackversion", true, jsonAnswer[removedAnswer](),
		func(ctx context.Context, d *drive.Local, r rollbackReq) (removedAnswer, error) {
			rec, err := drive.UnmarshalRecord(r.Record)
			if err != nil {
				return removedAnswer{}, err
			}
			if r.EventID != nil {
				rec.EventID = *r.EventID
			}
			removed, err := d.RollbackVersion(ctx, r.Bucket, r.Object, rec)
			return removedAnswer{removed}, err
		}}
	opWalkObjects = op[walkReq, []walkEntry]{"walkobjects", true, walkAnswer,
		func(ctx context.Context, d *drive.Local, r walkReq) ([]walkEntry, error) {
			var page []walkEntry
			add := func(name string, versions []*drive.Record) bool {
				page = append(page, walkEntry{name, versions})
				return r.Limit <= 0 || len(page) < r.Limit
			}
			if r.Delimiter != "" && r.LatestOnly {
				return page, d.WalkDelimited(ctx, r.Bucket, r.Prefix, r.Delimiter, r.After, add)
			}
			return page, d.WalkObjects(ctx, r.Bucket, r.Prefix, r.After, r.LatestOnly, add)
		}}
	opListEvents = op[listEventsReq, []eventEntry]{"listevents", true, eventsAnswer,
		func(ctx context.Context, d *drive.Local, r listEventsReq) ([]eventEntry, error) {
			var page []eventEntry
			err := d.ListEvents(ctx, r.After, func(id [16]byte, events []byte) bool {
				page = append(page, eventEntry{id, bytes.Clone(events)})
				return r.Limit <= 0 || len(page) < r.Limit
			})
			return page, err
		}}
	opDeleteEvents = op[eventIDsReq, none]{"deleteevents", true, noAnswer,
		func(ctx context.Context, d *drive.Local, r eventIDsReq) (none, error) {
			return none{}, d.DeleteEvents(ctx, r.IDs)
		}}
	opAbortStaged = op[idReq, none]{"abortstaged", true, noAnswer,
		func(ctx context.Context, d *drive.Local, r idReq) (none, error) {
			return none{}, d.AbortStaged(ctx, r.VersionID)
		}}
	opPutUpload = op[uploadReq, none]{"putupload", true, noAnswer,
		func(ctx context.Context, d *drive.Local, r uploadReq) (none, error) {
			return none{}, d.PutUpload(ctx, r.Upload)
		}}
	opGetUpload = op[objectIDReq, *drive.Upload]{"getupload", true, jsonAnswer[*drive.Upload](),
		func(ctx context.Context, d *drive.Local, r objectIDReq) (*drive.Upload, error) {
			return d.GetUpload(ctx, r.Bucket, r.Object, r.VersionID)
		}}
	opWalkUploads = op[uploadsReq, []*drive.Upload]{"walkuploads", true, jsonAnswer[[]*drive.Upload](),
		func(ctx context.Context, d *drive.Local, r uploadsReq) ([]*drive.Upload, error) {
			var us []*drive.Upload
			err := d.WalkUploads(ctx, r.Bucket, r.Prefix, r.After, func(u *drive.Upload) bool {
				us = append(us, u)
				return r.Limit <= 0 || len(us) < r.Limit
			})
			return us, err
		}}
	opCommitPart = op[commitPartReq, none]{"commitpart", false, noAnswer,
		func(ctx context.Context, d *drive.Local, r commitPartReq) (none, error) {
			return none{}, d.CommitPart(ctx, r.Upload, r.Part)
		}}
	opListParts = op[idReq, []drive.PartRecord]{"listparts", true, jsonAnswer[[]drive.PartRecord](),
		func(ctx context.Context, d *drive.Local, r idReq) ([]drive.PartRecord, error) {
			return d.ListParts(ctx, r.VersionID)
		}}
	opCompleteUpload = op[completeReq, supersededAnswer]{"completeupload", false, jsonAnswer[supersededAnswer](),
		func(ctx context.Context, d *drive.Local, r completeReq) (supersededAnswer, error) {
			rec, err := drive.UnmarshalRecord(r.Record)
			if err != nil {
				return supersededAnswer{}, err
			}
			res, err := d.CompleteUpload(ctx, r.Upload, r.Chosen, rec)
			return supersededAnswer{res.Superseded}, err
		}}
	opReopenUpload = op[completeReq, reopenedAnswer]{"reopenupload", true, jsonAnswer[reopenedAnswer](),
		func(ctx context.Context, d *drive.Local, r completeReq) (reopenedAnswer, error) {
			rec, err := drive.UnmarshalRecord(r.Record)
			if err != nil {
				return reopenedAnswer{}, err
			}
			reopened, err := d.ReopenUpload(ctx, r.Upload, r.Chosen, rec)
			return reopenedAnswer{reopened}, err
		}}
	opAbortUpload = op[objectIDReq, none]{"abortupload", false, noAnswer,
		func(ctx context.Context, d *drive.Local, r objectIDReq) (none, error) {
			return none{}, d.AbortUpload(ctx, r.Bucket, r.Object, r.VersionID)
		}}
)

// The drive operations with their own encodings.
var (
	opPutVersion = rawOp{"putversion", false, 0, (*Server).putVersion}
	opGetVersion = rawOp{"getversion", true, 0, (*Server).getVersion}
	opShardWrite = rawOp{"shard/write", false, 0, func(s *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error {
		return s.shardWrite(d, w, r)
	}}
	opShardRead = rawOp{"shard/read", true, frameShardRead, func(s *Server, d *drive.Local, w http.ResponseWriter, r *http.Request) error {
		return s.shardRead(d, w, r)
	}}
	opShardStat = rawOp{"shard/stat", true, 0, (*Server).shardStat}
)

// The node operations.
var (
	opPing          = nodeOp{name: "ping", idempotent: true, minProtocol: 1, serve: (*Server).ping}
	opBucketChanged = nodeOp{name: "bucketchanged", idempotent: true, minProtocol: 1, serve: (*Server).bucketChanged}
	opNodeStatus    = nodeOp{name: "nodestatus", idempotent: true, minProtocol: 1, serve: (*Server).nodeStatus}
	opPoolState     = nodeOp{name: "poolstate", idempotent: true, minProtocol: 1, serve: (*Server).poolState}
	opBatchPut      = nodeOp{name: "batch/put", idempotent: false, minProtocol: 2, frame: frameBatchPut,
		serve: func(s *Server, w http.ResponseWriter, r *http.Request) error { return s.serveBatch(s.batchPut, w, r) }}
	opBatchPutEvents = nodeOp{name: "batch/putevents", idempotent: false, minProtocol: eventsProtocol, frame: frameBatchPutEvents,
		serve: func(s *Server, w http.ResponseWriter, r *http.Request) error {
			return s.serveBatch(s.batchPutEvents, w, r)
		}}
	opBatchGet = nodeOp{name: "batch/get", idempotent: true, minProtocol: 2, frame: frameBatchGet,
		serve: func(s *Server, w http.ResponseWriter, r *http.Request) error { return s.serveBatch(s.batchGet, w, r) }}
	opBatchStat = nodeOp{name: "batch/stat", idempotent: true, minProtocol: statProtocol, frame: frameBatchStat,
		serve: func(s *Server, w http.ResponseWriter, r *http.Request) error { return s.serveBatch(s.batchStat, w, r) }}
	opFrames = nodeOp{name: "frames", idempotent: false, minProtocol: framesProtocol, serve: (*Server).serveFrames}
)

// driveOps and nodeOps are the server's dispatch tables, by name.
var (
	driveOps = indexDriveOps(opFormat, opDiskInfo, opMakeBucket, opSetBucket, opStatBucket, opBucketUsage,
		opListBuckets, opDeleteBucket, opVersions, opSetVersionMeta, opDeleteVersion, opRollbackVersion, opWalkObjects,
		opListEvents, opDeleteEvents,
		opAbortStaged, opPutUpload, opGetUpload, opWalkUploads, opCommitPart, opListParts, opCompleteUpload,
		opReopenUpload, opAbortUpload, opPutVersion, opGetVersion, opShardWrite, opShardRead, opShardStat)
	nodeOps = indexNodeOps(opPing, opBucketChanged, opNodeStatus, opPoolState, opBatchPut, opBatchPutEvents, opBatchGet, opBatchStat, opFrames)
)

func indexDriveOps(ops ...driveOperation) map[string]driveOperation {
	m := make(map[string]driveOperation, len(ops))
	for _, o := range ops {
		if _, dup := m[o.opName()]; dup {
			panic("internode: operation defined twice: " + o.opName())
		}
		m[o.opName()] = o
	}
	return m
}

func indexNodeOps(ops ...nodeOp) map[string]nodeOp {
	m := make(map[string]nodeOp, len(ops))
	for _, o := range ops {
		if _, dup := m[o.name]; dup {
			panic("internode: operation defined twice: " + o.name)
		}
		m[o.name] = o
	}
	return m
}
