package notify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The encoding of one write's events stored with its version
// (objlayer.PutOptions.Events): who stored them and when, what the write
// did (the Event) and which rules want it (target and configuration ID).
// The messages are made from these when delivered: the stored form is a
// third of theirs, and it is written to every drive's log with the
// version. A magic byte and a version byte come first, so a later build
// can change it and still read this one.
const (
	storedMagic   = 0xE7
	storedVersion = 1
)

// withVersion is one write's events as stored with its version.
type withVersion struct {
	node  string
	at    int64
	event Event
	rules []target
}

// target is a rule's part in a stored event: where it goes and under
// which configuration ID.
type target struct{ arn, config string }

func targetsOf(rules []*Rule) []target {
	ts := make([]target, len(rules))
	for i, r := range rules {
		ts[i] = target{r.Target, r.ID}
	}
	return ts
}

// items are the deliveries of w: one per rule, their messages made when
// delivered (Item.event).
func (w *withVersion) items() []Item {
	its := make([]Item, len(w.rules))
	for i, r := range w.rules {
		its[i] = Item{Target: r.arn, Key: w.event.Key, config: r.config, event: &w.event}
	}
	return its
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func (w *withVersion) marshal() []byte {
	e := &w.event
	n := 64 + len(w.node) + len(e.Name) + len(e.Bucket) + len(e.Key) + len(e.ETag) + len(e.VersionID) + len(e.Sequencer) +
		len(e.Principal) + len(e.Owner) + len(e.SourceIP) + len(e.RequestID) + len(e.Region)
	for _, r := range w.rules {
		n += 4 + len(r.arn) + len(r.config)
	}
	b := append(make([]byte, 0, n), storedMagic, storedVersion)
	b = appendStr(b, w.node)
	b = binary.AppendVarint(b, w.at)
	for _, s := range []string{e.Name, e.Bucket, e.Key} {
		b = appendStr(b, s)
	}
	b = binary.AppendVarint(b, e.Size)
	for _, s := range []string{e.ETag, e.VersionID, e.Sequencer} {
		b = appendStr(b, s)
	}
	b = binary.AppendVarint(b, e.Time.UnixNano())
	for _, s := range []string{e.Principal, e.Owner, e.SourceIP, e.RequestID, e.Region} {
		b = appendStr(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(w.rules)))
	for _, r := range w.rules {
		b = appendStr(b, r.arn)
		b = appendStr(b, r.config)
	}
	return b
}

var errStored = errors.New("notifications: stored events do not decode")

// decoder reads marshal's fields; a short or malformed input sets bad.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) str() string {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || uint64(len(d.b)-k) < n {
		d.bad, d.b = true, nil
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}

func (d *decoder) varint() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[k:]
	return v
}

func unmarshalWithVersion(b []byte) (*withVersion, error) {
	if len(b) < 2 || b[0] != storedMagic {
		return nil, errStored
	}
	if b[1] != storedVersion {
		return nil, fmt.Errorf("%w: encoding %d, this build reads %d", errStored, b[1], storedVersion)
	}
	d := decoder{b: b[2:]}
	w := &withVersion{node: d.str(), at: d.varint()}
	e := &w.event
	e.Name, e.Bucket, e.Key = d.str(), d.str(), d.str()
	e.Size = d.varint()
	e.ETag, e.VersionID, e.Sequencer = d.str(), d.str(), d.str()
	e.Time = time.Unix(0, d.varint()).UTC()
	e.Principal, e.Owner, e.SourceIP, e.RequestID, e.Region = d.str(), d.str(), d.str(), d.str(), d.str()
	count, k := binary.Uvarint(d.b)
	if d.bad || k <= 0 || count > uint64(len(d.b)) {
		return nil, errStored
	}
	d.b = d.b[k:]
	w.rules = make([]target, 0, count)
	for range count {
		w.rules = append(w.rules, target{d.str(), d.str()})
	}
	if d.bad || len(d.b) != 0 {
		return nil, errStored
	}
	return w, nil
}
