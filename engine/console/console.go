// Package console is the tenant's web console: pages a person signs in to
// with S3 credentials to browse and move objects, see the tenant's health
// and its users. It is served by `strata server` and `strata gateway` on a
// port of its own (a separate origin from S3, so an object served by S3
// can never run script with the console's cookie; docs/decisions.md).
//
// The console holds no authority of its own: every page is answered by
// S3, IAM or admin API requests signed with the signed-in person's
// credentials and sent to the process's own S3 listener, so it shows and
// does exactly what those credentials may, through the same checks as any
// client.
package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/certfiles"
	"github.com/strata-storage/strata/engine/s3http"
)

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = time.Hour

// Options are what a process's flags say of its console.
type Options struct {
	// Address is host:port the console listens on; empty: no console.
	Address string
	// PublicS3URL is the S3 endpoint presigned links point to
	// (scheme://host[:port]); empty: the console's own host name with the
	// S3 listener's port.
	PublicS3URL string
	// PublicS3Port, without PublicS3URL, is the port presigned links name
	// with the console's host name (the S3 Service's port in Kubernetes);
	// 0: the S3 listener's.
	PublicS3Port int
	// SessionTTL is how long a sign-in lasts; 0: DefaultSessionTTL.
	SessionTTL time.Duration
	// PrometheusURL is a Prometheus scraping the tenant, whose HTTP API
	// the tenant page's charts read (empty: no charts);
	// PrometheusSelector the label matchers of the tenant's series there
	// (`tenant="media",namespace="store"`; empty: every series).
	PrometheusURL      string
	PrometheusSelector string
	// OIDC is single sign-on through an issuer the tenant trusts.
	OIDC OIDC
}

// Config configures a console.
type Config struct {
	Options
	// Listener, when set, is used instead of listening on Address.
	Listener net.Listener
	// CertsDir holds tls.crt and tls.key (the S3 listener's); empty serves
	// plain HTTP, which a browser then treats as an insecure page.
	CertsDir            string
	CertsReloadInterval time.Duration
	// S3Address is the process's own S3 listener (host:port; an empty or
	// unspecified host is reached on loopback), S3TLS whether it serves
	// TLS.
	S3Address string
	S3TLS     bool
	// S3Leaf returns the certificate the S3 listener serves now: the
	// console's requests to it trust that certificate and no other.
	S3Leaf func() *x509.Certificate
	// RootSecret seals the session cookies (all servers of a tenant share
	// it, so a session is good on each).
	RootSecret string
	// Limits bound the console's connections as the S3 listener's are.
	Limits s3http.Limits
	// IssuerClient reaches the OIDC issuer (nil: the system's roots).
	IssuerClient *http.Client
	Log          *slog.Logger
}

// Console is the web console's handler.
type Console struct {
	cfg       Config
	sessions  *sessions
	transport *http.Transport
	// prometheus reads the charts' series (system roots over HTTPS).
	prometheus *http.Client
	s3Host     string
	// issuer is the single sign-on's issuer (nil: none).
	issuer *issuer
	mux    *http.ServeMux
}

// New makes a console from cfg.
func New(cfg Config) (*Console, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.S3TLS && cfg.S3Leaf == nil {
		return nil, errors.New("console: an S3 listener with TLS needs S3Leaf, the certificate it serves")
	}
	ses, err := newSessions(cfg.RootSecret, cfg.SessionTTL, cfg.CertsDir != "")
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(cfg.S3Address)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	c := &Console{cfg: cfg, sessions: ses, s3Host: net.JoinHostPort(host, port), mux: http.NewServeMux(),
		prometheus: &http.Client{Timeout: 10 * time.Second}}
	if o := cfg.OIDC; o.Issuer != "" {
		if o.ClientID == "" || o.RoleARN == "" {
			return nil, errors.New("console: single sign-on through an OIDC issuer needs its client ID and the role to assume")
		}
		hc := cfg.IssuerClient
		if hc == nil {
			hc = &http.Client{Timeout: 15 * time.Second}
		}
		c.issuer = &issuer{client: hc, url: o.Issuer}
	}
	c.transport = http.DefaultTransport.(*http.Transport).Clone()
	c.transport.Proxy = nil
	c.transport.MaxIdleConnsPerHost = 64
	if cfg.S3TLS {
		c.transport.TLSClientConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The S3 listener is this process: its certificate names the
			// tenant's Service, not the loopback address dialled, so the
			// chain is not checked by name; the console trusts exactly the
			// leaf the listener serves now, compared byte for byte.
			InsecureSkipVerify: true, //nolint:gosec // pinned to the served leaf in VerifyPeerCertificate
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				leaf := cfg.S3Leaf()
				if leaf == nil || len(raw) == 0 || !bytes.Equal(leaf.Raw, raw[0]) {
					return errors.New("console: the S3 listener presented a certificate it does not serve")
				}
				return nil
			},
		}
	}
	c.routes()
	return c, nil
}

// ServeHTTP serves the console's pages and API.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// A strict policy: the pages load only their own script and style
	// files, run no inline script, and may not be framed.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if c.sessions.secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	c.mux.ServeHTTP(w, r)
}

// Start listens on cfg.Address and serves the console until ctx ends; an
// empty address starts nothing. A console that cannot be set up or bound
// fails the start; one that stops later is logged.
func Start(ctx context.Context, cfg Config) error {
	if cfg.Address == "" {
		return nil
	}
	c, err := New(cfg)
	if err != nil {
		return err
	}
	if c.cfg.Listener == nil {
		if c.cfg.Listener, err = net.Listen("tcp", cfg.Address); err != nil {
			return err
		}
	}
	go func() {
		if err := Serve(ctx, c); err != nil {
			c.cfg.Log.Error("the console stopped", "err", err)
		}
	}()
	return nil
}

// Serve runs the console's listener until ctx ends.
func Serve(ctx context.Context, c *Console) error {
	cfg := c.cfg
	hc := s3http.Config{Address: cfg.Address, Listener: cfg.Listener, Log: cfg.Log, Limits: cfg.Limits,
		Handler: s3http.HandlerFunc(func(w http.ResponseWriter, r *s3http.Request) { c.ServeHTTP(w, r.Request) })}
	if cfg.CertsDir != "" {
		pair := certfiles.NewKeyPair(filepath.Join(cfg.CertsDir, certfiles.CertFile), filepath.Join(cfg.CertsDir, certfiles.KeyFile),
			certfiles.Interval(cfg.CertsReloadInterval))
		if _, err := pair.Get(); err != nil {
			return err
		}
		hc.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.Get() }}
	}
	srv, err := s3http.NewServer(hc)
	if err != nil {
		return err
	}
	cfg.Log.Info("serving the console", "address", cfg.Address, "tls", cfg.CertsDir != "")
	return srv.Serve(ctx)
}

// publicS3 is the S3 endpoint presigned links name, for a page served as
// host.
func (c *Console) publicS3(host string) (endpoint string, secure bool) {
	if u := c.cfg.PublicS3URL; u != "" {
		secure = strings.HasPrefix(u, "https://")
		return strings.TrimPrefix(strings.TrimPrefix(strings.TrimSuffix(u, "/"), "https://"), "http://"), secure
	}
	_, port, _ := net.SplitHostPort(c.cfg.S3Address)
	if c.cfg.PublicS3Port > 0 {
		port = strconv.Itoa(c.cfg.PublicS3Port)
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	return net.JoinHostPort(strings.Trim(name, "[]"), port), c.cfg.S3TLS
}
