// Package admin serves the engine's admin API, under /strata/admin/v1/,
// authenticated with the root credentials (HTTP Basic: the root access key
// and secret; serve it over TLS). The operator reads it for status. An
// address that fails 10 logins within a minute is refused (429) for the
// rest of that minute.
//
//	GET    /strata/admin/v1/info                        version, deployment, pools, sets, drives, capacity
//	GET    /strata/admin/v1/tls                         the certificates served and the CAs trusted, as loaded
//	GET    /strata/admin/v1/heal                        healing progress
//	POST   /strata/admin/v1/heal                        start an integrity scan now
//	GET    /strata/admin/v1/pools/{pool}/decommission   a pool's decommission progress
//	POST   /strata/admin/v1/pools/{pool}/decommission   start decommissioning a pool
//	DELETE /strata/admin/v1/pools/{pool}/decommission   cancel it
//	GET    /strata/admin/v1/buckets/{bucket}/usage      a bucket's usage and quota
//	PUT    /strata/admin/v1/buckets/{bucket}/quota?bytes=N&objects=M   set its quota (both 0: none)
//	GET    /strata/admin/v1/replication                 replication remotes' backlogs, and each bucket's rules and counters
//	POST   /strata/admin/v1/buckets/{bucket}/replication/resync   queue the bucket's versions not yet replicated
//
// A gateway serves only info (Mode "gateway", its volume as Capacity), tls,
// users and replication.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/objlayer"
)

// ErrNoSuchPool answers 404.
var ErrNoSuchPool = errors.New("no such pool")

// ErrInvalid answers 400: a request the API cannot act on as given.
var ErrInvalid = errors.New("invalid request")

// Informer is what every strata process answers: its info and its TLS. A
// gateway is only an Informer; a server is a Node.
type Informer interface {
	Info(ctx context.Context) adminapi.Info
	TLS() adminapi.TLSInfo
}

// Node is what the admin API reads and asks of the server.
type Node interface {
	Informer
	HealStatus() adminapi.HealStatus
	StartScan()
	DecommissionStatus(ctx context.Context, pool string) (adminapi.DecommissionStatus, error)
	StartDecommission(ctx context.Context, pool string) error
	CancelDecommission(ctx context.Context, pool string) error
	BucketUsage(ctx context.Context, bucket string) (adminapi.BucketUsage, error)
	SetBucketQuota(ctx context.Context, bucket string, q adminapi.Quota) error
}

// Replicator is a process that replicates buckets (engine/replicate):
// the replication endpoints exist when the node is one.
type Replicator interface {
	ReplicationStatus(ctx context.Context) (adminapi.ReplicationStatus, error)
	ResyncReplication(ctx context.Context, bucket string) (adminapi.ResyncResult, error)
}

// Users lists the users the process accepts (besides root).
type Users interface {
	Grants() []iam.User
}

