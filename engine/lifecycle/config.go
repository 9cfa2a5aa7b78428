// Package lifecycle is S3's bucket lifecycle configuration: the document
// (parsed and checked as S3 checks it, given back as it was written), which
// rule applies to an object, when an object expires (the x-amz-expiration
// header) and what the lifecycle pass does to the versions of one key at a
// given time. It does no I/O: the S3 layer stores the document and executes
// the actions it returns.
//
// Transitions to other storage classes are refused: Strata has one storage
// class, and accepting a rule it would never carry out would be a success
// that did not do what was asked.
package lifecycle

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"time"
)

// Configuration is a bucket's LifecycleConfiguration document.
type Configuration struct {
	XMLName xml.Name `xml:"LifecycleConfiguration"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	Rules   []Rule   `xml:"Rule"`
}

// Rule is one rule. Pointers keep absent elements absent when the
// document is given back.
type Rule struct {
	ID     string  `xml:"ID,omitempty"`
	Status string  `xml:"Status"`
	Filter *Filter `xml:"Filter"`
	// Prefix is the rule's filter in the document's first version.
	Prefix                         *string                         `xml:"Prefix"`
	Expiration                     *Expiration                     `xml:"Expiration"`
	NoncurrentVersionExpiration    *NoncurrentVersionExpiration    `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipartUpload *AbortIncompleteMultipartUpload `xml:"AbortIncompleteMultipartUpload"`
	Transitions                    []Transition                    `xml:"Transition"`
	NoncurrentVersionTransitions   []Transition                    `xml:"NoncurrentVersionTransition"`
}

// Filter selects the objects a rule applies to: at most one of its
// elements (And combines several).
type Filter struct {
	Prefix                *string `xml:"Prefix"`
	Tag                   *Tag    `xml:"Tag"`
	And                   *And    `xml:"And"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
}

// And is a conjunction of a prefix, tags and size bounds.
type And struct {
	Prefix                *string `xml:"Prefix"`
	Tags                  []Tag   `xml:"Tag"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
}

// Tag is an object tag a rule requires.
type Tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// Expiration expires current versions after Days, on Date, or removes
// delete markers left with no version behind them.
type Expiration struct {
	Days                      *int    `xml:"Days"`
	Date                      *string `xml:"Date"`
	ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker"`
}

// NoncurrentVersionExpiration removes versions NoncurrentDays after they
// stopped being current, keeping the NewerNoncurrentVersions newest.
type NoncurrentVersionExpiration struct {
	NoncurrentDays          *int `xml:"NoncurrentDays"`
	NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions"`
}

// AbortIncompleteMultipartUpload aborts uploads DaysAfterInitiation after
// they started.
type AbortIncompleteMultipartUpload struct {
	DaysAfterInitiation *int `xml:"DaysAfterInitiation"`
}

// Transition moves objects to another storage class (refused).
type Transition struct {
	Days           *int    `xml:"Days"`
	Date           *string `xml:"Date"`
	NoncurrentDays *int    `xml:"NoncurrentDays"`
	StorageClass   string  `xml:"StorageClass"`
}

