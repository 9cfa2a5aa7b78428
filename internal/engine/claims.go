package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/strata-storage/strata/engine/adminapi"
)

// What the operator does in a tenant for BucketClaims and BucketAccesses:
// buckets marked with the claim that owns them, their quotas, and IAM
// users (static keys) or roles (web identity) whose one inline policy
// reaches the claimed buckets.

// ClaimTag is the bucket tag naming the claim (its UID) that owns a
// bucket: a claim takes only a bucket it made, never one that exists
// otherwise (another namespace's, one of spec.buckets, one made through
// S3).
const ClaimTag = "strata.dev/claim-uid"

// ClaimNameTag names the owning claim for people: NAMESPACE/NAME.
const ClaimNameTag = "strata.dev/claim"

// ClaimPolicyName is the name of the inline policy of a claim's user or
// role.
const ClaimPolicyName = "strata-bucket-access"

// ErrBucketTaken: the bucket exists and no claim of this UID made it.
var ErrBucketTaken = errors.New("the bucket exists and belongs to something else")

// Quota is a bucket's hard quota; 0 is no limit on that figure.
type Quota = adminapi.Quota

// Usage is what a bucket holds.
type Usage struct {
	Bytes, Objects int64
}

// ClaimBucket is a claim's bucket as the tenant is to hold it.
type ClaimBucket struct {
	Bucket
	// Owner is the claim's UID; OwnerName is NAMESPACE/NAME.
	Owner, OwnerName string
	Quota            Quota
}

// Principal is an IAM user or role a BucketAccess makes.
type Principal struct {
	Name, Path string
	// Policy is the inline policy document.
	Policy string
	// Trust is a role's trust policy; empty for a user.
	Trust string
	// KeyID, for a user, is the access key the operator handed out, which
	// must still be the user's: EnsurePrincipal answers ErrKeyGone when
	// it is not (the user or the key deleted through IAM). Empty: none.
	KeyID string
}

// ErrKeyGone is EnsurePrincipal's answer when the user is as it should
// be but Principal.KeyID is no longer one of its keys.
var ErrKeyGone = errors.New("the access key handed out is no longer the user's")

func (c HTTPClient) s3Client(ep Endpoint, hc *http.Client) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(ep.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ep.AccessKey, ep.SecretKey, ""),
		HTTPClient:  hc, RetryMaxAttempts: 2,
	})
}

func (c HTTPClient) iamClient(ep Endpoint, hc *http.Client) *iam.Client {
	return iam.New(iam.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(ep.URL),
		Credentials: credentials.NewStaticCredentialsProvider(ep.AccessKey, ep.SecretKey, ""),
		HTTPClient:  hc, RetryMaxAttempts: 2,
	})
}

// withClients runs fn with an S3 and an IAM client of the tenant.
func (c HTTPClient) withClients(ep Endpoint, fn func(s *s3.Client, i *iam.Client) error) error {
	hc, err := c.httpClient(ep)
	if err != nil {
		return err
	}
	return fn(c.s3Client(ep, hc), c.iamClient(ep, hc))
}

func errCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// EnsureClaimBucket makes the claim's bucket, marked with the claim's
// tags in the request that makes it (or finds it so marked), and applies
// its versioning, object lock, quota and then its notifications (an
// ErrRefused or ErrTargetNotLoaded leaves the rest applied).
func (c HTTPClient) EnsureClaimBucket(ctx context.Context, ep Endpoint, b ClaimBucket) error {
	err := c.withClients(ep, func(cl *s3.Client, _ *iam.Client) error {
		// The claim's tags come with the bucket, in the one request that
		// makes it: of two claims racing for a name, the one whose
		// request made the bucket owns it, and the other reads its tag.
		in := &s3.CreateBucketInput{Bucket: aws.String(b.Name), CreateBucketConfiguration: &s3types.CreateBucketConfiguration{
			Tags: []s3types.Tag{{Key: aws.String(ClaimTag), Value: aws.String(b.Owner)}, {Key: aws.String(ClaimNameTag), Value: aws.String(b.OwnerName)}}}}
		if b.ObjectLock != nil {
			in.ObjectLockEnabledForBucket = aws.Bool(true)
		}
		_, err := cl.CreateBucket(ctx, in)
		if code := errCode(err); err != nil && code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return fmt.Errorf("creating bucket %s: %w", b.Name, s3Answer(err))
		}
		// Made now, or there before (S3 answers success in us-east-1 to
		// the owner of a bucket that exists): its tag says whose it is.
		owner, err := bucketOwner(ctx, cl, b.Name)
		if err != nil {
			return err
		}
		if owner != b.Owner {
			return ErrBucketTaken
		}
		if b.Versioning != "" {
			if _, err := cl.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(b.Name),
				VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatus(b.Versioning)}}); err != nil {
				return fmt.Errorf("setting versioning of bucket %s: %w", b.Name, s3Answer(err))
			}
		}
		// The notifications last, after the quota: rules the tenant
		// refuses leave the rest of the bucket as specified.
		defaults := b.Bucket
		defaults.Notifications = nil
		return ensureBucketDefaults(ctx, cl, defaults)
	})
	if err != nil {
		return err
	}
	ac, err := c.admin(ep)
	if err != nil {
		return err
	}
	defer ac.Close()
	if err := ac.SetBucketQuota(ctx, b.Name, b.Quota); err != nil {
		return fmt.Errorf("setting the quota of bucket %s: %w", b.Name, err)
	}
	if b.Notifications == nil {
		return nil
	}
	return c.withClients(ep, func(cl *s3.Client, _ *iam.Client) error {
		return putNotifications(ctx, cl, b.Name, b.Notifications)
	})
}

// bucketOwner is the claim UID a bucket is marked with ("" for none).
func bucketOwner(ctx context.Context, cl *s3.Client, bucket string) (string, error) {
	t, err := cl.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(bucket)})
	if code := errCode(err); code == "NoSuchTagSet" || code == "NoSuchTagSetError" {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("reading the tags of bucket %s: %w", bucket, s3Answer(err))
	}
	for _, tag := range t.TagSet {
		if aws.ToString(tag.Key) == ClaimTag {
			return aws.ToString(tag.Value), nil
		}
	}
	return "", nil
}

// BucketUsage reads what a bucket holds from the admin API.
func (c HTTPClient) BucketUsage(ctx context.Context, ep Endpoint, bucket string) (Usage, error) {
	ac, err := c.admin(ep)
	if err != nil {
		return Usage{}, err
	}
	defer ac.Close()
	u, err := ac.BucketUsage(ctx, bucket)
	if err != nil {
		return Usage{}, fmt.Errorf("usage of bucket %s: %w", bucket, err)
	}
	return Usage{Bytes: u.Bytes, Objects: u.Objects}, nil
}

