package s3sig

import "hash"

// ChecksumHash returns a hash of a checksum algorithm named as S3 names
// it (CRC32, CRC32C, CRC64NVME, SHA1, SHA256, ...), for checksums the
// server computes itself (a part of an upload created with an algorithm
// the client did not checksum); requests carry a digest as the base64 of
// its Sum.
func ChecksumHash(name string) (hash.Hash, bool) {
	a, ok := parseAlgorithm(name)
	if !ok || a == algNone {
		return nil, false
	}
	return a.newHash(), true
}
