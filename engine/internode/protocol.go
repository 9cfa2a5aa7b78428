// Package internode is how the servers of a deployment use each other's
// drives: an HTTP/2 service on every node (one persistent, multiplexed
// connection per peer; TLS with client certificates when the deployment runs
// TLS) that exposes the node's drives, and the client side, RemoteDrive, an
// erasure.Drive whose operations run on the peer. Metadata calls have
// deadlines, reads are retried with backoff, a peer that stops answering is
// marked offline (calls fail at once) until a background ping finds it again,
// and the hot operations of a small PUT or GET are batched per node.
//
// Every request carries the sender's protocol version; a node serves
// versions MinProtocol..Protocol, so N and N-1 interoperate during a rolling
// upgrade. Version 2 added the per-node batches; with a version 1 peer a
// node falls back to one call per drive. Version 3 added the framed channel
// (frames.go) for batches and shard reads; with a version 2 peer they go
// over HTTP/2.
package internode

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/drive"
)

// Protocol versions, defined in buildinfo so the version a binary prints
// is the one it speaks.
const (
	Protocol    = buildinfo.ProtocolVersion
	MinProtocol = buildinfo.MinProtocolVersion
)

// Prefix of every internode path.
const Prefix = "/strata/internode/"

// Headers of the protocol.
const (
	hdrProtocol = "X-Strata-Protocol"
	hdrTime     = "X-Strata-Time"
	hdrError    = "X-Strata-Error"
	hdrAuth     = "Authorization"
	authScheme  = "Strata "
)

// DefaultPort is the internode port when none is configured.
const DefaultPort = 9001

// ErrNodeOffline: the peer does not answer (it is down or cut off); calls
// fail at once until it answers a ping again.
var ErrNodeOffline = errors.New("node offline")

// ErrDriveNotServed: the peer does not serve that drive (it failed to open
// there, or the topology differs).
var ErrDriveNotServed = errors.New("drive not served by that node")

// Error codes on the wire, so a drive's sentinel errors survive the trip.
var wireErrors = map[string]error{
	"VersionNotFound": drive.ErrVersionNotFound,
	"BucketNotFound":  drive.ErrBucketNotFound,
	"BucketExists":    drive.ErrBucketExists,
	"BucketNotEmpty":  drive.ErrBucketNotEmpty,
	"UploadNotFound":  drive.ErrUploadNotFound,
	"Unformatted":     drive.ErrUnformatted,
	"CorruptRecord":   drive.ErrCorruptRecord,
	"DriveNotServed":  ErrDriveNotServed,
	"Bitrot":          drive.ErrBitrot,
}

// errorCode names an error for the wire ("Internal" when it is not a
// sentinel: the peer then rebuilds a plain error with the message).
func errorCode(err error) string {
	for code, e := range wireErrors {
		if errors.Is(err, e) {
			return code
		}
	}
	return "Internal"
}

// remoteError rebuilds an error from the wire: the sentinel when the code
// names one, with the peer's message.
type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func decodeError(code, msg string) error {
	// Unknown codes (Internal) keep a nil sentinel: still an answer from
	// the peer, never mistaken for the peer being unreachable.
	return &remoteError{sentinel: wireErrors[code], msg: msg}
}

// Secret derives the internode signing key from the root secret, which
// every node of a deployment shares.
func Secret(rootSecret string) []byte {
	m := hmac.New(sha256.New, []byte(rootSecret))
	m.Write([]byte("strata internode v1"))
	return m.Sum(nil)
}

// maxSkew bounds the clock difference a signed request tolerates.
const maxSkew = 5 * time.Minute

func mac(secret []byte, method, path, ts string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(method + "\n" + path + "\n" + ts))
	return hex.EncodeToString(m.Sum(nil))
}

func sign(req *http.Request, secret []byte, version int) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set(hdrTime, ts)
	req.Header.Set(hdrProtocol, strconv.Itoa(version))
	req.Header.Set(hdrAuth, authScheme+mac(secret, req.Method, req.URL.Path, ts))
}

func verify(req *http.Request, secret []byte) error {
	ts := req.Header.Get(hdrTime)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("internode: missing time")
	}
	if d := time.Since(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return fmt.Errorf("internode: request time off by %s (clocks out of sync?)", d.Round(time.Second))
	}
	got := req.Header.Get(hdrAuth)
	want := authScheme + mac(secret, req.Method, req.URL.Path, ts)
	if !hmac.Equal([]byte(got), []byte(want)) {
		return errors.New("internode: bad signature (the nodes' root credentials differ?)")
	}
	return nil
}

// Wire encoding of batches and listings: length-prefixed fields.

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// reader decodes what the append functions wrote, remembering the first
// error.
type reader struct {
	buf []byte
	err error
}

// count reads a number of items that follow; each takes at least a byte,
// so a count larger than what is left is malformed (and would otherwise
// make the receiver allocate whatever a peer names).
func (r *reader) count() int {
	v := r.uvarint()
	if r.err == nil && v > uint64(len(r.buf)) {
		r.err = fmt.Errorf("internode: malformed message: %d items in %d bytes", v, len(r.buf))
		return 0
	}
	return int(v)
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err = errors.New("internode: malformed message")
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.err = errors.New("internode: truncated message")
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) id() [16]byte {
	var id [16]byte
	b := r.bytes()
	if r.err == nil && len(b) != 16 {
		r.err = errors.New("internode: malformed ID")
	}
	copy(id[:], b)
	return id
}

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

func parseHexID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("internode: bad ID %q", s)
	}
	copy(id[:], b)
	return id, nil
}
