package s3front

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
)

// Answers the front end renders differently from S3, corrected on the
// way out (XML documents: a few kilobytes, a page of a listing up to a
// few hundred):
//
//   - GetObjectAcl: the front end marshals the SDK's output type, which has
//     no XML names, as <GetObjectAclOutput><Grants>...; clients expect S3's
//     <AccessControlPolicy> with <AccessControlList><Grant>.
//   - Get{Object,Bucket}Tagging: the front end renders tags from a map, so
//     their order changes from call to call; S3 answers them sorted by key.
//   - GetObjectAttributes: the front end's ObjectParts has no PartsCount;
//     the backend leaves the count in the request context (partsCountKey).
//   - Listings (objects, versions, uploads, parts): the front end renders
//     an empty <ChecksumType> for each object stored without a checksum;
//     S3 leaves the element out. Pages of objects rendered by the backend
//     (listxml.go) replace the front end's document instead.
//
// And on every answer: the request and host IDs once each. The front end
// sets them before a handler runs and again after it; an answer with
// headers of its own (GET, HEAD, listings) turns off the header's name
// normalizing on the way, so the second copy went out as a header of its
// own, in lower case, next to the first.
func fixResponses() fiber.Handler {
	return func(c fiber.Ctx) error {
		err := c.Next()
		oneHeader(&c.Response().Header, "x-amz-request-id", "X-Amz-Request-Id")
		oneHeader(&c.Response().Header, "x-amz-id-2", "X-Amz-Id-2")
		if c.Method() != http.MethodGet || c.Response().StatusCode() != http.StatusOK || c.Response().IsBodyStream() {
			return err
		}
		q := c.RequestCtx().QueryArgs()
		if isListing(c) {
			if doc, ok := c.RequestCtx().UserValue(listingDocKey).([]byte); ok {
				// A page rendered by the backend (listxml.go) replaces
				// the front end's rendering of it without its objects.
				c.Response().SetBodyRaw(doc)
			} else if body := c.Response().Body(); bytes.Contains(body, emptyChecksumType) {
				// The front end renders an object's checksum type
				// without omitempty: <ChecksumType></ChecksumType> for
				// every object stored without a checksum, where S3
				// leaves it out.
				c.Response().SetBodyRaw(bytes.ReplaceAll(body, emptyChecksumType, nil))
			}
		}
		var fixed []byte
		switch {
		case q.Has("acl"):
			fixed = objectACLAnswer(c.Response().Body())
		case q.Has("tagging"):
			fixed = sortedTags(c.Response().Body())
		case q.Has("attributes"):
			if n, ok := c.RequestCtx().UserValue(partsCountKey).(int); ok {
				fixed = withPartsCount(c.Response().Body(), n)
			}
		}
		if fixed != nil {
			c.Response().SetBodyRaw(fixed)
		}
		return err
	}
}

// The shape the front end gives GetObjectAcl.
type sdkObjectACL struct {
	XMLName xml.Name `xml:"GetObjectAclOutput"`
	Owner   struct {
		DisplayName string
		ID          string
	}
	Grants []struct {
		Grantee struct {
			Type         string
			DisplayName  string
			ID           string
			URI          string
			EmailAddress string
		}
		Permission string
	}
}

// S3's AccessControlPolicy document.
type accessControlPolicy struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ AccessControlPolicy"`
	Owner   struct {
		ID          string `xml:"ID"`
		DisplayName string `xml:"DisplayName,omitempty"`
	} `xml:"Owner"`
	Grants []aclGrant `xml:"AccessControlList>Grant"`
}

type aclGrant struct {
	Grantee struct {
		XMLNS        string `xml:"xmlns:xsi,attr"`
		Type         string `xml:"xsi:type,attr"`
		ID           string `xml:"ID,omitempty"`
		DisplayName  string `xml:"DisplayName,omitempty"`
		URI          string `xml:"URI,omitempty"`
		EmailAddress string `xml:"EmailAddress,omitempty"`
	} `xml:"Grantee"`
	Permission string `xml:"Permission"`
}

