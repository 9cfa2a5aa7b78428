package s3rules

import (
	"encoding/json"
	"encoding/xml"

	"github.com/strata-storage/strata/engine/s3err"
)

// A bucket's public access block and its four settings, each enforced by
// the front end:
//
//   - BlockPublicAcls: a request that would grant the public (AllUsers or
//     AuthenticatedUsers) through an ACL, on the bucket or an object, is
//     refused with AccessDenied before anything is stored;
//   - IgnorePublicAcls: public grants of ACLs grant nothing (GetBucketAcl
//     still shows them);
//   - BlockPublicPolicy: a bucket policy that grants the public is refused;
//   - RestrictPublicBuckets: a public policy grants anonymous requests
//     nothing (the bucket's own users keep what it grants them).

// PublicAccessBlock is the configuration, as S3's document and as kept
// (JSON in the bucket's record).
type PublicAccessBlock struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration" json:"-"`
	XMLNS                 string   `xml:"xmlns,attr,omitempty" json:"-"`
	BlockPublicAcls       bool     `xml:"BlockPublicAcls" json:"blockPublicAcls,omitempty"`
	IgnorePublicAcls      bool     `xml:"IgnorePublicAcls" json:"ignorePublicAcls,omitempty"`
	BlockPublicPolicy     bool     `xml:"BlockPublicPolicy" json:"blockPublicPolicy,omitempty"`
	RestrictPublicBuckets bool     `xml:"RestrictPublicBuckets" json:"restrictPublicBuckets,omitempty"`
}

// ParsePublicAccessBlock reads a PutPublicAccessBlock document and returns
// the record to store.
func ParsePublicAccessBlock(body []byte) ([]byte, error) {
	var p PublicAccessBlock
	if err := xml.Unmarshal(body, &p); err != nil || p.XMLName.Local != "PublicAccessBlockConfiguration" {
		return nil, s3err.MalformedXML
	}
	return json.Marshal(p)
}

// StoredPublicAccessBlock reads a bucket's stored configuration (nil:
// none). One that cannot be read blocks everything rather than open the
// bucket.
func StoredPublicAccessBlock(doc []byte) *PublicAccessBlock {
	if len(doc) == 0 {
		return nil
	}
	var p PublicAccessBlock
	if json.Unmarshal(doc, &p) != nil {
		return &PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
	}
	return &p
}

// BlockedBy refuses a request a setting blocks.
func BlockedBy(setting string) error {
	return s3err.AccessDenied.With("Access Denied: the bucket's public access block (" + setting + ") refuses public access.")
}
