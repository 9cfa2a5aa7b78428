// Package engine is the operator's seam to a running strata tenant: the
// admin API (status, drives, capacity) and health, through the engine's own
// client (engine/adminclient), and the S3 API (declared buckets).
//
// Reconcilers depend on the Client interface only.
package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/strata-storage/strata/engine/adminclient"
)

// Endpoint is how to reach one tenant.
type Endpoint struct {
	// URL is scheme://host:port of the S3 port (admin and health share it).
	URL string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// CA verifies the tenant's certificate (PEM); empty uses system roots.
	CA []byte
}

// Info is GET /strata/admin/v1/info.
type Info struct {
	Version      string   `json:"version"`
	DeploymentID string   `json:"deploymentID"`
	Pools        []Pool   `json:"pools"`
	Capacity     Capacity `json:"capacity"`
}

// Pool is one pool of Info.
type Pool struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Sets    int     `json:"sets"`
	SetSize int     `json:"setSize"`
	Parity  int     `json:"parity"`
	Drives  []Drive `json:"drives"`
}

// Drive states reported by the admin API.
const (
	DriveOnline      = "online"
	DriveOffline     = "offline"
	DriveHealing     = "healing"
	DriveUnformatted = "unformatted"
)

// Drive is one drive of a Pool.
type Drive struct {
	Endpoint   string `json:"endpoint"`
	Set        int    `json:"set"`
	Index      int    `json:"index"`
	State      string `json:"state"`
	TotalBytes int64  `json:"totalBytes"`
	UsedBytes  int64  `json:"usedBytes"`
	FreeBytes  int64  `json:"freeBytes"`
}

// Capacity of the tenant.
type Capacity struct {
	TotalBytes  int64 `json:"totalBytes"`
	UsedBytes   int64 `json:"usedBytes"`
	FreeBytes   int64 `json:"freeBytes"`
	UsableBytes int64 `json:"usableBytes"`
}

// TLSInfo is GET /strata/admin/v1/tls, the engine's own type
// (adminapi.TLSInfo, named through adminclient): the leaves a pod serves and
// the CAs it trusts, as its TLS stack holds them.
type TLSInfo = adminclient.TLSInfo

// CertInfo is one certificate of a TLSInfo.
type CertInfo = adminclient.CertInfo

// Bucket is a bucket to create, with its versioning state ("" leaves it).
type Bucket struct {
	Name       string
	Versioning string
	// ObjectLock, when set, creates the bucket with object lock; Mode and
	// Days (both or neither) are its default retention.
	ObjectLock *ObjectLock
	// Encryption, when set, is the bucket's default encryption.
	Encryption *Encryption
	// Lifecycle, when set, is the bucket's one lifecycle rule.
	Lifecycle *Lifecycle
	// Notifications, when set, is the bucket's whole notification
	// configuration (no rules: none).
	Notifications *Notifications
}

// Notifications are a bucket's notification rules.
type Notifications struct {
	Rules []NotificationRule
}

// NotificationRule sends Events of the keys matching Prefix and Suffix to
// the target ARN.
type NotificationRule struct {
	ID, ARN        string
	Events         []string
	Prefix, Suffix string
}

// ErrRefused wraps a configuration the tenant refused as written (S3's
// InvalidArgument): its message says what to change.
var ErrRefused = errors.New("refused by the tenant")

// ErrTargetNotLoaded: the tenant's servers do not know a notification
// target the configuration names (yet: they take a change of the
// Tenant's targets when they restart).
var ErrTargetNotLoaded = errors.New("the tenant's servers do not have the notification target yet")

// ObjectLock is a bucket's object lock and default retention.
type ObjectLock struct {
	Mode string // GOVERNANCE or COMPLIANCE; "" with Days 0: no default
	Days int32
}

// Encryption is a bucket's default encryption.
type Encryption struct {
	Algorithm string // AES256 or aws:kms
	KMSKeyID  string
}

