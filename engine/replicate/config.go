// Package replicate is Strata's bucket replication: a bucket's
// replication configuration (S3's ReplicationConfiguration document,
// checked as S3 checks it), and the remote that copies a bucket's new
// versions, delete markers, version deletes and tag changes to a bucket of
// another S3 service (another Strata tenant, or any S3 endpoint).
//
// Replication rides on the bucket notifications' durable queue
// (engine/notify): a write that a rule covers stores a replication event
// with its version, before it is acknowledged, exactly as a notification
// is stored; the queue hands it to the remote named by the configuration's
// Role (a target of the server's targets file of type "s3") until the
// remote has taken it. So the backlog of a remote that is down is kept
// durably, in order per key, and drained when it is back.
package replicate

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/strata-storage/strata/engine/notify"
)

// Error is a configuration refused: Code is the S3 error code to answer
// (the notification configurations' type, which the front end maps).
type Error = notify.Error

func invalid(format string, a ...any) *Error {
	return &Error{Code: "InvalidArgument", Message: fmt.Sprintf(format, a...)}
}

func malformed(format string, a ...any) *Error {
	return &Error{Code: "MalformedXML", Message: fmt.Sprintf(format, a...)}
}

// BucketARNPrefix starts a destination bucket's ARN.
const BucketARNPrefix = "arn:aws:s3:::"

// MaxRules bounds a configuration's rules, as S3 does.
const MaxRules = 1000

// Tag is one tag of a rule's filter.
type Tag struct{ Key, Value string }

// Rule is one rule: versions of keys under Prefix carrying every tag of
// Tags go to Bucket at the configuration's remote.
type Rule struct {
	ID       string
	Priority int
	Enabled  bool
	Prefix   string
	Tags     []Tag
	// Bucket is the destination bucket's name (from its ARN).
	Bucket string
	// StorageClass, when set, is the replicas' storage class.
	StorageClass string
	// DeleteMarkers: delete markers are replicated; Deletes: deletes of a
	// version are (Strata's and MinIO's DeleteReplication; S3 never
	// replicates them); Existing: a resync copies versions written before
	// the rule.
	DeleteMarkers, Deletes, Existing bool
}

// Matches reports whether the rule covers key with tags (the version's).
func (r *Rule) Matches(key string, tags map[string]string) bool {
	if !r.Enabled || !strings.HasPrefix(key, r.Prefix) {
		return false
	}
	for _, t := range r.Tags {
		if v, ok := tags[t.Key]; !ok || v != t.Value {
			return false
		}
	}
	return true
}

// Config is a bucket's replication configuration.
type Config struct {
	// Role names the remote (the ARN of an "s3" target of the server's
	// targets file: arn:strata:replication:REGION:ID:s3).
	Role  string
	Rules []Rule
	// legacyForm: the rules are of the older form (a Prefix, no Filter
	// and no priorities), and are written back so.
	legacyForm bool
}

// Match returns, for each destination bucket, the rule of the highest
// priority that covers key with tags (S3: when rules overlap, the one of
// the highest priority wins).
func (c *Config) Match(key string, tags map[string]string) []*Rule {
	var out []*Rule
	for i := range c.Rules {
		r := &c.Rules[i]
		if !r.Matches(key, tags) {
			continue
		}
		j := slices.IndexFunc(out, func(o *Rule) bool { return o.Bucket == r.Bucket })
		switch {
		case j < 0:
			out = append(out, r)
		case r.Priority > out[j].Priority:
			out[j] = r
		}
	}
	return out
}

// Rule returns the rule called id (nil for none).
func (c *Config) Rule(id string) *Rule {
	for i := range c.Rules {
		if c.Rules[i].ID == id {
			return &c.Rules[i]
		}
	}
	return nil
}

type status struct {
	Status string `xml:"Status"`
}

func (s *status) enabled() (bool, error) {
	if s == nil {
		return false, nil
	}
	switch s.Status {
	case "Enabled":
		return true, nil
	case "Disabled", "":
		// An empty Status (minio-go sends them) is one not given.
		return false, nil
	}
	return false, malformed("A Status is Enabled or Disabled, not %q.", s.Status)
}

func statusOf(on bool) *status {
	if on {
		return &status{"Enabled"}
	}
	return &status{"Disabled"}
}

type tagDoc struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type andDoc struct {
	Prefix *string  `xml:"Prefix"`
	Tags   []tagDoc `xml:"Tag"`
}

type filterDoc struct {
	Prefix *string `xml:"Prefix"`
	Tag    *tagDoc `xml:"Tag"`
	And    *andDoc `xml:"And"`
}

type destinationDoc struct {
	Bucket       string `xml:"Bucket"`
	StorageClass string `xml:"StorageClass,omitempty"`
}

