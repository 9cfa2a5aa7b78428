package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Replication statuses, as x-amz-replication-status answers them.
const (
	StatusPending   = "PENDING"
	StatusCompleted = "COMPLETED"
	StatusFailed    = "FAILED"
	StatusReplica   = "REPLICA"
)

// MetaStatus is the version metadata key holding a version's replication
// status once one is known (COMPLETED, FAILED, REPLICA); a version a rule
// covers without one is PENDING.
const MetaStatus = objlayer.InternalMetaPrefix + "Replication-Status"

// MetaEvent marks a version whose write stored its replication event
// with it (objlayer.PutOptions.EventMark; only events that are all
// replication rules'): such a version without a stored status is PENDING
// while the event is stored and COMPLETED once it is gone (delivered and
// forgotten), so a successful copy writes no status.
const MetaEvent = objlayer.InternalMetaPrefix + "Replication-Event"

// The headers a remote's requests carry so a Strata destination keeps
// what the source's version was: its version ID, time and ETag, and that
// it is a replica (not replicated again: two-way replication without
// loops). A destination honours them only for a principal allowed
// s3:ReplicateObject (writes) or s3:ReplicateDelete (deletes) on the
// bucket; another S3 service ignores them.
const (
	HeaderVersionID = "X-Strata-Replica-Version-Id"
	HeaderModTime   = "X-Strata-Replica-Mtime"
	HeaderETag      = "X-Strata-Replica-Etag"
	HeaderReplica   = "X-Strata-Replica"
)

// ErrGone is what Source.Open returns for a version no longer there (its
// copy is not needed).
var ErrGone = errors.New("replication: the version is gone")

// NotReplicable is a version that cannot be copied (SSE-C: the source
// does not hold its key): marked FAILED, not retried.
type NotReplicable struct{ Reason string }

func (e *NotReplicable) Error() string { return "replication: " + e.Reason }

// Version is a version to copy: the headers a PUT of it carries (content
// headers, user metadata, tags, object lock, checksum, encryption wanted),
// and its plaintext.
type Version struct {
	VersionID string
	Header    http.Header
	Size      int64
	ModTime   time.Time
	// ETag is the source's; MD5 is the plaintext's MD5 when known (a
	// single-part version), which the destination checks the body with.
	ETag, MD5 string
	// Status is the version's replication status ("" for none yet).
	Status string
	// StatusFollowsEvent: without a stored Status, the version is
	// COMPLETED once its event is delivered (MetaEvent), so its copy
	// need not write one.
	StatusFollowsEvent bool
	// DeleteMarker: the version is a delete marker (only its ModTime is
	// set; Open gives one only without the body).
	DeleteMarker bool
	// Tags are the version's tags (for a tagging change).
	Tags map[string]string
	// Parts are a multipart version's parts' plaintext sizes, PartMD5s
	// their MD5s in hex when known (not encrypted): a version copied in
	// parts keeps its layout, so the destination derives the same
	// multipart ETag and checks each part.
	Parts    []int64
	PartMD5s []string
	Body     io.ReadCloser
	// Reopen, when set, reads bytes [offset, offset+length) of the same
	// version's body again: a part of a copy in parts whose upload failed
	// is sent again from there (nil: the whole copy is retried).
	Reopen func(ctx context.Context, offset, length int64) (io.ReadCloser, error)
}

// Source is the local side a remote reads from: the S3 front end, which
// resolves versions and decrypts them.
type Source interface {
	// Config is a bucket's replication configuration (nil for none;
	// objlayer.ErrBucketNotFound when the bucket is gone).
	Config(ctx context.Context, bucket string) (*Config, error)
	// Open returns a version to copy (ErrGone, *NotReplicable); with
	// withBody false, Body is nil.
	Open(ctx context.Context, bucket, key, versionID string, withBody bool) (*Version, error)
	// SetStatus records a version's replication status.
	SetStatus(ctx context.Context, bucket, key, versionID, status string) error
	// FromSnapshot is the version (without its body) a write kept in
	// memory for its copy (Snapshot.Desc, the source's own encoding).
	FromSnapshot(bucket, key string, s *Snapshot) (*Version, error)
	// MaxPut is the largest version a copy sends in one PUT (S3's 5 GiB;
	// lower in tests): a larger one is copied in parts.
	MaxPut() int64
}

