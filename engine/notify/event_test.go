package notify

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// viaEncodingJSON is the event message as encoding/json writes it from
// the structure S3 documents (event structure 2.1): what Message must
// equal, field for field.
func viaEncodingJSON(t *testing.T, e Event, configID string) []byte {
	type id struct {
		PrincipalID string `json:"principalId"`
	}
	type object struct {
		Key       string `json:"key"`
		Size      int64  `json:"size,omitempty"`
		ETag      string `json:"eTag,omitempty"`
		VersionID string `json:"versionId,omitempty"`
		Sequencer string `json:"sequencer"`
	}
	type bucket struct {
		Name          string `json:"name"`
		OwnerIdentity id     `json:"ownerIdentity"`
		ARN           string `json:"arn"`
	}
	type s3 struct {
		SchemaVersion   string `json:"s3SchemaVersion"`
		ConfigurationID string `json:"configurationId"`
		Bucket          bucket `json:"bucket"`
		Object          object `json:"object"`
	}
	type record struct {
		EventVersion      string            `json:"eventVersion"`
		EventSource       string            `json:"eventSource"`
		AWSRegion         string            `json:"awsRegion"`
		EventTime         string            `json:"eventTime"`
		EventName         string            `json:"eventName"`
		UserIdentity      id                `json:"userIdentity"`
		RequestParameters map[string]string `json:"requestParameters"`
		ResponseElements  map[string]string `json:"responseElements"`
		S3                s3                `json:"s3"`
	}
	b, err := json.Marshal(map[string][]record{"Records": {{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: e.Region,
		EventTime: e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), EventName: strings.TrimPrefix(e.Name, "s3:"),
		UserIdentity:      id{e.Principal},
		RequestParameters: map[string]string{"sourceIPAddress": e.SourceIP},
		ResponseElements:  map[string]string{"x-amz-request-id": e.RequestID},
		S3: s3{SchemaVersion: "1.0", ConfigurationID: configID,
			Bucket: bucket{Name: e.Bucket, OwnerIdentity: id{e.Owner}, ARN: "arn:aws:s3:::" + e.Bucket},
			Object: object{Key: url.QueryEscape(e.Key), Size: e.Size, ETag: e.ETag, VersionID: e.VersionID, Sequencer: e.Sequencer}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMessageIsTheDocumentedJSON: the hand-written message decodes to
// the same document encoding/json makes, for plain and awkward strings
// (quotes, backslashes, control characters, invalid UTF-8, line and
// paragraph separators, non-ASCII) and for the fields left out when empty.
func TestMessageIsTheDocumentedJSON(t *testing.T) {
	awkward := []string{"", "plain", `q"uote\back`, "ctl\x00\x01\x1f\n\r\t", "bad\xff\xfeutf8", "sep\u2028\u2029", "ünïcødé 日本", "<html>&"}
	at := time.Date(2026, 11, 30, 11, 0, 0, 123_456_789, time.UTC)
	for i, s := range awkward {
		e := Event{Name: ObjectCreatedPut, Bucket: "bk" + s, Key: "dir/" + s, Size: int64(i * 1000), ETag: s, VersionID: s,
			Sequencer: "0000018F00000000", Time: at, Principal: s, Owner: s, SourceIP: s, RequestID: s, Region: s}
		var got, want any
		msg := Message(e, "cfg"+s)
		if err := json.Unmarshal(msg, &got); err != nil {
			t.Fatalf("%q: the message is not JSON: %v\n%s", s, err, msg)
		}
		if err := json.Unmarshal(viaEncodingJSON(t, e, "cfg"+s), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, msg, viaEncodingJSON(t, e, "cfg"+s))
		}
	}
}

func BenchmarkMessage(b *testing.B) {
	e := Event{Name: ObjectCreatedPut, Bucket: "bucket", Key: "a/b/c.png", Size: 4096, ETag: "0123456789abcdef0123456789abcdef",
		Sequencer: "0000018F00000000", Time: time.Now(), Principal: "AKIAEXAMPLE", Owner: "owner", SourceIP: "10.0.0.1", RequestID: "1234", Region: DefaultRegion}
	for b.Loop() {
		Message(e, "cfg")
	}
}
