package s3api

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// GetObjectAttributes' ObjectParts counts every part of the object
// (PartsCount, first, as S3 answers it) whatever page of parts follows:
// x-amz-max-parts bounds the page, x-amz-part-number-marker starts it.
func TestObjectAttributesPartsPage(t *testing.T) {
	info := objlayer.ObjectInfo{Parts: []objlayer.Part{{Number: 1, Size: 5}, {Number: 2, Size: 6}, {Number: 3, Size: 7}}}
	for _, c := range []struct {
		maxParts, marker string
		parts            string // part numbers and sizes
		truncated        bool
		next             int
	}{
		{"", "", "1:5 2:6 3:7", false, 3},
		{"2", "", "1:5 2:6", true, 2},
		{"2", "2", "3:7", false, 3},
		{"5000", "1", "2:6 3:7", false, 3},
		{"0", "", "1:5 2:6 3:7", false, 3}, // not a bound: the default
	} {
		r := &request{header: http.Header{}}
		if c.maxParts != "" {
			r.header.Set("X-Amz-Max-Parts", c.maxParts)
		}
		if c.marker != "" {
			r.header.Set("X-Amz-Part-Number-Marker", c.marker)
		}
		page := r.partsPage(info)
		var parts []string
		for _, p := range page.Parts {
			parts = append(parts, fmt.Sprintf("%d:%d", p.PartNumber, p.Size))
		}
		if page.PartsCount != 3 || strings.Join(parts, " ") != c.parts || page.IsTruncated != c.truncated || page.NextPartNumberMarker != c.next {
			t.Errorf("max %q marker %q: count %d parts %v truncated %v next %d; want 3 %s %v %d",
				c.maxParts, c.marker, page.PartsCount, parts, page.IsTruncated, page.NextPartNumberMarker, c.parts, c.truncated, c.next)
		}
		out, err := xml.Marshal(attributesDoc{XMLNS: xmlNS, ObjectParts: page})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "<ObjectParts><PartsCount>3</PartsCount>") {
			t.Errorf("PartsCount not first in ObjectParts: %s", out)
		}
	}
}
