package s3front

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
)

// Bucket default encryption (PutBucketEncryption and friends). The front
// end routes ?encryption to a NotImplemented answer after authenticating
// the request, and its backend interface has no such calls; for a backend
// that encrypts (bucketEncrypter), this middleware takes over the answer
// of an authenticated ?encryption request: it checks access with the front
// end's own rules and serves the request.

// bucketEncrypter is a backend that keeps buckets' default encryption.
type bucketEncrypter interface {
	PutBucketEncryption(ctx context.Context, bucket string, cfg bucketEncryption) error
	GetBucketEncryption(ctx context.Context, bucket string) (*bucketEncryption, error)
	DeleteBucketEncryption(ctx context.Context, bucket string) error
}

func serveBucketEncryption(be backend.Backend, enc bucketEncrypter, iam auth.IAMService) fiber.Handler {
	return serveSubresourceDoc(be, iam, subresourceDoc{
		query: "encryption", getAction: auth.GetEncryptionConfigurationAction, putAction: auth.PutEncryptionConfigurationAction,
		get: func(ctx context.Context, bucket string) ([]byte, error) {
			cfg, err := enc.GetBucketEncryption(ctx, bucket)
			if err != nil {
				return nil, err
			}
			doc := sseConfiguration{XMLNS: "http://s3.amazonaws.com/doc/2006-03-01/", Rules: make([]sseRule, 1)}
			doc.Rules[0].Default.Algorithm, doc.Rules[0].Default.KeyID = string(cfg.Mode), cfg.KeyID
			return marshalDoc(doc), nil
		},
		put: func(ctx context.Context, bucket string, body []byte) error {
			cfg, err := parseEncryption(body)
			if err != nil {
				return err
			}
			return enc.PutBucketEncryption(ctx, bucket, cfg)
		},
		del: enc.DeleteBucketEncryption,
	})
}

// The S3 document of a bucket's default encryption.
type sseConfiguration struct {
	XMLName xml.Name  `xml:"ServerSideEncryptionConfiguration"`
	XMLNS   string    `xml:"xmlns,attr,omitempty"`
	Rules   []sseRule `xml:"Rule"`
}

type sseRule struct {
	Default struct {
		Algorithm string `xml:"SSEAlgorithm"`
		KeyID     string `xml:"KMSMasterKeyID,omitempty"`
	} `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled *bool `xml:"BucketKeyEnabled,omitempty"`
}

// parseEncryption reads a ServerSideEncryptionConfiguration document.
func parseEncryption(body []byte) (bucketEncryption, error) {
	var doc sseConfiguration
	if xml.Unmarshal(body, &doc) != nil || len(doc.Rules) != 1 {
		return bucketEncryption{}, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	d := doc.Rules[0].Default
	switch types.ServerSideEncryption(d.Algorithm) {
	case types.ServerSideEncryptionAes256:
		if d.KeyID != "" {
			return bucketEncryption{}, s3err.GetAPIError(s3err.ErrMalformedXML)
		}
	case types.ServerSideEncryptionAwsKms, types.ServerSideEncryptionAwsKmsDsse:
		d.Algorithm = string(sseKMS)
	default:
		return bucketEncryption{}, s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	return bucketEncryption{Mode: sseMode(d.Algorithm), KeyID: d.KeyID}, nil
}

var errNoBucketEncryption = s3err.APIError{Code: "ServerSideEncryptionConfigurationNotFoundError",
	Description: "The server side encryption configuration was not found", HTTPStatusCode: http.StatusNotFound}

// PutBucketEncryption sets a bucket's default encryption; its master key
// must exist.
func (b *Backend) PutBucketEncryption(ctx context.Context, bucket string, cfg bucketEncryption) error {
	if _, err := b.managedKey(cfg.Mode, cfg.KeyID); err != nil {
		return err
	}
	doc, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Encryption = doc })
}

// GetBucketEncryption returns a bucket's default encryption.
func (b *Backend) GetBucketEncryption(ctx context.Context, bucket string) (*bucketEncryption, error) {
	own(&bucket)
	bk, err := b.pool.StatBucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	d := defaultEncryption(bk)
	if d == nil {
		return nil, errNoBucketEncryption
	}
	return &bucketEncryption{Mode: d.mode, KeyID: d.keyID}, nil
}

// DeleteBucketEncryption removes a bucket's default encryption.
func (b *Backend) DeleteBucketEncryption(ctx context.Context, bucket string) error {
	return b.setBucket(ctx, bucket, func(bk *objlayer.BucketInfo) { bk.Encryption = nil })
}