type ruleDoc struct {
	ID       string     `xml:"ID,omitempty"`
	Priority *int       `xml:"Priority"`
	Status   string     `xml:"Status"`
	Prefix   *string    `xml:"Prefix"`
	Filter   *filterDoc `xml:"Filter"`
	// DeleteMarkerReplication and DeleteReplication are written back with
	// the configuration; ExistingObjectReplication likewise.
	DeleteMarkerReplication   *status         `xml:"DeleteMarkerReplication"`
	DeleteReplication         *status         `xml:"DeleteReplication"`
	ExistingObjectReplication *status         `xml:"ExistingObjectReplication"`
	Destination               *destinationDoc `xml:"Destination"`
	// SourceSelectionCriteria (replicas of SSE-KMS objects, replica
	// modifications) is accepted: objects under SSE are always replicated,
	// re-encrypted by the destination.
	SourceSelectionCriteria *struct {
		Inner []byte `xml:",innerxml"`
	} `xml:"SourceSelectionCriteria"`
}

type configDoc struct {
	XMLName xml.Name  `xml:"ReplicationConfiguration"`
	XMLNS   string    `xml:"xmlns,attr,omitempty"`
	Role    string    `xml:"Role"`
	Rules   []ruleDoc `xml:"Rule"`
}

// Parse checks a ReplicationConfiguration document as S3 does: a Role
// naming a remote the server knows (known), one to MaxRules rules, each
// with a status, a destination bucket ARN and a filter of a prefix and
// tags, distinct IDs and priorities (rules given without a Filter use the
// older form with a Prefix, where priorities are not needed), and delete
// marker replication only without tag filters. IDs left out are given
// ones.
func Parse(doc []byte, known func(role string) bool) (*Config, error) {
	var d configDoc
	if err := xml.NewDecoder(bytes.NewReader(doc)).Decode(&d); err != nil {
		return nil, malformed("The XML you provided was not well-formed or did not validate against our published schema.")
	}
	if d.Role == "" {
		return nil, malformed("A replication configuration needs a Role: the ARN of a replication remote of this server (arn:strata:replication:REGION:ID:s3).")
	}
	if !known(d.Role) {
		return nil, invalid("The Role %q is not a replication remote of this server; remotes are the targets of type s3 in the tenant's notification targets.", d.Role)
	}
	if len(d.Rules) == 0 {
		return nil, malformed("A replication configuration needs at least one Rule.")
	}
	if len(d.Rules) > MaxRules {
		return nil, invalid("A replication configuration has at most %d rules.", MaxRules)
	}
	cfg := &Config{Role: d.Role}
	ids := map[string]bool{}
	priorities := map[int]bool{}
	legacy := 0
	for i, rd := range d.Rules {
		r, isLegacy, err := parseRule(rd)
		if err != nil {
			return nil, err
		}
		if isLegacy {
			legacy++
		}
		if r.ID == "" {
			r.ID = fmt.Sprintf("rule-%d", i+1)
		}
		if len(r.ID) > 255 {
			return nil, invalid("A rule ID is at most 255 characters.")
		}
		if ids[r.ID] {
			return nil, invalid("Two rules are called %q: rule IDs must be unique.", r.ID)
		}
		ids[r.ID] = true
		if !isLegacy {
			if priorities[r.Priority] {
				return nil, invalid("Two rules have priority %d: rules with a Filter need distinct priorities.", r.Priority)
			}
			priorities[r.Priority] = true
		}
		cfg.Rules = append(cfg.Rules, r)
	}
	if legacy > 0 && legacy < len(cfg.Rules) {
		return nil, invalid("Rules with a Filter and rules with a Prefix outside one cannot be mixed in a configuration.")
	}
	cfg.legacyForm = legacy > 0
	return cfg, nil
}