// DeleteClaimBucket deletes every version, delete marker and upload of a
// claim's bucket, then the bucket. A bucket gone already is no error; one
// not marked as owner's is left alone. Objects under a compliance
// retention or a legal hold make it fail, saying so.
func (c HTTPClient) DeleteClaimBucket(ctx context.Context, ep Endpoint, bucket, owner string) error {
	return c.withClients(ep, func(cl *s3.Client, _ *iam.Client) error {
		got, err := bucketOwner(ctx, cl, bucket)
		if code := errCode(err); code == "NoSuchBucket" {
			return nil
		} else if err != nil {
			return err
		}
		if got != owner {
			return nil // not ours to delete
		}
		uploads := s3.NewListMultipartUploadsPaginator(cl, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		for uploads.HasMorePages() {
			page, err := uploads.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("listing the uploads of bucket %s: %w", bucket, s3Answer(err))
			}
			for _, u := range page.Uploads {
				if _, err := cl.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId}); err != nil && errCode(err) != "NoSuchUpload" {
					return fmt.Errorf("aborting an upload of bucket %s: %w", bucket, s3Answer(err))
				}
			}
		}
		versions := s3.NewListObjectVersionsPaginator(cl, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
		var kept []string
		for versions.HasMorePages() {
			page, err := versions.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("listing the versions of bucket %s: %w", bucket, s3Answer(err))
			}
			var ids []s3types.ObjectIdentifier
			for _, v := range page.Versions {
				ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
			}
			for _, m := range page.DeleteMarkers {
				ids = append(ids, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
			}
			if len(ids) == 0 {
				continue
			}
			out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), BypassGovernanceRetention: aws.Bool(true),
				Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
			if err != nil {
				return fmt.Errorf("deleting the objects of bucket %s: %w", bucket, s3Answer(err))
			}
			for _, e := range out.Errors {
				kept = append(kept, fmt.Sprintf("%s (%s)", aws.ToString(e.Key), aws.ToString(e.Code)))
			}
		}
		if len(kept) > 0 {
			return fmt.Errorf("bucket %s keeps %d object version(s) it may not delete yet, e.g. %s: wait for their retention to end or set deletionPolicy: Retain",
				bucket, len(kept), strings.Join(kept[:min(3, len(kept))], ", "))
		}
		if _, err := cl.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil && errCode(err) != "NoSuchBucket" {
			return fmt.Errorf("deleting bucket %s: %w", bucket, s3Answer(err))
		}
		return nil
	})
}

// EnsurePrincipal makes a user (p.Trust empty) or a role and sets its
// inline policy (and a role's trust policy) to p's; it returns the ARN.
func (c HTTPClient) EnsurePrincipal(ctx context.Context, ep Endpoint, p Principal) (string, error) {
	var arn string
	err := c.withClients(ep, func(_ *s3.Client, cl *iam.Client) error {
		if p.Trust == "" {
			out, err := cl.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(p.Name), Path: aws.String(p.Path)})
			switch {
			case err == nil:
				arn = aws.ToString(out.User.Arn)
			case errCode(err) == "EntityAlreadyExists":
				got, err := cl.GetUser(ctx, &iam.GetUserInput{UserName: aws.String(p.Name)})
				if err != nil {
					return fmt.Errorf("reading user %s: %w", p.Name, err)
				}
				arn = aws.ToString(got.User.Arn)
			default:
				return fmt.Errorf("creating user %s: %w", p.Name, err)
			}
			if _, err := cl.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(p.Name), PolicyName: aws.String(ClaimPolicyName),
				PolicyDocument: aws.String(p.Policy)}); err != nil {
				return fmt.Errorf("setting the policy of user %s: %w", p.Name, err)
			}
			if p.KeyID == "" {
				return nil
			}
			keys, err := cl.ListAccessKeys(ctx, &iam.ListAccessKeysInput{UserName: aws.String(p.Name)})
			if err != nil {
				return fmt.Errorf("listing the keys of user %s: %w", p.Name, err)
			}
			for _, k := range keys.AccessKeyMetadata {
				if aws.ToString(k.AccessKeyId) == p.KeyID {
					return nil
				}
			}
			return fmt.Errorf("user %s, key %s: %w", p.Name, p.KeyID, ErrKeyGone)
		}
		out, err := cl.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(p.Name), Path: aws.String(p.Path),
			AssumeRolePolicyDocument: aws.String(p.Trust), Description: aws.String("made by the strata operator for a BucketAccess")})
		switch {
		case err == nil:
			arn = aws.ToString(out.Role.Arn)
		case errCode(err) == "EntityAlreadyExists":
			got, err := cl.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(p.Name)})
			if err != nil {
				return fmt.Errorf("reading role %s: %w", p.Name, err)
			}
			arn = aws.ToString(got.Role.Arn)
			if _, err := cl.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(p.Name), PolicyDocument: aws.String(p.Trust)}); err != nil {
				return fmt.Errorf("setting the trust policy of role %s: %w", p.Name, err)
			}
		default:
			return fmt.Errorf("creating role %s: %w", p.Name, err)
		}
		if _, err := cl.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(p.Name), PolicyName: aws.String(ClaimPolicyName),
			PolicyDocument: aws.String(p.Policy)}); err != nil {
			return fmt.Errorf("setting the policy of role %s: %w", p.Name, err)
		}
		return nil
	})
	return arn, err
}

