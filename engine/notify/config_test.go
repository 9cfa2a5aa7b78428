package notify

import (
	"errors"
	"strings"
	"testing"
)

const arnA, arnB = "arn:strata:sqs:us-east-1:a:webhook", "arn:strata:sqs:us-east-1:b:nats"

func known(arn string) bool { return arn == arnA || arn == arnB }

func parse(t *testing.T, doc string) (*Config, error) {
	t.Helper()
	return Parse([]byte(`<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`+doc+`</NotificationConfiguration>`), known)
}

func TestParseAndMatch(t *testing.T) {
	cfg, err := parse(t, `<QueueConfiguration><Id>images</Id><Queue>`+arnA+`</Queue><Event>s3:ObjectCreated:*</Event>
		<Filter><S3Key><FilterRule><Name>prefix</Name><Value>img/</Value></FilterRule><FilterRule><Name>Suffix</Name><Value>.jpg</Value></FilterRule></S3Key></Filter></QueueConfiguration>
		<TopicConfiguration><Topic>`+arnB+`</Topic><Event>s3:ObjectRemoved:Delete</Event><Event>s3:ObjectCreated:Put</Event>
		<Filter><S3Key><FilterRule><Name>prefix</Name><Value>logs/</Value></FilterRule></S3Key></Filter></TopicConfiguration>`)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]Rule{}
	for _, r := range cfg.Rules {
		byKind[r.Kind] = r
	}
	topic, queue := byKind["Topic"], byKind["Queue"]
	if len(cfg.Rules) != 2 || topic.ID == "" || queue.ID != "images" {
		t.Fatalf("rules %+v: want two, the one without an ID given one", cfg.Rules)
	}
	for _, c := range []struct {
		event, key string
		want       []string
	}{
		{ObjectCreatedPut, "img/a.jpg", []string{"images"}},
		{ObjectCreatedMultipart, "img/b/c.jpg", []string{"images"}},
		{ObjectCreatedPut, "img/a.png", nil},
		{ObjectRemovedDelete, "img/a.jpg", nil},
		{ObjectRemovedDelete, "logs/x", []string{topic.ID}},
		{ObjectRemovedDeleteMarker, "logs/x", nil},
		{ObjectCreatedCopy, "logs/x", nil},
	} {
		var got []string
		for _, r := range cfg.Match(c.event, c.key) {
			got = append(got, r.ID)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s on %s matched %v, want %v", c.event, c.key, got, c.want)
		}
	}
	// What GET answers parses back to the same rules.
	again, err := Parse(cfg.Marshal(), known)
	if err != nil || len(again.Rules) != 2 {
		t.Fatalf("round trip: %+v %v", again, err)
	}
	for i, r := range again.Rules {
		if w := cfg.Rules[i]; r.ID != w.ID || r.Kind != w.Kind || r.Target != w.Target || r.Prefix != w.Prefix || r.Suffix != w.Suffix ||
			strings.Join(r.Events, ",") != strings.Join(w.Events, ",") {
			t.Fatalf("round trip: rule %d is %+v, was %+v", i, r, w)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, c := range map[string]struct{ doc, code, says string }{
		"unknown target": {`<QueueConfiguration><Queue>arn:strata:sqs:us-east-1:x:webhook</Queue><Event>s3:ObjectCreated:*</Event></QueueConfiguration>`,
			"InvalidArgument", "Unable to validate the following destination configurations"},
		"unknown event": {`<QueueConfiguration><Queue>` + arnA + `</Queue><Event>s3:ObjectRestore:Post</Event></QueueConfiguration>`,
			"InvalidArgument", "not supported"},
		"no event":         {`<QueueConfiguration><Queue>` + arnA + `</Queue></QueueConfiguration>`, "MalformedXML", "at least one Event"},
		"no target":        {`<QueueConfiguration><Event>s3:ObjectCreated:*</Event></QueueConfiguration>`, "MalformedXML", "needs its Queue"},
		"bad filter":       {`<QueueConfiguration><Queue>` + arnA + `</Queue><Event>s3:ObjectCreated:*</Event><Filter><S3Key><FilterRule><Name>infix</Name><Value>a</Value></FilterRule></S3Key></Filter></QueueConfiguration>`, "InvalidArgument", "prefix or suffix"},
		"two prefixes":     {`<QueueConfiguration><Queue>` + arnA + `</Queue><Event>s3:ObjectCreated:*</Event><Filter><S3Key><FilterRule><Name>prefix</Name><Value>a</Value></FilterRule><FilterRule><Name>prefix</Name><Value>b</Value></FilterRule></S3Key></Filter></QueueConfiguration>`, "InvalidArgument", "more than one"},
		"overlap":          {`<QueueConfiguration><Queue>` + arnA + `</Queue><Event>s3:ObjectCreated:*</Event></QueueConfiguration><TopicConfiguration><Topic>` + arnB + `</Topic><Event>s3:ObjectCreated:Put</Event><Filter><S3Key><FilterRule><Name>prefix</Name><Value>a/</Value></FilterRule></S3Key></Filter></TopicConfiguration>`, "InvalidArgument", "overlap"},
		"same ID":          {`<QueueConfiguration><Id>x</Id><Queue>` + arnA + `</Queue><Event>s3:ObjectCreated:*</Event></QueueConfiguration><QueueConfiguration><Id>x</Id><Queue>` + arnA + `</Queue><Event>s3:ObjectRemoved:*</Event></QueueConfiguration>`, "InvalidArgument", "ID"},
		"event bridge":     {`<EventBridgeConfiguration></EventBridgeConfiguration>`, "InvalidArgument", "EventBridge"},
		"not the document": {`<QueueConfiguration><Queue>`, "MalformedXML", "well-formed"},
	} {
		_, err := parse(t, c.doc)
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code || !strings.Contains(e.Message, c.says) {
			t.Errorf("%s: %v, want %s saying %q", name, err, c.code, c.says)
		}
	}
	// Disjoint prefixes share event types without overlapping; no rules at
	// all turns notifications off.
	if _, err := parse(t, `<QueueConfiguration><Queue>`+arnA+`</Queue><Event>s3:ObjectCreated:*</Event><Filter><S3Key><FilterRule><Name>prefix</Name><Value>a/</Value></FilterRule></S3Key></Filter></QueueConfiguration>
		<QueueConfiguration><Queue>`+arnB+`</Queue><Event>s3:ObjectCreated:*</Event><Filter><S3Key><FilterRule><Name>prefix</Name><Value>b/</Value></FilterRule></S3Key></Filter></QueueConfiguration>`); err != nil {
		t.Errorf("disjoint prefixes: %v", err)
	}
	if cfg, err := parse(t, ""); err != nil || len(cfg.Rules) != 0 {
		t.Errorf("an empty configuration: %+v %v", cfg, err)
	}
}
