package s3rules

import (
	"encoding/xml"
	"net/url"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/strata-storage/strata/engine/s3err"
)

// Tag limits, S3's.
const (
	MaxObjectTags = 10
	MaxBucketTags = 50
	maxTagKey     = 128
	maxTagValue   = 256
)

// tagChars are the characters S3 allows in tag keys and values: letters,
// digits, spaces and _ . : / = + - @.
var tagChars = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

// Tag is one tag.
type Tag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// TaggingDocument is S3's Tagging document (PutObjectTagging,
// PutBucketTagging bodies and their GET answers).
type TaggingDocument struct {
	XMLName xml.Name `xml:"Tagging"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	Tags    []Tag    `xml:"TagSet>Tag"`
}

func checkTag(key, value string) error {
	if n := utf8.RuneCountInString(key); n == 0 || n > maxTagKey || !tagChars.MatchString(key) {
		return s3err.InvalidTag.With("The TagKey you have provided is invalid").Field("TagKey", key)
	}
	if utf8.RuneCountInString(value) > maxTagValue || !tagChars.MatchString(value) {
		return s3err.InvalidTag.With("The TagValue you have provided is invalid").Field("TagKey", key).Field("TagValue", value)
	}
	return nil
}

// ParseTagging reads a Tagging document of at most limit tags.
func ParseTagging(body []byte, limit int) (map[string]string, error) {
	var doc TaggingDocument
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, s3err.MalformedXML
	}
	if len(doc.Tags) > limit {
		if limit == MaxBucketTags {
			return nil, s3err.BadRequest.Withf("Bucket tag count cannot be greater than %d", limit)
		}
		return nil, s3err.BadRequest.Withf("Object tags cannot be greater than %d", limit)
	}
	out := make(map[string]string, len(doc.Tags))
	for _, t := range doc.Tags {
		if err := checkTag(t.Key, t.Value); err != nil {
			return nil, err
		}
		if _, dup := out[t.Key]; dup {
			return nil, s3err.InvalidTag.With("Cannot provide multiple Tags with the same key").Field("TagKey", t.Key)
		}
		out[t.Key] = t.Value
	}
	return out, nil
}

// ParseTagQuery reads tags sent as a URL query (x-amz-tagging, a form's
// tagging field): key=value pairs joined by &.
func ParseTagQuery(q string) (map[string]string, error) {
	if q == "" {
		return map[string]string{}, nil
	}
	bad := s3err.InvalidArgumentNamed("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.", "x-amz-tagging", q)
	out := map[string]string{}
	for rest := q; rest != ""; {
		var pair string
		pair, rest, _ = cutAmp(rest)
		if pair == "" {
			continue
		}
		k, v, found := cutEq(pair)
		if found && k == "" {
			return nil, bad
		}
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, bad
		}
		if err := checkTag(key, value); err != nil {
			return nil, err
		}
		if _, dup := out[key]; dup {
			return nil, bad
		}
		out[key] = value
	}
	if len(out) > MaxObjectTags {
		return nil, s3err.BadRequest.Withf("Object tags cannot be greater than %d", MaxObjectTags)
	}
	return out, nil
}

func cutAmp(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '&' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func cutEq(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// EncodeTagQuery renders tags as a URL query in key order (how a version
// keeps them).
func EncodeTagQuery(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	v := url.Values{}
	for _, k := range keys {
		v.Set(k, tags[k])
	}
	return v.Encode()
}

// DecodeTagQuery reads stored tags (a query EncodeTagQuery made); tags it
// cannot read are none.
func DecodeTagQuery(q string) map[string]string {
	if q == "" {
		return nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

// RenderTagging is a Tagging document of tags, sorted by key as S3
// answers them.
func RenderTagging(tags map[string]string) TaggingDocument {
	doc := TaggingDocument{XMLNS: "http://s3.amazonaws.com/doc/2006-03-01/", Tags: []Tag{}}
	for k, v := range tags {
		doc.Tags = append(doc.Tags, Tag{Key: k, Value: v})
	}
	slices.SortFunc(doc.Tags, func(a, b Tag) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return doc
}