// objectACLAnswer rewrites the front end's GetObjectAcl body as S3's;
// nil when body is something else.
func objectACLAnswer(body []byte) []byte {
	if !bytes.Contains(body, []byte("<GetObjectAclOutput")) {
		return nil
	}
	var in sdkObjectACL
	if xml.Unmarshal(body, &in) != nil {
		return nil
	}
	var out accessControlPolicy
	out.Owner.ID, out.Owner.DisplayName = in.Owner.ID, in.Owner.DisplayName
	for _, g := range in.Grants {
		var a aclGrant
		a.Grantee.XMLNS = "http://www.w3.org/2001/XMLSchema-instance"
		a.Grantee.Type, a.Grantee.ID, a.Grantee.DisplayName = g.Grantee.Type, g.Grantee.ID, g.Grantee.DisplayName
		a.Grantee.URI, a.Grantee.EmailAddress = g.Grantee.URI, g.Grantee.EmailAddress
		a.Permission = g.Permission
		out.Grants = append(out.Grants, a)
	}
	return marshalDoc(out)
}

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	XMLNS   string   `xml:"xmlns,attr,omitempty"`
	Tags    []struct {
		Key   string `xml:"Key"`
		Value string `xml:"Value"`
	} `xml:"TagSet>Tag"`
}

// sortedTags orders a Tagging document's tags by key; nil when body is
// something else or already in order.
func sortedTags(body []byte) []byte {
	if !bytes.Contains(body, []byte("<Tagging")) {
		return nil
	}
	var t tagging
	if xml.Unmarshal(body, &t) != nil {
		return nil
	}
	if sort.SliceIsSorted(t.Tags, func(i, j int) bool { return t.Tags[i].Key < t.Tags[j].Key }) {
		return nil
	}
	sort.Slice(t.Tags, func(i, j int) bool { return t.Tags[i].Key < t.Tags[j].Key })
	if t.XMLNS == "" {
		t.XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
	}
	return marshalDoc(t)
}

// partsCountKey holds, in the request context, how many parts the object
// of a GetObjectAttributes has.
const partsCountKey = "strata-parts-count"

// withPartsCount adds S3's PartsCount to an ObjectParts element.
func withPartsCount(body []byte, n int) []byte {
	const open = "<ObjectParts>"
	i := bytes.Index(body, []byte(open))
	if i < 0 {
		return nil
	}
	i += len(open)
	out := make([]byte, 0, len(body)+32)
	out = append(out, body[:i]...)
	out = append(out, "<PartsCount>"+strconv.Itoa(n)+"</PartsCount>"...)
	return append(out, body[i:]...)
}

func marshalDoc(v any) []byte {
	b, err := xml.Marshal(v)
	if err != nil {
		return nil
	}
	return append([]byte(xml.Header), b...)
}

// oneHeader leaves one copy of a header that may have been set under two
// spellings of its name (lower and canonical case), with the value last
// set.
func oneHeader(h *fasthttp.ResponseHeader, lower, canonical string) {
	v := h.Peek(lower)
	if len(v) == 0 {
		return // only the canonical one, if any
	}
	v = bytes.Clone(v)
	h.Del(lower)
	h.Del(canonical)
	h.SetBytesV(canonical, v)
}

var emptyChecksumType = []byte("<ChecksumType></ChecksumType>")

// isListing reports whether a GET answered with an XML document is a
// listing: of a bucket's objects, versions or uploads (a request on the
// bucket, path style), or of an upload's parts. Never an object's GET,
// whose body is the object's own bytes.
func isListing(c fiber.Ctx) bool {
	if !bytes.HasPrefix(c.Response().Header.ContentType(), []byte("application/xml")) {
		return false
	}
	if c.RequestCtx().QueryArgs().Has("uploadId") {
		return true
	}
	p := strings.Trim(string(c.RequestCtx().Path()), "/")
	return p != "" && !strings.Contains(p, "/")
}
