// Package notify is Strata's bucket notifications: a bucket's
// notification configuration (S3's NotificationConfiguration document,
// checked as S3 checks it), the S3 event records its writes and deletes
// make, the targets that receive them (a webhook, NATS JetStream), and the
// durable queue that holds each event from before its write is
// acknowledged until a target has taken it (queue.go): delivery is at
// least once.
package notify

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Error is a configuration refused: Code is the S3 error code to answer.
type Error struct{ Code, Message string }

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func invalid(format string, a ...any) *Error {
	return &Error{Code: "InvalidArgument", Message: fmt.Sprintf(format, a...)}
}

// Event names a configuration may ask for: the ones Strata's writes and
// deletes make, and their wildcards.
var eventNames = []string{
	"s3:ObjectCreated:*", "s3:ObjectCreated:Put", "s3:ObjectCreated:Post", "s3:ObjectCreated:Copy",
	"s3:ObjectCreated:CompleteMultipartUpload",
	"s3:ObjectRemoved:*", "s3:ObjectRemoved:Delete", "s3:ObjectRemoved:DeleteMarkerCreated",
	"s3:ObjectTagging:*", "s3:ObjectTagging:Put", "s3:ObjectTagging:Delete",
	"s3:ObjectAcl:Put",
	"s3:LifecycleExpiration:*", "s3:LifecycleExpiration:Delete", "s3:LifecycleExpiration:DeleteMarkerCreated",
}

// EventNames are the event names a configuration may ask for (the
// operator's CRDs list the same).
func EventNames() []string { return slices.Clone(eventNames) }

// Event names as a write makes them.
const (
	ObjectCreatedPut          = "s3:ObjectCreated:Put"
	ObjectCreatedPost         = "s3:ObjectCreated:Post"
	ObjectCreatedCopy         = "s3:ObjectCreated:Copy"
	ObjectCreatedMultipart    = "s3:ObjectCreated:CompleteMultipartUpload"
	ObjectRemovedDelete       = "s3:ObjectRemoved:Delete"
	ObjectRemovedDeleteMarker = "s3:ObjectRemoved:DeleteMarkerCreated"
	ObjectTaggingPut          = "s3:ObjectTagging:Put"
	ObjectTaggingDelete       = "s3:ObjectTagging:Delete"
	ObjectACLPut              = "s3:ObjectAcl:Put"
	// A lifecycle rule expired a version (removed it) or a current
	// version (made a delete marker over it).
	LifecycleExpirationDelete       = "s3:LifecycleExpiration:Delete"
	LifecycleExpirationDeleteMarker = "s3:LifecycleExpiration:DeleteMarkerCreated"
)

// Rule is one configuration element: events of keys matching Prefix and
// Suffix go to Target.
type Rule struct {
	ID string
	// Kind is the element it came in: Queue, Topic or CloudFunction.
	Kind   string
	Target string
	Events []string
	Prefix string
	Suffix string
}

// matches reports whether the rule wants event (a name without
// wildcard) on key.
func (r *Rule) matches(event, key string) bool {
	if !strings.HasPrefix(key, r.Prefix) || !strings.HasSuffix(key, r.Suffix) {
		return false
	}
	for _, e := range r.Events {
		if e == event || strings.HasSuffix(e, ":*") && strings.HasPrefix(event, strings.TrimSuffix(e, "*")) {
			return true
		}
	}
	return false
}

// Config is a bucket's notification configuration.
type Config struct{ Rules []Rule }

// Match returns the rules that want event on key.
func (c *Config) Match(event, key string) []*Rule {
	var out []*Rule
	for i := range c.Rules {
		if c.Rules[i].matches(event, key) {
			out = append(out, &c.Rules[i])
		}
	}
	return out
}

type filterRule struct {
	Name  string `xml:"Name"`
	Value string `xml:"Value"`
}

type ruleDoc struct {
	ID            string       `xml:"Id,omitempty"`
	Topic         string       `xml:"Topic,omitempty"`
	Queue         string       `xml:"Queue,omitempty"`
	CloudFunction string       `xml:"CloudFunction,omitempty"`
	Events        []string     `xml:"Event"`
	FilterRules   []filterRule `xml:"Filter>S3Key>FilterRule,omitempty"`
}

type configDoc struct {
	XMLName   xml.Name  `xml:"NotificationConfiguration"`
	XMLNS     string    `xml:"xmlns,attr,omitempty"`
	Topics    []ruleDoc `xml:"TopicConfiguration"`
	Queues    []ruleDoc `xml:"QueueConfiguration"`
	Functions []ruleDoc `xml:"CloudFunctionConfiguration"`
	// EventBridge is accepted and kept empty: Strata has no EventBridge.
	EventBridge *struct{} `xml:"EventBridgeConfiguration"`
}

