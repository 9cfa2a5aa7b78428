package s3front

import (
	"context"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/s3response"
)

// Listing pages of objects (ListObjects v1 and v2) are rendered here, not
// by the front end's encoder. The front end marshals a result by
// reflection, each object through an alias struct: for a page of 1,000
// objects that was 27% of a listing's server CPU, on the path between the
// drives' walk and the client's next request. A backend that renders its
// page leaves the document in the request context and returns the page
// without its objects, which the front end still marshals (a few fields)
// and fixResponses then replaces with the document. The document is the
// front end's, byte for byte, less the empty <ChecksumType> elements
// fixResponses removes anyway (TestListingDocumentIsTheFrontEndsDocument).

// listingDocKey holds, in the request context, a listing page rendered
// by handOff.
const listingDocKey = "strata-listing-doc"

// HandOffListing renders a page of ListObjectsV2 for fixResponses and
// returns what the front end is to marshal meanwhile: the page without
// its objects. A page it cannot render (or a request without the front
// end's context) is returned as it is.
func HandOffListing(ctx context.Context, out s3response.ListObjectsV2Result) s3response.ListObjectsV2Result {
	if handOff(ctx, out.Contents, func(b []byte) []byte { return appendListV2(b, &out) }) {
		out.Contents = nil
	}
	return out
}

// HandOffListingV1 is HandOffListing for ListObjects (version 1).
func HandOffListingV1(ctx context.Context, out s3response.ListObjectsResult) s3response.ListObjectsResult {
	if handOff(ctx, out.Contents, func(b []byte) []byte { return appendListV1(b, &out) }) {
		out.Contents = nil
	}
	return out
}

// handOff leaves the document render makes of a page of objs in the
// request context, and reports whether it did: not for a page without
// objects, with an object this encoder does not render (a restore status,
// which listings here never set), or outside the front end.
func handOff(ctx context.Context, objs []s3response.Object, render func([]byte) []byte) bool {
	rc, ok := frontCtx(ctx)
	if !ok || len(objs) == 0 || slices.ContainsFunc(objs, func(o s3response.Object) bool { return o.RestoreStatus != nil }) {
		return false
	}
	rc.SetUserValue(listingDocKey, render(make([]byte, 0, 512+320*len(objs))))
	return true
}

const listBucketResultOpen = `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`

func appendListV2(b []byte, r *s3response.ListObjectsV2Result) []byte {
	b = append(b, listBucketResultOpen...)
	b = appendOptional(b, "Name", r.Name)
	b = appendOptional(b, "Prefix", r.Prefix)
	b = appendOptional(b, "StartAfter", r.StartAfter)
	b = appendOptional(b, "ContinuationToken", r.ContinuationToken)
	b = appendOptional(b, "NextContinuationToken", r.NextContinuationToken)
	b = appendInt(b, "KeyCount", r.KeyCount)
	b = appendInt(b, "MaxKeys", r.MaxKeys)
	b = appendOptional(b, "Delimiter", r.Delimiter)
	b = appendBool(b, "IsTruncated", r.IsTruncated)
	b = appendListed(b, r.Contents, r.CommonPrefixes, r.EncodingType)
	return append(b, "</ListBucketResult>"...)
}

func appendListV1(b []byte, r *s3response.ListObjectsResult) []byte {
	b = append(b, listBucketResultOpen...)
	b = appendOptional(b, "Name", r.Name)
	b = appendOptional(b, "Prefix", r.Prefix)
	b = appendOptional(b, "Marker", r.Marker)
	b = appendOptional(b, "NextMarker", r.NextMarker)
	b = appendInt(b, "MaxKeys", r.MaxKeys)
	b = appendOptional(b, "Delimiter", r.Delimiter)
	b = appendBool(b, "IsTruncated", r.IsTruncated)
	b = appendListed(b, r.Contents, r.CommonPrefixes, r.EncodingType)
	return append(b, "</ListBucketResult>"...)
}

// appendListed renders what both versions list, in their order: the
// objects, the common prefixes, the encoding type (an empty element when
// there is none, as the front end renders it).
func appendListed(b []byte, objs []s3response.Object, cps []types.CommonPrefix, et types.EncodingType) []byte {
	for i := range objs {
		b = appendObject(b, &objs[i])
	}
	for _, cp := range cps {
		b = append(b, "<CommonPrefixes>"...)
		b = appendOptional(b, "Prefix", cp.Prefix)
		b = append(b, "</CommonPrefixes>"...)
	}
	return appendText(b, "EncodingType", string(et))
}

// appendObject renders one object as the front end's Object.MarshalXML
// does: its modification time (RFC 3339, to the second) first, then the
// object's fields in their declared order.
func appendObject(b []byte, o *s3response.Object) []byte {
	b = append(b, "<Contents>"...)
	if o.LastModified != nil {
		b = append(b, "<LastModified>"...)
		b = o.LastModified.UTC().AppendFormat(b, time.RFC3339)
		b = append(b, "</LastModified>"...)
	}
	for _, alg := range o.ChecksumAlgorithm {
		b = appendText(b, "ChecksumAlgorithm", string(alg))
	}
	if o.ChecksumType != "" {
		b = appendText(b, "ChecksumType", string(o.ChecksumType))
	}
	b = appendOptional(b, "ETag", o.ETag)
	b = appendOptional(b, "Key", o.Key)
	if o.Owner != nil {
		b = append(b, "<Owner>"...)
		b = appendOptional(b, "DisplayName", o.Owner.DisplayName)
		b = appendOptional(b, "ID", o.Owner.ID)
		b = append(b, "</Owner>"...)
	}
	if o.Size != nil {
		b = append(b, "<Size>"...)
		b = strconv.AppendInt(b, *o.Size, 10)
		b = append(b, "</Size>"...)
	}
	b = appendText(b, "StorageClass", string(o.StorageClass))
	return append(b, "</Contents>"...)
}

func appendOptional(b []byte, name string, s *string) []byte {
	if s == nil {
		return b
	}
	return appendText(b, name, *s)
}

func appendInt(b []byte, name string, n *int32) []byte {
	if n == nil {
		return b
	}
	b = appendOpen(b, name)
	b = strconv.AppendInt(b, int64(*n), 10)
	return appendClose(b, name)
}

func appendBool(b []byte, name string, v *bool) []byte {
	if v == nil {
		return b
	}
	b = appendOpen(b, name)
	b = strconv.AppendBool(b, *v)
	return appendClose(b, name)
}

func appendText(b []byte, name, s string) []byte {
	b = appendOpen(b, name)
	b = appendEscaped(b, s)
	return appendClose(b, name)
}

func appendOpen(b []byte, name string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

func appendClose(b []byte, name string) []byte {
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// appendEscaped escapes character data as encoding/xml does: the five
// markup characters and tab, newline and carriage return as references,
// and what XML cannot carry (invalid UTF-8, characters outside XML's
// range) as U+FFFD.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\'' && c != '&' && c != '<' && c != '>' {
			i++
			continue
		}
		r, width := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !xmlChar(r) || r == utf8.RuneError && width == 1 {
				esc = "\uFFFD"
				break
			}
			i += width
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, esc...)
		i += width
		last = i
	}
	return append(b, s[last:]...)
}

// xmlChar reports whether XML 1.0 can carry r.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
