// Package engine is the storage engine the strata binary runs: the S3 front
// end, the erasure-coded object layer, drives, cluster membership and the
// POSIX gateway. Nothing under engine/ imports operator code or Kubernetes;
// the operator talks to the engine only over HTTP.
package engine