// Parse checks a NotificationConfiguration document as S3 does: every
// destination must be a target the server knows (known), every event one
// it makes, filter rules a prefix and a suffix at most once each, and no
// two rules may share an event type over keys both would match. IDs left
// out are given ones. An empty document (no rules) turns notifications off.
func Parse(doc []byte, known func(arn string) bool) (*Config, error) {
	var d configDoc
	if err := xml.NewDecoder(bytes.NewReader(doc)).Decode(&d); err != nil {
		return nil, &Error{Code: "MalformedXML", Message: "The XML you provided was not well-formed or did not validate against our published schema."}
	}
	if d.EventBridge != nil {
		return nil, invalid("EventBridge is not supported; use a Queue, Topic or CloudFunction configuration naming a target of this server.")
	}
	cfg := &Config{}
	var unknown []string
	for _, group := range []struct {
		kind string
		docs []ruleDoc
	}{{"Topic", d.Topics}, {"Queue", d.Queues}, {"CloudFunction", d.Functions}} {
		for _, rd := range group.docs {
			r := Rule{ID: rd.ID, Kind: group.kind, Target: map[string]string{"Topic": rd.Topic, "Queue": rd.Queue, "CloudFunction": rd.CloudFunction}[group.kind]}
			if r.Target == "" {
				return nil, &Error{Code: "MalformedXML", Message: fmt.Sprintf("A %sConfiguration needs its %s (the target's ARN).", group.kind, group.kind)}
			}
			if !known(r.Target) {
				unknown = append(unknown, r.Target)
			}
			if len(rd.Events) == 0 {
				return nil, &Error{Code: "MalformedXML", Message: "A notification configuration needs at least one Event."}
			}
			for _, e := range rd.Events {
				if !slices.Contains(eventNames, e) {
					return nil, invalid("The event %q is not supported for notifications (supported: %s).", e, strings.Join(eventNames, ", "))
				}
			}
			r.Events = rd.Events
			var prefixes, suffixes int
			for _, f := range rd.FilterRules {
				switch strings.ToLower(f.Name) {
				case "prefix":
					prefixes++
					r.Prefix = f.Value
				case "suffix":
					suffixes++
					r.Suffix = f.Value
				default:
					return nil, invalid("The filter rule name must be either prefix or suffix, not %q.", f.Name)
				}
				if !utf8.ValidString(f.Value) || len(f.Value) > 1024 {
					return nil, invalid("A filter rule's value must be UTF-8 of at most 1024 bytes.")
				}
			}
			if prefixes > 1 || suffixes > 1 {
				return nil, invalid("Cannot specify more than one prefix or suffix rule in a filter.")
			}
			if len(r.ID) > 255 {
				return nil, invalid("A configuration ID is at most 255 characters.")
			}
			cfg.Rules = append(cfg.Rules, r)
		}
	}
	if len(unknown) > 0 {
		return nil, invalid("Unable to validate the following destination configurations: %s is not a target of this server (its targets are listed by `strata admin info` and in the server's start-up log).", strings.Join(unknown, ", "))
	}
	ids := map[string]bool{}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		if r.ID == "" {
			r.ID = fmt.Sprintf("notification-%d", i+1)
		}
		if ids[r.ID] {
			return nil, invalid("Two configurations have the ID %q.", r.ID)
		}
		ids[r.ID] = true
		for _, o := range cfg.Rules[:i] {
			if overlap(r, &o) {
				return nil, invalid("Configurations overlap. Configurations on the same bucket cannot share a common event type (%q and %q).", o.ID, r.ID)
			}
		}
	}
	return cfg, nil
}

// overlap reports two rules sharing an event type over keys both match.
func overlap(a, b *Rule) bool {
	shared := false
	for _, x := range a.Events {
		for _, y := range b.Events {
			if x == y || strings.HasSuffix(x, ":*") && strings.HasPrefix(y, strings.TrimSuffix(x, "*")) ||
				strings.HasSuffix(y, ":*") && strings.HasPrefix(x, strings.TrimSuffix(y, "*")) {
				shared = true
			}
		}
	}
	prefixes := strings.HasPrefix(a.Prefix, b.Prefix) || strings.HasPrefix(b.Prefix, a.Prefix)
	suffixes := strings.HasSuffix(a.Suffix, b.Suffix) || strings.HasSuffix(b.Suffix, a.Suffix)
	return shared && prefixes && suffixes
}

// Marshal is the configuration as S3's document (what GET answers).
func (c *Config) Marshal() []byte {
	d := configDoc{XMLNS: "http://s3.amazonaws.com/doc/2006-03-01/"}
	for _, r := range c.Rules {
		rd := ruleDoc{ID: r.ID, Events: r.Events}
		if r.Prefix != "" {
			rd.FilterRules = append(rd.FilterRules, filterRule{Name: "prefix", Value: r.Prefix})
		}
		if r.Suffix != "" {
			rd.FilterRules = append(rd.FilterRules, filterRule{Name: "suffix", Value: r.Suffix})
		}
		switch r.Kind {
		case "Topic":
			rd.Topic = r.Target
			d.Topics = append(d.Topics, rd)
		case "CloudFunction":
			rd.CloudFunction = r.Target
			d.Functions = append(d.Functions, rd)
		default:
			rd.Queue = r.Target
			d.Queues = append(d.Queues, rd)
		}
	}
	b, err := xml.Marshal(d)
	if err != nil {
		panic(err) // plain strings only
	}
	return b
}
