package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/strata-storage/strata/engine/iam"
)

// The objects `strata selftest` writes: one small enough to live inline in
// the version record, one large enough to be striped into shard files (and
// not a multiple of any block size), so both of the server's write paths
// are read back.
const (
	selftestSmall = 4 << 10
	selftestLarge = 1<<20 + 1
)

// selftestPrefix starts the name of every bucket and key the check makes,
// so that anything a killed run leaves behind is recognisable.
const selftestPrefix = "strata-selftest"

type selftest struct {
	endpoint string
	bucket   string
	wait     time.Duration
	// credentials names where the keys came from, and check what to check,
	// for a refusal's message.
	credentials, check string
	s3                 *s3.Client
	out                io.Writer
	// made lists what this run created, newest last, for the clean-up.
	made []madeThing
}

// madeThing is an object version or a bucket (key empty) this run created.
type madeThing struct {
	bucket, key, versionID string
}

func runSelftest(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("strata selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: strata selftest --endpoint URL [--ca-file FILE] [--bucket NAME]

Writes objects to an S3 endpoint, reads them back and compares them, then
deletes them (the check a Helm test of a tenant runs). Without --bucket it
works in a temporary bucket it removes. Credentials come from the
environment as for 'strata server' or, with --aws-credentials, from the
AWS SDK's own chain (static keys in AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, or AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE
traded for a session through STS at AWS_ENDPOINT_URL: what a
BucketAccess's Secret or ConfigMap gives a pod, docs/claims.md). Exits 0
when every step succeeded, 1 with the failing step on standard error
otherwise.

`)
		fs.PrintDefaults()
	}
	endpoint := fs.String("endpoint", "", "S3 endpoint URL, e.g. https://media.storage.svc:443 (required)")
	caFile := fs.String("ca-file", "", "PEM file of the CA that signed the endpoint's certificate, trusted besides the system's")
	bucket := fs.String("bucket", "", "existing bucket to write in; empty: a temporary bucket, removed afterwards")
	region := fs.String("region", "us-east-1", "region the requests are signed for")
	wait := fs.Duration("wait", 0, "how long to keep retrying while the endpoint does not answer yet (a tenant still starting)")
	sdkCreds := fs.Bool("aws-credentials", false, "take credentials from the AWS SDK's default chain (environment, web identity) instead of the root's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "strata selftest: "+format+"\n", a...)
		return code
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	u, err := url.Parse(*endpoint)
	switch {
	case *endpoint == "":
		return fail(2, "--endpoint is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fail(2, "--endpoint %q: want http://HOST:PORT or https://HOST:PORT", *endpoint)
	case *caFile != "" && u.Scheme != "https":
		return fail(2, "--ca-file is only used with an https endpoint")
	}
	hc, err := selftestHTTPClient(*caFile)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer hc.CloseIdleConnections()
	var creds aws.CredentialsProvider
	credsName, check := "root credentials", "check STRATA_ROOT_USER/STRATA_ROOT_PASSWORD or the files they name"
	if *sdkCreds {
		credsName, check = "AWS SDK's credentials", "check the AWS_ variables (a BucketAccess's Secret or ConfigMap) and the bucket"
		cfg, err := config.LoadDefaultConfig(context.Background(), config.WithHTTPClient(hc), config.WithRegion(*region))
		if err != nil || cfg.Credentials == nil {
			return fail(2, "the AWS SDK's credentials: %v", err)
		}
		creds = cfg.Credentials
	} else {
		root, err := iam.RootFromEnv(getenv)
		if err != nil {
			return fail(2, "%v", err)
		}
		creds = credentials.NewStaticCredentialsProvider(root.AccessKey, root.SecretKey, "")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	st := &selftest{
		endpoint: *endpoint, bucket: *bucket, wait: *wait, out: stdout, credentials: credsName, check: check,
		s3: s3.New(s3.Options{
			BaseEndpoint: aws.String(*endpoint), Region: *region, UsePathStyle: true,
			Credentials: creds,
			HTTPClient:  hc,
		}),
	}
	err = st.run(ctx)
	// Clean up even after a failure (the objects of a half-done run are
	// still ours), with a context of its own: ctx may be what ended.
	cleanupCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cleanupErr := st.cleanup(cleanupCtx)
	switch {
	case err != nil:
		if cleanupErr != nil {
			fmt.Fprintf(stderr, "strata selftest: also, cleaning up: %v\n", cleanupErr)
		}
		return fail(1, "FAILED: %v", err)
	case cleanupErr != nil:
		return fail(1, "FAILED: cleaning up: %v", cleanupErr)
	}
	fmt.Fprintf(stdout, "strata selftest: ok: 2 objects written, read back intact and deleted at %s\n", *endpoint)
	return 0
}

// selftestHTTPClient trusts the system's CAs and, when caFile is given, the
// CA in it (a tenant's own CA, from its <tenant>-tls Secret's ca.crt).
func selftestHTTPClient(caFile string) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: time.Minute}, nil
}

func (st *selftest) logf(format string, a ...any) {
	fmt.Fprintf(st.out, "strata selftest: "+format+"\n", a...)
}

func (st *selftest) run(ctx context.Context) error {
	if err := st.waitForEndpoint(ctx); err != nil {
		return err
	}
	if err := st.useBucket(ctx); err != nil {
		return err
	}
	for _, size := range []int{selftestSmall, selftestLarge} {
		if err := st.roundTrip(ctx, size); err != nil {
			return err
		}
	}
	return nil
}

// waitForEndpoint lists buckets until the endpoint answers, for at most
// st.wait: right after `helm install` the tenant's pods may still start.
// Refused credentials end the wait at once.
func (st *selftest) waitForEndpoint(ctx context.Context) error {
	deadline := time.Now().Add(st.wait)
	waiting := false
	for {
		// A bucket given is all the credentials may reach (a claim's).
		var err error
		if st.bucket != "" {
			_, err = st.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.bucket)})
		} else {
			_, err = st.s3.ListBuckets(ctx, &s3.ListBucketsInput{})
		}
		// A bucket that does not exist is an answer too: useBucket says so.
		if err == nil || isNotFound(err) {
			st.logf("%s answers", st.endpoint)
			return nil
		}
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && credentialsRefused(apiErr.ErrorCode()) {
			return fmt.Errorf("%s refuses the %s (%s): %s", st.endpoint, st.credentials, apiErr.ErrorCode(), st.check)
		}
		var untrusted *tls.CertificateVerificationError
		if errors.As(err, &untrusted) {
			return fmt.Errorf("the certificate of %s is not trusted (give the CA that signed it with --ca-file): %w", st.endpoint, untrusted)
		}
		// Said before the deadline is checked: the S3 client's own retries
		// of one call can outlast a short --wait.
		if !waiting && st.wait > 0 {
			st.logf("waiting up to %s for %s: %v", st.wait, st.endpoint, err)
			waiting = true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s does not answer: %w", st.endpoint, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// useBucket checks the given bucket exists, or creates a temporary one.
func (st *selftest) useBucket(ctx context.Context) error {
	if st.bucket != "" {
		_, err := st.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(st.bucket)})
		switch {
		case isNotFound(err):
			return fmt.Errorf("bucket %s does not exist: give an existing bucket, or none for a temporary one", st.bucket)
		case err != nil:
			return fmt.Errorf("bucket %s: %w", st.bucket, err)
		}
		return nil
	}
	st.bucket = selftestPrefix + "-" + randomHex(6)
	if _, err := st.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(st.bucket)}); err != nil {
		return fmt.Errorf("creating bucket %s: %w", st.bucket, err)
	}
	st.made = append(st.made, madeThing{bucket: st.bucket})
	st.logf("created bucket %s", st.bucket)
	return nil
}

// roundTrip writes size random bytes, reads them back, compares, deletes
// the version it wrote and checks the key is gone.
func (st *selftest) roundTrip(ctx context.Context, size int) error {
	want := make([]byte, size)
	if _, err := rand.Read(want); err != nil {
		return err
	}
	key := fmt.Sprintf("%s/%s-%d", selftestPrefix, randomHex(6), size)
	name := st.bucket + "/" + key
	put, err := st.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key), Body: bytes.NewReader(want)})
	if err != nil {
		return fmt.Errorf("writing %s (%d bytes): %w", name, size, err)
	}
	written := madeThing{bucket: st.bucket, key: key, versionID: aws.ToString(put.VersionId)}
	st.made = append(st.made, written)
	st.logf("wrote %s (%d bytes)", name, size)

	get, err := st.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("reading back %s: %w", name, err)
	}
	got, err := io.ReadAll(get.Body)
	get.Body.Close()
	if err != nil {
		return fmt.Errorf("reading back %s: %w", name, err)
	}
	if err := compareObject(want, got); err != nil {
		return fmt.Errorf("%s read back differs from what was written: %w", name, err)
	}
	st.logf("read %s back: identical", name)

	if err := st.delete(ctx, written); err != nil {
		return err
	}
	st.made = st.made[:len(st.made)-1]
	_, err = st.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)})
	if !isNotFound(err) {
		if err == nil {
			return fmt.Errorf("%s still exists after it was deleted", name)
		}
		return fmt.Errorf("checking %s is gone: %w", name, err)
	}
	st.logf("deleted %s", name)
	return nil
}

// compareObject says how got differs from want, or nil.
func compareObject(want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d bytes instead of %d", len(got), len(want))
	}
	i := 0
	for want[i] == got[i] {
		i++
	}
	ws, gs := sha256.Sum256(want), sha256.Sum256(got)
	return fmt.Errorf("first difference at byte %d; sha256 %x written, %x read", i, ws[:8], gs[:8])
}

// delete removes an object version this run wrote, or a bucket it made.
// A version is deleted by its ID where the bucket keeps versions, so that
// no delete marker or old version stays behind.
func (st *selftest) delete(ctx context.Context, m madeThing) error {
	if m.key == "" {
		if _, err := st.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(m.bucket)}); err != nil {
			return fmt.Errorf("removing bucket %s: %w", m.bucket, err)
		}
		st.logf("removed bucket %s", m.bucket)
		return nil
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(m.key)}
	if m.versionID != "" {
		// "null" too: in a bucket whose versioning is suspended, that
		// removes the version instead of adding a delete marker.
		in.VersionId = aws.String(m.versionID)
	}
	if _, err := st.s3.DeleteObject(ctx, in); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", m.bucket, m.key, err)
	}
	return nil
}

// cleanup removes what a run made and did not remove itself, newest first
// (objects before their bucket).
func (st *selftest) cleanup(ctx context.Context) error {
	var errs []error
	for i := len(st.made) - 1; i >= 0; i-- {
		if err := st.delete(ctx, st.made[i]); err != nil {
			errs = append(errs, err)
		}
	}
	st.made = nil
	return errors.Join(errs...)
}

// credentialsRefused reports S3 error codes that waiting will not change:
// the endpoint is up and refuses the credentials.
func credentialsRefused(code string) bool {
	switch code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied":
		// Not a HEAD's body-less 403 (Forbidden): for a bucket, it is
		// also what an access just made answers until its policy reaches
		// every server.
		return true
	}
	return false
}

func isNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotFound" || apiErr.ErrorCode() == "NoSuchKey" || apiErr.ErrorCode() == "NoSuchBucket")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
