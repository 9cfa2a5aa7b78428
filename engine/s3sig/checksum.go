package s3sig

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"net/http"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/strata-storage/strata/engine/s3err"
	"github.com/zeebo/xxh3"
)

// S3's flexible checksums: a request names one algorithm, and either
// gives the body's digest (x-amz-checksum-<alg>, a header or a form
// field; or the aws-chunked trailer that x-amz-trailer announces) or asks
// the server to compute it (x-amz-sdk-checksum-algorithm or
// x-amz-checksum-algorithm alone). A value is the base64 of the digest in
// big-endian byte order, as the AWS SDKs send it. aws-sdk-go-v2 computes
// CRC32, CRC32C, CRC64NVME, SHA1, SHA256 and SHA512 and only names the
// others; for those we chose the same rule: XXHASH64 and XXHASH3 are the
// 8 big-endian bytes of the 64-bit hash (seed 0), XXHASH128 the 16 bytes
// of the 128-bit XXH3 hash, high half first (xxHash's canonical form),
// MD5 the 16-byte digest.

// algorithm is a checksum algorithm; the zero value is none.
type algorithm uint8

const (
	algNone algorithm = iota
	algCRC32
	algCRC32C
	algCRC64NVME
	algSHA1
	algSHA256
	algSHA512
	algMD5
	algXXHash64
	algXXHash3
	algXXHash128
	algCount
)

// String is the algorithm's name as S3 spells it.
func (a algorithm) String() string {
	switch a {
	case algCRC32:
		return "CRC32"
	case algCRC32C:
		return "CRC32C"
	case algCRC64NVME:
		return "CRC64NVME"
	case algSHA1:
		return "SHA1"
	case algSHA256:
		return "SHA256"
	case algSHA512:
		return "SHA512"
	case algMD5:
		return "MD5"
	case algXXHash64:
		return "XXHASH64"
	case algXXHash3:
		return "XXHASH3"
	case algXXHash128:
		return "XXHASH128"
	}
	return ""
}

// header is the algorithm's x-amz-checksum- header name.
func (a algorithm) header() string { return "x-amz-checksum-" + strings.ToLower(a.String()) }

// size is the digest's length in bytes.
func (a algorithm) size() int {
	switch a {
	case algCRC32, algCRC32C:
		return 4
	case algCRC64NVME, algXXHash64, algXXHash3:
		return 8
	case algSHA1:
		return sha1.Size
	case algSHA256:
		return sha256.Size
	case algSHA512:
		return sha512.Size
	case algMD5, algXXHash128:
		return 16
	}
	return 0
}

// newHash is a fresh hash of the algorithm; every Sum is big-endian.
func (a algorithm) newHash() hash.Hash {
	switch a {
	case algCRC32:
		return crc32.NewIEEE()
	case algCRC32C:
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case algCRC64NVME:
		return crc64nvme.New()
	case algSHA1:
		return sha1.New()
	case algSHA256:
		return sha256.New()
	case algSHA512:
		return sha512.New()
	case algMD5:
		return md5.New()
	case algXXHash64:
		return xxhash.New()
	case algXXHash3:
		return xxh3.New()
	case algXXHash128:
		return xxh3.New128()
	}
	return nil
}

// parseAlgorithm reads an algorithm's name, any case.
func parseAlgorithm(name string) (algorithm, bool) {
	for a := algNone + 1; a < algCount; a++ {
		if strings.EqualFold(name, a.String()) {
			return a, true
		}
	}
	return algNone, false
}

// checksumSpec is what a request asks of its body's checksum.
type checksumSpec struct {
	alg algorithm
	// want is the digest the client gave; nil when the server is to
	// compute it, or when it comes in the trailer.
	want []byte
	// trailer: the value comes in the aws-chunked trailer.
	trailer bool
}

// decodeChecksum decodes a checksum value of alg; false when it is not
// base64 of a digest of the algorithm's size.
func decodeChecksum(alg algorithm, v string) ([]byte, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	return b, err == nil && len(b) == alg.size()
}

