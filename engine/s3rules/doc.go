// Package s3rules holds S3's rules as pure functions over values: the
// conditions of conditional requests, byte ranges, listing encodings, tags,
// names, access control lists, bucket policies and their conditions,
// object lock, CORS and the public access block. Both storage modes'
// requests are judged by them (engine/s3api calls them for `strata server`
// and `strata gateway` alike), and the lifecycle worker uses the lock
// rules, so nothing here knows about HTTP servers, storage or clocks (the
// time is always given). Every refusal is an engine/s3err answer.
package s3rules
