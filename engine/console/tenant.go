package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/adminclient"
)

// adminTimeout bounds one admin API call of a page.
const adminTimeout = 10 * time.Second

func (c *Console) s3URL() string {
	if c.cfg.S3TLS {
		return "https://" + c.s3Host
	}
	return "http://" + c.s3Host
}

// admin is an admin API client signing with the session's credentials: the
// admin API decides whether they may read it (the root credentials only).
func (c *Console) admin(ses session) *adminclient.Client {
	cl, _ := adminclient.New(c.s3URL(), adminclient.Options{AccessKey: ses.AccessKey, SecretKey: ses.SecretKey,
		Transport: c.transport, Timeout: adminTimeout})
	return cl
}

// tenantView is the tenant page: the deployment as this process sees it,
// healing, decommissions in progress, certificates and replication.
type tenantView struct {
	Info          adminapi.Info                 `json:"info"`
	Heal          *adminapi.HealStatus          `json:"heal,omitempty"`
	Decommissions []adminapi.DecommissionStatus `json:"decommissions,omitempty"`
	TLS           adminapi.TLSInfo              `json:"tls"`
	Replication   *adminapi.ReplicationStatus   `json:"replication,omitempty"`
}

func writeAdminError(w http.ResponseWriter, err error) {
	var se *adminclient.StatusError
	if errors.As(err, &se) {
		code := "AdminRefused"
		if se.Code == http.StatusForbidden || se.Code == http.StatusUnauthorized {
			writeError(w, http.StatusForbidden, "AccessDenied", "the tenant's health is shown to the root credentials only: "+se.Reason)
			return
		}
		writeError(w, se.Code, code, se.Reason)
		return
	}
	writeError(w, http.StatusBadGateway, "Unavailable", err.Error())
}

func (c *Console) tenant(w http.ResponseWriter, r *http.Request, k *call) {
	a := c.admin(k.ses)
	ctx := r.Context()
	var v tenantView
	var err error
	if v.Info, err = a.Info(ctx); err != nil {
		writeAdminError(w, err)
		return
	}
	// What a gateway does not have (healing, pools to drain) is left out.
	if h, err := a.Heal(ctx); err == nil {
		v.Heal = &h
	}
	for _, p := range v.Info.Pools {
		if p.State == "Active" || p.State == "" {
			continue
		}
		if d, err := a.Decommission(ctx, p.Name); err == nil {
			v.Decommissions = append(v.Decommissions, d)
		}
	}
	v.TLS, _ = a.TLS(ctx)
	if rs, err := a.Replication(ctx); err == nil {
		v.Replication = &rs
	}
	writeJSON(w, http.StatusOK, v)
}

// userView is one IAM user of the users page.
type userView struct {
	Name string `json:"name"`
	// Claim is the namespace of the BucketAccess claim the operator made
	// this user for (read-only in the console); empty for other users.
	Claim      string      `json:"claim,omitempty"`
	Created    time.Time   `json:"created"`
	Groups     []string    `json:"groups"`
	Policies   []string    `json:"policies"`
	AccessKeys []accessKey `json:"accessKeys"`
	// Error says what of this user could not be read (its keys, groups or
	// policies then show incomplete).
	Error string `json:"error,omitempty"`
}

type accessKey struct {
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
}

// usersView is the users page: the IAM directory's users as the
// credentials may list them, and the users the tenant declares in its
// users file (owned by the operator, shown read-only) when they may read
// the admin API.
type usersView struct {
	Users []userView `json:"users"`
	// Declared are the users file's users (the Tenant's spec.users and
	// bucket accesses), without secrets.
	Declared []adminapi.UserInfo `json:"declared"`
	// IAMError says why the IAM directory could not be listed (say, the
	// credentials may not), shown in place of its users.
	IAMError string `json:"iamError,omitempty"`
}

// iamClient is an IAM API client of the process's own listener signing as
// the session.
func (c *Console) iamClient(ses session) *iam.Client {
	return iam.New(iam.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(c.s3URL()),
		Credentials:  awscreds.NewStaticCredentialsProvider(ses.AccessKey, ses.SecretKey, ses.SessionToken),
		HTTPClient:   &http.Client{Transport: c.transport, Timeout: adminTimeout},
	})
}

func iamMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}

// maxUsers bounds the users one page lists.
const maxUsers = 1000

func (c *Console) users(w http.ResponseWriter, r *http.Request, k *call) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	v := usersView{Users: []userView{}, Declared: []adminapi.UserInfo{}}
	if declared, err := c.admin(k.ses).Users(ctx); err == nil {
		v.Declared = declared
	}
	cl := c.iamClient(k.ses)
	pages := iam.NewListUsersPaginator(cl, &iam.ListUsersInput{})
	for pages.HasMorePages() && len(v.Users) < maxUsers {
		page, err := pages.NextPage(ctx)
		if err != nil {
			v.IAMError = iamMessage(err)
			break
		}
		for _, u := range page.Users {
			uv := userView{Name: aws.ToString(u.UserName), Created: aws.ToTime(u.CreateDate), Groups: []string{}, Policies: []string{}, AccessKeys: []accessKey{}}
			if ns, ok := strings.CutPrefix(aws.ToString(u.Path), ClaimsPath); ok {
				uv.Claim = strings.TrimSuffix(ns, "/")
			}
			var errs []string
			if keys, err := cl.ListAccessKeys(ctx, &iam.ListAccessKeysInput{UserName: u.UserName}); err == nil {
				for _, ak := range keys.AccessKeyMetadata {
					uv.AccessKeys = append(uv.AccessKeys, accessKey{ID: aws.ToString(ak.AccessKeyId), Status: string(ak.Status), Created: aws.ToTime(ak.CreateDate)})
				}
			} else {
				errs = append(errs, "access keys: "+iamMessage(err))
			}
			if groups, err := cl.ListGroupsForUser(ctx, &iam.ListGroupsForUserInput{UserName: u.UserName}); err == nil {
				for _, g := range groups.Groups {
					uv.Groups = append(uv.Groups, aws.ToString(g.GroupName))
				}
			} else {
				errs = append(errs, "groups: "+iamMessage(err))
			}
			if inline, err := cl.ListUserPolicies(ctx, &iam.ListUserPoliciesInput{UserName: u.UserName}); err == nil {
				uv.Policies = append(uv.Policies, inline.PolicyNames...)
			} else {
				errs = append(errs, "inline policies: "+iamMessage(err))
			}
			if attached, err := cl.ListAttachedUserPolicies(ctx, &iam.ListAttachedUserPoliciesInput{UserName: u.UserName}); err == nil {
				for _, p := range attached.AttachedPolicies {
					uv.Policies = append(uv.Policies, aws.ToString(p.PolicyName))
				}
			} else {
				errs = append(errs, "attached policies: "+iamMessage(err))
			}
			uv.Error = strings.Join(errs, "; ")
			v.Users = append(v.Users, uv)
		}
	}
	writeJSON(w, http.StatusOK, v)
}
