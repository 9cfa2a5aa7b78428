package notify

import (
	"reflect"
	"testing"
	"time"
)

// TestStoredEventsRoundTrip: an event stored with a version decodes to
// what was stored, and makes the message the write would have sent; every
// truncation of it and a later encoding are refused, not misread.
func TestStoredEventsRoundTrip(t *testing.T) {
	e := Event{Name: ObjectCreatedPut, Bucket: "bk", Key: "a/b c.png", Size: 4096, ETag: "0123abcd", VersionID: "v1",
		Sequencer: "0000018F00000000", Time: time.Unix(1764460800, 123_000_000).UTC(), Principal: "AKIA", Owner: "owner",
		SourceIP: "10.0.0.1", RequestID: "req-1", Region: DefaultRegion}
	rules := []*Rule{{ID: "one", Target: "arn:strata:sqs:us-east-1:jobs:nats"}, {ID: "two", Target: "arn:strata:sqs:us-east-1:hook:webhook"}}
	w := withVersion{node: "10.0.0.9:9000", at: 42, event: e, rules: targetsOf(rules)}
	b := w.marshal()
	got, err := unmarshalWithVersion(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, w) {
		t.Fatalf("decoded %+v, stored %+v", *got, w)
	}
	its := got.items()
	if len(its) != 2 || its[1].Target != rules[1].Target || string(its[1].message()) != string(Message(e, "two")) {
		t.Fatalf("items %+v", its)
	}
	for n := range len(b) {
		if _, err := unmarshalWithVersion(b[:n]); err == nil {
			t.Fatalf("a stored event cut to %d of %d bytes decoded", n, len(b))
		}
	}
	later := append([]byte{storedMagic, storedVersion + 1}, b[2:]...)
	if _, err := unmarshalWithVersion(later); err == nil {
		t.Fatal("a later encoding decoded")
	}
	if msg := len(Message(e, "one")) + len(Message(e, "two")); len(b)*2 > msg {
		t.Fatalf("the stored form (%d bytes) is not under half its messages' (%d)", len(b), msg)
	}
}

func TestSequencerSortsByTime(t *testing.T) {
	for _, c := range []struct {
		at   int64
		want string
	}{{0, "0000000000000000"}, {0x18F2A3B4C5D6E7F, "018F2A3B4C5D6E7F"}, {1<<63 - 1, "7FFFFFFFFFFFFFFF"}} {
		if got := Sequencer(c.at); got != c.want {
			t.Fatalf("Sequencer(%d) = %s, want %s", c.at, got, c.want)
		}
	}
}
