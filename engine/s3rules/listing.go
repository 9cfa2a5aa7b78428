package s3rules

import (
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// KeyEncoder renders keys in listings: as they are, or URL-encoded when
// the request asked for encoding-type=url.
type KeyEncoder struct{ URL bool }

// ListingEncoder reads a listing's encoding-type parameter.
func ListingEncoder(encodingType string) (KeyEncoder, error) {
	switch encodingType {
	case "":
		return KeyEncoder{}, nil
	case "url":
		return KeyEncoder{URL: true}, nil
	}
	return KeyEncoder{}, s3err.InvalidArgumentNamed("Invalid Encoding Method specified in Request", "encoding-type", encodingType)
}

// Type is the EncodingType a listing answers ("" or "url").
func (e KeyEncoder) Type() string {
	if e.URL {
		return "url"
	}
	return ""
}

// Enc encodes like S3: every byte but unreserved characters and '/'
// percent-encoded, spaces as %20.
func (e KeyEncoder) Enc(s string) string {
	if !e.URL {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), "%2F", "/")
}

// EncodeToken makes a continuation token: opaque to clients, the marker
// base64-encoded.
func EncodeToken(marker string) string { return base64.RawURLEncoding.EncodeToString([]byte(marker)) }

// DecodeToken reads a continuation token.
func DecodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", s3err.InvalidArgumentNamed("The continuation token provided is incorrect", "continuation-token", tok)
	}
	return string(b), nil
}