// Remote copies what a bucket's rules cover to another S3 endpoint: the
// delivery of the replication events the notifications' queue holds. It
// is a notify.Target (ARN, Deliver, Close) whose ARN the configurations'
// Role names.
type Remote struct {
	arn, region string
	endpoint    *url.URL
	creds       aws.Credentials
	client      *http.Client
	signer      *v4.Signer
	src         Source
	log         *slog.Logger
	stats       *Stats
	// large bounds the copies streaming a version from the drives at
	// once in the process (nil: no bound; Remotes.Open shares its own
	// among its remotes), mine those of this remote (at most half of
	// them, so one slow destination leaves room for the others').
	large, mine chan struct{}
}

// RemoteLanes is how many copies a remote runs at once (notify.Laned): a
// copy waits a round trip to the destination, often another site's, so
// the queue's 8 lanes would cap a server's copies at 8 a round trip (160
// a second at 50 ms), under what one server takes in small PUTs. Each
// lane holds one copy; those streaming a version from the drives are
// bounded by LargeCopies.
const RemoteLanes = 32

// LargeCopies is how many copies of versions read back from the drives
// (not from their write's snapshot) and larger than what a server keeps
// inline run at once in a process, whatever its remotes and lanes (each
// holds the erasure layer's block buffers while it streams), half of them
// at most to one remote.
const LargeCopies = 8

// largeCopyFloor is the size above which a version read back takes one
// of LargeCopies (the erasure-coded server's inline limit).
const largeCopyFloor = 128 << 10

// Lanes is how many of its copies run at once (notify.Laned).
func (r *Remote) Lanes() int { return RemoteLanes }

// ARN is a remote's ARN for the target id in region.
func ARN(region, id string) string {
	return notifytargets.Target{ID: id, Type: notifytargets.S3}.ARN(region)
}

