package notify

import (
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"time"
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
}

// record is one entry of an S3 event message (event structure 2.1).
type record struct {
	EventVersion      string            `json:"eventVersion"`
	EventSource       string            `json:"eventSource"`
	AWSRegion         string            `json:"awsRegion"`
	EventTime         string            `json:"eventTime"`
	EventName         string            `json:"eventName"`
	UserIdentity      principal         `json:"userIdentity"`
	RequestParameters map[string]string `json:"requestParameters"`
	ResponseElements  map[string]string `json:"responseElements"`
	S3                s3Entity          `json:"s3"`
}

type principal struct {
	PrincipalID string `json:"principalId"`
}

type s3Entity struct {
	SchemaVersion   string   `json:"s3SchemaVersion"`
	ConfigurationID string   `json:"configurationId"`
	Bucket          bucketID `json:"bucket"`
	Object          objectID `json:"object"`
}

type bucketID struct {
	Name          string    `json:"name"`
	OwnerIdentity principal `json:"ownerIdentity"`
	ARN           string    `json:"arn"`
}

type objectID struct {
	Key       string `json:"key"`
	Size      int64  `json:"size,omitempty"`
	ETag      string `json:"eTag,omitempty"`
	VersionID string `json:"versionId,omitempty"`
	Sequencer string `json:"sequencer"`
}

// Message is the S3 event message a target receives for e under the
// configuration rule configID: {"Records":[...]} with one record, the
// object key URL-encoded as S3 sends it.
func Message(e Event, configID string) []byte {
	rec := record{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: e.Region,
		EventTime:         e.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
		EventName:         strings.TrimPrefix(e.Name, "s3:"),
		UserIdentity:      principal{e.Principal},
		RequestParameters: map[string]string{"sourceIPAddress": e.SourceIP},
		ResponseElements:  map[string]string{"x-amz-request-id": e.RequestID},
		S3: s3Entity{
			SchemaVersion: "1.0", ConfigurationID: configID,
			Bucket: bucketID{Name: e.Bucket, OwnerIdentity: principal{e.Owner}, ARN: "arn:aws:s3:::" + e.Bucket},
			Object: objectID{Key: url.QueryEscape(e.Key), Size: e.Size, ETag: e.ETag, VersionID: e.VersionID, Sequencer: e.Sequencer},
		},
	}
	b, err := json.Marshal(struct {
		Records []record `json:"Records"`
	}{[]record{rec}})
	if err != nil {
		panic(err) // strings and numbers only
	}
	return b
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