// checksumParser reads the checksum a request (headers, or a form's
// fields) asks for, one field at a time: at most one x-amz-checksum-<alg>
// value or trailer, optionally named by x-amz-sdk-checksum-algorithm (or
// x-amz-checksum-algorithm), which alone asks for the checksum to be
// computed. (A plain loop over the caller's fields, not an iterator:
// range-over-func closures would move its state to the heap on every
// request.)
type checksumParser struct {
	spec    checksumSpec
	named   algorithm
	trailer string
	err     error
}

// add reads one field; names are matched in any case.
func (c *checksumParser) add(k, v string) {
	if c.err != nil || len(k) <= len("x-amz-") || !strings.EqualFold(k[:len("x-amz-")], "x-amz-") {
		return
	}
	rest := k[len("x-amz-"):]
	if !hasPrefixFold(rest, "checksum-") && !strings.EqualFold(rest, "trailer") && !strings.EqualFold(rest, "sdk-checksum-algorithm") {
		return // most x-amz- headers: not lowered, not allocated
	}
	rest = strings.ToLower(rest)
	switch {
	case rest == "trailer":
		c.trailer = strings.ToLower(strings.TrimSpace(v))
	case rest == "sdk-checksum-algorithm" || rest == "checksum-algorithm":
		a, ok := parseAlgorithm(strings.TrimSpace(v))
		switch {
		case !ok:
			c.err = errUnknownAlgorithm()
		case c.named != algNone && c.named != a:
			c.err = s3err.InvalidRequest.Withf("Value for x-amz-%s header is invalid.", rest)
		default:
			c.named = a
		}
	case rest == "checksum-mode" || rest == "checksum-type":
		// A GET's request for checksums; a multipart upload's kind.
	case strings.HasPrefix(rest, "checksum-"):
		a, ok := parseAlgorithm(rest[len("checksum-"):])
		if !ok {
			c.err = s3err.InvalidRequest.With("The algorithm type you specified in x-amz-checksum- header is invalid.")
			return
		}
		if c.spec.alg != algNone {
			c.err = errMultipleChecksums()
			return
		}
		want, ok := decodeChecksum(a, v)
		if !ok {
			c.err = errChecksumValue(a.header())
			return
		}
		c.spec.alg, c.spec.want = a, want
	}
}

// finish gives the checksum asked for; trailerOK tells whether the
// payload is a trailer-carrying aws-chunked one.
func (c *checksumParser) finish(trailerOK bool) (checksumSpec, error) {
	spec := c.spec
	if c.err != nil {
		return spec, c.err
	}
	if c.trailer != "" {
		if !trailerOK {
			return spec, s3err.InvalidRequest.With("x-amz-trailer is only valid with a STREAMING-...-TRAILER x-amz-content-sha256.")
		}
		a, ok := algNone, false
		if strings.HasPrefix(c.trailer, "x-amz-checksum-") {
			a, ok = parseAlgorithm(c.trailer[len("x-amz-checksum-"):])
		}
		if !ok {
			return spec, s3err.InvalidRequest.With("The value specified in the x-amz-trailer header is not supported")
		}
		if spec.alg != algNone {
			return spec, errMultipleChecksums()
		}
		spec.alg, spec.trailer = a, true
	}
	switch {
	case c.named == algNone:
	case spec.alg == algNone:
		spec.alg = c.named // compute it, and report it
	case spec.alg != c.named:
		return spec, s3err.InvalidRequest.With("x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
	}
	return spec, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// headerChecksums is the checksum a request's headers ask for.
func headerChecksums(h http.Header, trailerOK bool) (checksumSpec, error) {
	var c checksumParser
	for k, vs := range h {
		if len(vs) > 0 {
			c.add(k, vs[0])
		}
	}
	return c.finish(trailerOK)
}

func errMultipleChecksums() *s3err.Error {
	return s3err.InvalidRequest.With("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
}

// contentMD5 reads a Content-MD5 value: nil when absent, InvalidDigest
// when not base64 of 16 bytes (an empty value included, as S3).
func contentMD5(v string, present bool) ([]byte, error) {
	if !present {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(b) != md5.Size {
		return nil, s3err.InvalidDigest
	}
	return b, nil
}
