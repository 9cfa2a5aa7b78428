package internode

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
)

// Server serves this node's drives to its peers.
type Server struct {
	// Drive returns the local drive at a path (nil when it is offline or
	// not this node's).
	Drive func(path string) *drive.Local
	// Secret signs requests (Secret(rootSecret)).
	Secret []byte
	// Version is the protocol this node speaks (Protocol; lower in tests of
	// a rolling upgrade).
	Version int
	// Hooks for node-level notices; nil: ignored.
	OnBucketChanged func(bucket string)
	Log             *slog.Logger
	// NoSync skips the fsync of shards written by peers (relaxed mode).
	NoSync bool
	// Node answers node-level requests (status, pool state); nil: none.
	Node NodeHooks
	// Served reports, for pings, the paths of the drives this node serves
	// and whether it is still starting; nil: not reported (peers then
	// count every drive of the node, as with older builds).
	Served func() (paths []string, starting bool)
	// Pools reports, for pings, the names of the pools this node reads
	// and writes; nil: not reported (peers then take it that the node
	// knows every pool, as with older builds).
	Pools func() []string
	// Names are this node's hosts in the topology: a request for another
	// node is refused (identity.go). nil or empty: not checked.
	Names func() []string
	// OnHello is told that the node known as host in the topology is back
	// (a ping with from=host); it pings that node back before the ping is
	// answered. nil: ignored.
	OnHello func(ctx context.Context, host string)

	// The framed channels served (see frames.go).
	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	nonces nonces // of the signed requests accepted
}

// NodeHooks are the node-level operations peers ask of a node.
type NodeHooks interface {
	// NodeStatus is this node's own view (its drives, its drains), as JSON.
	NodeStatus(ctx context.Context) any
	// SetPoolState overrides a pool's state on this node (an admin
	// starting or cancelling a decommission; persist), or applies the
	// state the topology gives it before this node's copy of the topology
	// says so (a drain about to start; not persist). It answers once the
	// writes this node placed in a pool now draining have finished.
	SetPoolState(pool, state string, persist bool) error
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, Prefix) {
		http.NotFound(w, r)
		return
	}
	if err := verify(r, s.Secret, &s.nonces); err != nil {
		s.Log.Warn("internode request refused", "from", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	observeClock(r.Header.Get(hdrClock))
	v, _ := strconv.Atoi(r.Header.Get(hdrProtocol))
	if v < MinProtocol || v > s.Version {
		http.Error(w, fmt.Sprintf("internode protocol %d not served (this node speaks %d..%d)", v, MinProtocol, s.Version), http.StatusUpgradeRequired)
		return
	}
	if why := s.misdirected(r); why != "" {
		http.Error(w, why, http.StatusMisdirectedRequest)
		return
	}
	op := strings.TrimPrefix(r.URL.Path, Prefix)
	w.Header().Set(hdrProtocol, strconv.Itoa(s.Version))
	if err := s.handleRecovered(op, w, r); err != nil {
		w.Header().Set(hdrError, errorCode(err))
		status := http.StatusInternalServerError
		if errorCode(err) != "Internal" {
			status = http.StatusConflict // an expected answer, not a failure of the node
		}
		http.Error(w, err.Error(), status)
	}
}

// handleRecovered is handle with a panic turned into an error answer
// (logged with its stack). net/http would recover it too, but by dropping
// the connection, which the caller would take for the node being down.
func (s *Server) handleRecovered(op string, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.Log.Error("internode call panicked", "op", op, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internode: the call failed on the peer: %v", p)
		}
	}()
	return s.handle(op, w, r)
}

