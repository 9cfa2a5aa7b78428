package s3rules

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/minio/crc64nvme"
)

// The CRC of a whole object derived from its parts' must be the CRC of its
// bytes, for every algorithm and for parts of any length, an empty one too.
func TestCombineCRCIsTheCRCOfTheWhole(t *testing.T) {
	crcOf := map[string]func([]byte) string{
		"CRC32": func(b []byte) string {
			return enc32(crc32.ChecksumIEEE(b))
		},
		"CRC32C": func(b []byte) string {
			return enc32(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		},
		"CRC64NVME": func(b []byte) string {
			var out [8]byte
			binary.BigEndian.PutUint64(out[:], crc64nvme.Checksum(b))
			return base64.StdEncoding.EncodeToString(out[:])
		},
	}
	for alg, crc := range crcOf {
		for _, sizes := range [][]int{{1, 1}, {5 << 20, 3}, {100, 0, 7}, {4096, 4096, 4096, 1}} {
			var whole []byte
			var sum string
			for i, n := range sizes {
				part := make([]byte, n)
				rand.Read(part)
				whole = append(whole, part...)
				if i == 0 {
					sum = crc(part)
					continue
				}
				var err error
				if sum, err = CombineCRC(alg, sum, crc(part), int64(n)); err != nil {
					t.Fatal(err)
				}
			}
			if want := crc(whole); sum != want {
				t.Errorf("%s of parts %v: combined %s, whole %s", alg, sizes, sum, want)
			}
		}
	}
}

func enc32(v uint32) string {
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return base64.StdEncoding.EncodeToString(out[:])
}
