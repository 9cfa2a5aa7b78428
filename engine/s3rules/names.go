package s3rules

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-storage/strata/engine/s3err"
)

// MaxKeyLength is the longest object key S3 accepts, in bytes.
const MaxKeyLength = 1024

// ValidBucketName applies S3's naming rules for new buckets: 3 to 63
// characters of lower-case letters, digits, periods and hyphens, starting
// and ending with a letter or digit; no adjacent periods or a period next
// to a hyphen; not an IP address; none of the reserved prefixes and
// suffixes.
func ValidBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (c == '.' || c == '-') && i > 0 && i < len(name)-1
		if !ok {
			return false
		}
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return false
	}
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(name, bad) {
			return false
		}
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, sfx := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, sfx) {
			return false
		}
	}
	return true
}

// CheckKey refuses keys S3 refuses (empty, too long) and keys the engine
// cannot store faithfully (NUL, which separates parts of metadata keys, and
// bytes that are not UTF-8, which listings could not order or render).
func CheckKey(key string) error {
	switch {
	case key == "":
		return s3err.InvalidRequest.With("An object key must not be empty.")
	case len(key) > MaxKeyLength:
		return s3err.KeyTooLong.Field("Size", strconv.Itoa(len(key))).Field("MaxSizeAllowed", strconv.Itoa(MaxKeyLength))
	case strings.IndexByte(key, 0) >= 0 || !utf8.ValidString(key):
		return s3err.InvalidArgument.With("Object keys must be UTF-8 without NUL characters.")
	}
	return nil
}