// AccessKey is a user's key.
type AccessKey struct{ ID, Secret string }

// CreateAccessKey makes a new key for a user. A user that has its two
// keys already (a key made before whose Secret was never written) has
// those but keep deleted first.
func (c HTTPClient) CreateAccessKey(ctx context.Context, ep Endpoint, user, keep string) (AccessKey, error) {
	var k AccessKey
	err := c.withClients(ep, func(_ *s3.Client, cl *iam.Client) error {
		out, err := cl.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(user)})
		if errCode(err) == "LimitExceeded" {
			if err := deleteKeys(ctx, cl, user, keep); err != nil {
				return err
			}
			out, err = cl.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(user)})
		}
		if err != nil {
			return fmt.Errorf("creating a key for user %s: %w", user, err)
		}
		k = AccessKey{ID: aws.ToString(out.AccessKey.AccessKeyId), Secret: aws.ToString(out.AccessKey.SecretAccessKey)}
		return nil
	})
	return k, err
}

// DeleteAccessKeys deletes a user's keys other than keep.
func (c HTTPClient) DeleteAccessKeys(ctx context.Context, ep Endpoint, user, keep string) error {
	return c.withClients(ep, func(_ *s3.Client, cl *iam.Client) error {
		return deleteKeys(ctx, cl, user, keep)
	})
}

func deleteKeys(ctx context.Context, cl *iam.Client, user, keep string) error {
	keys, err := cl.ListAccessKeys(ctx, &iam.ListAccessKeysInput{UserName: aws.String(user)})
	if errCode(err) == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing the keys of user %s: %w", user, err)
	}
	for _, k := range keys.AccessKeyMetadata {
		if id := aws.ToString(k.AccessKeyId); id != keep {
			if _, err := cl.DeleteAccessKey(ctx, &iam.DeleteAccessKeyInput{UserName: aws.String(user), AccessKeyId: k.AccessKeyId}); err != nil && errCode(err) != "NoSuchEntity" {
				return fmt.Errorf("deleting key %s of user %s: %w", id, user, err)
			}
		}
	}
	return nil
}

// DeletePrincipal deletes a user (its keys and policy first) or a role;
// one gone already is no error.
func (c HTTPClient) DeletePrincipal(ctx context.Context, ep Endpoint, name string, role bool) error {
	return c.withClients(ep, func(_ *s3.Client, cl *iam.Client) error {
		gone := func(err error) bool { return err == nil || errCode(err) == "NoSuchEntity" }
		if role {
			if _, err := cl.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(ClaimPolicyName)}); !gone(err) {
				return fmt.Errorf("deleting the policy of role %s: %w", name, err)
			}
			if _, err := cl.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)}); !gone(err) {
				return fmt.Errorf("deleting role %s: %w", name, err)
			}
			return nil
		}
		if err := deleteKeys(ctx, cl, name, ""); err != nil {
			return err
		}
		if _, err := cl.DeleteUserPolicy(ctx, &iam.DeleteUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String(ClaimPolicyName)}); !gone(err) {
			return fmt.Errorf("deleting the policy of user %s: %w", name, err)
		}
		if _, err := cl.DeleteUser(ctx, &iam.DeleteUserInput{UserName: aws.String(name)}); !gone(err) {
			return fmt.Errorf("deleting user %s: %w", name, err)
		}
		return nil
	})
}
