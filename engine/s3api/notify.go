package s3api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/replicate"
	"github.com/strata-storage/strata/engine/s3err"
)

// Notifier is the bucket notifications' durable queue (engine/notify).
type Notifier interface {
	// Known reports whether arn names one of the server's targets.
	Known(arn string) bool
	// Add stores events durably, returning once they are.
	Add(ctx context.Context, items []notify.Item) error
	// Encode is a write's events as the object layer stores them with
	// its version (objlayer.PutOptions.Events); Committed hands over the
	// events the layer stored so, to deliver.
	Encode(e notify.Event, rules []*notify.Rule) []byte
	Committed(ref objlayer.EventRef, e notify.Event, rules []*notify.Rule)
}

// emptyNotification is what GetBucketNotificationConfiguration answers
// for a bucket with none, as S3 does.
const emptyNotification = `<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>`

func putBucketNotification(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	cfg, err := notify.Parse(body, func(arn string) bool {
		return r.s.cfg.Notifier != nil && r.s.cfg.Notifier.Known(arn) && !strings.HasPrefix(arn, notifytargets.RemoteARNPrefix)
	})
	if err != nil {
		return configRefused(err)
	}
	var doc []byte
	if len(cfg.Rules) > 0 {
		doc = cfg.Marshal()
	}
	return r.finishSet(r.setBucket(func(b *objlayer.BucketInfo) { b.Notification = doc }), http.StatusOK)
}

func getBucketNotification(r *request) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	doc := bk.Notification
	if len(doc) == 0 {
		doc = []byte(emptyNotification)
	}
	return r.writeDoc(http.StatusOK, "application/xml", append([]byte(xmlHeader), doc...))
}

// notify stores the events a write or delete of key made, for the rules
// of the bucket's configuration that want them, before the request is
// answered: an acknowledged write has its events queued. When they cannot
// be stored the request answers SlowDown: the change is made, the queue
// goes on storing its events until it can (a change made is delivered,
// though its request failed), and the client's retry makes it again with
// events of its own (a delete's retry makes a second delete marker).
func (r *request) notify(bk objlayer.BucketInfo, event, key string, info objlayer.ObjectInfo) error {
	rules := r.notifyRules(bk, event, key, info.Meta)
	if len(rules) == 0 {
		return nil
	}
	e := r.event(bk, event, key, info)
	items := make([]notify.Item, 0, len(rules))
	for _, rule := range rules {
		items = append(items, notify.Item{Target: rule.Target, Key: key, Msg: notify.Message(e, rule.ID)})
	}
	if err := r.s.cfg.Notifier.Add(r.ctx, items); err != nil {
		r.s.cfg.Log.Warn("notifications: events not stored; the request answers SlowDown", "bucket", bk.Name, "key", key, "event", event, "error", err)
		return s3err.SlowDown.With("The change was made but its event notification could not be stored; retry the request.")
	}
	return nil
}

// notifyRules are the rules of the bucket's notification configuration
// that want event for key, and its replication rules' (meta: the
// version's); none without a notifier.
func (r *request) notifyRules(bk objlayer.BucketInfo, event, key string, meta map[string]string) []*notify.Rule {
	var rules []*notify.Rule
	if cfg := notify.Cached(bk.Notification); cfg != nil && r.s.cfg.Notifier != nil {
		rules = cfg.Match(event, key)
	}
	if len(bk.Replication) > 0 {
		rules = append(rules, r.replicationRules(bk, event, key, meta)...)
	}
	return rules
}

// withEvents has the object layer store a write's events with its
// version (opts.Events), when the bucket's configuration wants any; the
// write's answer goes to notified.
func (r *request) withEvents(bk objlayer.BucketInfo, event, key string, opts *objlayer.PutOptions) *storedEvents {
	rules := r.notifyRules(bk, event, key, opts.Meta)
	if len(rules) == 0 {
		return nil
	}
	replicated, onlyReplicated := replicationAmong(rules)
	se := &storedEvents{name: event, rules: rules, replicated: replicated}
	if onlyReplicated {
		// The version's replication status can follow its event: no
		// second write once it is copied (replicate.MetaEvent).
		opts.EventMark = replicate.MetaEvent
	}
	opts.Events = func(info objlayer.ObjectInfo) []byte {
		se.event = r.event(bk, event, key, plainInfo(info))
		return r.s.cfg.Notifier.Encode(se.event, rules)
	}
	return se
}

// replicationAmong reports whether any of the rules is a replication
// rule's, and whether all are (an event that is also a notification's
// stays stored while that target is down, which says nothing about the
// copy).
func replicationAmong(rules []*notify.Rule) (some, all bool) {
	n := 0
	for _, r := range rules {
		if r.Kind == "Replication" {
			n++
		}
	}
	return n > 0, n == len(rules)
}

// storedEvents is the event a write had the layer store with it.
type storedEvents struct {
	name  string
	event notify.Event
	rules []*notify.Rule
	// replicated: a rule is a replication rule's. body is the write's
	// plaintext when it keeps it for the copy (keepBody).
	replicated bool
	body       *teeBody
}