// Lifecycle is a rule over the whole bucket; nil fields are not part of it.
type Lifecycle struct {
	ExpirationDays, NoncurrentDays, AbortUploadDays *int32
}

// LifecycleRuleID names the rule the operator keeps.
const LifecycleRuleID = "strata-operator"

// Client talks to a running tenant.
type Client interface {
	// Info reads the admin API.
	Info(ctx context.Context, ep Endpoint) (Info, error)
	// EnsureBuckets creates missing buckets and applies their settings;
	// buckets that exist are left as they are apart from those. A bucket
	// S3 refuses does not stop the others: the error joins a *BucketError
	// for each (FailedBuckets names them). An endpoint that does not
	// answer stops it at once, with no *BucketError.
	EnsureBuckets(ctx context.Context, ep Endpoint, buckets []Bucket) error
	// ClusterHealth asks one server (ep.URL is that pod's address) whether
	// every erasure set has write quorum; with maintenance, whether it still
	// would without this server (the upgrade gate). nil means yes; the
	// error carries the engine's reason.
	ClusterHealth(ctx context.Context, ep Endpoint, maintenance bool) error
	// TLS asks one pod (ep.URL is that pod's address) which certificates
	// it serves and which CAs it trusts, as its TLS stack holds them now:
	// a CA rotation moves leaves to a new CA only once every pod trusts
	// it, and drops the old CA only once no pod serves a leaf of it.
	TLS(ctx context.Context, ep Endpoint) (TLSInfo, error)
	// EnsureOIDCProviders registers web identity issuers with the tenant
	// (IAM's CreateOpenIDConnectProvider) and returns their ARNs.
	EnsureOIDCProviders(ctx context.Context, ep Endpoint, providers []OIDCProvider) ([]string, error)

	// EnsureClaimBucket makes (or finds, marked as the claim's) a
	// BucketClaim's bucket with its versioning, lock and quota;
	// ErrBucketTaken when the name belongs to something else.
	EnsureClaimBucket(ctx context.Context, ep Endpoint, b ClaimBucket) error
	// BucketUsage reads what a bucket holds.
	BucketUsage(ctx context.Context, ep Endpoint, bucket string) (Usage, error)
	// DeleteClaimBucket empties and deletes a claim's bucket (one not
	// marked with owner is left alone).
	DeleteClaimBucket(ctx context.Context, ep Endpoint, bucket, owner string) error
	// EnsurePrincipal makes an IAM user or role with its inline policy
	// and returns its ARN.
	EnsurePrincipal(ctx context.Context, ep Endpoint, p Principal) (string, error)
	// CreateAccessKey makes a key for a user (deleting its keys but keep
	// when it has two already).
	CreateAccessKey(ctx context.Context, ep Endpoint, user, keep string) (AccessKey, error)
	// DeleteAccessKeys deletes a user's keys but keep.
	DeleteAccessKeys(ctx context.Context, ep Endpoint, user, keep string) error
	// DeletePrincipal deletes a user (with its keys) or a role.
	DeletePrincipal(ctx context.Context, ep Endpoint, name string, role bool) error
}

// HTTPClient is the production Client.
type HTTPClient struct {
	// Timeout bounds each call; reconciles must not hang on a dead tenant.
	Timeout time.Duration
	// Cooldown is how long calls to an address that took no connection
	// within a call's time fail at once (ErrUnreachable) before one tries
	// it again; default 30 s (unreachable.go).
	Cooldown time.Duration
}

var _ Client = HTTPClient{}

// transports keeps one transport per CA bundle, so the calls of many
// reconciles to a tenant reuse connections (and TLS sessions) instead of
// dialling for each.
var transports sync.Map // string(CA) -> *http.Transport

