package objlayer

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"time"
)

// BucketInfo is a bucket's record: its name, owner and the S3
// configuration documents the front end keeps for it. A layer stores it
// whole and returns it as stored.
type BucketInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Versioning is "", "Enabled" or "Suspended".
	Versioning string `json:"versioning,omitempty"`
	// Tags are the bucket's tags.
	Tags map[string]string `json:"tags,omitempty"`
	// Owner is the access key that created the bucket ("" for buckets made
	// before owners were kept: the root account's).
	Owner string `json:"owner,omitempty"`
	// ACL, Policy, CORS and ObjectLock are the front end's documents for
	// the bucket (its ACL, bucket policy, CORS and object-lock
	// configuration), kept as it gave them; empty when not set.
	ACL        []byte `json:"acl,omitempty"`
	Policy     []byte `json:"policy,omitempty"`
	CORS       []byte `json:"cors,omitempty"`
	ObjectLock []byte `json:"objectLock,omitempty"`
	// Encryption is the bucket's default encryption (JSON: mode and key
	// ID), applied to writes that ask for none.
	Encryption []byte `json:"encryption,omitempty"`
	// Ownership is the bucket's object-ownership control (S3's
	// BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter).
	Ownership string `json:"ownership,omitempty"`
	// Lifecycle is the bucket's lifecycle configuration (S3's XML
	// document, as engine/lifecycle checked it); empty when not set.
	Lifecycle []byte `json:"lifecycle,omitempty"`
	// Notification is the bucket's notification configuration (S3's XML
	// document, as engine/notify checked it); empty when not set.
	Notification []byte `json:"notification,omitempty"`
	// Replication is the bucket's replication configuration (S3's XML
	// document, as engine/replicate checked it); empty when not set.
	Replication []byte `json:"replication,omitempty"`
	// PublicAccessBlock is the bucket's public access block (the front
	// end's JSON); empty when not set.
	PublicAccessBlock []byte `json:"publicAccessBlock,omitempty"`
	// Quota is the bucket's hard quota; nil for none.
	Quota *Quota `json:"quota,omitempty"`
	// Updated is the time of the last change to the record; when copies
	// disagree, the latest change wins.
	Updated time.Time `json:"updated,omitzero"`
}

// Quota is a bucket's hard quota: a write that would take the bucket's
// versions past either figure is refused (ErrQuotaExceeded); zero is no
// limit on that figure.
type Quota struct {
	Bytes   int64 `json:"bytes,omitempty"`
	Objects int64 `json:"objects,omitempty"`
}

// Usage is what a bucket's versions hold (delete markers are none).
type Usage struct {
	Bytes   int64 `json:"bytes"`
	Objects int64 `json:"objects"`
}

// ObjectInfo describes one object version as the layer resolved it.
type ObjectInfo struct {
	Bucket, Name string
	// VersionID is all zero for the null version.
	VersionID [16]byte
	ModTime   time.Time
	// Size is the stored size: what was given to PutObject (an encrypted
	// object's sealed size; the front end knows its plaintext size).
	Size         int64
	ETag         string
	Meta         map[string]string
	DeleteMarker bool
	// IsLatest is set by listings of versions.
	IsLatest bool
	// Parts lists the parts of a multipart object (empty otherwise).
	Parts []Part
	// EventID is set when the write's events (PutOptions.Events) were
	// stored with the version, on write quorum of its drives: they are
	// the caller's to deliver and then forget (EventStore). Zero when the
	// layer stored none.
	EventID [16]byte
}

// Part is one part of a multipart object, as stored.
type Part struct {
	Number int
	Size   int64
	ETag   string
}

// PutOptions qualify a PutObject or a multipart completion.
type PutOptions struct {
	// VersionID of the new version; all zero writes the null version
	// (unversioned or versioning-suspended buckets). The front end makes
	// them time-ordered (UUIDv7: the first 48 bits are the creation time
	// in milliseconds), so a layer may order a key's versions by ID.
	VersionID [16]byte
	// Meta is user metadata and stored system headers.
	Meta map[string]string
	// ModTime overrides the version time (tests, replication); zero = now.
	ModTime time.Time
	// AfterBody, when set, is called once the body has been read to its
	// end and before anything is committed: it may add to Meta (checksums
	// the client sent after the body), or refuse the write with an error,
	// which is returned and leaves nothing stored.
	AfterBody func(meta map[string]string) error
	// ETag, when set, is kept instead of the body's MD5 (a version moved
	// between pools keeps its ETag, a multipart "-N" one included), or of
	// a completion's parts' (a replica keeps the source's).
	ETag string
	// BodyETag, when set, is called once the body has been read and gives
	// the ETag (the MD5 of an encrypted object's plaintext, which only the
	// reader that encrypted it saw).
	BodyETag func() string
	// CompleteParts, for a multipart completion, is called with the parts
	// chosen before anything is committed: it may add to the version's
	// metadata (checksums derived from the parts') or refuse it.
	CompleteParts func(parts []PartInfo, meta map[string]string) error
	// Condition, when set, is called with the key's current version (nil
	// when it has none) as late as the layer can before it commits, and
	// refuses the write with its error (a conditional write: If-Match,
	// If-None-Match). A layer that serialises a key's commits (a lock)
	// calls it under that lock; the erasure layer calls it just before
	// committing, so a write committing at the same moment elsewhere may
	// still win.
	Condition func(current *ObjectInfo) error
	// Events, when set, makes the write's event notifications from the
	// version as it commits (called again when the version is stamped
	// again); a layer that can stores them in the same commit as the
	// version, so an acknowledged write has them, and says so in the
	// answer's EventID. A layer that cannot ignores it.
	Events func(info ObjectInfo) []byte
	// EventMark, with Events, names a metadata key that a layer storing
	// the events with the version on every drive it writes sets in the
	// version's metadata to the events' ID (EventMarkValue), so a reader
	// can tell from EventStore.EventStored whether they are still waiting
	// for delivery. A layer that cannot store them so leaves the key out.
	EventMark string
}

