package internode

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/vfs"
)

// PeerOptions configure the client of one peer.
type PeerOptions struct {
	// Secret signs requests.
	Secret []byte
	// Version is the protocol this node speaks.
	Version int
	// TLS, when set, is the client configuration (root CAs, client
	// certificate); nil speaks h2c.
	TLS *tls.Config
	// CallTimeout bounds a metadata call; shard streams are bounded by
	// their connection's liveness instead. Default 10 s.
	CallTimeout time.Duration
	Log         *slog.Logger
}

// Peer is the client of one other node: one HTTP/2 connection, multiplexed.
type Peer struct {
	// Host is the peer's S3 address (its identity in the topology).
	Host string
	addr string // host:port of its internode service
	base string
	opts PeerOptions
	hc   *http.Client

	fmu sync.Mutex
	fc  *frameConn // the framed channel (protocol 3), dialled on first use

	// epoch ends when the peer is marked offline: every call in flight
	// to it (frames, HTTP calls, shard streams) is abandoned then, rather
	// than each waiting for its own deadline.
	emu         sync.Mutex
	epoch       context.Context
	cancelEpoch context.CancelFunc

	online  atomic.Bool
	version atomic.Int32 // the peer's protocol, learned from pings
	pinging atomic.Bool
	closed  chan struct{}
}

// NewPeer returns the client of the node whose S3 address is host,
// reached on its internode port.
func NewPeer(host string, internodePort int, opts PeerOptions) (*Peer, error) {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		return nil, err
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 10 * time.Second
	}
	scheme := "http"
	tr := &http.Transport{
		MaxIdleConnsPerHost: 4,
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		HTTP2:               &http.HTTP2Config{SendPingTimeout: 5 * time.Second, PingTimeout: 5 * time.Second, MaxReceiveBufferPerStream: 2 << 20, MaxReceiveBufferPerConnection: 3 << 20},
	}
	tr.Protocols = new(http.Protocols)
	if opts.TLS != nil {
		scheme = "https"
		tr.TLSClientConfig = opts.TLS
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	addr := net.JoinHostPort(h, strconv.Itoa(internodePort))
	p := &Peer{
		Host: host, addr: addr, base: scheme + "://" + addr + Prefix,
		opts: opts, hc: &http.Client{Transport: tr}, closed: make(chan struct{}),
	}
	p.version.Store(int32(MinProtocol))
	p.online.Store(true)
	p.epoch, p.cancelEpoch = context.WithCancel(context.Background())
	go p.heartbeat()
	return p, nil
}

// heartbeatInterval is how often an online peer is pinged, so a node that
// died is noticed (and its calls fail at once) even when nothing else
// talks to it.
const heartbeatInterval = time.Second

func (p *Peer) heartbeat() {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-p.closed:
			return
		case <-t.C:
		}
		if !p.online.Load() {
			continue // the reconnect pinger runs
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := p.ping(ctx)
		cancel()
		if err != nil {
			p.markOffline(err)
		}
	}
}

// Close stops the peer's background pings and ends its framed channel.
func (p *Peer) Close() {
	close(p.closed)
	p.closeFrames()
}

// Online reports whether the peer answers.
func (p *Peer) Online() bool { return p.online.Load() }

// Version is the protocol used with the peer: the lower of both sides.
func (p *Peer) Version() int { return min(int(p.version.Load()), p.opts.Version) }

// Ping asks the peer for its protocol version; it marks the peer online
// or offline.
func (p *Peer) Ping(ctx context.Context) error {
	var out struct{ Protocol int }
	err := p.call(ctx, "ping", nil, nil, false, func(r io.Reader) error { return json.NewDecoder(r).Decode(&out) })
	if err != nil {
		return err
	}
	p.version.Store(int32(out.Protocol))
	p.online.Store(true)
	return nil
}

// markOffline records that the peer stopped answering and pings it until
// it answers again.
func (p *Peer) markOffline(err error) {
	if p.online.CompareAndSwap(true, false) {
		p.opts.Log.Warn("node offline", "node", p.Host, "err", err)
		p.emu.Lock()
		p.cancelEpoch()
		p.epoch, p.cancelEpoch = context.WithCancel(context.Background())
		p.emu.Unlock()
	}
	if !p.pinging.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.pinging.Store(false)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.closed:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := p.ping(ctx)
			cancel()
			if err == nil {
				p.opts.Log.Info("node back online", "node", p.Host, "protocol", p.version.Load())
				return
			}
		}
	}()
}

