package drive

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// Metadata store keys. Bucket names and object keys never contain NUL (the
// front end refuses such keys), so NUL separates the parts and every version
// of an object sorts before any longer key: listing order is key order.
//
//	b\x00<bucket>                                   bucket record (JSON)
//	v\x00<bucket>\x00<object>\x00<order><versionID> version record
//
// <order> is the version's ModTime inverted (big-endian), so an object's
// newest version comes first, and the version ID breaks ties the same way
// Record.Newer does.
const sep = 0x00

var (
	bucketPrefix  = []byte{'b', sep}
	versionPrefix = []byte{'v', sep}
)

func bucketKey(bucket string) []byte {
	return append(append([]byte(nil), bucketPrefix...), bucket...)
}

// bucketVersionsPrefix covers every version record of a bucket.
func bucketVersionsPrefix(bucket string) []byte {
	k := append(append([]byte(nil), versionPrefix...), bucket...)
	return append(k, sep)
}

// objectPrefix covers every version of one object.
func objectPrefix(bucket, object string) []byte {
	k := bucketVersionsPrefix(bucket)
	k = append(k, object...)
	return append(k, sep)
}

func versionKey(bucket, object string, r *Record) []byte {
	k := objectPrefix(bucket, object)
	// Flip the sign bit so signed times sort as unsigned, then invert.
	k = binary.BigEndian.AppendUint64(k, ^(uint64(r.ModTime) ^ 1<<63))
	for _, b := range r.VersionID {
		k = append(k, ^b)
	}
	return k
}

// splitVersionKey returns the object name of a version key under the bucket
// prefix p.
func splitVersionKey(p, key []byte) (string, error) {
	rest := key[len(p):]
	if len(rest) < 1+8+16 {
		return "", errors.New("short version key")
	}
	name := rest[:len(rest)-(1+8+16)]
	if rest[len(name)] != sep || bytes.IndexByte(name, sep) >= 0 {
		return "", errors.New("malformed version key")
	}
	return string(name), nil
}

// prefixEnd is the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
