package drive

// Metadata store keys. Bucket names and object keys never contain NUL (the
// front end refuses such keys), so NUL separates the parts and an object's
// key sorts before any longer key with the same start: listing order is key
// order.
//
//	b\x00<bucket>            bucket record (JSON)
//	o\x00<bucket>\x00<object> the object's newest version (versions.go)
//	v\x00<bucket>\x00<object>\x00<version ID> an older version
//	u\x00..., p\x00...        multipart uploads and their parts (multipart.go)
//	r\x00<stamp><bucket>\x00<object> a null version a write replaced (undo.go)
const sep = 0x00

var (
	bucketPrefix  = []byte{'b', sep}
	objectPrefix  = []byte{'o', sep}
	versionPrefix = []byte{'v', sep}
)

func bucketKey(bucket string) []byte {
	return append(append(make([]byte, 0, len(bucketPrefix)+len(bucket)), bucketPrefix...), bucket...)
}

// prefixed is prefix, bucket and sep in one allocation with room for extra
// bytes more: the keys below were grown by appending part after part, two
// or three allocations a key (6.8% of a HEAD's CPU in BenchmarkHeadObject).
func prefixed(prefix []byte, bucket string, extra int) []byte {
	k := make([]byte, 0, len(prefix)+len(bucket)+1+extra)
	k = append(k, prefix...)
	k = append(k, bucket...)
	return append(k, sep)
}

// bucketObjectsPrefix covers every object of a bucket.
func bucketObjectsPrefix(bucket string) []byte { return prefixed(objectPrefix, bucket, 0) }

func objectKey(bucket, object string) []byte {
	return append(prefixed(objectPrefix, bucket, len(object)), object...)
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

// bucketVersionsPrefix covers every older version of a bucket's objects.
func bucketVersionsPrefix(bucket string) []byte { return prefixed(versionPrefix, bucket, 0) }

// objectVersionsPrefix covers an object's older versions.
func objectVersionsPrefix(bucket, object string) []byte { return versionsPrefixCap(bucket, object, 0) }

// versionsPrefixCap is objectVersionsPrefix with room for extra bytes more.
func versionsPrefixCap(bucket, object string, extra int) []byte {
	return append(append(prefixed(versionPrefix, bucket, len(object)+1+extra), object...), sep)
}

func versionKey(bucket, object string, id [16]byte) []byte {
	return append(versionsPrefixCap(bucket, object, len(id)), id[:]...)
}