func transportFor(ca []byte) (*http.Transport, error) {
	if tr, ok := transports.Load(string(ca)); ok {
		return tr.(*http.Transport), nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("tenant CA is not PEM")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	got, _ := transports.LoadOrStore(string(ca), tr)
	return got.(*http.Transport), nil
}

func (c HTTPClient) timeout() time.Duration {
	if c.Timeout == 0 {
		return 5 * time.Second
	}
	return c.Timeout
}

// transport is the shared transport for ep's CA, holding back calls to
// an address that took no connection a moment ago.
func (c HTTPClient) transport(ep Endpoint) (http.RoundTripper, error) {
	tr, err := transportFor(ep.CA)
	if err != nil {
		return nil, err
	}
	cooldown := c.Cooldown
	if cooldown == 0 {
		cooldown = defaultCooldown
	}
	return holdingTransport{base: tr, cooldown: cooldown}, nil
}

func (c HTTPClient) httpClient(ep Endpoint) (*http.Client, error) {
	tr, err := c.transport(ep)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, Timeout: c.timeout()}, nil
}

// admin returns the engine's admin client for an endpoint.
func (c HTTPClient) admin(ep Endpoint) (*adminclient.Client, error) {
	tr, err := c.transport(ep)
	if err != nil {
		return nil, err
	}
	return adminclient.New(ep.URL, adminclient.Options{AccessKey: ep.AccessKey, SecretKey: ep.SecretKey, Transport: tr, Timeout: c.timeout()})
}

// Info implements Client through the engine's admin client.
func (c HTTPClient) Info(ctx context.Context, ep Endpoint) (Info, error) {
	ac, err := c.admin(ep)
	if err != nil {
		return Info{}, err
	}
	defer ac.Close()
	ai, err := ac.Info(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("admin API: %w", err)
	}
	info := Info{Version: ai.Version, DeploymentID: ai.DeploymentID, Capacity: Capacity{
		TotalBytes: int64(ai.Capacity.TotalBytes), UsedBytes: int64(ai.Capacity.UsedBytes),
		FreeBytes: int64(ai.Capacity.FreeBytes), UsableBytes: int64(ai.Capacity.UsableBytes),
	}}
	for _, p := range ai.Pools {
		pool := Pool{Name: p.Name, State: p.State, Sets: p.Sets, SetSize: p.SetSize, Parity: p.Parity}
		for _, d := range p.Drives {
			pool.Drives = append(pool.Drives, Drive{Endpoint: d.Endpoint, Set: d.Set, Index: d.Index, State: d.State,
				TotalBytes: int64(d.TotalBytes), UsedBytes: int64(d.UsedBytes), FreeBytes: int64(d.FreeBytes)})
		}
		info.Pools = append(info.Pools, pool)
	}
	return info, nil
}

// ClusterHealth implements Client: /strata/health/cluster, with
// ?maintenance=true for the upgrade gate (412 when this server going down
// would break write quorum).
func (c HTTPClient) ClusterHealth(ctx context.Context, ep Endpoint, maintenance bool) error {
	ac, err := c.admin(ep)
	if err != nil {
		return err
	}
	defer ac.Close()
	if err := ac.ClusterHealth(ctx, maintenance); err != nil {
		return fmt.Errorf("cluster health: %w", err)
	}
	return nil
}

// TLS implements Client: GET /strata/admin/v1/tls, signed like Info.
func (c HTTPClient) TLS(ctx context.Context, ep Endpoint) (TLSInfo, error) {
	ac, err := c.admin(ep)
	if err != nil {
		return TLSInfo{}, err
	}
	defer ac.Close()
	info, err := ac.TLS(ctx)
	if err != nil {
		return TLSInfo{}, fmt.Errorf("admin API: %w", err)
	}
	return info, nil
}