// drive returns the drive a request names.
func (s *Server) drive(r *http.Request) (*drive.Local, error) {
	path := r.URL.Query().Get("drive")
	d := s.Drive(path)
	if d == nil {
		return nil, fmt.Errorf("%w: %s", ErrDriveNotServed, path)
	}
	return d, nil
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

func readJSON(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(v)
}

// handle runs the operation a request names, from the tables in ops.go.
func (s *Server) handle(name string, w http.ResponseWriter, r *http.Request) error {
	if o, ok := nodeOps[name]; ok {
		if s.Version < o.minProtocol {
			return fmt.Errorf("internode: %s needs protocol %d", name, o.minProtocol)
		}
		return o.serve(s, w, r)
	}
	o, ok := driveOps[name]
	if !ok {
		return fmt.Errorf("internode: unknown operation %q", name)
	}
	d, err := s.drive(r)
	if err != nil {
		return err
	}
	return o.handle(s, d, w, r)
}

// pingAnswer is what a node says of itself to a ping: its protocol, and
// (from later builds on) the drives it serves, whether it is still
// starting and the pools it knows. An older node sends the protocol alone; an older client reads
// it alone.
type pingAnswer struct {
	Protocol int `json:"protocol"`
	// Clock is the node's hybrid clock and Wall its wall clock (Unix ns;
	// 0 from older builds): see package hlc.
	Clock    int64     `json:"clock,omitempty"`
	Wall     int64     `json:"wall,omitempty"`
	Drives   *[]string `json:"drives,omitempty"`
	Starting bool      `json:"starting,omitempty"`
	Pools    *[]string `json:"pools,omitempty"`
}

// helloTimeout bounds the ping back to a node that says it is back.
const helloTimeout = 2 * time.Second

func (s *Server) ping(w http.ResponseWriter, r *http.Request) error {
	if from := r.URL.Query().Get("from"); from != "" && s.OnHello != nil {
		ctx, cancel := context.WithTimeout(r.Context(), helloTimeout)
		s.OnHello(ctx, from)
		cancel()
	}
	a := pingAnswer{Protocol: s.Version}
	if s.Served != nil {
		paths, starting := s.Served()
		if paths == nil {
			paths = []string{} // none, which null would not say
		}
		a.Drives, a.Starting = &paths, starting
	}
	if s.Pools != nil {
		names := s.Pools()
		if names == nil {
			names = []string{}
		}
		a.Pools = &names
	}
	a.Clock, a.Wall = hlc.Default.Peek(), hlc.Default.Wall()
	return writeJSON(w, a)
}

func (s *Server) bucketChanged(_ http.ResponseWriter, r *http.Request) error {
	if s.OnBucketChanged != nil {
		s.OnBucketChanged(r.URL.Query().Get("bucket"))
	}
	return nil
}

func (s *Server) nodeStatus(w http.ResponseWriter, r *http.Request) error {
	if s.Node == nil {
		return errors.New("internode: no node status")
	}
	return writeJSON(w, s.Node.NodeStatus(r.Context()))
}

func (s *Server) poolState(_ http.ResponseWriter, r *http.Request) error {
	if s.Node == nil {
		return errors.New("internode: no node")
	}
	q := r.URL.Query()
	return s.Node.SetPoolState(q.Get("pool"), q.Get("state"), q.Get("persist") != "false")
}

// putVersion: the record is the body, bucket, object and staging area
// are in the query.
func (s *Server) putVersion(d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRecord+1))
	if err == nil && len(body) > maxRecord {
		err = fmt.Errorf("internode: a version record over %d bytes", maxRecord)
	}
	if err != nil {
		return err
	}
	rec, err := drive.UnmarshalRecord(body)
	if err != nil {
		return err
	}
	stage, err := optionalID(q.Get("stage"))
	if err != nil {
		return err
	}
	res, err := d.PutVersion(r.Context(), q.Get("bucket"), q.Get("object"), rec, stage)
	if err != nil {
		return err
	}
	return writeJSON(w, supersededAnswer{res.Superseded})
}

// getVersion answers the record (binary) of a version named in the query.
func (s *Server) getVersion(d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var vid *[16]byte
	if v := q.Get("version"); v != "" {
		id, err := parseHexID(v)
		if err != nil {
			return err
		}
		vid = &id
	}
	rec, err := d.GetVersion(r.Context(), q.Get("bucket"), q.Get("object"), vid)
	if err != nil {
		return err
	}
	_, err = w.Write(drive.MarshalRecord(nil, rec))
	return err
}

// shardStat answers the size of a shard file.
func (s *Server) shardStat(d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id, part, err := shardArgs(q, "datadir")
	if err != nil {
		return err
	}
	f, err := d.OpenShard(r.Context(), id, part)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]int64{"size": fi.Size()})
}

