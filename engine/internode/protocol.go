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
// over HTTP/2. Version 4 signs each request over its query, body, a nonce
// and the time, and a server refuses a request it has seen (replay.go);
// with an older peer requests are signed as before. Version 5 added
// batches of record reads without inline data (a HEAD's); with an older
// peer they read the data too. Version 6 carries writes' events with their
// records (batch/putevents) and lists and removes them (listevents,
// deleteevents); an older peer's drives store none, and a write whose
// events are not on write quorum of drives stores them another way.
package internode

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/buildinfo"
	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/hlc"
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
	// hdrClock is the sender's hybrid clock (Unix ns), which the receiver
	// moves its own to (package hlc). Older builds neither send nor read
	// it; it is a hint, not signed: a value far ahead is not followed.
	hdrClock   = "X-Strata-Clock"
	hdrAuth    = "Authorization"
	authScheme = "Strata "
	// From signedProtocol on.
	hdrNonce         = "X-Strata-Nonce"
	hdrBodySum       = "X-Strata-Content-Sha256"
	authSchemeSigned = "Strata4 "
	unsignedPayload  = "UNSIGNED-PAYLOAD"
)

// signedProtocol is the first version whose requests are signed over their
// query and body and carry a nonce.
const signedProtocol = 4

// statProtocol is the first version with batches of record reads without
// inline data (frameBatchStat).
const statProtocol = 5

// eventsProtocol is the first version that carries writes' events with
// their records (frameBatchPutEvents, opListEvents, opDeleteEvents).
const eventsProtocol = 6

// maxSkewSigned bounds the clock difference a signed request tolerates; a
// server remembers each nonce this long past its time.
const maxSkewSigned = 2 * time.Minute

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
	"PartMissing":     drive.ErrPartMissing,
	"Unformatted":     drive.ErrUnformatted,
	"CorruptRecord":   drive.ErrCorruptRecord,
	"DriveNotServed":  ErrDriveNotServed,
	"Bitrot":          drive.ErrBitrot,
	"Superseded":      drive.ErrSuperseded,
	"DriveClosed":     drive.ErrClosed,
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

// maxSkew bounds the clock difference a legacy-signed request tolerates.
const maxSkew = 5 * time.Minute

func mac(secret []byte, method, path, ts string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(method + "\n" + path + "\n" + ts))
	return hex.EncodeToString(m.Sum(nil))
}

// sign signs req for a peer speaking version: from signedProtocol over the
// request's method, path, query, body (bodySum: its SHA-256 in hex, or
// unsignedPayload for a streamed shard), time and a fresh nonce; before,
// over method, path and time only.
func sign(req *http.Request, secret []byte, version int, bodySum string) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set(hdrTime, ts)
	req.Header.Set(hdrClock, strconv.FormatInt(hlc.Default.Peek(), 10))
	req.Header.Set(hdrProtocol, strconv.Itoa(version))
	if version < signedProtocol {
		req.Header.Set(hdrAuth, authScheme+mac(secret, req.Method, req.URL.Path, ts))
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	req.Header.Set(hdrNonce, nonce)
	req.Header.Set(hdrBodySum, bodySum)
	req.Header.Set(hdrAuth, authSchemeSigned+signature(secret, req, ts, nonce, bodySum))
}

// observeClock moves this node's hybrid clock to a peer's (hdrClock).
func observeClock(v string) {
	if t, err := strconv.ParseInt(v, 10, 64); err == nil && t > 0 {
		hlc.Default.Observe(t)
	}
}

// signature is the MAC of a version-4 request.
func signature(secret []byte, req *http.Request, ts, nonce, bodySum string) string {
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{req.Method, req.URL.Path, req.URL.Query().Encode(), bodySum, ts, nonce, req.Header.Get(hdrProtocol)} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// bodySum is the SHA-256 of a request body, as signed.
func bodySum(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

// verify authenticates a request: a version-4 signature, once (seen
// remembers the nonces), or a legacy one from a sender that declares an
// older protocol (a node not yet upgraded).
func verify(req *http.Request, secret []byte, seen *nonces) error {
	auth := req.Header.Get(hdrAuth)
	if !strings.HasPrefix(auth, authSchemeSigned) {
		return verifyLegacy(req, secret)
	}
	ts := req.Header.Get(hdrTime)
	at, err := signedAt(ts, maxSkewSigned)
	if err != nil {
		return err
	}
	nonce, err := hex.DecodeString(req.Header.Get(hdrNonce))
	if err != nil || len(nonce) != 16 {
		return errors.New("internode: missing nonce")
	}
	sum := req.Header.Get(hdrBodySum)
	want := authSchemeSigned + signature(secret, req, ts, req.Header.Get(hdrNonce), sum)
	if !hmac.Equal([]byte(auth), []byte(want)) {
		return errors.New("internode: bad signature (the nodes' root credentials differ, or the request was altered)")
	}
	if !seen.first([16]byte(nonce), at.Add(maxSkewSigned)) {
		return errors.New("internode: request replayed")
	}
	return checkBody(req, sum)
}

// checkBody holds a signed request to its body: read whole (bounded) and
// compared with the signed sum before any handler sees it. Only a shard's
// stream is sent unsigned; its query (which names the staging file) is.
func checkBody(req *http.Request, sum string) error {
	if sum == unsignedPayload {
		if req.URL.Path != Prefix+opShardWrite.name {
			return errors.New("internode: unsigned body refused")
		}
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxFrame+1))
	if err != nil {
		return fmt.Errorf("internode: reading the body: %w", err)
	}
	if len(body) > maxFrame {
		return fmt.Errorf("internode: body over %d bytes refused", maxFrame)
	}
	if !hmac.Equal([]byte(bodySum(body)), []byte(sum)) {
		return errors.New("internode: body does not match its signature")
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// signedAt is a request's time (ts, Unix seconds), refused when it is
// further than skew from this node's clock.
func signedAt(ts string, skew time.Duration) (time.Time, error) {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("internode: missing time")
	}
	at := time.Unix(sec, 0)
	if d := time.Since(at); d > skew || d < -skew {
		return time.Time{}, fmt.Errorf("internode: request time off by %s (clocks out of sync? nodes need them within %s)", d.Round(time.Second), skew)
	}
	return at, nil
}

// verifyLegacy checks a signature over method, path and time: accepted
// only from a sender declaring a protocol before signedProtocol, so a
// request of an upgraded node cannot be stripped down to it.
func verifyLegacy(req *http.Request, secret []byte) error {
	if v, _ := strconv.Atoi(req.Header.Get(hdrProtocol)); v >= signedProtocol {
		return fmt.Errorf("internode: protocol %d requests must be signed over their query and body", v)
	}
	ts := req.Header.Get(hdrTime)
	if _, err := signedAt(ts, maxSkew); err != nil {
		return err
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
	// text, when set, is the message as a string (buf, as read so far,
	// is its end): strings read are cut from it instead of copied each.
	text string
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

func (r *reader) string() string {
	b := r.bytes()
	if r.text == "" {
		return string(b)
	}
	// buf is what is left of text: b ends where it begins.
	end := len(r.text) - len(r.buf)
	return r.text[end-len(b) : end]
}

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
