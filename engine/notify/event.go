package notify

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Event is what a write or delete did, as its notification tells it.
type Event struct {
	// Name is the event's name with its "s3:" prefix (ObjectCreatedPut...).
	Name      string
	Bucket    string
	Key       string
	Size      int64
	ETag      string
	VersionID string
	// Sequencer orders the events of one key: a later change of the key
	// has a greater one (the version's hybrid-clock stamp, in hex).
	Sequencer string
	Time      time.Time
	// Principal is who made the request; Owner the bucket's owner.
	Principal, Owner string
	SourceIP         string
	RequestID        string
	Region           string
	// Snapshot is what the write kept in memory for a target that can
	// use it (a replication remote: the version's bytes, so its copy need
	// not read them back); never stored or sent, so an event read back
	// from the store has none.
	Snapshot any
}

// Sequencer is the sequencer of a change stamped at (Unix nanoseconds):
// 16 upper-case hex digits, so a later change's sorts after.
func Sequencer(at int64) string {
	const digits = "0123456789ABCDEF"
	var b [16]byte
	u := uint64(at)
	for i := 15; i >= 0; i-- {
		b[i] = digits[u&0xf]
		u >>= 4
	}
	return string(b[:])
}

// Message is the S3 event message a target receives for e under the
// configuration rule configID: {"Records":[...]} with one record (event
// structure 2.1: eventVersion, eventSource, awsRegion, eventTime,
// eventName, userIdentity, requestParameters, responseElements, s3), the
// object key URL-encoded as S3 sends it. It is written field by field,
// not through encoding/json: every delivered event makes one, and the
// reflection cost more than the rest of the message's way to its target.
func Message(e Event, configID string) []byte {
	key := url.QueryEscape(e.Key)
	b := make([]byte, 0, 560+len(e.Bucket)*2+len(key)+len(configID)+len(e.Principal)+len(e.Owner)+len(e.RequestID))
	b = append(b, `{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":`...)
	b = appendJSONString(b, e.Region)
	b = append(b, `,"eventTime":"`...)
	b = e.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","eventName":`...)
	b = appendJSONString(b, strings.TrimPrefix(e.Name, "s3:"))
	b = append(b, `,"userIdentity":{"principalId":`...)
	b = appendJSONString(b, e.Principal)
	b = append(b, `},"requestParameters":{"sourceIPAddress":`...)
	b = appendJSONString(b, e.SourceIP)
	b = append(b, `},"responseElements":{"x-amz-request-id":`...)
	b = appendJSONString(b, e.RequestID)
	b = append(b, `},"s3":{"s3SchemaVersion":"1.0","configurationId":`...)
	b = appendJSONString(b, configID)
	b = append(b, `,"bucket":{"name":`...)
	b = appendJSONString(b, e.Bucket)
	b = append(b, `,"ownerIdentity":{"principalId":`...)
	b = appendJSONString(b, e.Owner)
	b = append(b, `},"arn":`...)
	b = appendJSONString(b, "arn:aws:s3:::"+e.Bucket)
	b = append(b, `},"object":{"key":`...)
	b = appendJSONString(b, key)
	if e.Size != 0 {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, e.Size, 10)
	}
	if e.ETag != "" {
		b = append(b, `,"eTag":`...)
		b = appendJSONString(b, e.ETag)
	}
	if e.VersionID != "" {
		b = append(b, `,"versionId":`...)
		b = appendJSONString(b, e.VersionID)
	}
	b = append(b, `,"sequencer":`...)
	b = appendJSONString(b, e.Sequencer)
	return append(b, `}}}]}`...)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does; its HTML escapes are left out, which JSON does not
// need).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
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
