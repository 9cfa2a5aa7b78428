package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
	"github.com/aws/smithy-go/middleware"
)

// Target is an S3 service under test: one or more endpoints (replicas of one
// gateway, say) sharing one set of credentials.
type Target struct {
	Name      string
	Endpoints []string
	AccessKey string
	SecretKey string
	Region    string
}

// ClientOptions choose what the load generator spends CPU on. By default it
// sends UNSIGNED-PAYLOAD and no checksums: on 2 cores the client competes
// with the server, and hashing every byte twice would measure the client.
type ClientOptions struct {
	Concurrency int
	SignPayload bool // SigV4 over the SHA-256 of the body, as a plain-HTTP SDK default does
	Checksums   bool // the SDK's default CRC32 on uploads and validation on downloads
	// FullSDK keeps every middleware of the SDK's stack and its endpoint
	// rules engine; by default the purely informational ones are dropped.
	FullSDK bool
}

// Client settings as reports name them.
const (
	leanClients    = "lean"     // the load generator's default: see ClientOptions
	defaultClients = "defaults" // the SDK's own: signed payloads, checksums, whole stack
)

// withSDKDefaults returns o with every setting at the SDK's default.
func (o ClientOptions) withSDKDefaults() ClientOptions {
	o.SignPayload, o.Checksums, o.FullSDK = true, true, true
	return o
}

// settings names o for reports: lean, defaults, or the flags in between.
func (o ClientOptions) settings() string {
	var on []string
	for _, f := range []struct {
		set  bool
		name string
	}{{o.SignPayload, "sign-payload"}, {o.Checksums, "checksums"}, {o.FullSDK, "full-sdk"}} {
		if f.set {
			on = append(on, f.name)
		}
	}
	switch len(on) {
	case 0:
		return leanClients
	case 3:
		return defaultClients
	}
	return strings.Join(on, "+")
}

// newTransport returns an HTTP/1.1 transport that keeps a connection per
// client alive, with large buffers so a 1 MiB body is not copied in 4 KiB
// syscalls.
func newTransport(concurrency int) *http.Transport {
	return &http.Transport{
		Proxy: nil, // loopback only, never through a proxy from the environment
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0, // no global cap
		MaxIdleConnsPerHost:   2 * concurrency,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
}

// newS3Clients returns one client per endpoint of t, all sharing transport.
func newS3Clients(t Target, o ClientOptions, transport *http.Transport) []*s3.Client {
	httpClient := &http.Client{Transport: transport}
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	clients := make([]*s3.Client, 0, len(t.Endpoints))
	for _, ep := range t.Endpoints {
		opts := s3.Options{
			BaseEndpoint: aws.String(ep),
			Region:       region,
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(t.AccessKey, t.SecretKey, ""),
			HTTPClient:   httpClient,
			// Every failure is counted, none retried away.
			Retryer: aws.NopRetryer{},
			// No Expect: 100-continue round trip before large PUTs.
			ContinueHeaderThresholdBytes:              -1,
			RequestChecksumCalculation:                aws.RequestChecksumCalculationWhenRequired,
			ResponseChecksumValidation:                aws.ResponseChecksumValidationWhenRequired,
			DisableLogOutputChecksumValidationSkipped: true,
		}
		if o.Checksums {
			opts.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported
			opts.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
		}
		if !o.SignPayload {
			opts.APIOptions = append(opts.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		}
		if !o.FullSDK {
			if u, err := url.Parse(ep); err == nil {
				opts.EndpointResolverV2 = pathStyleResolver{base: *u}
			}
			opts.APIOptions = append(opts.APIOptions, removeInformationalMiddleware)
		}
		clients = append(clients, s3.New(opts))
	}
	return clients
}

// pathStyleResolver resolves every request to ENDPOINT/BUCKET. The SDK's
// rules engine reaches the same URL for a custom path-style endpoint, but
// evaluates a decision graph and parses the URL again on every request.
type pathStyleResolver struct{ base url.URL }

func (r pathStyleResolver) ResolveEndpoint(_ context.Context, p s3.EndpointParameters) (smithyendpoints.Endpoint, error) {
	u := r.base
	if p.Bucket != nil {
		u.Path = "/" + *p.Bucket // bucket names never need escaping
	}
	return smithyendpoints.Endpoint{URI: u}, nil
}

// removeInformationalMiddleware drops the steps of the SDK's stack that
// only add telemetry headers (invocation ID, attempt count, user agent),
// record timings, log or trace: nothing a server needs, and each costs
// allocations on every request. A step this SDK version lacks is skipped.
func removeInformationalMiddleware(s *middleware.Stack) error {
	for _, id := range []string{"ClientRequestID", "UserAgent", "RecursionDetection"} {
		_, _ = s.Build.Remove(id)
	}
	_, _ = s.Serialize.Remove("isExpressUserAgent")
	for _, id := range []string{"RetryMetricsHeader", "spanRetryLoop"} {
		_, _ = s.Finalize.Remove(id)
	}
	for _, id := range []string{"RecordResponseTiming", "RequestResponseLogger"} {
		_, _ = s.Deserialize.Remove(id)
	}
	return nil
}

// ensureBucket creates bucket unless it exists already.
func ensureBucket(ctx context.Context, c *s3.Client, bucket string) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err == nil || errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	return err
}

// waitS3 polls ListBuckets until the target answers it, or ctx ends.
func waitS3(ctx context.Context, c *s3.Client) error {
	var last error
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.ListBuckets(reqCtx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errorCode shortens an SDK error to its S3 code when it has one.
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	return err.Error()
}