// Handler serves the admin API for node, checking the root credentials.
// The heal endpoints exist only when node is a Node; the user listing
// when users is not nil. Over plain HTTP it answers only when allowHTTP.
func Handler(node Informer, users Users, access, secret string, allowHTTP bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+adminapi.Prefix+"info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, node.Info(r.Context())) })
	mux.HandleFunc("GET "+adminapi.Prefix+"tls", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, node.TLS()) })
	if users != nil {
		mux.HandleFunc("GET "+adminapi.Prefix+"users", func(w http.ResponseWriter, _ *http.Request) {
			out := []adminapi.UserInfo{}
			for _, u := range users.Grants() {
				out = append(out, adminapi.UserInfo{AccessKey: u.AccessKey, Policy: string(u.Policy), Buckets: u.Buckets})
			}
			writeJSON(w, out)
		})
	}
	if n, ok := node.(Node); ok {
		mux.HandleFunc("GET "+adminapi.Prefix+"heal", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, n.HealStatus()) })
		mux.HandleFunc("POST "+adminapi.Prefix+"heal", func(w http.ResponseWriter, _ *http.Request) {
			n.StartScan()
			writeJSONStatus(w, http.StatusAccepted, map[string]string{"status": "scan started", "at": time.Now().UTC().Format(time.RFC3339)})
		})
		mux.HandleFunc("GET "+adminapi.Prefix+"pools/{pool}/decommission", func(w http.ResponseWriter, r *http.Request) {
			st, err := n.DecommissionStatus(r.Context(), r.PathValue("pool"))
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, st)
		})
		mux.HandleFunc("POST "+adminapi.Prefix+"pools/{pool}/decommission", func(w http.ResponseWriter, r *http.Request) {
			if err := n.StartDecommission(r.Context(), r.PathValue("pool")); err != nil {
				writeError(w, err)
				return
			}
			writeJSONStatus(w, http.StatusAccepted, map[string]string{"status": "decommission started"})
		})
		mux.HandleFunc("DELETE "+adminapi.Prefix+"pools/{pool}/decommission", func(w http.ResponseWriter, r *http.Request) {
			if err := n.CancelDecommission(r.Context(), r.PathValue("pool")); err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, map[string]string{"status": "decommission cancelled"})
		})
		mux.HandleFunc("GET "+adminapi.Prefix+"buckets/{bucket}/usage", func(w http.ResponseWriter, r *http.Request) {
			u, err := n.BucketUsage(r.Context(), r.PathValue("bucket"))
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, u)
		})
		mux.HandleFunc("PUT "+adminapi.Prefix+"buckets/{bucket}/quota", func(w http.ResponseWriter, r *http.Request) {
			q, err := quotaOf(r.URL.Query())
			if err == nil {
				err = n.SetBucketQuota(r.Context(), r.PathValue("bucket"), q)
			}
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, q)
		})
	}
	if rp, ok := node.(Replicator); ok {
		mux.HandleFunc("GET "+adminapi.Prefix+"replication", func(w http.ResponseWriter, r *http.Request) {
			st, err := rp.ReplicationStatus(r.Context())
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, st)
		})
		mux.HandleFunc("POST "+adminapi.Prefix+"buckets/{bucket}/replication/resync", func(w http.ResponseWriter, r *http.Request) {
			res, err := rp.ResyncReplication(r.Context(), r.PathValue("bucket"))
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, res)
		})
	}
	return authenticated(mux, access, secret, allowHTTP, newLockout())
}

// authenticated serves next to requests signed with the root credentials
// (SigV4, sigv4.go), or carrying them as HTTP Basic over TLS; it refuses
// plain HTTP unless allowHTTP, and locks out addresses that keep failing
// (lockout.go).
func authenticated(next http.Handler, access, secret string, allowHTTP bool, lock *lockout) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !allowHTTP {
			http.Error(w, "admin API: refused over plain HTTP; serve TLS (--certs-dir) or start with --admin-over-http", http.StatusForbidden)
			return
		}
		if locked, left := lock.locked(r.RemoteAddr); locked {
			w.Header().Set("Retry-After", retryAfter(left))
			http.Error(w, "admin API: too many failed logins from this address; retry later", http.StatusTooManyRequests)
			return
		}
		if err := checkCredentials(r, access, secret); err != nil {
			lock.failed(r.RemoteAddr)
			w.Header().Set("WWW-Authenticate", sigV4Scheme)
			http.Error(w, "admin API: "+err.Error(), http.StatusUnauthorized)
			return
		}
		lock.succeeded(r.RemoteAddr)
		next.ServeHTTP(w, r)
	})
}

// checkCredentials accepts a SigV4 signature by the root credentials, or
// (only over TLS, for clients of builds before SigV4) HTTP Basic.
func checkCredentials(r *http.Request, access, secret string) error {
	if strings.HasPrefix(r.Header.Get("Authorization"), sigV4Scheme+" ") {
		return verifySigV4(r, access, secret, time.Now())
	}
	user, pass, ok := r.BasicAuth()
	switch {
	case !ok:
		return errors.New("root credentials required (AWS Signature Version 4)")
	case r.TLS == nil:
		return errors.New("HTTP Basic is refused over plain HTTP: sign with AWS Signature Version 4")
	case subtle.ConstantTimeCompare([]byte(user), []byte(access)) != 1 || subtle.ConstantTimeCompare([]byte(pass), []byte(secret)) != 1:
		return errors.New("root credentials required")
	}
	return nil
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusConflict
	switch {
	case errors.Is(err, ErrNoSuchPool), errors.Is(err, objlayer.ErrBucketNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		code = http.StatusBadRequest
	}
	writeJSONStatus(w, code, map[string]string{"error": err.Error()})
}

// quotaOf reads a quota from the query: bytes and objects, each a
// non-negative integer, absent for zero.
func quotaOf(q url.Values) (adminapi.Quota, error) {
	var out adminapi.Quota
	for name, v := range map[string]*int64{"bytes": &out.Bytes, "objects": &out.Objects} {
		s := q.Get(name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return out, fmt.Errorf("%w: %s=%q is not a non-negative integer", ErrInvalid, name, s)
		}
		*v = n
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