// maxRecord bounds a version record sent to putversion: its metadata and,
// for an inline object, its shard (inline objects are at most 128 KiB).
const maxRecord = 16 << 20

// shardArgs reads the shard a query names: its data directory (under the
// key idKey) and part number.
func shardArgs(q url.Values, idKey string) ([16]byte, int, error) {
	id, err := parseHexID(q.Get(idKey))
	if err != nil {
		return id, 0, err
	}
	part, _ := strconv.Atoi(q.Get("part"))
	return id, part, nil
}

func optionalID(s string) ([16]byte, error) {
	if s == "" {
		return drive.NotStaged, nil
	}
	return parseHexID(s)
}

// shardWrite stages a shard streamed by a peer (made durable when it
// commits).
func (s *Server) shardWrite(d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id, part, err := shardArgs(q, "id")
	if err != nil {
		return err
	}
	f, err := d.CreateStaged(r.Context(), id, part)
	if err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	_, err = io.CopyBuffer(f, r.Body, buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.AbortStaged(r.Context(), id)
	}
	return err
}

// shardRead answers a byte range of a committed shard file.
func (s *Server) shardRead(d *drive.Local, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id, part, err := shardArgs(q, "datadir")
	if err != nil {
		return err
	}
	off, _ := strconv.ParseInt(q.Get("off"), 10, 64)
	n, _ := strconv.Atoi(q.Get("len"))
	buf, err := readShardRange(r.Context(), d, id, part, off, n)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	_, err = w.Write(buf)
	return err
}

// readShardRange reads up to n bytes of a shard at off: fewer at its end.
func readShardRange(ctx context.Context, d *drive.Local, dataDir [16]byte, part int, off int64, n int) ([]byte, error) {
	if n < 0 || n > maxShardRead {
		return nil, fmt.Errorf("internode: read of %d bytes refused", n)
	}
	f, err := d.OpenShard(ctx, dataDir, part)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// maxBatch bounds the body of a batch (and so a frame): a batch holds the
// records of one small PUT or GET for each drive of a node in one set, a
// few MiB at the most (inline objects are at most 128 KiB).
const maxBatch = 64 << 20

// batchFunc answers a batch: body is the request, and the answer is
// appended to dst.
type batchFunc func(ctx context.Context, dst, body []byte) ([]byte, error)

// serveBatch answers a batch sent over HTTP.
func (s *Server) serveBatch(run batchFunc, w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBatch))
	if err != nil {
		return err
	}
	out, err := run(r.Context(), nil, body)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// batchPut runs several drives' PutVersion (protocol 2).
func (s *Server) batchPut(ctx context.Context, dst, body []byte) ([]byte, error) {
	return s.putRecords(ctx, dst, body, false)
}

// batchPutEvents is batchPut whose items carry their writes' events
// (eventsProtocol).
func (s *Server) batchPutEvents(ctx context.Context, dst, body []byte) ([]byte, error) {
	return s.putRecords(ctx, dst, body, true)
}

// putRecords answers a batch of PutVersions, each item with its write's
// events after its record when withEvents.
func (s *Server) putRecords(ctx context.Context, dst, body []byte, withEvents bool) ([]byte, error) {
	in := reader{buf: body}
	n := in.count()
	if in.err != nil {
		return nil, in.err
	}
	type item struct {
		d              *drive.Local
		bucket, object string
		stage          [16]byte
		rec            *drive.Record
		err            error
	}
	items := make([]item, n)
	for i := range items {
		it := &items[i]
		path := in.string()
		it.bucket, it.object = in.string(), in.string()
		it.stage = in.id()
		recBytes := in.bytes()
		var eventID [16]byte
		var events []byte
		if withEvents {
			eventID, events = in.id(), in.bytes()
		}
		if in.err != nil {
			return nil, in.err
		}
		if it.d = s.Drive(path); it.d == nil {
			it.err = fmt.Errorf("%w: %s", ErrDriveNotServed, path)
			continue
		}
		if it.rec, it.err = drive.UnmarshalRecord(recBytes); it.err == nil {
			it.rec.EventID, it.rec.Events = eventID, events
		}
	}
	done := make(chan struct{}, n)
	for i := range items {
		go func(it *item) {
			if it.err == nil {
				var res drive.PutResult
				// Superseded travels as an error: a coordinator of an
				// older build, which knows no such code, sees a failed
				// write, never a silent success.
				if res, it.err = it.d.PutVersion(ctx, it.bucket, it.object, it.rec, it.stage); it.err == nil && res.Superseded {
					it.err = drive.ErrSuperseded
				}
			}
			done <- struct{}{}
		}(&items[i])
	}
	for range items {
		<-done
	}
	for _, it := range items {
		dst = appendError(dst, it.err)
	}
	return dst, nil
}

