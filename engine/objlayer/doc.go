// Package objlayer is the contract between Strata's S3 front end and the
// storage under it: the object layer's interface (Layer), the values that
// cross it, and every error it returns. The erasure-coded layer of `strata
// server` (engine/erasure) and the POSIX layer of `strata gateway`
// (engine/posix) implement it; the front end (engine/s3api) is written
// against it alone, so it never sees drives, shards or files.
//
// The package depends on nothing of Strata's: both sides import it, the
// way a protocol's types sit between its client and its server. Metadata
// crosses it as a map the front end owns (header names for what S3
// returns, InternalMetaPrefix for what it keeps to itself); a layer stores
// the map as given and never interprets it, except for the few keys named
// here.
package objlayer