// EventMarkValue is how PutOptions.EventMark records an events' ID.
func EventMarkValue(id [16]byte) string { return hex.EncodeToString(id[:]) }

// ParseEventMark is EventMarkValue's inverse (false for a value it did
// not make).
func ParseEventMark(v string) (id [16]byte, ok bool) {
	if len(v) != 2*len(id) {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(v)); err != nil {
		return id, false
	}
	return id, true
}

// EventRef names a write's events stored with its version.
type EventRef struct {
	Bucket, Object string
	ID             [16]byte
}

// ErrPartialListing is what EventStore.ListEvents returns, after
// listing all it could, when some drives could not be listed (offline,
// or of a build that stores no events).
var ErrPartialListing = errors.New("events: some drives could not be listed")

// EventStore is implemented by layers that store writes' events with
// their versions (PutOptions.Events).
type EventStore interface {
	// ListEvents calls fn with each write's stored events (every drive's
	// copy seen once); fn's error stops the walk and is returned, and
	// ErrPartialListing says drives were left out.
	ListEvents(ctx context.Context, fn func(id [16]byte, events []byte) error) error
	// ForgetEvents removes delivered events.
	ForgetEvents(ctx context.Context, refs []EventRef) error
	// EventStored reports whether the events ref names are still stored
	// (not yet delivered and forgotten): true when any drive that can
	// hold them does, or when too few drives answered to tell.
	EventStored(ctx context.Context, ref EventRef) (bool, error)
}

// ETagFor is the ETag options give a version ("" when the stored bytes'
// MD5 is kept); called once the body was read.
func (o PutOptions) ETagFor() string {
	if o.BodyETag != nil {
		return o.BodyETag()
	}
	return o.ETag
}

// PartOptions qualify a part upload.
type PartOptions struct {
	// Checksum, when set, gives the checksum stored with the part once
	// its body was read ("ALGORITHM:value").
	Checksum func() string
	// Body, when set, turns the request body into the bytes stored, given
	// the upload's metadata (the parts of an encrypted upload are
	// encrypted with its key): the reader, its size (-1: unknown) and,
	// when not nil, what gives the part's ETag once it was read.
	Body func(uploadMeta map[string]string, r io.Reader, size int64) (io.Reader, int64, func() string, error)
}

// UploadInfo describes a multipart upload.
type UploadInfo struct {
	Bucket, Object string
	ID             [16]byte
	Initiated      time.Time
	Meta           map[string]string
}

// PartInfo describes one uploaded part.
type PartInfo struct {
	Number   int
	ModTime  time.Time
	Size     int64
	ETag     string
	Checksum string
}

// CompletePart names a part in a completion request.
type CompletePart struct {
	Number int
	ETag   string
}

// UploadList is one page of a multipart upload listing.
type UploadList struct {
	Uploads        []UploadInfo
	CommonPrefixes []string
	IsTruncated    bool
	NextKeyMarker  string
	NextUploadID   [16]byte
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	IsTruncated    bool
	// NextMarker is the last key or common prefix returned, to continue from.
	NextMarker string
	// NextVersionMarker is the version ID to continue from, for version
	// listings (empty when the next page starts at a new key).
	NextVersionMarker string
}

// DeleteMode says how a DELETE without a version ID behaves, by the
// bucket's versioning state.
type DeleteMode int

// Delete modes.
const (
	// DeleteUnversioned removes the null version.
	DeleteUnversioned DeleteMode = iota
	// DeleteVersioned adds a delete marker with a new version ID.
	DeleteVersioned
	// DeleteSuspended adds a delete marker as the null version.
	DeleteSuspended
	// DeleteMarkerAs adds a delete marker whose version ID is the one
	// given (a replica of another bucket's marker, engine/replicate): the
	// versionID names the marker to make, not a version to remove.
	DeleteMarkerAs
)

// DeleteResult says what a delete did, for the S3 response headers.
type DeleteResult struct {
	// VersionID is the version removed, or the delete marker created.
	VersionID [16]byte
	// DeleteMarker: a delete marker was created, or the version removed
	// was one.
	DeleteMarker bool
}

// DirectHandle is a Handle whose WriteRange copies from a local file the
// handle holds open (the POSIX layer's): a read then fails only on an I/O
// error, so the front end need not read ahead of its answer's headers to
// be able to answer an error instead, and a writer that can send a file
// from the page cache (sendfile) is handed the file.
type DirectHandle interface {
	Handle
	Direct() bool
}

// Handle is an object version resolved once: its info is fixed, and reads
// return exactly that version's bytes, even if a newer version is written
// meanwhile. A layer that finds data missing or damaged while serving a
// read repairs it on its own (queues the object for healing).
type Handle interface {
	// Info is the version resolved.
	Info() ObjectInfo
	// WriteRange writes length bytes of the stored object from offset to w
	// (length -1: to the end).
	WriteRange(ctx context.Context, w io.Writer, offset, length int64) error
	// Close releases what the handle holds (an open file); the front end
	// closes every handle it opened, once, when it is done with it.
	Close() error
}

// IsInternalBucket reports a bucket the engine keeps for itself (the IAM
// directory's, the notification queue's: names starting ".strata-"). No
// S3 request can name one (a bucket name starts with a letter or digit),
// and listings leave them out.
func IsInternalBucket(name string) bool { return strings.HasPrefix(name, ".strata-") }
