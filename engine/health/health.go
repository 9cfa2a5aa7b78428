// Package health serves a strata process's health endpoints:
//
//	/strata/health/live      200 while the process serves HTTP
//	/strata/health/ready     200 when it can serve S3 requests
//	/strata/health/cluster   200 when every erasure set has write quorum;
//	                         with ?maintenance=true, 412 when taking this
//	                         node down would break a set's write quorum
//
// They are unauthenticated (kubelet probes them) and reveal no data.
package health

import (
	"encoding/json"
	"net/http"
)

// Paths of the health endpoints.
const (
	PathLive    = "/strata/health/live"
	PathReady   = "/strata/health/ready"
	PathCluster = "/strata/health/cluster"
)

// Checker answers the health questions of a node.
type Checker interface {
	// Ready reports whether S3 requests can be served, and why not.
	Ready() (bool, string)
	// ClusterHealthy reports whether every set has write quorum; with
	// maintenance, whether it would still have it without this node.
	ClusterHealthy(maintenance bool) (bool, string)
}

type answer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func reply(w http.ResponseWriter, ok bool, failCode int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	a := answer{Status: "ok", Reason: reason}
	code := http.StatusOK
	if !ok {
		a.Status, code = "unavailable", failCode
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

// Live always answers 200: the process runs and serves HTTP.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reply(w, true, 0, "") })
}

// Ready answers 200 when the node can serve S3 requests, 503 otherwise.
func Ready(c Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ok, why := c.Ready()
		reply(w, ok, http.StatusServiceUnavailable, why)
	})
}

// Cluster answers 200 when every set has write quorum (503 otherwise); with
// ?maintenance=true it answers 412 when this node going down would break a
// set's write quorum.
func Cluster(c Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		maintenance := r.URL.Query().Get("maintenance") == "true"
		ok, why := c.ClusterHealthy(maintenance)
		code := http.StatusServiceUnavailable
		if maintenance {
			code = http.StatusPreconditionFailed
		}
		reply(w, ok, code, why)
	})
}