// Error is a document S3 would refuse, with S3's code for it.
type Error struct {
	Code    string // MalformedXML, InvalidArgument, InvalidRequest, InvalidStorageClass
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func malformed(msg string) error { return &Error{"MalformedXML", msg} }
func invalidArg(msg string) error {
	return &Error{"InvalidArgument", msg}
}

// Limits of a document.
const (
	maxRules   = 1000
	maxIDLen   = 255
	maxNewerNC = 100
)

// Parse reads and checks a lifecycle document. Rules without an ID get a
// generated one, as S3 gives them.
func Parse(doc []byte) (*Configuration, error) {
	var c Configuration
	if err := xml.Unmarshal(doc, &c); err != nil {
		return nil, malformed("The XML you provided was not well-formed or did not validate against our published schema.")
	}
	if len(c.Rules) == 0 || len(c.Rules) > maxRules {
		return nil, malformed(fmt.Sprintf("A lifecycle configuration holds 1 to %d rules.", maxRules))
	}
	ids := map[string]bool{}
	for i := range c.Rules {
		r := &c.Rules[i]
		if r.ID == "" {
			r.ID = newID()
		}
		if len(r.ID) > maxIDLen {
			return nil, invalidArg(fmt.Sprintf("ID length should not exceed allowed limit of %d", maxIDLen))
		}
		if ids[r.ID] {
			return nil, invalidArg("Rule ID must be unique. Found same ID for more than one rule")
		}
		ids[r.ID] = true
		if err := r.check(); err != nil {
			return nil, err
		}
	}
	c.XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
	return &c, nil
}

// Marshal is the document as stored and served.
func (c *Configuration) Marshal() []byte {
	b, err := xml.Marshal(c)
	if err != nil {
		panic(err) // only strings, numbers and pointers to them
	}
	return append([]byte(xml.Header), b...)
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *Rule) check() error {
	if r.Status != "Enabled" && r.Status != "Disabled" {
		return malformed("Status must be Enabled or Disabled.")
	}
	if r.Filter != nil && r.Prefix != nil {
		return malformed("A rule has either a Filter or a Prefix, not both.")
	}
	if r.Filter == nil && r.Prefix == nil {
		return malformed("A rule needs a Filter (which may be empty) or a Prefix.")
	}
	if r.Filter != nil {
		if err := r.Filter.check(); err != nil {
			return err
		}
	}
	if r.Expiration == nil && r.NoncurrentVersionExpiration == nil && r.AbortIncompleteMultipartUpload == nil &&
		len(r.Transitions) == 0 && len(r.NoncurrentVersionTransitions) == 0 {
		return &Error{"InvalidRequest", "At least one action needs to be specified in a rule."}
	}
	tagged := r.Filter != nil && (r.Filter.Tag != nil || r.Filter.And != nil && len(r.Filter.And.Tags) > 0)
	if e := r.Expiration; e != nil {
		n := 0
		for _, set := range []bool{e.Days != nil, e.Date != nil, e.ExpiredObjectDeleteMarker != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return malformed("Expiration has exactly one of Days, Date and ExpiredObjectDeleteMarker.")
		}
		if e.Days != nil && *e.Days <= 0 {
			return invalidArg("'Days' for Expiration action must be a positive integer")
		}
		if e.Date != nil {
			if _, err := parseDate(*e.Date); err != nil {
				return err
			}
		}
		if e.ExpiredObjectDeleteMarker != nil && tagged {
			return invalidArg("ExpiredObjectDeleteMarker cannot be specified with tags.")
		}
	}
	if nc := r.NoncurrentVersionExpiration; nc != nil {
		if nc.NoncurrentDays == nil || *nc.NoncurrentDays <= 0 {
			return invalidArg("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
		}
		if v := nc.NewerNoncurrentVersions; v != nil && (*v <= 0 || *v > maxNewerNC) {
			return invalidArg(fmt.Sprintf("'NewerNoncurrentVersions' must be between 1 and %d", maxNewerNC))
		}
	}
	if a := r.AbortIncompleteMultipartUpload; a != nil {
		if a.DaysAfterInitiation == nil || *a.DaysAfterInitiation <= 0 {
			return invalidArg("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
		}
		if tagged {
			return invalidArg("AbortIncompleteMultipartUpload cannot be specified with Tags.")
		}
	}
	for _, t := range append(append([]Transition{}, r.Transitions...), r.NoncurrentVersionTransitions...) {
		if t.Date != nil {
			if _, err := parseDate(*t.Date); err != nil {
				return err
			}
		}
	}
	if len(r.Transitions) > 0 || len(r.NoncurrentVersionTransitions) > 0 {
		return &Error{"InvalidStorageClass", "Lifecycle transitions are not supported: Strata has one storage class, STANDARD."}
	}
	return nil
}

func (f *Filter) check() error {
	n := 0
	for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.And != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return malformed("A Filter has at most one of Prefix, Tag, ObjectSizeGreaterThan, ObjectSizeLessThan and And.")
	}
	if a := f.And; a != nil {
		keys := map[string]bool{}
		for _, t := range a.Tags {
			if keys[t.Key] {
				return invalidArg("Duplicate Tag Keys are not allowed.")
			}
			keys[t.Key] = true
		}
		if gt, lt := a.ObjectSizeGreaterThan, a.ObjectSizeLessThan; gt != nil && lt != nil && *gt >= *lt {
			return invalidArg("ObjectSizeGreaterThan must be less than ObjectSizeLessThan.")
		}
	}
	return nil
}

// parseDate reads an ISO 8601 date, which S3 requires at midnight UTC.
func parseDate(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
				return time.Time{}, invalidArg("'Date' must be at midnight GMT")
			}
			return t, nil
		}
	}
	return time.Time{}, invalidArg("'Date' must be an ISO 8601 date, at midnight GMT")
}
