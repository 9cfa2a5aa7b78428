package s3rules

import (
	"encoding/json"
	"encoding/xml"
	"strconv"
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// Object lock: a bucket's configuration (stored as JSON in its record, the
// shape existing drives and gateway volumes hold), a version's retention
// (JSON in its metadata) and legal hold ("ON"/"OFF"), and the rules that
// decide whether a version may be deleted or its retention changed. The
// retention clock is the server's, never the client's.

// Lock modes.
const (
	ModeGovernance = "GOVERNANCE"
	ModeCompliance = "COMPLIANCE"
)

// Bounds of a default retention, S3's.
const (
	maxRetentionDays  = 36500
	maxRetentionYears = 100
)

// DefaultRetention is a bucket's default retention rule.
type DefaultRetention struct {
	Days  *int32 `json:"Days" xml:"Days,omitempty"`
	Mode  string `json:"Mode" xml:"Mode,omitempty"`
	Years *int32 `json:"Years" xml:"Years,omitempty"`
}

// BucketLock is a bucket's object lock configuration as stored.
type BucketLock struct {
	Enabled          bool
	DefaultRetention *DefaultRetention
	CreatedAt        *time.Time
}

// ObjectLockConfiguration is S3's document.
type ObjectLockConfiguration struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	XMLNS             string   `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled,omitempty"`
	Rule              *struct {
		DefaultRetention *DefaultRetention `xml:"DefaultRetention"`
	} `xml:"Rule,omitempty"`
}

// ParseLockConfiguration reads a PutObjectLockConfiguration document and
// returns the record to store.
func ParseLockConfiguration(body []byte, now time.Time) ([]byte, error) {
	var c ObjectLockConfiguration
	if err := xml.Unmarshal(body, &c); err != nil || c.ObjectLockEnabled != "Enabled" {
		return nil, s3err.MalformedXML
	}
	lock := BucketLock{Enabled: true}
	if c.Rule != nil && c.Rule.DefaultRetention != nil {
		d := c.Rule.DefaultRetention
		switch {
		case d.Mode != ModeGovernance && d.Mode != ModeCompliance:
			return nil, s3err.MalformedXML
		case d.Days != nil && d.Years != nil, d.Days == nil && d.Years == nil:
			return nil, s3err.MalformedXML
		case d.Days != nil && *d.Days <= 0:
			return nil, s3err.InvalidArgumentNamed("Default retention period must be a positive integer value.", "Days", strconv.Itoa(int(*d.Days)))
		case d.Days != nil && *d.Days > maxRetentionDays:
			return nil, s3err.InvalidArgumentNamed("Default retention period is too large.", "Days", strconv.Itoa(int(*d.Days)))
		case d.Years != nil && *d.Years <= 0:
			return nil, s3err.InvalidArgumentNamed("Default retention period must be a positive integer value.", "Years", strconv.Itoa(int(*d.Years)))
		case d.Years != nil && *d.Years > maxRetentionYears:
			return nil, s3err.InvalidArgumentNamed("Default retention period is too large.", "Years", strconv.Itoa(int(*d.Years)))
		}
		lock.DefaultRetention = d
		lock.CreatedAt = &now
	}
	return json.Marshal(lock)
}

// StoredLock reads a bucket's stored configuration; nil when object lock
// is off.
func StoredLock(doc []byte) (*BucketLock, error) {
	if len(doc) == 0 {
		return nil, nil
	}
	var l BucketLock
	if err := json.Unmarshal(doc, &l); err != nil {
		return nil, err
	}
	if !l.Enabled {
		return nil, nil
	}
	return &l, nil
}

// Document renders the configuration as GetObjectLockConfiguration answers
// it.
func (l BucketLock) Document() ObjectLockConfiguration {
	c := ObjectLockConfiguration{XMLNS: xmlnsS3, ObjectLockEnabled: "Enabled"}
	if l.DefaultRetention != nil {
		c.Rule = &struct {
			DefaultRetention *DefaultRetention `xml:"DefaultRetention"`
		}{l.DefaultRetention}
	}
	return c
}

