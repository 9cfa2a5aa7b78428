package s3front

import (
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"
)

// Bucket sub-resources the front end routes to a NotImplemented answer
// after authenticating the request, and whose calls its backend interface
// lacks (?encryption, ?lifecycle): a middleware takes over the answer of
// such an authenticated request, checks access with the front end's own
// rules and serves it.

// takeOverSubresource serves requests for the bucket sub-resource query
// that the front end answered NotImplemented, once authenticated.
func takeOverSubresource(query string, serve func(c fiber.Ctx, acct auth.Account) error) fiber.Handler {
	return func(c fiber.Ctx) error {
		err := c.Next()
		if !c.RequestCtx().QueryArgs().Has(query) || c.Response().StatusCode() != http.StatusNotImplemented {
			return err
		}
		acct, ok := utils.ContextKeyAccount.Get(c).(auth.Account)
		if !ok {
			return err // not authenticated: the front end's answer stands
		}
		c.Response().ResetBody()
		c.Response().Header.Del("Content-Type")
		if aerr := serve(c, acct); aerr != nil {
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

// verifyBucketAccess checks that acct may do action on bucket, with the
// front end's rules (owner, ACL, bucket policy, IAM).
func verifyBucketAccess(c fiber.Ctx, be backend.Backend, iam auth.IAMService, acct auth.Account, bucket string, action auth.Action, perm auth.Permission) error {
	isRoot, _ := utils.ContextKeyIsRoot.Get(c).(bool)
	parsedACL, _ := utils.ContextKeyParsedAcl.Get(c).(auth.ACL)
	return auth.VerifyAccess(c, be, auth.AccessOptions{
		Acl: parsedACL, AclPermission: perm, IsRoot: isRoot, Acc: acct, Bucket: bucket,
		Actions: []auth.Action{action}, Iam: iam,
	})
}

// answerEmpty answers status with no body. (fiber's SendStatus writes the
// status text as the body; boto3 takes a 200 whose body is not XML for an
// error it failed to parse.)
func answerEmpty(c fiber.Ctx, status int) error {
	c.Response().ResetBody()
	c.Status(status)
	return nil
}

// subresourceDoc is a bucket sub-resource that is one document: GET answers
// it, PUT stores the request's body (which the front end read whole and
// checked against its signed hash), DELETE removes it.
type subresourceDoc struct {
	query                string
	getAction, putAction auth.Action
	get                  func(ctx context.Context, bucket string) ([]byte, error)
	put                  func(ctx context.Context, bucket string, body []byte) error
	del                  func(ctx context.Context, bucket string) error
}

func serveSubresourceDoc(be backend.Backend, iam auth.IAMService, d subresourceDoc) fiber.Handler {
	return takeOverSubresource(d.query, func(c fiber.Ctx, acct auth.Account) error {
		bucket, _ := splitBucketPath(c.Path())
		action, perm := d.getAction, auth.PermissionRead
		if c.Method() != http.MethodGet {
			action, perm = d.putAction, auth.PermissionWrite
		}
		if err := verifyBucketAccess(c, be, iam, acct, bucket, action, perm); err != nil {
			return err
		}
		ctx := c.RequestCtx()
		switch c.Method() {
		case http.MethodGet:
			doc, err := d.get(ctx, bucket)
			if err != nil {
				return err
			}
			c.Response().Header.SetContentType(fiber.MIMEApplicationXML)
			return c.Status(http.StatusOK).Send(doc)
		case http.MethodPut:
			if err := d.put(ctx, bucket, c.Body()); err != nil {
				return err
			}
			return answerEmpty(c, http.StatusOK)
		case http.MethodDelete:
			if err := d.del(ctx, bucket); err != nil {
				return err
			}
			return answerEmpty(c, http.StatusNoContent)
		}
		return s3err.GetAPIError(s3err.ErrNotImplemented)
	})
}