// EnsureBuckets implements Client with the S3 API (aws-sdk-go-v2,
// path-style addressing: tenant Services have no wildcard DNS).
func (c HTTPClient) EnsureBuckets(ctx context.Context, ep Endpoint, buckets []Bucket) error {
	hc, err := c.httpClient(ep)
	if err != nil {
		return err
	}
	cl := c.s3Client(ep, hc)
	var errs []error
	for _, b := range buckets {
		err := ensureBucket(ctx, cl, b)
		if tenantWide(err) {
			// Every other bucket would wait as long for the same answer
			// (the operator's reconciles of other tenants behind it).
			return fmt.Errorf("tenant S3 endpoint %s: %w", ep.URL, err)
		}
		if err != nil {
			errs = append(errs, &BucketError{Bucket: b.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}

// tenantWide reports whether err says nothing about the bucket but about
// the tenant: a request that got no answer (the endpoint down, refused,
// timed out), or an answer every bucket would get (the servers failing,
// 5xx; the operator's keys refused, 401 or 403).
func tenantWide(err error) bool {
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		code := resp.HTTPStatusCode()
		return code >= 500 || code == http.StatusUnauthorized || code == http.StatusForbidden
	}
	return false
}

// s3Answer is an error of the SDK with its text cut to what the service
// answered (its code and message): the SDK's own text carries the
// request's ID, which would change a condition's message, and so its
// status, at every pass. The error it wraps stays reachable.
func s3Answer(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() == "" {
		return err
	}
	msg := ae.ErrorCode()
	if m := ae.ErrorMessage(); m != "" {
		msg += ": " + m
	}
	return &answered{err: err, msg: msg}
}

type answered struct {
	err error
	msg string
}

func (a *answered) Error() string { return a.msg }
func (a *answered) Unwrap() error { return a.err }

// BucketError is a declared bucket that could not be applied; its
// message names the bucket.
type BucketError struct {
	Bucket string
	Err    error
}

func (e *BucketError) Error() string { return e.Err.Error() }
func (e *BucketError) Unwrap() error { return e.Err }

// FailedBuckets names the buckets an error of EnsureBuckets says could not
// be applied.
func FailedBuckets(err error) []string {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var names []string
	for _, e := range errs {
		if be := (*BucketError)(nil); errors.As(e, &be) {
			names = append(names, be.Bucket)
		}
	}
	return names
}

// ensureBucket creates one declared bucket when it is missing and applies
// its versioning and defaults.
func ensureBucket(ctx context.Context, cl *s3.Client, b Bucket) error {
	if _, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.Name)}); err != nil {
		var notFound *s3types.NotFound
		if !errors.As(err, &notFound) && !strings.Contains(err.Error(), "StatusCode: 404") {
			return fmt.Errorf("bucket %s: %w", b.Name, s3Answer(err))
		}
		in := &s3.CreateBucketInput{Bucket: aws.String(b.Name)}
		if b.ObjectLock != nil {
			in.ObjectLockEnabledForBucket = aws.Bool(true)
		}
		if _, err := cl.CreateBucket(ctx, in); err != nil {
			var owned *s3types.BucketAlreadyOwnedByYou
			if !errors.As(err, &owned) {
				return fmt.Errorf("creating bucket %s: %w", b.Name, s3Answer(err))
			}
		}
	}
	if b.Versioning != "" {
		_, err := cl.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
			Bucket:                  aws.String(b.Name),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatus(b.Versioning)},
		})
		if err != nil {
			return fmt.Errorf("setting versioning of bucket %s: %w", b.Name, s3Answer(err))
		}
	}
	return ensureBucketDefaults(ctx, cl, b)
}

