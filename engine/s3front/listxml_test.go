package s3front

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/s3response"
)

// A page rendered by listxml.go is the front end's document for it, byte
// for byte, less the empty <ChecksumType> elements fixResponses removes:
// random pages of both listing versions, with keys of every kind of
// character (markup, control characters, invalid UTF-8, characters
// outside XML's range), owners, checksums and common prefixes.
func TestListingDocumentIsTheFrontEndsDocument(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 27))
	for i := range 400 {
		v2 := randomListV2(rng)
		want, err := xml.Marshal(v2)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.ReplaceAll(want, emptyChecksumType, nil)
		if got := appendListV2(nil, &v2); !bytes.Equal(got, want) {
			t.Fatalf("page %d (v2):\n got %s\nwant %s", i, got, want)
		}
		v1 := s3response.ListObjectsResult{
			Name: v2.Name, Prefix: v2.Prefix, Marker: v2.StartAfter, NextMarker: v2.NextContinuationToken,
			MaxKeys: v2.MaxKeys, Delimiter: v2.Delimiter, IsTruncated: v2.IsTruncated, Contents: v2.Contents,
			CommonPrefixes: v2.CommonPrefixes, EncodingType: v2.EncodingType,
		}
		if want, err = xml.Marshal(v1); err != nil {
			t.Fatal(err)
		}
		want = bytes.ReplaceAll(want, emptyChecksumType, nil)
		if got := appendListV1(nil, &v1); !bytes.Equal(got, want) {
			t.Fatalf("page %d (v1):\n got %s\nwant %s", i, got, want)
		}
	}
}

func randomListV2(rng *rand.Rand) s3response.ListObjectsV2Result {
	r := s3response.ListObjectsV2Result{
		Name: randomOptional(rng), Prefix: randomOptional(rng), StartAfter: randomOptional(rng),
		ContinuationToken: randomOptional(rng), NextContinuationToken: randomOptional(rng),
		Delimiter: randomOptional(rng),
	}
	if rng.IntN(4) > 0 {
		n, m := int32(rng.IntN(1001)), int32(rng.IntN(1001)-1)
		r.KeyCount, r.MaxKeys = &n, &m
	}
	if rng.IntN(4) > 0 {
		v := rng.IntN(2) == 0
		r.IsTruncated = &v
	}
	if rng.IntN(3) == 0 {
		r.EncodingType = types.EncodingTypeUrl
	}
	for range rng.IntN(20) {
		o := s3response.Object{Key: randomOptional(rng), ETag: randomOptional(rng),
			StorageClass: types.ObjectStorageClass(randomString(rng))}
		if rng.IntN(5) > 0 {
			at := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("x", 3600*(rng.IntN(25)-12)))
			o.LastModified = &at
		}
		if rng.IntN(5) > 0 {
			size := rng.Int64N(1<<40) - 1
			o.Size = &size
		}
		for range rng.IntN(3) {
			o.ChecksumAlgorithm = append(o.ChecksumAlgorithm, types.ChecksumAlgorithm(randomString(rng)))
		}
		if rng.IntN(2) == 0 {
			o.ChecksumType = types.ChecksumType(randomString(rng))
		}
		if rng.IntN(3) == 0 {
			o.Owner = &types.Owner{DisplayName: randomOptional(rng), ID: randomOptional(rng)}
		}
		r.Contents = append(r.Contents, o)
	}
	for range rng.IntN(5) {
		r.CommonPrefixes = append(r.CommonPrefixes, types.CommonPrefix{Prefix: randomOptional(rng)})
	}
	return r
}

func randomOptional(rng *rand.Rand) *string {
	if rng.IntN(4) == 0 {
		return nil
	}
	s := randomString(rng)
	return &s
}

// randomString mixes plain text with every class of character the
// escaping treats apart.
func randomString(rng *rand.Rand) string {
	pieces := []string{"a", "photos/", "2026", " ", "\"", "'", "&", "<", ">", "\t", "\n", "\r",
		"\x00", "\x01", "\x1f", "\x7f", "é", "日本", "\u2028", "\uFFFD", "\uFFFE", "\U0001F600",
		"\xff", "\xc3", "\xed\xa0\x80", "%2F", "]]>"}
	var b []byte
	for range rng.IntN(12) {
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return string(b)
}

func BenchmarkListingDocument(b *testing.B) {
	page := s3response.ListObjectsV2Result{}
	name, prefix, next := "bench", "", "b2JqZWN0LTAwMDk5OQ"
	keys, maxKeys, trunc := int32(1000), int32(1000), true
	page.Name, page.Prefix, page.NextContinuationToken = &name, &prefix, &next
	page.KeyCount, page.MaxKeys, page.IsTruncated = &keys, &maxKeys, &trunc
	at := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	for i := range 1000 {
		key, etag, size := "dir-042/object-"+string(rune('a'+i%26))+"-000123", `"5d41402abc4b2a76b9719d911017c592"`, int64(4096)
		page.Contents = append(page.Contents, s3response.Object{Key: &key, ETag: &etag, LastModified: &at, Size: &size,
			StorageClass: types.ObjectStorageClassStandard})
	}
	b.Run("front-end", func(b *testing.B) {
		for b.Loop() {
			if _, err := xml.Marshal(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("listxml", func(b *testing.B) {
		for b.Loop() {
			appendListV2(make([]byte, 0, 512+320*len(page.Contents)), &page)
		}
	})
}
