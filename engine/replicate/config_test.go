package replicate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/notify"
)

const role = "arn:strata:replication:us-east-1:dr:s3"

func known(r string) bool { return r == role }

func doc(rules string) []byte {
	return []byte(`<ReplicationConfiguration><Role>` + role + `</Role>` + rules + `</ReplicationConfiguration>`)
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, doc, code, says string
	}{
		{"not XML", `<Repl`, "MalformedXML", "well-formed"},
		{"no role", `<ReplicationConfiguration><Rule><Status>Enabled</Status><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule></ReplicationConfiguration>`,
			"MalformedXML", "needs a Role"},
		{"unknown role", `<ReplicationConfiguration><Role>arn:strata:replication:us-east-1:nope:s3</Role><Rule><Status>Enabled</Status><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule></ReplicationConfiguration>`,
			"InvalidArgument", "not a replication remote"},
		{"no rules", string(doc("")), "MalformedXML", "at least one Rule"},
		{"no destination", string(doc(`<Rule><Status>Enabled</Status></Rule>`)), "MalformedXML", "Destination"},
		{"destination not an ARN", string(doc(`<Rule><Status>Enabled</Status><Destination><Bucket>b</Bucket></Destination></Rule>`)),
			"InvalidArgument", "not a bucket ARN"},
		{"bad status", string(doc(`<Rule><Status>On</Status><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"MalformedXML", "Enabled or Disabled"},
		{"filter without priority", string(doc(`<Rule><Status>Enabled</Status><Filter><Prefix>a</Prefix></Filter><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"MalformedXML", "Priority"},
		{"filter without delete marker replication", string(doc(`<Rule><Status>Enabled</Status><Priority>1</Priority><Filter><Prefix>a</Prefix></Filter><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"MalformedXML", "DeleteMarkerReplication"},
		{"two priorities alike", string(doc(
			`<Rule><ID>a</ID><Status>Enabled</Status><Priority>1</Priority><Filter><Prefix>a</Prefix></Filter><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>` +
				`<Rule><ID>b</ID><Status>Enabled</Status><Priority>1</Priority><Filter><Prefix>b</Prefix></Filter><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"InvalidArgument", "priority 1"},
		{"two IDs alike", string(doc(
			`<Rule><ID>a</ID><Status>Enabled</Status><Prefix>a</Prefix><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>` +
				`<Rule><ID>a</ID><Status>Enabled</Status><Prefix>b</Prefix><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"InvalidArgument", "unique"},
		{"delete markers with a tag filter", string(doc(`<Rule><Status>Enabled</Status><Priority>1</Priority><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><DeleteMarkerReplication><Status>Enabled</Status></DeleteMarkerReplication><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"InvalidArgument", "Tag filter"},
		{"prefix and filter", string(doc(`<Rule><Status>Enabled</Status><Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`)),
			"MalformedXML", "not both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), known)
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || !strings.Contains(e.Message, c.says) {
				t.Fatalf("got %v, want %s saying %q", err, c.code, c.says)
			}
		})
	}
}

func TestParseMarshalMatch(t *testing.T) {
	// minio-go's form: empty And, Tag and Status elements.
	in := doc(`<Rule><ID>logs</ID><Status>Enabled</Status><Priority>2</Priority>` +
		`<DeleteMarkerReplication><Status>Enabled</Status></DeleteMarkerReplication><DeleteReplication><Status>Enabled</Status></DeleteReplication>` +
		`<Destination><Bucket>arn:aws:s3:::dst</Bucket></Destination><Filter><Prefix>logs/</Prefix><And></And><Tag></Tag></Filter>` +
		`<ExistingObjectReplication><Status></Status></ExistingObjectReplication></Rule>` +
		`<Rule><ID>all</ID><Status>Enabled</Status><Priority>1</Priority><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication>` +
		`<Destination><Bucket>arn:aws:s3:::dst</Bucket></Destination><Filter><And><Prefix></Prefix><Tag><Key>copy</Key><Value>yes</Value></Tag></And></Filter></Rule>` +
		`<Rule><ID>off</ID><Status>Disabled</Status><Priority>3</Priority><DeleteMarkerReplication><Status>Disabled</Status></DeleteMarkerReplication>` +
		`<Destination><Bucket>arn:aws:s3:::other</Bucket></Destination><Filter><Prefix></Prefix></Filter></Rule>`)
	cfg, err := Parse(in, known)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(cfg.Marshal(), known)
	if err != nil {
		t.Fatalf("the marshalled form does not parse: %v\n%s", err, cfg.Marshal())
	}
	if string(again.Marshal()) != string(cfg.Marshal()) {
		t.Fatalf("marshal is not stable:\n%s\n%s", cfg.Marshal(), again.Marshal())
	}
	logs := cfg.Rule("logs")
	if logs == nil || !logs.DeleteMarkers || !logs.Deletes || logs.Prefix != "logs/" || logs.Bucket != "dst" {
		t.Fatalf("rule logs: %+v", logs)
	}
	for _, c := range []struct {
		key  string
		tags map[string]string
		want string
	}{
		{"logs/a", nil, "logs"},
		{"logs/a", map[string]string{"copy": "yes"}, "logs"}, // priority 2 over 1, one destination
		{"data/a", map[string]string{"copy": "yes"}, "all"},
		{"data/a", map[string]string{"copy": "no"}, ""},
		{"data/a", nil, ""}, // "off" is disabled
	} {
		got := cfg.Match(c.key, c.tags)
		ids := ""
		for _, r := range got {
			ids += r.ID
		}
		if ids != c.want {
			t.Errorf("Match(%q, %v) = %q, want %q", c.key, c.tags, ids, c.want)
		}
	}
}

func TestLegacyFormReplicatesDeleteMarkers(t *testing.T) {
	cfg, err := Parse(doc(`<Rule><Status>Enabled</Status><Prefix>a/</Prefix><Destination><Bucket>arn:aws:s3:::b</Bucket></Destination></Rule>`), known)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rules[0]
	if !r.DeleteMarkers || r.ID == "" || r.Prefix != "a/" {
		t.Fatalf("legacy rule: %+v", r)
	}
	if !strings.Contains(string(cfg.Marshal()), "<Prefix>a/</Prefix>") || strings.Contains(string(cfg.Marshal()), "<Filter>") {
		t.Fatalf("legacy rules are written back in their form: %s", cfg.Marshal())
	}
}

func TestParseEvent(t *testing.T) {
	msg := []byte(`{"Records":[{"eventVersion":"2.1","eventTime":"2026-11-30T10:00:00.000Z","eventName":"ObjectRemoved:DeleteMarkerCreated",` +
		`"s3":{"configurationId":"r1","bucket":{"name":"src"},"object":{"key":"a+b%2Fc","versionId":"0192"}}}]}`)
	ev, err := parseEvent(msg)
	if err != nil {
		t.Fatal(err)
	}
	if ev.name != "s3:ObjectRemoved:DeleteMarkerCreated" || ev.key != "a b/c" || ev.rule != "r1" || ev.bucket != "src" || ev.versionID != "0192" {
		t.Fatalf("%+v", ev)
	}
}

func TestParseEventOfQueueMessage(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	msg := notify.Message(notify.Event{Name: notify.ObjectCreatedPut, Bucket: "src", Key: "dir/ä b+c?.txt", VersionID: "v1", Size: 5 << 20, Time: at}, "rule-1")
	ev, err := parseEvent(msg)
	if err != nil {
		t.Fatal(err)
	}
	if ev.name != notify.ObjectCreatedPut || ev.key != "dir/ä b+c?.txt" || ev.rule != "rule-1" || ev.versionID != "v1" || !ev.at.Equal(at) || ev.size != 5<<20 {
		t.Fatalf("%+v", ev)
	}
}

func TestEscapePath(t *testing.T) {
	for in, want := range map[string]string{
		"/b/plain/key.txt":          "/b/plain/key.txt",
		"/b/odd keys/ä b+c?d=%&e#f": "/b/odd%20keys/%C3%A4%20b%2Bc%3Fd%3D%25%26e%23f",
		"/b/~tilde_-.":              "/b/~tilde_-.",
	} {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPartLayout: a version is copied in its own parts when S3 would take
// them, else in parts of copyPartSize, larger when 10,000 would not hold
// it.
func TestPartLayout(t *testing.T) {
	const mib = 1 << 20
	sum := func(sizes []int64) (n int64) {
		for _, s := range sizes {
			n += s
		}
		return n
	}
	for _, c := range []struct {
		name      string
		v         Version
		wantParts int
		wantFirst int64
		wantMD5s  bool
	}{
		{"its own parts and MD5s", Version{Size: 6 * mib, Parts: []int64{5 * mib, mib}, PartMD5s: []string{"a", "b"}}, 2, 5 * mib, true},
		{"its own parts, MD5s not known", Version{Size: 6 * mib, Parts: []int64{5 * mib, mib}}, 2, 5 * mib, false},
		{"parts that do not add up", Version{Size: 7 * mib, Parts: []int64{5 * mib, mib}}, 1, 7 * mib, false},
		{"a part below S3's minimum before the last", Version{Size: 200 * mib, Parts: []int64{mib, 199 * mib}}, 4, 64 * mib, false},
		{"no parts", Version{Size: 130 * mib}, 3, 64 * mib, false},
		{"more than 10,000 parts of 64 MiB", Version{Size: 1 << 40}, 10000, (1<<40 + 9999) / 10000, false},
	} {
		sizes, md5s := partLayout(&c.v)
		if len(sizes) != c.wantParts || sizes[0] != c.wantFirst || sum(sizes) != c.v.Size || (md5s != nil) != c.wantMD5s {
			t.Errorf("%s: %d parts, first %d, sum %d, MD5s %v; want %d, %d, %d, %v", c.name, len(sizes), sizes[0], sum(sizes), md5s != nil,
				c.wantParts, c.wantFirst, c.v.Size, c.wantMD5s)
		}
	}
}