// Open opens the remote a targets file's entry of type s3 describes:
// Endpoint its URL (https://host:port), Username and Password its access
// key and secret, CAFile the CA that signed its certificate (empty: the
// system's).
func Open(spec notifytargets.Target, region string, src Source, stats *Stats, log *slog.Logger) (*Remote, error) {
	u, err := url.Parse(spec.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("replication remote %s: endpoint %q is not an http(s) URL", spec.ID, spec.Endpoint)
	}
	if spec.Username == "" || spec.Password == "" {
		return nil, fmt.Errorf("replication remote %s needs an access key and secret (username and password)", spec.ID)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = 60 * time.Second
	if spec.CAFile != "" {
		pem, err := os.ReadFile(spec.CAFile)
		if err != nil {
			return nil, fmt.Errorf("replication remote %s: %w", spec.ID, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("replication remote %s: no certificate in %s", spec.ID, spec.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = NewStats()
	}
	return &Remote{arn: ARN(region, spec.ID), region: region, endpoint: u,
		creds:  aws.Credentials{AccessKeyID: spec.Username, SecretAccessKey: spec.Password},
		client: &http.Client{Transport: tr}, src: src, log: log, stats: stats,
		// S3 signs the path as sent: escaped once, not twice.
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })}, nil
}

// ARN names the remote in replication configurations (their Role).
func (r *Remote) ARN() string { return r.arn }

// DeliveryTimeout bounds a delivery (notify.Timeouter): a version's copy
// is bounded by its size instead (copyTimeout).
func (r *Remote) DeliveryTimeout() time.Duration { return 6 * time.Hour }

// copyTimeout is how long a copy of size bytes may take: a minute, and
// as long again as moving it at 4 MiB/s takes (a destination slower than
// that fails the copy, which is retried).
func copyTimeout(size int64) time.Duration {
	return time.Minute + time.Duration(size/(4<<20))*time.Second
}

// Close ends the remote's idle connections.
func (r *Remote) Close() { r.client.CloseIdleConnections() }

// event is what a replication event says (the S3 event message the
// notifications' queue holds).
type event struct {
	name, rule, bucket, key, versionID string
	at                                 time.Time
	// size is the version's, as its write (or resync) gave it.
	size int64
	// snap is the version as its write kept it, when it did.
	snap *Snapshot
}

func parseEvent(msg []byte) (event, error) {
	var m struct {
		Records []struct {
			EventTime time.Time `json:"eventTime"`
			EventName string    `json:"eventName"`
			S3        struct {
				ConfigurationID string `json:"configurationId"`
				Bucket          struct {
					Name string `json:"name"`
				} `json:"bucket"`
				Object struct {
					Key       string `json:"key"`
					VersionID string `json:"versionId"`
					Size      int64  `json:"size"`
				} `json:"object"`
			} `json:"s3"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return event{}, fmt.Errorf("replication: an event that does not decode: %w", err)
	}
	if len(m.Records) != 1 {
		return event{}, fmt.Errorf("replication: an event message of %d records", len(m.Records))
	}
	rec := m.Records[0]
	key, err := url.QueryUnescape(rec.S3.Object.Key)
	if err != nil {
		return event{}, fmt.Errorf("replication: an event's key does not decode: %w", err)
	}
	return event{name: "s3:" + rec.EventName, rule: rec.S3.ConfigurationID, bucket: rec.S3.Bucket.Name, key: key,
		versionID: rec.S3.Object.VersionID, at: rec.EventTime, size: rec.S3.Object.Size}, nil
}

// Deliver carries out one replication event given as its S3 event
// message (read back from a batch of the queue); DeliverEvent is the same
// for an event the queue holds as it was made.
func (r *Remote) Deliver(ctx context.Context, msg []byte) error {
	ev, err := parseEvent(msg)
	if err != nil {
		r.log.Warn("replication: dropped an event", "error", err)
		return nil
	}
	return r.deliver(ctx, ev)
}

// DeliverEvent is Deliver for an event as the queue holds it
// (notify.EventTarget).
func (r *Remote) DeliverEvent(ctx context.Context, e notify.Event, rule string) error {
	snap, _ := e.Snapshot.(*Snapshot)
	return r.deliver(ctx, event{name: e.Name, rule: rule, bucket: e.Bucket, key: e.Key, versionID: e.VersionID, at: e.Time, size: e.Size, snap: snap})
}

// deliver carries out one replication event: copies the version, makes
// the delete marker, deletes the version or sets its tags at the
// destination the event's rule names, as the bucket's configuration says
// now (a rule gone or disabled since drops the event). An error the
// destination may get over (unreachable, 5xx, SlowDown, timeouts) is
// returned, and the queue retries; any other marks the version FAILED and
// is counted, not retried (a resync copies it again).
func (r *Remote) deliver(ctx context.Context, ev event) error {
	// Anything but a version's copy (bounded by its size) has a minute.
	short, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, err := r.src.Config(short, ev.bucket)
	if errors.Is(err, objlayer.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var rule *Rule
	if cfg != nil && cfg.Role == r.arn {
		rule = cfg.Rule(ev.rule)
	}
	if rule == nil || !rule.Enabled {
		r.stats.skipped(ev.bucket)
		return r.dropped(short, ev)
	}
	var n int64
	switch {
	case strings.HasPrefix(ev.name, "s3:ObjectCreated:"):
		n, err = r.copyVersion(ctx, ev, rule)
	case ev.name == "s3:ObjectRemoved:DeleteMarkerCreated":
		if !rule.DeleteMarkers {
			return nil
		}
		h := http.Header{HeaderVersionID: {ev.versionID}, HeaderReplica: {"true"}}
		// The marker keeps its time, so it sorts among the key's versions
		// at the destination as it does here, whatever order they arrive in.
		if v, err := r.src.Open(short, ev.bucket, ev.key, ev.versionID, false); err == nil && v.DeleteMarker {
			h.Set(HeaderModTime, v.ModTime.UTC().Format(time.RFC3339Nano))
		}
		err = r.send(short, http.MethodDelete, rule.Bucket, ev.key, nil, h, nil, 0, "")
	case ev.name == "s3:ObjectRemoved:Delete":
		if !rule.Deletes || ev.versionID == "" {
			return nil
		}
		err = r.send(short, http.MethodDelete, rule.Bucket, ev.key, url.Values{"versionId": {ev.versionID}}, http.Header{HeaderReplica: {"true"}}, nil, 0, "")
		if isNotFound(err) {
			err = nil
		}
	case strings.HasPrefix(ev.name, "s3:ObjectTagging:"):
		err = r.copyTags(short, ev, rule)
	default:
		return nil
	}
	if err == nil {
		r.stats.done(ev.bucket, n, time.Since(ev.at))
		return nil
	}
	if errors.Is(err, ErrGone) {
		return nil
	}
	if retryable(err) {
		r.stats.retried(ev.bucket)
		return err
	}
	r.log.Warn("replication: a version failed to replicate", "bucket", ev.bucket, "key", ev.key, "version", ev.versionID,
		"event", ev.name, "destination", rule.Bucket, "error", err)
	r.stats.failed(ev.bucket)
	if strings.HasPrefix(ev.name, "s3:ObjectCreated:") {
		if serr := r.src.SetStatus(ctx, ev.bucket, ev.key, ev.versionID, StatusFailed); serr != nil && !errors.Is(serr, ErrGone) {
			return serr
		}
	}
	return nil
}

// copyVersion PUTs the version to the destination and marks it
// COMPLETED. A version that is itself a replica is left alone. The
// version is its write's snapshot when the event carries one (a version
// deleted or changed since is copied as it was written: the events of
// those changes follow in order), else read back from the source.
func (r *Remote) copyVersion(ctx context.Context, ev event, rule *Rule) (int64, error) {
	var v *Version
	var err error
	if body, ok := ev.snap.bodyOf(ev.versionID); ok {
		if v, err = r.src.FromSnapshot(ev.bucket, ev.key, ev.snap); err == nil {
			v.Body = body
		} else {
			r.log.Warn("replication: a version's snapshot does not decode; reading it back", "bucket", ev.bucket, "key", ev.key, "error", err)
			v = nil
		}
	}
	if v == nil {
		// The slot first when the event says the version is large: an
		// open body starts reading at once.
		held := false
		if ev.size > largeCopyFloor {
			release, err := r.largeSlot(ctx)
			if err != nil {
				return 0, err
			}
			defer release()
			held = true
		}
		if v, err = r.src.Open(ctx, ev.bucket, ev.key, ev.versionID, true); err != nil {
			return 0, err
		}
		if !held && v.Size > largeCopyFloor { // an unversioned key written larger since its event
			release, err := r.largeSlot(ctx)
			if err != nil {
				v.Body.Close()
				return 0, err
			}
			defer release()
		}
	}
	defer v.Body.Close()
	if v.Status == StatusReplica {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, copyTimeout(v.Size))
	defer cancel()
	h := v.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(HeaderVersionID, v.VersionID)
	h.Set(HeaderModTime, v.ModTime.UTC().Format(time.RFC3339Nano))
	h.Set(HeaderETag, v.ETag)
	if rule.StorageClass != "" {
		h.Set("X-Amz-Storage-Class", rule.StorageClass)
	}
	if v.Size > r.src.MaxPut() {
		err = r.copyInParts(ctx, rule.Bucket, ev.key, v, h)
	} else {
		if sum := contentMD5(v.MD5); sum != "" {
			h.Set("Content-Md5", sum)
		}
		err = r.send(ctx, http.MethodPut, rule.Bucket, ev.key, nil, h, v.Body, v.Size, unsignedPayload)
	}
	if err != nil {
		return 0, err
	}
	if ev.snap != nil {
		ev.snap.done()
	}
	if v.Status == "" && v.StatusFollowsEvent {
		return v.Size, nil
	}
	if err := r.src.SetStatus(ctx, ev.bucket, ev.key, ev.versionID, StatusCompleted); err != nil && !errors.Is(err, ErrGone) {
		return v.Size, err
	}
	return v.Size, nil
}

// largeSlot waits for one of this remote's large-copy slots and one of
// the process's; release gives both back.
func (r *Remote) largeSlot(ctx context.Context) (release func(), err error) {
	if r.large == nil {
		return func() {}, nil
	}
	select {
	case r.mine <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r.large <- struct{}{}:
		return func() { <-r.large; <-r.mine }, nil
	case <-ctx.Done():
		<-r.mine
		return nil, ctx.Err()
	}
}

// contentMD5 is the Content-MD5 header of a hex MD5 ("" for none).
func contentMD5(md5hex string) string {
	sum, err := hex.DecodeString(md5hex)
	if md5hex == "" || err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(sum)
}

// copyInParts copies a version larger than a single PUT may be as a
// multipart upload, in the source's parts when it has them (partLayout).
// The upload is created with the version's headers; the replica headers
// go with the completion, which a Strata destination checks and keeps
// (the source's version ID, time and ETag, REPLICA), and which another
// S3 service ignores. A failure aborts the upload (the copy is retried
// whole).
func (r *Remote) copyInParts(ctx context.Context, bucket, key string, v *Version, h http.Header) (err error) {
	create, replica := http.Header{}, http.Header{}
	for k, vs := range h {
		switch {
		case strings.HasPrefix(k, "X-Strata-Replica"):
			replica[k] = vs
		case strings.HasPrefix(k, "X-Amz-Checksum-"):
			// A whole-object checksum: the parts are checked by their MD5s.
		default:
			create[k] = vs
		}
	}
	var started struct {
		UploadID string `xml:"UploadId"`
	}
	body, err := r.request(ctx, http.MethodPost, bucket, key, url.Values{"uploads": {""}}, create, nil, 0, "")
	if err == nil && (xml.Unmarshal(body, &started) != nil || started.UploadID == "") {
		err = &RemoteError{Status: http.StatusOK, Message: "CreateMultipartUpload answered no upload ID"}
	}
	if err != nil {
		return err
	}
	upload := url.Values{"uploadId": {started.UploadID}}
	// unsettled: the completion's outcome is not known (its answer was cut
	// off): the destination may still be completing the upload, which is
	// then not aborted; the copy is retried, and a Strata destination
	// holding the version by then answers it as written.
	unsettled := false
	defer func() {
		if err == nil || unsettled {
			return
		}
		// Its parts would stay on the destination until its lifecycle
		// aborts them: removed now, whatever the copy's context says.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if aerr := r.send(actx, http.MethodDelete, bucket, key, upload, nil, nil, 0, ""); aerr != nil && !isNotFound(aerr) {
			r.log.Warn("replication: aborting a failed copy's upload at the destination", "bucket", bucket, "key", key, "upload", started.UploadID, "error", aerr)
		}
	}()
	type part struct {
		Number int    `xml:"PartNumber"`
		ETag   string `xml:"ETag"`
	}
	doc := struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []part   `xml:"Part"`
	}{}
	sizes, md5s := partLayout(v)
	offset := int64(0)
	for i, size := range sizes {
		ph := http.Header{}
		if md5s != nil {
			if sum := contentMD5(md5s[i]); sum != "" {
				ph.Set("Content-Md5", sum)
			}
		}
		q := url.Values{"partNumber": {strconv.Itoa(i + 1)}, "uploadId": {started.UploadID}}
		var etag string
		if etag, err = r.sendPart(ctx, bucket, key, q, ph, v, offset, size); err != nil {
			return err
		}
		doc.Parts = append(doc.Parts, part{i + 1, etag})
		offset += size
	}
	raw, err := xml.Marshal(doc)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	answer, err := r.request(ctx, http.MethodPost, bucket, key, upload, replica, io.NopCloser(bytes.NewReader(raw)), int64(len(raw)), hex.EncodeToString(sum[:]))
	if re := (*RemoteError)(nil); errors.As(err, &re) && re.Err != nil {
		unsettled = true // sent, the answer lost
	}
	if err != nil {
		return err
	}
	// S3 answers a completion 200 at once and its outcome after: the
	// result, or an error (which S3 asks to retry: a 5xx to the caller).
	var result struct {
		XMLName xml.Name
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	// An answer that does not parse has no root: neither case below.
	_ = xml.Unmarshal(answer, &result)
	switch result.XMLName.Local {
	case "CompleteMultipartUploadResult":
		return nil
	case "Error":
		return &RemoteError{Status: http.StatusInternalServerError, Code: result.Code, Message: result.Message}
	}
	unsettled = true
	return &RemoteError{Err: fmt.Errorf("CompleteMultipartUpload answered 200 without its result (%d bytes)", len(answer))}
}

// copyPartSize is the size of the parts a version is copied in when its
// own are not usable.
const copyPartSize = 64 << 20

// partLayout is the parts a version is copied in: its own (sizes, and
// MD5s when known) when S3 would take them, else parts of copyPartSize,
// or larger when 10,000 of those would not hold it.
func partLayout(v *Version) ([]int64, []string) {
	if n := len(v.Parts); n > 0 && n <= objlayer.MaxParts {
		var total int64
		ok := true
		for i, s := range v.Parts {
			total += s
			if s > objlayer.MaxPartSize || i < n-1 && s < objlayer.MinPartSize {
				ok = false
			}
		}
		if ok && total == v.Size {
			if len(v.PartMD5s) == n {
				return v.Parts, v.PartMD5s
			}
			return v.Parts, nil
		}
	}
	size := max(int64(copyPartSize), (v.Size+objlayer.MaxParts-1)/objlayer.MaxParts)
	var sizes []int64
	for left := v.Size; left > 0; left -= size {
		sizes = append(sizes, min(size, left))
	}
	return sizes, nil
}

// partRetries is how many times a part whose upload failed with an error
// worth retrying is sent again, a second more apart each time, before the
// copy fails (and is retried whole).
const partRetries = 3

// sendPart uploads bytes [offset, offset+size) of v, read on from v.Body,
// and sends them again from v.Reopen when the upload fails with an error
// worth retrying.
func (r *Remote) sendPart(ctx context.Context, bucket, key string, q url.Values, h http.Header, v *Version, offset, size int64) (string, error) {
	// The body is the version's, read on: a part's reader must not close
	// it, and net/http may still be reading a request's body after Do
	// returned, so the part is detached before anyone reads on.
	first := &detachable{r: io.LimitReader(v.Body, size)}
	etag, err := r.uploadPart(ctx, bucket, key, q, h, first, size)
	first.detach()
	for attempt := 1; err != nil && worthSendingAgain(err) && v.Reopen != nil && attempt <= partRetries; attempt++ {
		if ctx.Err() != nil {
			return "", err // the copy's time is up: no part is read on
		}
		// v.Body on to this part's end, for the parts after it.
		if _, derr := io.Copy(io.Discard, first.r); derr != nil {
			return "", derr
		}
		r.log.Info("replication: sending a part again", "bucket", bucket, "key", key, "part", q.Get("partNumber"), "attempt", attempt+1, "error", err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Second):
		}
		again, oerr := v.Reopen(ctx, offset, size)
		if oerr != nil {
			return "", oerr
		}
		etag, err = r.uploadPart(ctx, bucket, key, q, h, again, size)
		_ = again.Close()
	}
	return etag, err
}

// worthSendingAgain: the destination's answer (or its absence) asks for
// a retry; a local failure (reading the source, signing) is not the part's.
func worthSendingAgain(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && retryable(err)
}

// detachable is a reader whose reads stop, with an error, once detached.
type detachable struct {
	mu       sync.Mutex
	r        io.Reader
	detached bool
}

var errDetached = errors.New("replication: the part's request was answered")

func (d *detachable) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detached {
		return 0, errDetached
	}
	return d.r.Read(p)
}

func (d *detachable) Close() error { return nil }

// detach waits for a read in progress and fails those after.
func (d *detachable) detach() {
	d.mu.Lock()
	d.detached = true
	d.mu.Unlock()
}

// uploadPart sends one part and returns the ETag the destination gave it.
func (r *Remote) uploadPart(ctx context.Context, bucket, key string, q url.Values, h http.Header, body io.ReadCloser, size int64) (string, error) {
	var etag string
	err := r.exchange(ctx, http.MethodPut, bucket, key, q, h, body, size, unsignedPayload, func(resp *http.Response, _ []byte) {
		etag = resp.Header.Get("ETag")
	})
	if err == nil && etag == "" {
		err = &RemoteError{Status: http.StatusOK, Message: "UploadPart answered no ETag"}
	}
	return etag, err
}

// dropped is what an event whose rule is gone or disabled leaves
// (markDropped).
func (r *Remote) dropped(ctx context.Context, ev event) error { return markDropped(ctx, r.src, ev) }

// markDropped stores PENDING for the version of a replication event that
// is dropped without its copy (its rule or its remote gone): a version
// whose status follows its event would read COMPLETED once the event is
// forgotten. A resync copies it once a rule covers it again. An error
// keeps the event, to be tried again.
func markDropped(ctx context.Context, src Source, ev event) error {
	if !strings.HasPrefix(ev.name, "s3:ObjectCreated:") {
		return nil
	}
	v, err := src.Open(ctx, ev.bucket, ev.key, ev.versionID, false)
	var nr *NotReplicable
	switch {
	case errors.Is(err, ErrGone), errors.As(err, &nr):
		return nil
	case err != nil:
		return err
	case v.DeleteMarker || v.Status != "" || !v.StatusFollowsEvent:
		return nil
	}
	if err := src.SetStatus(ctx, ev.bucket, ev.key, ev.versionID, StatusPending); err != nil && !errors.Is(err, ErrGone) {
		return err
	}
	return nil
}

// DroppedByQueue is the queue's OnDrop (set before it runs): an event
// for a remote the server no longer has is markDropped. Until Bind such
// events are kept.
func (rs *Remotes) DroppedByQueue(ctx context.Context, target string, e notify.Event) error {
	if !strings.HasPrefix(target, notifytargets.RemoteARNPrefix) {
		return nil
	}
	if rs == nil {
		return errNotBound
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return markDropped(ctx, boundSource{rs}, event{name: e.Name, bucket: e.Bucket, key: e.Key, versionID: e.VersionID})
}

// copyTags sets the destination version's tags to the source's.
func (r *Remote) copyTags(ctx context.Context, ev event, rule *Rule) error {
	v, err := r.src.Open(ctx, ev.bucket, ev.key, ev.versionID, false)
	if err != nil {
		return err
	}
	if v.Status == StatusReplica || v.DeleteMarker {
		return nil
	}
	q := url.Values{"tagging": {""}, "versionId": {ev.versionID}}
	h := http.Header{HeaderReplica: {"true"}}
	if len(v.Tags) == 0 {
		return r.send(ctx, http.MethodDelete, rule.Bucket, ev.key, q, h, nil, 0, "")
	}
	type tag struct{ Key, Value string }
	doc := struct {
		XMLName xml.Name `xml:"Tagging"`
		Tags    []tag    `xml:"TagSet>Tag"`
	}{}
	for k, val := range v.Tags {
		doc.Tags = append(doc.Tags, tag{k, val})
	}
	body, err := xml.Marshal(doc)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return r.send(ctx, http.MethodPut, rule.Bucket, ev.key, q, h, io.NopCloser(bytes.NewReader(body)), int64(len(body)), hex.EncodeToString(sum[:]))
}

const unsignedPayload = "UNSIGNED-PAYLOAD"

// emptyPayload is the SHA-256 of no body.
const emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// send makes one signed request to the destination (path-style) and
// returns nil for a 2xx answer, else a *RemoteError.
func (r *Remote) send(ctx context.Context, method, bucket, key string, q url.Values, h http.Header, body io.Reader, size int64, payload string) error {
	return r.exchange(ctx, method, bucket, key, q, h, body, size, payload, nil)
}

// request is send that returns a 2xx answer's body (at most 64 KiB).
func (r *Remote) request(ctx context.Context, method, bucket, key string, q url.Values, h http.Header, body io.Reader, size int64, payload string) ([]byte, error) {
	var out []byte
	err := r.exchange(ctx, method, bucket, key, q, h, body, size, payload, func(_ *http.Response, b []byte) { out = b })
	return out, err
}

// exchange is send, calling ok with a 2xx answer and its body.
func (r *Remote) exchange(ctx context.Context, method, bucket, key string, q url.Values, h http.Header, body io.Reader, size int64, payload string, ok func(*http.Response, []byte)) error {
	u := *r.endpoint
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + bucket + "/" + key
	// Sent, and signed, as S3 canonicalises it: every byte but the
	// unreserved ones and '/' escaped (Go's own path escaping leaves
	// '+', '=', '&' and others, which S3 would sign escaped).
	u.RawPath = escapePath(u.Path)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	if body != nil && size == 0 {
		// An empty body, sent with Content-Length: 0 (Go sends a reader of
		// unknown length chunked, which S3 answers 411).
		if c, ok := body.(io.Closer); ok {
			_ = c.Close()
		}
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if body != nil {
		req.ContentLength = size
	}
	if payload == "" {
		payload = emptyPayload
	}
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if err := r.signer.SignHTTP(ctx, r.creds, req, payload, "s3", r.region, time.Now()); err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return &RemoteError{Err: err}
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		if ok == nil {
			return nil
		}
		if rerr != nil {
			// The answer's body is wanted and was cut off.
			return &RemoteError{Err: rerr}
		}
		ok(resp, raw)
		return nil
	}
	e := &RemoteError{Status: resp.StatusCode}
	var doc struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(raw, &doc) == nil {
		e.Code, e.Message = doc.Code, doc.Message
	}
	return e
}

// escapePath escapes p as SigV4's canonical URI has it for S3.
func escapePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// RemoteError is a request the destination refused or never answered.
type RemoteError struct {
	Status        int
	Code, Message string
	Err           error
}

func (e *RemoteError) Error() string {
	if e.Err != nil {
		return "replication: destination unreachable: " + e.Err.Error()
	}
	return fmt.Sprintf("replication: destination answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *RemoteError) Unwrap() error { return e.Err }

func isNotFound(err error) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Status == http.StatusNotFound
}

// retryable reports whether the destination may take the request later:
// it was unreachable, busy, or failed on its side.
func retryable(err error) bool {
	var re *RemoteError
	if !errors.As(err, &re) {
		var nr *NotReplicable
		return !errors.As(err, &nr) // a local read that failed: try again
	}
	switch {
	case re.Err != nil, re.Status >= 500, re.Status == http.StatusTooManyRequests, re.Status == http.StatusRequestTimeout:
		return true
	case re.Code == "SlowDown", re.Code == "RequestTimeout", re.Code == "RequestTimeTooSkewed", re.Code == "ServiceUnavailable":
		return true
	}
	return false
}

// Stats count a server's replication, per source bucket.
type Stats struct {
	// ObserveLag, when set, is told each replicated change's lag: the
	// time from the write to its copy at the destination (the metrics'
	// histogram).
	ObserveLag func(time.Duration)

	mu      sync.Mutex
	buckets map[string]*BucketStats
}

// BucketStats are one source bucket's counters.
type BucketStats struct {
	Replicated, Failed, Retried, Skipped int64
	Bytes                                int64
	// LastLag is the lag of the last change replicated; LastAt when that
	// was.
	LastLag time.Duration
	LastAt  time.Time
}

// NewStats returns empty counters.
func NewStats() *Stats { return &Stats{buckets: map[string]*BucketStats{}} }

func (s *Stats) done(bucket string, n int64, lag time.Duration) {
	s.add(bucket, func(b *BucketStats) {
		b.Replicated++
		b.Bytes += n
		b.LastLag, b.LastAt = lag, time.Now()
	})
	if s.ObserveLag != nil {
		s.ObserveLag(lag)
	}
}

func (s *Stats) failed(bucket string)  { s.add(bucket, func(b *BucketStats) { b.Failed++ }) }
func (s *Stats) retried(bucket string) { s.add(bucket, func(b *BucketStats) { b.Retried++ }) }
func (s *Stats) skipped(bucket string) { s.add(bucket, func(b *BucketStats) { b.Skipped++ }) }

func (s *Stats) add(bucket string, fn func(*BucketStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[bucket]
	if b == nil {
		b = &BucketStats{}
		s.buckets[bucket] = b
	}
	fn(b)
}

// Snapshot returns a copy of the counters by bucket.
func (s *Stats) Snapshot() map[string]BucketStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]BucketStats, len(s.buckets))
	for k, b := range s.buckets {
		out[k] = *b
	}
	return out
}

// Remotes are the replication remotes of a server's targets file: opened
// with the notification targets (Open, for Targets) before the front end
// exists, and bound to it as their Source once it does (Bind). A remote
// asked to deliver before that answers an error, and its event waits in
// the queue. The file read again replaces them (set).
type Remotes struct {
	Stats  *Stats
	region string
	log    *slog.Logger
	src    atomic.Pointer[Source]
	list   atomic.Pointer[[]*Remote]
	large  chan struct{} // LargeCopies, shared by the remotes opened here
}

// All returns the remotes in force.
func (rs *Remotes) All() []*Remote {
	if l := rs.list.Load(); l != nil {
		return *l
	}
	return nil
}

func (rs *Remotes) set(list []*Remote) { rs.list.Store(&list) }

// NewRemotes returns an empty set of remotes for region.
func NewRemotes(region string, log *slog.Logger) *Remotes {
	return &Remotes{Stats: NewStats(), region: region, log: log, large: make(chan struct{}, LargeCopies)}
}

// Open opens the remote spec describes (in force once set lists it).
func (rs *Remotes) Open(spec notifytargets.Target) (*Remote, error) {
	r, err := Open(spec, rs.region, boundSource{rs}, rs.Stats, rs.log)
	if err == nil {
		r.large, r.mine = rs.large, make(chan struct{}, LargeCopies/2)
	}
	return r, err
}

// Bind makes src the remotes' source.
func (rs *Remotes) Bind(src Source) { rs.src.Store(&src) }

var errNotBound = errors.New("replication: the front end is not serving yet")

// boundSource is the source Bind gave.
type boundSource struct{ rs *Remotes }

func (b boundSource) get() (Source, error) {
	if p := b.rs.src.Load(); p != nil {
		return *p, nil
	}
	return nil, errNotBound
}

func (b boundSource) Config(ctx context.Context, bucket string) (*Config, error) {
	s, err := b.get()
	if err != nil {
		return nil, err
	}
	return s.Config(ctx, bucket)
}

func (b boundSource) Open(ctx context.Context, bucket, key, versionID string, withBody bool) (*Version, error) {
	s, err := b.get()
	if err != nil {
		return nil, err
	}
	return s.Open(ctx, bucket, key, versionID, withBody)
}

func (b boundSource) MaxPut() int64 {
	if s, err := b.get(); err == nil {
		return s.MaxPut()
	}
	return objlayer.MaxPutSize
}

func (b boundSource) FromSnapshot(bucket, key string, snap *Snapshot) (*Version, error) {
	s, err := b.get()
	if err != nil {
		return nil, err
	}
	return s.FromSnapshot(bucket, key, snap)
}

func (b boundSource) SetStatus(ctx context.Context, bucket, key, versionID, status string) error {
	s, err := b.get()
	if err != nil {
		return err
	}
	return s.SetStatus(ctx, bucket, key, versionID, status)
}