// ensureBucketDefaults applies a declared bucket's object lock, default
// encryption, lifecycle rule and notifications: a bucket that cannot hold
// the lock declared (S3 turns it on only at creation) is an error, never
// a silent success.
func ensureBucketDefaults(ctx context.Context, cl *s3.Client, b Bucket) error {
	if l := b.ObjectLock; l != nil {
		got, err := cl.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(b.Name)})
		if err != nil || got.ObjectLockConfiguration == nil || got.ObjectLockConfiguration.ObjectLockEnabled != s3types.ObjectLockEnabledEnabled {
			return fmt.Errorf("bucket %s exists without object lock, which S3 turns on only when a bucket is created: "+
				"declare the lock on a new bucket, or remove objectLock from this one (%v)", b.Name, err)
		}
		cfg := &s3types.ObjectLockConfiguration{ObjectLockEnabled: s3types.ObjectLockEnabledEnabled}
		if l.Mode != "" {
			cfg.Rule = &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{
				Mode: s3types.ObjectLockRetentionMode(l.Mode), Days: aws.Int32(l.Days)}}
		}
		if _, err := cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(b.Name), ObjectLockConfiguration: cfg}); err != nil {
			return fmt.Errorf("setting the default retention of bucket %s: %w", b.Name, s3Answer(err))
		}
	}
	if e := b.Encryption; e != nil {
		def := &s3types.ServerSideEncryptionByDefault{SSEAlgorithm: s3types.ServerSideEncryption(e.Algorithm)}
		if e.KMSKeyID != "" {
			def.KMSMasterKeyID = aws.String(e.KMSKeyID)
		}
		if _, err := cl.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String(b.Name),
			ServerSideEncryptionConfiguration: &s3types.ServerSideEncryptionConfiguration{
				Rules: []s3types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: def}}}}); err != nil {
			return fmt.Errorf("setting the default encryption of bucket %s: %w", b.Name, s3Answer(err))
		}
	}
	if lc := b.Lifecycle; lc != nil {
		rule := s3types.LifecycleRule{ID: aws.String(LifecycleRuleID), Status: s3types.ExpirationStatusEnabled, Filter: &s3types.LifecycleRuleFilter{}}
		if lc.ExpirationDays != nil {
			rule.Expiration = &s3types.LifecycleExpiration{Days: lc.ExpirationDays}
		}
		if lc.NoncurrentDays != nil {
			rule.NoncurrentVersionExpiration = &s3types.NoncurrentVersionExpiration{NoncurrentDays: lc.NoncurrentDays}
		}
		if lc.AbortUploadDays != nil {
			rule.AbortIncompleteMultipartUpload = &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: lc.AbortUploadDays}
		}
		if _, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(b.Name),
			LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{rule}}}); err != nil {
			return fmt.Errorf("setting the lifecycle of bucket %s: %w", b.Name, s3Answer(err))
		}
	}
	if n := b.Notifications; n != nil {
		if err := putNotifications(ctx, cl, b.Name, n); err != nil {
			return err
		}
	}
	return nil
}

// putNotifications sets a bucket's notification configuration to n's
// rules (queue configurations: Strata's target ARNs are of that form).
func putNotifications(ctx context.Context, cl *s3.Client, bucket string, n *Notifications) error {
	cfg := &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{}}
	for _, r := range n.Rules {
		q := s3types.QueueConfiguration{Id: aws.String(r.ID), QueueArn: aws.String(r.ARN)}
		for _, e := range r.Events {
			q.Events = append(q.Events, s3types.Event(e))
		}
		var filter []s3types.FilterRule
		if r.Prefix != "" {
			filter = append(filter, s3types.FilterRule{Name: s3types.FilterRuleNamePrefix, Value: aws.String(r.Prefix)})
		}
		if r.Suffix != "" {
			filter = append(filter, s3types.FilterRule{Name: s3types.FilterRuleNameSuffix, Value: aws.String(r.Suffix)})
		}
		if filter != nil {
			q.Filter = &s3types.NotificationConfigurationFilter{Key: &s3types.S3KeyFilter{FilterRules: filter}}
		}
		cfg.QueueConfigurations = append(cfg.QueueConfigurations, q)
	}
	_, err := cl.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(bucket), NotificationConfiguration: cfg})
	switch code := errCode(err); {
	case err == nil:
		return nil
	case code == "InvalidArgument":
		var ae smithy.APIError
		msg := err.Error()
		if errors.As(err, &ae) {
			msg = ae.ErrorMessage()
		}
		if strings.Contains(msg, "Unable to validate the following destination configurations") {
			return fmt.Errorf("%w: the notifications of bucket %s: %s", ErrTargetNotLoaded, bucket, msg)
		}
		return fmt.Errorf("%w: the notifications of bucket %s: %s", ErrRefused, bucket, msg)
	default:
		return fmt.Errorf("setting the notifications of bucket %s: %w", bucket, s3Answer(err))
	}
}
