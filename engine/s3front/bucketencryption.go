package s3front

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/strata-storage/strata/engine/erasure"
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
	return func(c fiber.Ctx) error {
		err := c.Next()
		if !c.RequestCtx().QueryArgs().Has("encryption") || c.Response().StatusCode() != http.StatusNotImplemented {
			return err
		}
		acct, ok := utils.ContextKeyAccount.Get(c).(auth.Account)
		if !ok {
			return err // not authenticated: the front end's answer stands
		}
		c.Response().ResetBody()
		c.Response().Header.Del("Content-Type")
		if aerr := encryptionRequest(c, be, enc, iam, acct); aerr != nil {
			var s3e s3err.S3Error
			if !errors.As(aerr, &s3e) {
				s3e = s3err.GetAPIError(s3err.ErrInternalError)
			}
			base := s3e.BaseError()
			return writeError(c, &base)
		}
		return nil
	}
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

func encryptionRequest(c fiber.Ctx, be backend.Backend, enc bucketEncrypter, iam auth.IAMService, acct auth.Account) error {
	bucket, _ := splitBucketPath(c.Path())
	action, perm := auth.GetEncryptionConfigurationAction, auth.PermissionRead
	if c.Method() != http.MethodGet {
		action, perm = auth.PutEncryptionConfigurationAction, auth.PermissionWrite
	}
	isRoot, _ := utils.ContextKeyIsRoot.Get(c).(bool)
	parsedACL, _ := utils.ContextKeyParsedAcl.Get(c).(auth.ACL)
	if err := auth.VerifyAccess(c, be, auth.AccessOptions{
		Acl: parsedACL, AclPermission: perm, IsRoot: isRoot, Acc: acct, Bucket: bucket,
		Actions: []auth.Action{action}, Iam: iam,
	}); err != nil {
		return err
	}
	ctx := c.RequestCtx()
	switch c.Method() {
	case http.MethodGet:
		cfg, err := enc.GetBucketEncryption(ctx, bucket)
		if err != nil {
			return err
		}
		doc := sseConfiguration{XMLNS: "http://s3.amazonaws.com/doc/2006-03-01/", Rules: make([]sseRule, 1)}
		doc.Rules[0].Default.Algorithm, doc.Rules[0].Default.KeyID = string(cfg.Mode), cfg.KeyID
		c.Response().Header.SetContentType(fiber.MIMEApplicationXML)
		return c.Status(http.StatusOK).Send(marshalDoc(doc))
	case http.MethodPut:
		// The front end read the body whole and checked it against its
		// signed hash.
		var doc sseConfiguration
		if xml.Unmarshal(c.Body(), &doc) != nil || len(doc.Rules) != 1 {
			return s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		d := doc.Rules[0].Default
		switch types.ServerSideEncryption(d.Algorithm) {
		case types.ServerSideEncryptionAes256:
			if d.KeyID != "" {
				return s3err.GetAPIError(s3err.ErrMalformedXML)
			}
		case types.ServerSideEncryptionAwsKms, types.ServerSideEncryptionAwsKmsDsse:
			d.Algorithm = string(sseKMS)
		default:
			return s3err.GetAPIError(s3err.ErrMalformedXML)
		}
		if err := enc.PutBucketEncryption(ctx, bucket, bucketEncryption{Mode: sseMode(d.Algorithm), KeyID: d.KeyID}); err != nil {
			return err
		}
		return c.SendStatus(http.StatusOK)
	case http.MethodDelete:
		if err := enc.DeleteBucketEncryption(ctx, bucket); err != nil {
			return err
		}
		return c.SendStatus(http.StatusNoContent)
	}
	return s3err.GetAPIError(s3err.ErrNotImplemented)
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
	return b.setBucket(ctx, bucket, func(bk *erasure.BucketInfo) { bk.Encryption = doc })
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
	return b.setBucket(ctx, bucket, func(bk *erasure.BucketInfo) { bk.Encryption = nil })
}
