package console

// The namespaces' claims as the tenant holds them: the buckets the
// operator made for BucketClaims (tagged with the claim's name when they
// were created) and the users and roles it made for BucketAccesses (under
// ClaimsPath/NAMESPACE/). The console reads them with the signed-in
// credentials like anything else and changes none of them: the operator
// owns them and would undo a change.

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/minio/minio-go/v7"
)

// Bucket tags the operator marks a claim's bucket with
// (internal/engine.ClaimTag, ClaimNameTag).
const (
	claimUIDTag  = "strata.dev/claim-uid"
	claimNameTag = "strata.dev/claim"
)

// maxClaimBuckets bounds the buckets whose tags one claims page reads.
const maxClaimBuckets = 1000

type claimedBucket struct {
	Bucket    string `json:"bucket"`
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
}

type claimedPrincipal struct {
	Kind      string   `json:"kind"` // user or role
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Policies  []string `json:"policies"`
}

type claimsPage struct {
	Buckets    []claimedBucket    `json:"buckets"`
	Principals []claimedPrincipal `json:"principals"`
	// Unread counts buckets whose tags these credentials may not read,
	// or past maxClaimBuckets.
	Unread   int    `json:"unread"`
	IAMError string `json:"iamError,omitempty"`
}

// bucketClaim is the BucketClaim (NAMESPACE/NAME) a bucket was made for,
// "" for none.
func bucketClaim(ctx context.Context, cl *minio.Client, bucket string) (string, error) {
	t, err := cl.GetBucketTagging(ctx, bucket)
	if err != nil {
		if code := minio.ToErrorResponse(err).Code; code == "NoSuchTagSet" || code == "NoSuchTagSetError" {
			return "", nil
		}
		return "", err
	}
	m := t.ToMap()
	if m[claimUIDTag] == "" {
		return "", nil
	}
	if name := m[claimNameTag]; name != "" {
		return name, nil
	}
	return "(a claim)", nil
}

func (c *Console) claims(w http.ResponseWriter, r *http.Request, k *call) {
	ctx := r.Context()
	page := claimsPage{Buckets: []claimedBucket{}, Principals: []claimedPrincipal{}}
	buckets, err := k.s3.ListBuckets(ctx)
	if err != nil && minio.ToErrorResponse(err).Code != "AccessDenied" {
		writeS3Error(w, err)
		return
	}
	if len(buckets) > maxClaimBuckets {
		page.Unread += len(buckets) - maxClaimBuckets
		buckets = buckets[:maxClaimBuckets]
	}
	// Eight at a time: one tagging read a bucket.
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for b := range work {
				claim, err := bucketClaim(ctx, k.s3, b)
				mu.Lock()
				switch {
				case err != nil:
					page.Unread++
				case claim != "":
					ns, _, _ := strings.Cut(claim, "/")
					page.Buckets = append(page.Buckets, claimedBucket{Bucket: b, Namespace: ns, Claim: claim})
				}
				mu.Unlock()
			}
		})
	}
	for _, b := range buckets {
		work <- b.Name
	}
	close(work)
	wg.Wait()
	sort.Slice(page.Buckets, func(i, j int) bool { return page.Buckets[i].Bucket < page.Buckets[j].Bucket })

	cl := c.iamClient(k.ses)
	if err := c.claimPrincipals(ctx, cl, &page); err != nil {
		page.IAMError = iamMessage(err)
	}
	writeJSON(w, http.StatusOK, page)
}

// claimPrincipals lists the claims' users and roles with their inline
// policies' names.
func (c *Console) claimPrincipals(ctx context.Context, cl *iam.Client, page *claimsPage) error {
	nsOf := func(path *string) string {
		return strings.Trim(strings.TrimPrefix(aws.ToString(path), ClaimsPath), "/")
	}
	users := iam.NewListUsersPaginator(cl, &iam.ListUsersInput{PathPrefix: aws.String(ClaimsPath)})
	for users.HasMorePages() {
		out, err := users.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, u := range out.Users {
			p := claimedPrincipal{Kind: "user", Name: aws.ToString(u.UserName), Namespace: nsOf(u.Path), Policies: []string{}}
			if pol, err := cl.ListUserPolicies(ctx, &iam.ListUserPoliciesInput{UserName: u.UserName}); err == nil {
				p.Policies = append(p.Policies, pol.PolicyNames...)
			}
			page.Principals = append(page.Principals, p)
		}
	}
	roles := iam.NewListRolesPaginator(cl, &iam.ListRolesInput{PathPrefix: aws.String(ClaimsPath)})
	for roles.HasMorePages() {
		out, err := roles.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, r := range out.Roles {
			p := claimedPrincipal{Kind: "role", Name: aws.ToString(r.RoleName), Namespace: nsOf(r.Path), Policies: []string{}}
			if pol, err := cl.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: r.RoleName}); err == nil {
				p.Policies = append(p.Policies, pol.PolicyNames...)
			}
			page.Principals = append(page.Principals, p)
		}
	}
	sort.Slice(page.Principals, func(i, j int) bool {
		a, b := page.Principals[i], page.Principals[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return nil
}

// claimedBucketRefused refuses deleting a claim's bucket from the console:
// the claim's deletionPolicy decides what becomes of it.
func (c *Console) claimedBucketRefused(w http.ResponseWriter, r *http.Request, k *call, bucket string) bool {
	claim, err := bucketClaim(r.Context(), k.s3, bucket)
	if err != nil || claim == "" {
		// Tags unreadable: S3 decides whether these credentials may
		// delete the bucket.
		return false
	}
	ns, name, _ := strings.Cut(claim, "/")
	writeError(w, http.StatusConflict, "OwnedByOperator", "bucket "+bucket+" carries the tag "+claimNameTag+"="+claim+
		": BucketClaim "+claim+" owns it; delete the claim (kubectl delete bucketclaim -n "+ns+" "+name+") and its deletionPolicy decides what becomes of the bucket")
	return true
}