// batchGet runs several drives' GetVersion (protocol 2).
func (s *Server) batchGet(ctx context.Context, dst, body []byte) ([]byte, error) {
	return s.readRecords(ctx, dst, body, true)
}

// batchStat runs several drives' StatVersion (statProtocol).
func (s *Server) batchStat(ctx context.Context, dst, body []byte) ([]byte, error) {
	return s.readRecords(ctx, dst, body, false)
}

// readRecords answers a batch of record reads, with inline data or not.
func (s *Server) readRecords(ctx context.Context, dst, body []byte, withData bool) ([]byte, error) {
	// The names it carries are strings of one copy of the (small) body.
	in := reader{buf: body, text: string(body)}
	n := in.count()
	if in.err != nil {
		return nil, in.err
	}
	type item struct {
		d              *drive.Local
		bucket, object string
		vid            *[16]byte
		err            error
	}
	items := make([]item, n)
	for i := range items {
		it := &items[i]
		path := in.string()
		it.bucket, it.object = in.string(), in.string()
		if has := in.uvarint(); has == 1 {
			id := in.id()
			it.vid = &id
		}
		if in.err != nil {
			return nil, in.err
		}
		if it.d = s.Drive(path); it.d == nil {
			it.err = fmt.Errorf("%w: %s", ErrDriveNotServed, path)
		}
	}
	// Each record goes from its drive's store into the answer: the
	// records of one object are about the same size, so the first sets
	// the room made for the others.
	room := 2 << 10
	for _, it := range items {
		if it.err != nil {
			dst = appendError(dst, it.err)
			continue
		}
		dst = growFrame(dst, room)
		start := len(dst)
		dst, it.err = appendSized(appendError(dst, nil), func(b []byte) ([]byte, error) {
			return it.d.AppendVersion(ctx, b, it.bucket, it.object, it.vid, withData)
		})
		if it.err != nil {
			dst = appendError(dst[:start], it.err)
		}
		room = max(room, len(dst)-start+64)
	}
	return dst, nil
}

// appendRecord appends rec's encoding as appendBytes would append it.
func appendRecord(dst []byte, rec *drive.Record) []byte {
	dst, _ = appendSized(dst, func(b []byte) ([]byte, error) { return drive.MarshalRecord(b, rec), nil })
	return dst
}

// appendSized appends what fill appends, as appendBytes would append it
// (its length first), without a buffer of its own: it goes after room for
// the longest length, which then moves up against the length written. On
// an error, dst is given back as it was.
func appendSized(dst []byte, fill func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	dst, err := fill(append(dst, make([]byte, binary.MaxVarintLen64)...))
	if err != nil {
		return dst[:start], err
	}
	var length [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(length[:], uint64(len(dst)-start-binary.MaxVarintLen64))
	copy(dst[start:], length[:k])
	copy(dst[start+k:], dst[start+binary.MaxVarintLen64:])
	return dst[:len(dst)-(binary.MaxVarintLen64-k)], nil
}

// appendError writes an error as (code, message); nil as two empty strings.
func appendError(dst []byte, err error) []byte {
	if err == nil {
		return appendString(appendString(dst, ""), "")
	}
	return appendString(appendString(dst, errorCode(err)), err.Error())
}

func (r *reader) error() error {
	code, msg := r.string(), r.string()
	if code == "" {
		return nil
	}
	return decodeError(code, msg)
}
