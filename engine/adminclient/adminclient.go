// Package adminclient is the Go client of a strata process's non-S3 HTTP
// endpoints: the admin API (with the root credentials) and the health
// endpoints. The operator uses it; it is the one place that knows the
// paths, and the response types are the engine's own (package admin), so
// both sides agree on the shapes by construction.
package adminclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/health"
)

// Client talks to one strata process (or a Service in front of several).
type Client struct {
	base                 string
	accessKey, secretKey string
	hc                   *http.Client
	shared               bool
}

// Options configure a Client.
type Options struct {
	// AccessKey and SecretKey are the root credentials (admin API).
	AccessKey, SecretKey string
	// CA verifies the server's certificate (PEM); empty: system roots.
	CA []byte
	// Timeout bounds each call; default 5 s.
	Timeout time.Duration
	// ServerName, when set, is the name verified in the server's
	// certificate instead of the URL's host (a pod reached by its IP).
	ServerName string
	// DialContext, when set, makes the connections (say, from another
	// network namespace).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Transport, when set, carries the requests instead of a transport of
	// the client's own (CA, ServerName and DialContext are then the
	// transport's business); Close leaves its connections alone.
	Transport http.RoundTripper
}

// New returns a client of the process at baseURL (scheme://host:port).
func New(baseURL string, opts Options) (*Client, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Transport != nil {
		return &Client{base: strings.TrimSuffix(baseURL, "/"), accessKey: opts.AccessKey, secretKey: opts.SecretKey,
			hc: &http.Client{Transport: opts.Transport, Timeout: opts.Timeout}, shared: true}, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(opts.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.CA) {
			return nil, errors.New("adminclient: CA is not PEM")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if opts.ServerName != "" {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.ServerName = opts.ServerName
	}
	if opts.DialContext != nil {
		tr.DialContext = opts.DialContext
	}
	return &Client{
		base: strings.TrimSuffix(baseURL, "/"), accessKey: opts.AccessKey, secretKey: opts.SecretKey,
		hc: &http.Client{Transport: tr, Timeout: opts.Timeout},
	}, nil
}

// Close releases idle connections (those of a transport of its own).
func (c *Client) Close() {
	if !c.shared {
		c.hc.CloseIdleConnections()
	}
}

// StatusError is an answer other than success, with the server's reason.
type StatusError struct {
	Code   int
	Reason string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Reason)
}

func (c *Client) do(ctx context.Context, method, path string, auth bool, out any) error {
	resp, err := c.send(ctx, method, path, auth, false)
	if err == nil && auth && resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		// A build from before SigV4 (it announces Basic): during an
		// upgrade, ask it the old way.
		resp.Body.Close()
		resp, err = c.send(ctx, method, path, auth, true)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		reason := strings.TrimSpace(string(body[:min(len(body), 300)]))
		var j struct{ Error, Reason string }
		if json.Unmarshal(body, &j) == nil && j.Error+j.Reason != "" {
			reason = j.Error + j.Reason
		}
		return &StatusError{Code: resp.StatusCode, Reason: reason}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// send makes one request, signed with SigV4 by the root credentials (or,
// for old builds, carrying them as HTTP Basic) when auth.
func (c *Client) send(ctx context.Context, method, path string, auth, basic bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	switch {
	case auth && basic:
		req.SetBasicAuth(c.accessKey, c.secretKey)
	case auth:
		if err := adminapi.Sign(req, c.accessKey, c.secretKey, time.Now()); err != nil {
			return nil, err
		}
	}
	return c.hc.Do(req)
}

// Info reads the deployment as the process sees it.
func (c *Client) Info(ctx context.Context) (adminapi.Info, error) {
	var info adminapi.Info
	err := c.do(ctx, http.MethodGet, adminapi.Prefix+"info", true, &info)
	return info, err
}

// TLSInfo and CertInfo are the admin API's (package admin), named here
// so the operator, which imports no engine package but this one, can name
// them too.
type (
	TLSInfo  = adminapi.TLSInfo
	CertInfo = adminapi.CertInfo
)

// TLS reads the certificates the process serves and the CAs it trusts, as
// its TLS stack holds them now.
func (c *Client) TLS(ctx context.Context) (adminapi.TLSInfo, error) {
	var info adminapi.TLSInfo
	err := c.do(ctx, http.MethodGet, adminapi.Prefix+"tls", true, &info)
	return info, err
}

// Users lists the users the process accepts besides root (no secrets).
func (c *Client) Users(ctx context.Context) ([]adminapi.UserInfo, error) {
	var users []adminapi.UserInfo
	err := c.do(ctx, http.MethodGet, adminapi.Prefix+"users", true, &users)
	return users, err
}

// Heal reads the healing progress.
func (c *Client) Heal(ctx context.Context) (adminapi.HealStatus, error) {
	var st adminapi.HealStatus
	err := c.do(ctx, http.MethodGet, adminapi.Prefix+"heal", true, &st)
	return st, err
}

// StartScan starts an integrity scan.
func (c *Client) StartScan(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, adminapi.Prefix+"heal", true, nil)
}

func decommissionPath(pool string) string {
	return adminapi.Prefix + "pools/" + url.PathEscape(pool) + "/decommission"
}

// Decommission reads a pool's decommission progress.
func (c *Client) Decommission(ctx context.Context, pool string) (adminapi.DecommissionStatus, error) {
	var st adminapi.DecommissionStatus
	err := c.do(ctx, http.MethodGet, decommissionPath(pool), true, &st)
	return st, err
}

// StartDecommission starts draining a pool.
func (c *Client) StartDecommission(ctx context.Context, pool string) error {
	return c.do(ctx, http.MethodPost, decommissionPath(pool), true, nil)
}

// CancelDecommission stops draining a pool.
func (c *Client) CancelDecommission(ctx context.Context, pool string) error {
	return c.do(ctx, http.MethodDelete, decommissionPath(pool), true, nil)
}

// Ready reports whether the process serves S3 (nil) or why not.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, health.PathReady, false, nil)
}