// keepBody has a small write that is replicated keep its body as it
// reads it (src: the plaintext the layer stores, size its length), so
// its copy need not read the version back (replicate.Snapshot); within
// the snapshots' budget, else src is left as it is.
func (se *storedEvents) keepBody(src io.Reader, size int64) io.Reader {
	if se == nil || !se.replicated || !replicate.Reserve(size) {
		return src
	}
	se.body = &teeBody{r: src, buf: make([]byte, 0, size), want: size, reserved: size}
	return se.body
}

// snapshot hands the kept body to the event as a replicate.Snapshot of
// the version the write stored (info), or gives its reservation back.
func (se *storedEvents) snapshot(s *Server, bucket, key string, info *objlayer.ObjectInfo) {
	if se == nil || se.body == nil {
		return
	}
	t := se.body
	se.body = nil
	if info == nil || int64(len(t.buf)) != t.want || info.Size != t.want || encrypted(info.Meta) {
		replicate.Unreserve(t.reserved)
		return
	}
	se.event.Snapshot = replicate.NewSnapshot(se.event.VersionID, encodeSnapshot(info), t.buf)
}

// teeBody keeps what is read through it.
type teeBody struct {
	r    io.Reader
	buf  []byte
	want int64 // -1 once more came than announced
	// reserved is what replicate.Reserve counted for it.
	reserved int64
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if int64(len(t.buf)+n) <= t.want {
		t.buf = append(t.buf, p[:n]...)
	} else {
		t.want = -1 // longer than announced: nothing kept
	}
	return n, err
}

// notified finishes a write's events: delivered from the store when the
// layer kept them with the version, else stored now (notify).
func (r *request) notified(bk objlayer.BucketInfo, se *storedEvents, key string, info objlayer.ObjectInfo) error {
	if se == nil {
		return nil
	}
	if info.EventID != ([16]byte{}) {
		se.snapshot(r.s, bk.Name, key, &info)
		r.s.cfg.Notifier.Committed(objlayer.EventRef{Bucket: bk.Name, Object: key, ID: info.EventID}, se.event, se.rules)
		return nil
	}
	se.snapshot(r.s, bk.Name, key, nil)
	return r.notify(bk, se.name, key, info)
}

// event is what a write or delete of key did, as its notification tells
// it.
func (r *request) event(bk objlayer.BucketInfo, event, key string, info objlayer.ObjectInfo) notify.Event {
	at := info.ModTime
	if at.IsZero() {
		at = r.now
	}
	return notify.Event{Name: event, Bucket: bk.Name, Key: key, Size: info.Size, ETag: info.ETag,
		VersionID: versionIDOut(info.VersionID, bk.Versioning), Sequencer: notify.Sequencer(at.UnixNano()),
		// The request's ID shares the memory of its whole exchange with
		// the client, and the principal its Authorization header: an
		// event waiting for delivery keeps copies, not them.
		Time: r.now, Principal: strings.Clone(r.access), Owner: r.s.ownerOf(bk), SourceIP: r.hr.Client.String(), RequestID: strings.Clone(r.hr.ID), Region: r.s.cfg.Region}
}

// notifyVersion is notify for a change to the request's version's
// metadata (tags, ACL).
func (r *request) notifyVersion(event string, info objlayer.ObjectInfo) error {
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	changed := plainInfo(info)
	changed.ModTime = time.Time{} // the version keeps its time; the change is now
	return r.notify(bk, event, r.key, changed)
}

// LifecycleExpired stores the notification events of an expiration made
// by a lifecycle rule (engine/lifecycle's ExpiredFunc): the version it
// removed, or the delete marker it made. The principal is S3's own, as
// S3 names it in these events. Lifecycle expirations are not replicated
// (S3 does not replicate them either): the destination has rules of its
// own.
func (s *Server) LifecycleExpired(ctx context.Context, bk objlayer.BucketInfo, key string, res objlayer.DeleteResult, marker bool) error {
	cfg := notify.Cached(bk.Notification)
	if cfg == nil || s.cfg.Notifier == nil {
		return nil
	}
	event := notify.LifecycleExpirationDelete
	if marker {
		event = notify.LifecycleExpirationDeleteMarker
	}
	rules := cfg.Match(event, key)
	if len(rules) == 0 {
		return nil
	}
	now := s.cfg.Now()
	e := notify.Event{Name: event, Bucket: bk.Name, Key: key, VersionID: versionIDOut(res.VersionID, bk.Versioning),
		Sequencer: notify.Sequencer(now.UnixNano()), Time: now, Principal: "s3.amazonaws.com", Owner: s.ownerOf(bk), Region: s.cfg.Region}
	items := make([]notify.Item, 0, len(rules))
	for _, rule := range rules {
		items = append(items, notify.Item{Target: rule.Target, Key: key, Msg: notify.Message(e, rule.ID)})
	}
	// Events the store refused are kept by the queue and stored again:
	// the lifecycle worker need not tell them again (a duplicate).
	if err := s.cfg.Notifier.Add(ctx, items); err != nil && !errors.Is(err, notify.ErrKept) {
		return err
	}
	return nil
}

// configRefused answers a notification or replication configuration the
// parser refused: MalformedXML or InvalidArgument, with its message.
func configRefused(err error) error {
	if ne := (*notify.Error)(nil); errors.As(err, &ne) {
		if ne.Code == "MalformedXML" {
			return s3err.MalformedXML.With(ne.Message)
		}
		return s3err.InvalidArgument.With(ne.Message)
	}
	return s3err.MalformedXML.Because(err)
}
