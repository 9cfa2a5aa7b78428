// Package internal holds the operator's internals: pure builders (spec to
// Kubernetes objects), placement and erasure-layout math, certificates,
// upgrade gating and status computation. Sub-packages arrive with the
// reconcilers; nothing here talks to the API server.
package internal