// Retention is a version's retention.
type Retention struct {
	Mode            string
	RetainUntilDate *time.Time
}

// NewVersionRetention is the retention the bucket's default rule gives a
// version written at now (nil: none).
func (l BucketLock) NewVersionRetention(now time.Time) *Retention {
	d := l.DefaultRetention
	if d == nil {
		return nil
	}
	t := now.UTC()
	if d.Days != nil {
		t = t.AddDate(0, 0, int(*d.Days))
	}
	if d.Years != nil {
		t = t.AddDate(int(*d.Years), 0, 0)
	}
	return &Retention{Mode: d.Mode, RetainUntilDate: &t}
}

// Encode renders a retention as a version keeps it.
func (r Retention) Encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// StoredRetention reads a version's retention (nil when it has none or it
// does not parse).
func StoredRetention(doc string) *Retention {
	if doc == "" {
		return nil
	}
	var r Retention
	if json.Unmarshal([]byte(doc), &r) != nil || r.Mode == "" {
		return nil
	}
	return &r
}

// RetentionDocument is S3's Retention document.
type RetentionDocument struct {
	XMLName         xml.Name `xml:"Retention"`
	XMLNS           string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

// ParseRetention reads a PutObjectRetention document: a valid mode and a
// date in the future.
func ParseRetention(body []byte, now time.Time) (Retention, error) {
	var d RetentionDocument
	if err := xml.Unmarshal(body, &d); err != nil {
		return Retention{}, s3err.MalformedXML
	}
	if d.Mode != ModeGovernance && d.Mode != ModeCompliance {
		return Retention{}, s3err.MalformedXML
	}
	t, err := time.Parse(time.RFC3339, d.RetainUntilDate)
	if err != nil {
		return Retention{}, s3err.InvalidRequest.With("The retain until date must be provided in ISO 8601 format.")
	}
	if t.Before(now) {
		return Retention{}, s3err.InvalidArgumentNamed("The retain until date must be in the future!", "RetainUntilDate", d.RetainUntilDate)
	}
	t = t.UTC()
	return Retention{Mode: d.Mode, RetainUntilDate: &t}, nil
}

// Document renders a retention as GetObjectRetention answers it.
func (r Retention) Document() RetentionDocument {
	d := RetentionDocument{XMLNS: xmlnsS3, Mode: r.Mode}
	if r.RetainUntilDate != nil {
		d.RetainUntilDate = r.RetainUntilDate.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return d
}

// Protects reports whether a retention still protects its version at now.
func (r *Retention) Protects(now time.Time) bool {
	return r != nil && r.RetainUntilDate != nil && r.RetainUntilDate.After(now)
}

// ErrObjectLocked refuses what a lock forbids.
var ErrObjectLocked = s3err.ObjectLocked

// Bypass says how a request may override a GOVERNANCE retention.
type Bypass int

const (
	// NoBypass: the request did not ask (no bypass header).
	NoBypass Bypass = iota
	// BypassAsked: the header is present but the requester may not use it.
	BypassAsked
	// BypassGranted: the header is present and the requester may.
	BypassGranted
)

// CheckRemoval decides whether a version with retention r and legal hold
// may be removed (deleted, or replaced in place) at now.
func CheckRemoval(r *Retention, legalHold bool, bypass Bypass, now time.Time) error {
	if legalHold {
		return ErrObjectLocked
	}
	if !r.Protects(now) {
		return nil
	}
	if r.Mode == ModeGovernance && bypass == BypassGranted {
		return nil
	}
	return ErrObjectLocked
}

// CheckRetentionChange decides whether a version's retention may go from
// old to next: lengthening it in the same mode always may; COMPLIANCE may
// never be shortened or changed; GOVERNANCE may with the bypass.
func CheckRetentionChange(old *Retention, next Retention, bypass Bypass, now time.Time) error {
	if !old.Protects(now) {
		return nil
	}
	if old.Mode == next.Mode && next.RetainUntilDate != nil && !next.RetainUntilDate.Before(*old.RetainUntilDate) {
		return nil
	}
	if old.Mode == ModeCompliance || bypass != BypassGranted {
		return ErrObjectLocked
	}
	return nil
}
