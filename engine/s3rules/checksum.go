package s3rules

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// Checksums of multipart objects, S3's two kinds: FULL_OBJECT, the CRC of
// the whole object, derived from the parts' CRCs without reading the
// data (CRCs combine), and COMPOSITE, the checksum of the parts' raw
// checksums concatenated, with "-N" appended.

// crcPoly are the reflected polynomials of the CRCs S3 combines.
var crcPoly = map[string]struct {
	poly  uint64
	width int
}{
	"CRC32":     {0xEDB88320, 32},
	"CRC32C":    {0x82F63B78, 32},
	"CRC64NVME": {0x9A6C9329AC4BC9B5, 64},
}

// CanCombine reports whether an algorithm's checksums combine (FULL_OBJECT).
func CanCombine(alg string) bool {
	_, ok := crcPoly[alg]
	return ok
}

// CombineCRC appends a part's CRC (base64, of len2 bytes) to the CRC of
// what came before it: the CRC of the concatenation.
func CombineCRC(alg, first, second string, len2 int64) (string, error) {
	p, ok := crcPoly[alg]
	if !ok {
		return "", fmt.Errorf("%s checksums do not combine", alg)
	}
	a, err1 := decodeCRC(first, p.width)
	b, err2 := decodeCRC(second, p.width)
	if err1 != nil || err2 != nil {
		return "", fmt.Errorf("malformed %s checksum", alg)
	}
	return encodeCRC(crcCombine(a, b, len2, p.poly, p.width), p.width), nil
}

func decodeCRC(v string, width int) (uint64, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != width/8 {
		return 0, fmt.Errorf("not a %d-bit checksum", width)
	}
	if width == 32 {
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

func encodeCRC(v uint64, width int) string {
	b := make([]byte, width/8)
	if width == 32 {
		binary.BigEndian.PutUint32(b, uint32(v))
	} else {
		binary.BigEndian.PutUint64(b, v)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// crcCombine is the CRC of A||B from crc1 = CRC(A) and crc2 = CRC(B),
// len2 = len(B): crc1 is advanced over len2 zero bytes by repeated
// squaring of the one-zero-bit operator over GF(2), then xored with crc2
// (the CRCs' pre- and post-conditioning cancel out).
func crcCombine(crc1, crc2 uint64, len2 int64, poly uint64, width int) uint64 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [64]uint64
	odd[0] = poly
	row := uint64(1)
	for n := 1; n < width; n++ {
		odd[n] = row
		row <<= 1
	}
	square := func(dst, src *[64]uint64) {
		for n := 0; n < width; n++ {
			dst[n] = gf2Times(src, src[n])
		}
	}
	square(&even, &odd) // two zero bits
	square(&odd, &even) // four
	for {
		square(&even, &odd) // a zero byte, then doubling
		if len2&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
		square(&odd, &even)
		if len2&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[64]uint64, vec uint64) uint64 {
	var sum uint64
	for i := 0; vec != 0; i++ {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
		vec >>= 1
	}
	return sum
}

// Composite is the COMPOSITE checksum of parts' checksums (base64) with
// the hash of their algorithm: base64 of the hash of the raw digests,
// "-N" appended.
func Composite(newHash func() hash.Hash, sums []string) (string, error) {
	h := newHash()
	for i, s := range sums {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", fmt.Errorf("part %d's checksum is not base64", i+1)
		}
		h.Write(raw)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(sums)), nil
}

// Checksum types.
const (
	ChecksumFullObject = "FULL_OBJECT"
	ChecksumComposite  = "COMPOSITE"
)

// UploadChecksumType is the checksum type of a new upload with an
// algorithm: the one asked for (checked against the algorithm), or S3's
// default for it (FULL_OBJECT for the CRC64NVME, COMPOSITE for the rest).
func UploadChecksumType(alg, typ string) (string, error) {
	switch typ {
	case "":
		if alg == "CRC64NVME" {
			return ChecksumFullObject, nil
		}
		return ChecksumComposite, nil
	case ChecksumFullObject:
		if !CanCombine(alg) {
			return "", s3err.InvalidRequest.Withf("The %s algorithm is not supported for the %s checksum type.", alg, typ)
		}
	case ChecksumComposite:
		if alg == "CRC64NVME" {
			return "", s3err.InvalidRequest.Withf("The %s algorithm is not supported for the %s checksum type.", alg, typ)
		}
	default:
		return "", s3err.InvalidRequest.With("Value for x-amz-checksum-type header is invalid.")
	}
	return typ, nil
}

// ETagOfParts is a multipart object's ETag from its parts' ETags (hex MD5s,
// quoted or not): the MD5 of their binary digests, "-N".
func ETagOfParts(etags []string) (string, bool) {
	h := md5.New()
	for _, e := range etags {
		raw, err := hexDecode(strings.Trim(e, `"`))
		if err != nil {
			return "", false
		}
		h.Write(raw)
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(etags)), true
}

func hexDecode(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("odd hex")
	}
	out := make([]byte, len(s)/2)
	for i := 0; i < len(out); i++ {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, err
		}
		out[i] = byte(v)
	}
	return out, nil
}
