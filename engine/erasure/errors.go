package erasure

import "errors"

// Errors of the object layer. The S3 front end maps them to S3 error codes
// in one place; nothing below it knows about HTTP.
var (
	// ErrReadQuorum: fewer than the data shards of an object could be read
	// intact, so its bytes cannot be rebuilt right now.
	ErrReadQuorum = errors.New("erasure: read quorum lost")

	// ErrWriteQuorum: fewer drives than the write quorum accepted a write;
	// the write was rolled back and is not visible.
	ErrWriteQuorum = errors.New("erasure: write quorum lost")
)
