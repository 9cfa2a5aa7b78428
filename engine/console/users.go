package console

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
)

// ClaimsPath is the IAM path of the users and roles the operator makes for
// BucketAccess claims (controllers/claims.go): the console shows them
// read-only, since the operator owns them and would undo a change.
const ClaimsPath = "/strata-claims/"

// writeIAMError answers with the IAM API's error code and message.
func writeIAMError(w http.ResponseWriter, err error) {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		if errors.Is(err, context.DeadlineExceeded) {
			writeError(w, http.StatusGatewayTimeout, "Timeout", err.Error())
			return
		}
		writeError(w, http.StatusBadGateway, "Unavailable", err.Error())
		return
	}
	if signedOutCodes[ae.ErrorCode()] {
		writeError(w, http.StatusUnauthorized, "SignedOut", ae.ErrorCode()+": these credentials no longer sign in; sign in again")
		return
	}
	status := http.StatusBadRequest
	switch ae.ErrorCode() {
	case "AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch":
		status = http.StatusForbidden
	case "NoSuchEntity":
		status = http.StatusNotFound
	case "EntityAlreadyExists", "DeleteConflict", "LimitExceeded":
		status = http.StatusConflict
	}
	writeError(w, status, ae.ErrorCode(), ae.ErrorMessage())
}

// ownedByOperator refuses a change to a user the operator made for a
// claim; it reads the user first (which the credentials must be allowed).
func (c *Console) ownedByOperator(w http.ResponseWriter, r *http.Request, cl *iam.Client, user string) bool {
	out, err := cl.GetUser(r.Context(), &iam.GetUserInput{UserName: aws.String(user)})
	if err != nil {
		writeIAMError(w, err)
		return true
	}
	if strings.HasPrefix(aws.ToString(out.User.Path), ClaimsPath) {
		writeError(w, http.StatusConflict, "OwnedByOperator",
			"user "+user+" belongs to a BucketAccess claim: the operator owns it (change the claim instead)")
		return true
	}
	return false
}

func (c *Console) createUser(w http.ResponseWriter, r *http.Request, k *call) {
	var req struct {
		Name string `json:"name"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if _, err := c.iamClient(k.ses).CreateUser(r.Context(), &iam.CreateUserInput{UserName: aws.String(req.Name)}); err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"name": req.Name})
}

// deleteUser removes a user with its keys and inline policies, detached
// from its managed policies and groups first, as IAM requires.
func (c *Console) deleteUser(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "user")
	if !ok {
		return
	}
	user := aws.String(q[0])
	cl := c.iamClient(k.ses)
	ctx := r.Context()
	if c.ownedByOperator(w, r, cl, q[0]) {
		return
	}
	// What can fail for want of a right goes first (detaching, leaving
	// groups), then what cannot be undone (keys, inline policies).
	attached := iam.NewListAttachedUserPoliciesPaginator(cl, &iam.ListAttachedUserPoliciesInput{UserName: user})
	for attached.HasMorePages() {
		page, err := attached.NextPage(ctx)
		if err != nil {
			writeIAMError(w, err)
			return
		}
		for _, p := range page.AttachedPolicies {
			if _, err := cl.DetachUserPolicy(ctx, &iam.DetachUserPolicyInput{UserName: user, PolicyArn: p.PolicyArn}); err != nil {
				writeIAMError(w, err)
				return
			}
		}
	}
	groups := iam.NewListGroupsForUserPaginator(cl, &iam.ListGroupsForUserInput{UserName: user})
	for groups.HasMorePages() {
		page, err := groups.NextPage(ctx)
		if err != nil {
			writeIAMError(w, err)
			return
		}
		for _, g := range page.Groups {
			if _, err := cl.RemoveUserFromGroup(ctx, &iam.RemoveUserFromGroupInput{UserName: user, GroupName: g.GroupName}); err != nil {
				writeIAMError(w, err)
				return
			}
		}
	}
	keys := iam.NewListAccessKeysPaginator(cl, &iam.ListAccessKeysInput{UserName: user})
	for keys.HasMorePages() {
		page, err := keys.NextPage(ctx)
		if err != nil {
			writeIAMError(w, err)
			return
		}
		for _, key := range page.AccessKeyMetadata {
			if _, err := cl.DeleteAccessKey(ctx, &iam.DeleteAccessKeyInput{UserName: user, AccessKeyId: key.AccessKeyId}); err != nil {
				writeIAMError(w, err)
				return
			}
		}
	}
	inline := iam.NewListUserPoliciesPaginator(cl, &iam.ListUserPoliciesInput{UserName: user})
	for inline.HasMorePages() {
		page, err := inline.NextPage(ctx)
		if err != nil {
			writeIAMError(w, err)
			return
		}
		for _, p := range page.PolicyNames {
			if _, err := cl.DeleteUserPolicy(ctx, &iam.DeleteUserPolicyInput{UserName: user, PolicyName: aws.String(p)}); err != nil {
				writeIAMError(w, err)
				return
			}
		}
	}
	if _, err := cl.DeleteUser(ctx, &iam.DeleteUserInput{UserName: user}); err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// createKey makes an access key; its secret is in this answer only (IAM
// shows it once), never in a URL or a log.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "user")
	if !ok {
		return
	}
	cl := c.iamClient(k.ses)
	if c.ownedByOperator(w, r, cl, q[0]) {
		return
	}
	out, err := cl.CreateAccessKey(r.Context(), &iam.CreateAccessKeyInput{UserName: aws.String(q[0])})
	if err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{
		"user": q[0], "accessKeyId": aws.ToString(out.AccessKey.AccessKeyId), "secretAccessKey": aws.ToString(out.AccessKey.SecretAccessKey)})
}

func (c *Console) deleteKey(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "user", "id")
	if !ok {
		return
	}
	cl := c.iamClient(k.ses)
	if c.ownedByOperator(w, r, cl, q[0]) {
		return
	}
	if _, err := cl.DeleteAccessKey(r.Context(), &iam.DeleteAccessKeyInput{UserName: aws.String(q[0]), AccessKeyId: aws.String(q[1])}); err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// putPolicy sets a user's inline policy (IAM checks the document).
func (c *Console) putPolicy(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "user", "name")
	if !ok {
		return
	}
	var req struct {
		Document string `json:"document"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	cl := c.iamClient(k.ses)
	if c.ownedByOperator(w, r, cl, q[0]) {
		return
	}
	if _, err := cl.PutUserPolicy(r.Context(), &iam.PutUserPolicyInput{UserName: aws.String(q[0]), PolicyName: aws.String(q[1]),
		PolicyDocument: aws.String(req.Document)}); err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (c *Console) deletePolicy(w http.ResponseWriter, r *http.Request, k *call) {
	q, ok := need(w, r, "user", "name")
	if !ok {
		return
	}
	cl := c.iamClient(k.ses)
	if c.ownedByOperator(w, r, cl, q[0]) {
		return
	}
	if _, err := cl.DeleteUserPolicy(r.Context(), &iam.DeleteUserPolicyInput{UserName: aws.String(q[0]), PolicyName: aws.String(q[1])}); err != nil {
		writeIAMError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
