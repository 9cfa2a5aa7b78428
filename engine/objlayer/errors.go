package objlayer

import "errors"

// Errors of the object layer: every failure a Layer reports wraps one of
// these or is an internal fault. The S3 front end maps them to S3 error
// codes in one place (engine/s3err); nothing below it knows about HTTP.
var (
	// ErrObjectNotFound: no such object (or version).
	ErrObjectNotFound = errors.New("object not found")
	// ErrBucketNotFound: no such bucket.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrBucketExists: the bucket exists already.
	ErrBucketExists = errors.New("bucket already exists")
	// ErrBucketNotEmpty: the bucket still holds objects.
	ErrBucketNotEmpty = errors.New("bucket not empty")
	// ErrIncompleteBody: the request body ended before its declared size.
	ErrIncompleteBody = errors.New("request body shorter than its Content-Length")
	// ErrBodyTooLong: the request body ran past its declared size.
	ErrBodyTooLong = errors.New("request body longer than its Content-Length")
	// ErrInvalidVersionID: a version ID that this engine never issued.
	ErrInvalidVersionID = errors.New("invalid version ID")
	// ErrInvalidKey: a key this layer cannot store faithfully (a POSIX
	// layer: a key that is no relative path inside its bucket, or names
	// the layer's own staging area).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrKeyTooLong: a key longer than the layer stores (a file name
	// component over the filesystem's limit).
	ErrKeyTooLong = errors.New("object key too long")
	// ErrKeyConflict: a key whose place is taken by another kind of entry
	// (a POSIX layer: a parent path is an object's file, or the key names
	// a directory holding other objects).
	ErrKeyConflict = errors.New("object key conflicts with an existing object")
	// ErrOutsideBucket: a key that resolves outside its bucket (a POSIX
	// layer: through a symbolic link made on the volume).
	ErrOutsideBucket = errors.New("object key resolves outside its bucket")

	// ErrUploadNotFound: no such upload (never started, completed or
	// aborted).
	ErrUploadNotFound = errors.New("multipart upload not found")
	// ErrInvalidPart: a part named in a completion was not uploaded, or its
	// ETag differs.
	ErrInvalidPart = errors.New("invalid part")
	// ErrInvalidPartOrder: completion parts are not in ascending order.
	ErrInvalidPartOrder = errors.New("parts not in ascending order")
	// ErrPartTooSmall: a part other than the last is under MinPartSize.
	ErrPartTooSmall = errors.New("part smaller than the minimum")

	// ErrReadQuorum: too few copies of an object (too few drives of its
	// erasure set) could be read intact, so its bytes cannot be rebuilt
	// right now. Retryable; nothing was changed.
	ErrReadQuorum = errors.New("read quorum lost")
	// ErrWriteQuorum: too few drives accepted a write; it was rolled back
	// and is not visible. Retryable.
	ErrWriteQuorum = errors.New("write quorum lost")
	// ErrBusy: the key is being changed by another writer the layer
	// waits for (a POSIX layer: another replica completing the same
	// upload); the client retries.
	ErrBusy = errors.New("busy: another writer holds the key")
	// ErrNoSpace: no storage has room for new objects (the layer's error
	// says why: pools over their fill limit, a full filesystem).
	ErrNoSpace = errors.New("no room for new objects")
	// ErrQuotaExceeded: the write would take its bucket past the bucket's
	// quota (the error says which figure).
	ErrQuotaExceeded = errors.New("bucket quota exceeded")
)