// currentEpoch is the context that ends when the peer is next marked
// offline.
func (p *Peer) currentEpoch() context.Context {
	p.emu.Lock()
	defer p.emu.Unlock()
	return p.epoch
}

// ping is Ping without the offline short-cut.
func (p *Peer) ping(ctx context.Context) error {
	var out struct{ Protocol int }
	err := p.do(ctx, "ping", nil, nil, func(r io.Reader) error { return json.NewDecoder(r).Decode(&out) })
	if err != nil {
		return err
	}
	p.version.Store(int32(out.Protocol))
	p.online.Store(true)
	return nil
}

// transportErr reports whether err means the peer did not answer (as
// opposed to answering with an error).
func transportErr(err error) bool {
	var re *remoteError
	var se *statusError
	return err != nil && !errors.As(err, &re) && !errors.As(err, &se) && !errors.Is(err, context.Canceled)
}

type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return fmt.Sprintf("internode: %d %s", e.code, e.msg) }

// call runs one operation: a signed POST with a deadline, retried with
// backoff when idempotent and the peer did not answer.
func (p *Peer) call(ctx context.Context, op string, q url.Values, body []byte, idempotent bool, out func(io.Reader) error) error {
	return p.retry(ctx, idempotent, func(ctx context.Context) error {
		return p.do(ctx, op, q, bytes.NewReader(body), out)
	})
}

// batch runs a call of the hot path: on the framed channel when the peer
// speaks protocol 3, else as an HTTP call.
func (p *Peer) batch(op string, fop byte, body []byte, idempotent bool, out func([]byte) error) error {
	ctx := context.Background()
	if p.Version() < framesProtocol {
		return p.call(ctx, op, nil, body, idempotent, func(r io.Reader) error {
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			return out(b)
		})
	}
	return p.retry(ctx, idempotent, func(ctx context.Context) error {
		b, err := p.frames(ctx, fop, body)
		if err != nil {
			return err
		}
		return out(b)
	})
}

// retry runs try with the call deadline, again with backoff when the call
// is idempotent and the peer did not answer; a peer that never answered is
// marked offline.
func (p *Peer) retry(ctx context.Context, idempotent bool, try func(context.Context) error) error {
	if !p.online.Load() {
		return fmt.Errorf("%w: %s", ErrNodeOffline, p.Host)
	}
	attempts := 1
	if idempotent {
		attempts = 3
	}
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(50*(1<<(2*(i-1)))) * time.Millisecond):
			}
		}
		epoch := p.currentEpoch()
		cctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
		stop := context.AfterFunc(epoch, cancel)
		err = try(cctx)
		stop()
		cancel()
		if epoch.Err() != nil && err != nil {
			// Another call or the heartbeat found the peer gone.
			return fmt.Errorf("%w: %s: %w", ErrNodeOffline, p.Host, err)
		}
		if !transportErr(err) {
			return err
		}
	}
	p.markOffline(err)
	return fmt.Errorf("%w: %s: %w", ErrNodeOffline, p.Host, err)
}

func (p *Peer) do(ctx context.Context, op string, q url.Values, body io.Reader, out func(io.Reader) error) error {
	u := p.base + op
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return err
	}
	sign(req, p.opts.Secret, p.Version())
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return p.answer(resp, out)
}

func (p *Peer) answer(resp *http.Response, out func(io.Reader) error) error {
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if code := resp.Header.Get(hdrError); code != "" {
			return decodeError(code, string(bytes.TrimSpace(msg)))
		}
		return &statusError{code: resp.StatusCode, msg: string(bytes.TrimSpace(msg))}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return out(resp.Body)
}

// Drive returns the peer's drive at path.
func (p *Peer) Drive(path string) *RemoteDrive { return &RemoteDrive{peer: p, path: path} }

// Batcher implements erasure.Batched for the peer's drives: nil when the
// peer speaks protocol 1.
func (p *Peer) batcher() erasure.NodeBatcher {
	if p.Version() < 2 {
		return nil
	}
	return p
}

