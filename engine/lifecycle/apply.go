package lifecycle

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Day is S3's lifecycle day. Tests run the lifecycle with shorter days
// (as RGW's rgw_lc_debug_interval does); only a day of Day rounds expiry
// times up to midnight UTC, as S3 does.
const Day = 24 * time.Hour

// Version is what the rules look at in one version of a key.
type Version struct {
	ModTime      time.Time
	Size         int64
	Tags         map[string]string
	DeleteMarker bool
	// Locked: a retention or legal hold in force keeps the version.
	Locked bool
}

// ActionKind is what the lifecycle pass does to a version.
type ActionKind int

// Actions.
const (
	// ExpireCurrent expires the current version: a DELETE without version
	// ID (a delete marker where the bucket is versioned).
	ExpireCurrent ActionKind = iota + 1
	// DeleteNoncurrent removes a noncurrent version (or delete marker).
	DeleteNoncurrent
	// RemoveDeleteMarker removes a delete marker left with no versions.
	RemoveDeleteMarker
)

func (k ActionKind) String() string {
	switch k {
	case ExpireCurrent:
		return "expire-current"
	case DeleteNoncurrent:
		return "delete-noncurrent"
	case RemoveDeleteMarker:
		return "remove-delete-marker"
	}
	return fmt.Sprint(int(k))
}

// Action is one thing to do to versions[Index] of a key.
type Action struct {
	Kind   ActionKind
	Index  int
	RuleID string
}

// matches reports whether the rule applies to key's version v.
func (r *Rule) matches(key string, v Version) bool {
	prefix, tags, gt, lt := r.filter()
	if r.Status != "Enabled" || !strings.HasPrefix(key, prefix) || gt != nil && v.Size <= *gt || lt != nil && v.Size >= *lt {
		return false
	}
	for _, t := range tags {
		if got, ok := v.Tags[t.Key]; !ok || got != t.Value {
			return false
		}
	}
	return true
}

// filter is the rule's filter, whichever way the document wrote it.
func (r *Rule) filter() (prefix string, tags []Tag, gt, lt *int64) {
	switch f := r.Filter; {
	case r.Prefix != nil:
		prefix = *r.Prefix
	case f == nil:
	case f.And != nil:
		prefix, tags, gt, lt = deref(f.And.Prefix), f.And.Tags, f.And.ObjectSizeGreaterThan, f.And.ObjectSizeLessThan
	default:
		prefix, gt, lt = deref(f.Prefix), f.ObjectSizeGreaterThan, f.ObjectSizeLessThan
		if f.Tag != nil {
			tags = []Tag{*f.Tag}
		}
	}
	return prefix, tags, gt, lt
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// after is days lifecycle days after t: rounded up to the next midnight UTC
// when a day is S3's.
func after(t time.Time, days int, day time.Duration) time.Time {
	at := t.Add(time.Duration(days) * day)
	if day == Day {
		if m := at.UTC().Truncate(Day); m.Before(at) {
			at = m.Add(Day)
		}
	}
	return at
}

// expiry is when rule r expires a current version written at mod, if it
// expires current versions.
func (r *Rule) expiry(mod time.Time, day time.Duration) (time.Time, bool) {
	e := r.Expiration
	switch {
	case e == nil:
	case e.Days != nil:
		return after(mod, *e.Days, day), true
	case e.Date != nil:
		if t, err := parseDate(*e.Date); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// Expiry is when the current version v of key expires and by which rule:
// the earliest of the rules that apply (ok false when none does).
func (c *Configuration) Expiry(key string, v Version, day time.Duration) (at time.Time, ruleID string, ok bool) {
	if v.DeleteMarker {
		return time.Time{}, "", false
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		if !r.matches(key, v) {
			continue
		}
		if t, has := r.expiry(v.ModTime, day); has && (!ok || t.Before(at)) {
			at, ruleID, ok = t, r.ID, true
		}
	}
	return at, ruleID, ok
}

// ExpirationHeader is the x-amz-expiration value for the current version v
// of key ("" when no rule expires it).
func (c *Configuration) ExpirationHeader(key string, v Version, day time.Duration) string {
	at, id, ok := c.Expiry(key, v, day)
	if !ok {
		return ""
	}
	return fmt.Sprintf("expiry-date=%q, rule-id=%q", at.UTC().Format(http.TimeFormat), id)
}

// Decide is what the lifecycle pass does at now to the versions of key,
// newest first (versions[0] is the current one). Versions that are locked
// are never removed; expiring a current version only hides it behind a
// delete marker where the bucket is versioned, which a lock allows.
func (c *Configuration) Decide(key string, versions []Version, now time.Time, day time.Duration) []Action {
	if len(versions) == 0 {
		return nil
	}
	var out []Action
	removed := 0
	for i := 1; i < len(versions); i++ {
		v := versions[i]
		if v.Locked {
			continue
		}
		since := versions[i-1].ModTime // when it stopped being current
		for ri := range c.Rules {
			r := &c.Rules[ri]
			nc := r.NoncurrentVersionExpiration
			if nc == nil || !r.matches(key, v) {
				continue
			}
			keep := 0
			if nc.NewerNoncurrentVersions != nil {
				keep = *nc.NewerNoncurrentVersions
			}
			if i-1 >= keep && !now.Before(after(since, *nc.NoncurrentDays, day)) {
				out = append(out, Action{DeleteNoncurrent, i, r.ID})
				removed++
				break
			}
		}
	}
	cur := versions[0]
	if !cur.DeleteMarker {
		if at, id, ok := c.Expiry(key, cur, day); ok && !now.Before(at) {
			out = append(out, Action{ExpireCurrent, 0, id})
		}
		return out
	}
	if removed < len(versions)-1 {
		return out // the marker still hides versions
	}
	for ri := range c.Rules {
		r := &c.Rules[ri]
		if e := r.Expiration; e != nil && r.matches(key, cur) && (e.ExpiredObjectDeleteMarker != nil && *e.ExpiredObjectDeleteMarker || e.Days != nil) {
			return append(out, Action{RemoveDeleteMarker, 0, r.ID})
		}
	}
	return out
}

// AbortUpload reports whether a multipart upload of key started at
// initiated is aborted at now, and by which rule.
func (c *Configuration) AbortUpload(key string, initiated, now time.Time, day time.Duration) (string, bool) {
	for i := range c.Rules {
		r := &c.Rules[i]
		a := r.AbortIncompleteMultipartUpload
		// Such a rule has no tags (Parse refuses them), and an upload has
		// no size yet: its prefix alone decides.
		if prefix, _, _, _ := r.filter(); a == nil || r.Status != "Enabled" || !strings.HasPrefix(key, prefix) {
			continue
		}
		if !now.Before(after(initiated, *a.DaysAfterInitiation, day)) {
			return r.ID, true
		}
	}
	return "", false
}

// HasCurrentExpiry reports whether some enabled rule expires current
// versions (the header is then worth computing).
func (c *Configuration) HasCurrentExpiry() bool {
	for _, r := range c.Rules {
		if r.Status == "Enabled" && r.Expiration != nil && (r.Expiration.Days != nil || r.Expiration.Date != nil) {
			return true
		}
	}
	return false
}

// HasTagFilters reports whether some enabled rule filters by object tags
// (a store that keeps tags apart from its listings then reads them).
func (c *Configuration) HasTagFilters() bool {
	for i := range c.Rules {
		if _, tags, _, _ := c.Rules[i].filter(); c.Rules[i].Status == "Enabled" && len(tags) > 0 {
			return true
		}
	}
	return false
}