func parseRule(rd ruleDoc) (r Rule, legacy bool, err error) {
	r.ID = rd.ID
	switch rd.Status {
	case "Enabled":
		r.Enabled = true
	case "Disabled":
	default:
		return r, false, malformed("A rule's Status is Enabled or Disabled, not %q.", rd.Status)
	}
	if rd.Destination == nil || rd.Destination.Bucket == "" {
		return r, false, malformed("A rule needs a Destination with a Bucket (arn:aws:s3:::BUCKET).")
	}
	name, ok := strings.CutPrefix(rd.Destination.Bucket, BucketARNPrefix)
	if !ok || name == "" || strings.ContainsAny(name, "/:") {
		return r, false, invalid("The destination bucket %q is not a bucket ARN (arn:aws:s3:::BUCKET).", rd.Destination.Bucket)
	}
	r.Bucket, r.StorageClass = name, rd.Destination.StorageClass
	switch {
	case rd.Filter != nil && rd.Prefix != nil:
		return r, false, malformed("A rule has a Filter or a Prefix, not both.")
	case rd.Filter == nil:
		legacy = true
		if rd.Prefix != nil {
			r.Prefix = *rd.Prefix
		}
	default:
		f := rd.Filter
		// Empty elements (minio-go sends <And></And><Tag></Tag>) are ones
		// not given.
		if f.And != nil && f.And.Prefix == nil && len(f.And.Tags) == 0 {
			f.And = nil
		}
		if f.Tag != nil && f.Tag.Key == "" && f.Tag.Value == "" {
			f.Tag = nil
		}
		n := 0
		if f.Prefix != nil {
			n++
			r.Prefix = *f.Prefix
		}
		if f.Tag != nil {
			n++
			r.Tags = []Tag{{f.Tag.Key, f.Tag.Value}}
		}
		if f.And != nil {
			n++
			if f.And.Prefix != nil {
				r.Prefix = *f.And.Prefix
			}
			for _, t := range f.And.Tags {
				r.Tags = append(r.Tags, Tag(t))
			}
		}
		if n > 1 {
			return r, false, malformed("A Filter holds one of Prefix, Tag and And.")
		}
		for i, t := range r.Tags {
			if t.Key == "" {
				return r, false, invalid("A filter's tag needs a Key.")
			}
			if slices.ContainsFunc(r.Tags[:i], func(o Tag) bool { return o.Key == t.Key }) {
				return r, false, invalid("A filter names the tag %q twice.", t.Key)
			}
		}
		if rd.Priority == nil {
			return r, false, malformed("A rule with a Filter needs a Priority.")
		}
		if rd.DeleteMarkerReplication == nil {
			return r, false, malformed("A rule with a Filter needs DeleteMarkerReplication (Enabled or Disabled).")
		}
	}
	if rd.Priority != nil {
		if *rd.Priority < 0 {
			return r, false, invalid("A rule's Priority is 0 or more.")
		}
		r.Priority = *rd.Priority
	}
	if r.DeleteMarkers, err = rd.DeleteMarkerReplication.enabled(); err != nil {
		return r, false, err
	}
	if legacy && rd.DeleteMarkerReplication == nil {
		// The older form replicates delete markers.
		r.DeleteMarkers = true
	}
	if r.DeleteMarkers && len(r.Tags) > 0 {
		return r, false, invalid("Delete marker replication is not supported if any Tag filter is specified: a delete marker has no tags.")
	}
	if r.Deletes, err = rd.DeleteReplication.enabled(); err != nil {
		return r, false, err
	}
	if r.Existing, err = rd.ExistingObjectReplication.enabled(); err != nil {
		return r, false, err
	}
	return r, legacy, nil
}

// Marshal is the configuration as GetBucketReplication answers it (and as
// the bucket's record keeps it).
func (c *Config) Marshal() []byte {
	d := configDoc{XMLNS: "http://s3.amazonaws.com/doc/2006-03-01/", Role: c.Role}
	legacy := c.legacyForm
	for _, r := range c.Rules {
		rd := ruleDoc{ID: r.ID, Status: "Disabled", Destination: &destinationDoc{Bucket: BucketARNPrefix + r.Bucket, StorageClass: r.StorageClass},
			DeleteMarkerReplication: statusOf(r.DeleteMarkers)}
		if r.Enabled {
			rd.Status = "Enabled"
		}
		if r.Deletes {
			rd.DeleteReplication = statusOf(true)
		}
		if r.Existing {
			rd.ExistingObjectReplication = statusOf(true)
		}
		if legacy {
			p := r.Prefix
			rd.Prefix = &p
		} else {
			pr := r.Priority
			rd.Priority = &pr
			rd.Filter = filterOf(r)
		}
		d.Rules = append(d.Rules, rd)
	}
	out, err := xml.Marshal(d)
	if err != nil {
		panic(err) // strings and ints only
	}
	return out
}

func filterOf(r Rule) *filterDoc {
	f := &filterDoc{}
	switch {
	case len(r.Tags) == 0:
		p := r.Prefix
		f.Prefix = &p
	case len(r.Tags) == 1 && r.Prefix == "":
		f.Tag = &tagDoc{r.Tags[0].Key, r.Tags[0].Value}
	default:
		a := &andDoc{}
		if r.Prefix != "" {
			p := r.Prefix
			a.Prefix = &p
		}
		for _, t := range r.Tags {
			a.Tags = append(a.Tags, tagDoc(t))
		}
		f.And = a
	}
	return f
}

var parsed sync.Map // string(doc) -> *Config

// Cached parses a configuration stored by the front end (Marshal's
// document, already checked), once per distinct document; nil for none.
func Cached(doc []byte) *Config {
	if len(doc) == 0 {
		return nil
	}
	if c, ok := parsed.Load(string(doc)); ok {
		return c.(*Config)
	}
	c, err := Parse(doc, func(string) bool { return true })
	if err != nil {
		return nil
	}
	parsed.Store(string(doc), c)
	return c
}
