// Package admin serves the engine's admin API, under /strata/admin/v1/,
// authenticated with the root credentials (HTTP Basic: the root access key
// and secret; serve it over TLS). The operator reads it for status.
//
//	GET /strata/admin/v1/info   version, deployment, pools, sets, drives, capacity
//	GET /strata/admin/v1/heal   healing progress (server only)
//	POST /strata/admin/v1/heal  start an integrity scan now (server only)
//
// A gateway serves only info (Mode "gateway", its volume as Capacity).
package admin

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"time"

	"github.com/strata-storage/strata/engine/erasure"
)

// Prefix of the admin API.
const Prefix = "/strata/admin/v1/"

// Info describes a node's view of the deployment.
type Info struct {
	Version         string     `json:"version"`
	ProtocolVersion int        `json:"protocolVersion"`
	DeploymentID    string     `json:"deploymentID"`
	Mode            string     `json:"mode"`
	Uptime          string     `json:"uptime"`
	Pools           []PoolInfo `json:"pools"`
	Capacity        Capacity   `json:"capacity"`
}

// PoolInfo is one server pool.
type PoolInfo struct {
	Name    string      `json:"name"`
	State   string      `json:"state"`
	Sets    int         `json:"sets"`
	SetSize int         `json:"setSize"`
	Parity  int         `json:"parity"`
	Drives  []DriveInfo `json:"drives"`
}

// DriveInfo is one drive.
type DriveInfo struct {
	Endpoint   string `json:"endpoint"`
	Set        int    `json:"set"`
	Index      int    `json:"index"`
	State      string `json:"state"`
	TotalBytes uint64 `json:"totalBytes"`
	UsedBytes  uint64 `json:"usedBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
}

// Capacity sums the drives: raw bytes, and usable bytes after parity.
type Capacity struct {
	TotalBytes  uint64 `json:"totalBytes"`
	UsedBytes   uint64 `json:"usedBytes"`
	FreeBytes   uint64 `json:"freeBytes"`
	UsableBytes uint64 `json:"usableBytes"`
}

// Informer is what every strata process answers: its info. A gateway is
// only an Informer; a server is a Node.
type Informer interface {
	Info() Info
}

// Node is what the admin API reads and asks of the server.
type Node interface {
	Informer
	HealStatus() erasure.HealStatus
	StartScan()
}

// Handler serves the admin API for node, checking the root credentials.
// The heal endpoints exist only when node is a Node.
func Handler(node Informer, access, secret string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"info", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, node.Info()) })
	if n, ok := node.(Node); ok {
		mux.HandleFunc("GET "+Prefix+"heal", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, n.HealStatus()) })
		mux.HandleFunc("POST "+Prefix+"heal", func(w http.ResponseWriter, _ *http.Request) {
			n.StartScan()
			writeJSONStatus(w, http.StatusAccepted, map[string]string{"status": "scan started", "at": time.Now().UTC().Format(time.RFC3339)})
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(access)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(secret)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="strata admin"`)
			http.Error(w, "admin API: root credentials required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