// ClusterHealth reports whether every erasure set has write quorum (nil);
// with maintenance, whether it still would without this process (the
// upgrade gate: a 412 StatusError when not).
func (c *Client) ClusterHealth(ctx context.Context, maintenance bool) error {
	p := health.PathCluster
	if maintenance {
		p += "?maintenance=true"
	}
	return c.do(ctx, http.MethodGet, p, false, nil)
}

func bucketPath(bucket, what string) string {
	return adminapi.Prefix + "buckets/" + url.PathEscape(bucket) + "/" + what
}

// BucketUsage reads a bucket's usage and quota.
func (c *Client) BucketUsage(ctx context.Context, bucket string) (adminapi.BucketUsage, error) {
	var u adminapi.BucketUsage
	err := c.do(ctx, http.MethodGet, bucketPath(bucket, "usage"), true, &u)
	return u, err
}

// SetBucketQuota sets a bucket's quota (the zero Quota removes it).
func (c *Client) SetBucketQuota(ctx context.Context, bucket string, q adminapi.Quota) error {
	p := fmt.Sprintf("%s?bytes=%d&objects=%d", bucketPath(bucket, "quota"), q.Bytes, q.Objects)
	return c.do(ctx, http.MethodPut, p, true, nil)
}

// Replication reads the node's replication status.
func (c *Client) Replication(ctx context.Context) (adminapi.ReplicationStatus, error) {
	var st adminapi.ReplicationStatus
	err := c.do(ctx, http.MethodGet, adminapi.Prefix+"replication", true, &st)
	return st, err
}

// ResyncReplication queues a bucket's versions not yet replicated.
func (c *Client) ResyncReplication(ctx context.Context, bucket string) (adminapi.ResyncResult, error) {
	var res adminapi.ResyncResult
	err := c.do(ctx, http.MethodPost, bucketPath(bucket, "replication/resync"), true, &res)
	return res, err
}