// PutVersions implements erasure.NodeBatcher: one request for all items.
func (p *Peer) PutVersions(items []erasure.PutItem) []error {
	body := binaryUvarint(len(items))
	for _, it := range items {
		body = appendString(body, it.Drive.(*RemoteDrive).path)
		body = appendString(body, it.Bucket)
		body = appendString(body, it.Object)
		body = appendBytes(body, it.Stage[:])
		body = appendBytes(body, drive.MarshalRecord(nil, it.Rec))
	}
	errs := make([]error, len(items))
	err := p.batch("batch/put", opBatchPut, body, false, func(b []byte) error {
		in := reader{buf: b}
		for i := range errs {
			errs[i] = in.error()
		}
		return in.err
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// GetVersions implements erasure.NodeBatcher.
func (p *Peer) GetVersions(items []erasure.GetItem) ([]*drive.Record, []error) {
	body := binaryUvarint(len(items))
	for _, it := range items {
		body = appendString(body, it.Drive.(*RemoteDrive).path)
		body = appendString(body, it.Bucket)
		body = appendString(body, it.Object)
		if it.VersionID != nil {
			body = append(body, 1)
			body = appendBytes(body, it.VersionID[:])
		} else {
			body = append(body, 0)
		}
	}
	recs := make([]*drive.Record, len(items))
	errs := make([]error, len(items))
	err := p.batch("batch/get", opBatchGet, body, true, func(b []byte) error {
		in := reader{buf: b}
		for i := range items {
			if errs[i] = in.error(); errs[i] == nil {
				recs[i], errs[i] = drive.UnmarshalRecord(in.bytes())
			}
		}
		return in.err
	})
	if err != nil {
		for i := range errs {
			recs[i], errs[i] = nil, err
		}
	}
	return recs, errs
}

func binaryUvarint(n int) []byte { return appendUvarint(nil, uint64(n)) }

func appendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

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

// Online implements erasure.Liveness.
func (d *RemoteDrive) Online() bool { return d.peer.Online() }

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

// jsonCall sends args as JSON and decodes a JSON answer into out (nil: none).
func (d *RemoteDrive) jsonCall(op string, a jsonArgs, idempotent bool, out any) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	var decode func(io.Reader) error
	if out != nil {
		decode = func(r io.Reader) error { return json.NewDecoder(r).Decode(out) }
	}
	return d.peer.call(context.Background(), op, d.q(), body, idempotent, decode)
}

func decodeRecord(rec **drive.Record) func(io.Reader) error {
	return func(r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		*rec, err = drive.UnmarshalRecord(b)
		return err
	}
}

// Format implements erasure.Drive.
func (d *RemoteDrive) Format() (drive.Format, error) {
	var f drive.Format
	return f, d.jsonCall("format", jsonArgs{}, true, &f)
}

// DiskInfo implements erasure.Drive.
func (d *RemoteDrive) DiskInfo() (vfs.Usage, error) {
	var u vfs.Usage
	return u, d.jsonCall("diskinfo", jsonArgs{}, true, &u)
}

// MakeBucket implements erasure.Drive.
func (d *RemoteDrive) MakeBucket(b drive.BucketInfo) error {
	return d.jsonCall("makebucket", jsonArgs{BucketInfo: b}, false, nil)
}

// SetBucket implements erasure.Drive.
func (d *RemoteDrive) SetBucket(b drive.BucketInfo) error {
	return d.jsonCall("setbucket", jsonArgs{BucketInfo: b}, true, nil)
}

// StatBucket implements erasure.Drive.
func (d *RemoteDrive) StatBucket(name string) (drive.BucketInfo, error) {
	var b drive.BucketInfo
	return b, d.jsonCall("statbucket", jsonArgs{Bucket: name}, true, &b)
}

// ListBuckets implements erasure.Drive.
func (d *RemoteDrive) ListBuckets() ([]drive.BucketInfo, error) {
	var bs []drive.BucketInfo
	return bs, d.jsonCall("listbuckets", jsonArgs{}, true, &bs)
}

// DeleteBucket implements erasure.Drive.
func (d *RemoteDrive) DeleteBucket(name string, force bool) error {
	return d.jsonCall("deletebucket", jsonArgs{Bucket: name, Force: force}, false, nil)
}

// PutVersion implements erasure.Drive.
func (d *RemoteDrive) PutVersion(bucket, object string, rec *drive.Record, stageID [16]byte) (drive.PutResult, error) {
	stage := ""
	if stageID != drive.NotStaged {
		stage = hexID(stageID)
	}
	var out struct{ Superseded bool }
	err := d.peer.call(context.Background(), "putversion", d.q("bucket", bucket, "object", object, "stage", stage),
		drive.MarshalRecord(nil, rec), false, func(r io.Reader) error { return json.NewDecoder(r).Decode(&out) })
	return drive.PutResult{Superseded: out.Superseded}, err
}

// GetVersion implements erasure.Drive.
func (d *RemoteDrive) GetVersion(bucket, object string, versionID *[16]byte) (*drive.Record, error) {
	v := ""
	if versionID != nil {
		v = hexID(*versionID)
	}
	var rec *drive.Record
	err := d.peer.call(context.Background(), "getversion", d.q("bucket", bucket, "object", object, "version", v), nil, true, decodeRecord(&rec))
	return rec, err
}

// Versions implements erasure.Drive.
func (d *RemoteDrive) Versions(bucket, object string) ([]*drive.Record, error) {
	var recs []*drive.Record
	body, _ := json.Marshal(jsonArgs{Bucket: bucket, Object: object})
	err := d.peer.call(context.Background(), "versions", d.q(), body, true, func(r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		recs, err = drive.DecodeVersions(b, -1)
		return err
	})
	return recs, err
}

// SetVersionMeta implements erasure.Drive.
func (d *RemoteDrive) SetVersionMeta(bucket, object string, rec *drive.Record, meta map[string]string) error {
	return d.jsonCall("setversionmeta", jsonArgs{Bucket: bucket, Object: object, Record: drive.MarshalRecord(nil, rec), Meta: meta}, true, nil)
}

// DeleteVersion implements erasure.Drive.
func (d *RemoteDrive) DeleteVersion(bucket, object string, versionID [16]byte) (*drive.Record, error) {
	body, _ := json.Marshal(jsonArgs{Bucket: bucket, Object: object, VersionID: versionID})
	var rec *drive.Record
	err := d.peer.call(context.Background(), "deleteversion", d.q(), body, false, decodeRecord(&rec))
	return rec, err
}

// RollbackVersion implements erasure.Drive.
func (d *RemoteDrive) RollbackVersion(bucket, object string, rec *drive.Record) (bool, error) {
	var out struct{ Removed bool }
	err := d.jsonCall("rollbackversion", jsonArgs{Bucket: bucket, Object: object, Record: drive.MarshalRecord(nil, rec)}, true, &out)
	return out.Removed, err
}

// walkPage is how many objects a remote walk fetches per call.
const walkPage = 1000

// WalkObjects implements erasure.Drive, fetching pages from the peer.
func (d *RemoteDrive) WalkObjects(bucket, prefix, startAfter string, latestOnly bool, fn func(object string, versions []*drive.Record) bool) error {
	after := startAfter
	for {
		body, _ := json.Marshal(jsonArgs{Bucket: bucket, Prefix: prefix, After: after, LatestOnly: latestOnly, Limit: walkPage})
		var page []byte
		err := d.peer.call(context.Background(), "walkobjects", d.q(), body, true, func(r io.Reader) error {
			var err error
			page, err = io.ReadAll(r)
			return err
		})
		if err != nil {
			return err
		}
		in := reader{buf: page}
		n := 0
		for len(in.buf) > 0 {
			name := in.string()
			vb := in.bytes()
			if in.err != nil {
				return in.err
			}
			versions, err := drive.DecodeVersions(vb, -1)
			if err != nil {
				return err
			}
			n++
			after = name
			if !fn(name, versions) {
				return nil
			}
		}
		if n < walkPage {
			return nil
		}
	}
}

// CreateStaged implements erasure.Drive: the shard streams to the peer,
// which stages it and answers when the file is closed (it is synced when
// it commits).
func (d *RemoteDrive) CreateStaged(id [16]byte, part int) (vfs.File, error) {
	if !d.peer.Online() {
		return nil, fmt.Errorf("%w: %s", ErrNodeOffline, d.peer.Host)
	}
	pr, pw := io.Pipe()
	w := &remoteWriter{pw: pw, done: make(chan error, 1), name: d.path + "/tmp/" + hexID(id)}
	q := d.q("id", hexID(id), "part", strconv.Itoa(part))
	go func() {
		err := d.peer.do(d.peer.currentEpoch(), "shard/write", q, pr, nil)
		_ = pr.CloseWithError(err)
		if transportErr(err) {
			d.peer.markOffline(err)
		}
		w.done <- err
	}()
	return w, nil
}

// AbortStaged implements erasure.Drive.
func (d *RemoteDrive) AbortStaged(id [16]byte) error {
	return d.jsonCall("abortstaged", jsonArgs{VersionID: id}, true, nil)
}

// OpenShard implements erasure.Drive. No call is made until the first
// read: a shard that is never needed costs nothing.
func (d *RemoteDrive) OpenShard(dataDir [16]byte, part int) (vfs.File, error) {
	if !d.peer.Online() {
		return nil, fmt.Errorf("%w: %s", ErrNodeOffline, d.peer.Host)
	}
	return &remoteReader{d: d, dataDir: dataDir, part: part}, nil
}

// PutUpload implements erasure.Drive.
func (d *RemoteDrive) PutUpload(u *drive.Upload) error {
	return d.jsonCall("putupload", jsonArgs{Upload: u}, true, nil)
}

// GetUpload implements erasure.Drive.
func (d *RemoteDrive) GetUpload(bucket, object string, id [16]byte) (*drive.Upload, error) {
	var u drive.Upload
	if err := d.jsonCall("getupload", jsonArgs{Bucket: bucket, Object: object, VersionID: id}, true, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// WalkUploads implements erasure.Drive.
func (d *RemoteDrive) WalkUploads(bucket, prefix string, fn func(u *drive.Upload) bool) error {
	var us []*drive.Upload
	if err := d.jsonCall("walkuploads", jsonArgs{Bucket: bucket, Prefix: prefix}, true, &us); err != nil {
		return err
	}
	for _, u := range us {
		if !fn(u) {
			break
		}
	}
	return nil
}

// CommitPart implements erasure.Drive.
func (d *RemoteDrive) CommitPart(u *drive.Upload, p *drive.PartRecord) error {
	return d.jsonCall("commitpart", jsonArgs{Upload: u, Part: p}, false, nil)
}

// ListParts implements erasure.Drive.
func (d *RemoteDrive) ListParts(uploadID [16]byte) ([]drive.PartRecord, error) {
	var ps []drive.PartRecord
	return ps, d.jsonCall("listparts", jsonArgs{VersionID: uploadID}, true, &ps)
}

// CompleteUpload implements erasure.Drive.
func (d *RemoteDrive) CompleteUpload(u *drive.Upload, chosen []drive.PartRecord, rec *drive.Record) (drive.PutResult, error) {
	var out struct{ Superseded bool }
	err := d.jsonCall("completeupload", jsonArgs{Upload: u, Chosen: chosen, Record: drive.MarshalRecord(nil, rec)}, false, &out)
	return drive.PutResult{Superseded: out.Superseded}, err
}

// AbortUpload implements erasure.Drive.
func (d *RemoteDrive) AbortUpload(bucket, object string, id [16]byte) error {
	return d.jsonCall("abortupload", jsonArgs{Bucket: bucket, Object: object, VersionID: id}, false, nil)
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

// remoteReader reads a peer's shard by ranges.
type remoteReader struct {
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
		err := peer.retry(context.Background(), true, func(ctx context.Context) error {
			b, err := peer.framesInto(ctx, opShardRead, body, p)
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
	err := r.d.peer.call(context.Background(), "shard/read", q, nil, true, func(rd io.Reader) error {
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
	err := r.d.peer.call(context.Background(), "shard/stat", q, nil, true, func(rd io.Reader) error { return json.NewDecoder(rd).Decode(&out) })
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

// NotifyBucketChanged tells the peer to drop its cached record of a bucket.
func (p *Peer) NotifyBucketChanged(bucket string) error {
	return p.call(context.Background(), "bucketchanged", url.Values{"bucket": {bucket}}, nil, true, nil)
}

// NodeStatus fetches the peer's own view of itself into out.
func (p *Peer) NodeStatus(out any) error {
	return p.call(context.Background(), "nodestatus", nil, nil, true, func(r io.Reader) error { return json.NewDecoder(r).Decode(out) })
}

// SetPoolState asks the peer to override a pool's state.
func (p *Peer) SetPoolState(pool, state string) error {
	return p.call(context.Background(), "poolstate", url.Values{"pool": {pool}, "state": {state}}, nil, true, nil)
}
