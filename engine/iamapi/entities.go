package iamapi

// The actions on users, groups and roles, their access keys, policies and
// memberships, OIDC providers and the account summary. The actions that
// exist once per kind (GetUserPolicy, GetGroupPolicy, GetRolePolicy, ...)
// are one function each, made per kind.

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-storage/strata/engine/iam"
)

// kindSpec is how the API names a kind: its parameter and its word in
// action and element names.
type kindSpec struct {
	kind  iam.Kind
	param string // UserName, GroupName, RoleName
	title string // User, Group, Role
}

var (
	userKind  = kindSpec{iam.KindUser, "UserName", "User"}
	groupKind = kindSpec{iam.KindGroup, "GroupName", "Group"}
	roleKind  = kindSpec{iam.KindRole, "RoleName", "Role"}
)

func init() {
	for _, k := range []kindSpec{userKind, groupKind, roleKind} {
		actions["Put"+k.title+"Policy"] = putPolicy(k)
		actions["Get"+k.title+"Policy"] = getPolicy(k)
		actions["List"+k.title+"Policies"] = listPolicies(k)
		actions["Delete"+k.title+"Policy"] = deletePolicy(k)
		actions["Attach"+k.title+"Policy"] = attachPolicy(k, true)
		actions["Detach"+k.title+"Policy"] = attachPolicy(k, false)
		actions["ListAttached"+k.title+"Policies"] = listAttached(k)
		actions["Get"+k.title] = getEntity(k)
		actions["Delete"+k.title] = deleteEntity(k)
		actions["List"+k.title+"s"] = listEntities(k)
		actions["Create"+k.title] = createEntity(k)
	}
	actions["GetUser"] = getUser
	actions["UpdateUser"] = updateEntity(userKind, "NewUserName")
	actions["UpdateGroup"] = updateEntity(groupKind, "NewGroupName")
	actions["UpdateRole"] = updateRole
	actions["UpdateAssumeRolePolicy"] = updateAssumeRolePolicy
	actions["AddUserToGroup"] = membership(true)
	actions["RemoveUserFromGroup"] = membership(false)
	actions["ListGroupsForUser"] = listGroupsForUser
	actions["CreateAccessKey"] = createAccessKey
	actions["ListAccessKeys"] = listAccessKeys
	actions["UpdateAccessKey"] = updateAccessKey
	actions["DeleteAccessKey"] = deleteAccessKey
	actions["CreateOpenIDConnectProvider"] = createProvider
	actions["GetOpenIDConnectProvider"] = getProvider
	actions["ListOpenIDConnectProviders"] = listProviders
	actions["DeleteOpenIDConnectProvider"] = deleteProvider
	actions["AddClientIDToOpenIDConnectProvider"] = editProvider(addClientID)
	actions["RemoveClientIDFromOpenIDConnectProvider"] = editProvider(removeClientID)
	actions["UpdateOpenIDConnectProviderThumbprint"] = editProvider(setThumbprints)
	actions["GetAccountSummary"] = accountSummary
}

// accountID is the ID ARNs show for the caller's account.
func (h *Handler) accountID(c Caller) string { return h.accountOf(c.Account) }

// accountOf is the ID ARNs show for an account ("" the tenant's).
func (h *Handler) accountOf(account string) string {
	if account != "" {
		return account
	}
	return h.Account
}

// arn is an entity's ARN in the caller's account.
func (h *Handler) arn(c Caller, e iam.Entity) string { return h.arnOf(c.Account, e) }

func (h *Handler) arnOf(account string, e iam.Entity) string {
	return fmt.Sprintf("arn:aws:iam::%s:%s%s%s", h.accountOf(account), e.Kind, e.Path, e.Name)
}

// resource is the ARN an action on a named entity is authorised against
// (the entity's own when it exists).
func (h *Handler) resource(c Caller, k kindSpec, name string) string {
	if e, err := h.Dir.Get(k.kind, c.Account, name); err == nil {
		return h.arn(c, e)
	}
	return fmt.Sprintf("arn:aws:iam::%s:%s/%s", h.accountID(c), k.kind, name)
}

// authorize lets the caller run the action on a resource: admins always;
// others when their identity policies allow it.
func (h *Handler) authorize(c Caller, action, resource string) error {
	if c.Admin || c.Allows != nil && c.Allows("iam:"+action, resource) {
		return nil
	}
	return &apiError{code: "AccessDenied", status: 403,
		msg: fmt.Sprintf("User is not authorized to perform: iam:%s on resource: %s", action, resource)}
}

// named reads the entity an action is about (its kind's parameter,
// required) and the fields named, and authorises the action on it.
func (h *Handler) named(p params, c Caller, k kindSpec, fields ...string) (string, []string, error) {
	name, err := p.req(k.param)
	if err != nil {
		return "", nil, err
	}
	return h.onSubject(p, c, k, name, fields)
}

func (h *Handler) onSubject(p params, c Caller, k kindSpec, name string, fields []string) (string, []string, error) {
	values := make([]string, len(fields))
	for i, f := range fields {
		v, err := p.req(f)
		if err != nil {
			return "", nil, err
		}
		values[i] = v
	}
	return name, values, h.authorize(c, p.action, h.resource(c, k, name))
}

// xmlEntity is a User, Group or Role element.
type xmlEntity struct {
	Path               string `xml:"Path"`
	UserName           string `xml:"UserName,omitempty"`
	GroupName          string `xml:"GroupName,omitempty"`
	RoleName           string `xml:"RoleName,omitempty"`
	UserID             string `xml:"UserId,omitempty"`
	GroupID            string `xml:"GroupId,omitempty"`
	RoleID             string `xml:"RoleId,omitempty"`
	Arn                string `xml:"Arn"`
	CreateDate         string `xml:"CreateDate"`
	AssumeRolePolicy   string `xml:"AssumeRolePolicyDocument,omitempty"`
	Description        string `xml:"Description,omitempty"`
	MaxSessionDuration int    `xml:"MaxSessionDuration,omitempty"`
}

func (h *Handler) xmlEntity(c Caller, e iam.Entity) xmlEntity {
	x := xmlEntity{Path: e.Path, Arn: h.arn(c, e), CreateDate: isoTime(e.Created)}
	switch e.Kind {
	case iam.KindUser:
		x.UserName, x.UserID = e.Name, e.ID
	case iam.KindGroup:
		x.GroupName, x.GroupID = e.Name, e.ID
	case iam.KindRole:
		x.RoleName, x.RoleID = e.Name, e.ID
		x.AssumeRolePolicy, x.Description, x.MaxSessionDuration = percentEncoded(e.Trust), e.Description, e.MaxSessionDuration
	}
	return x
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// percentEncoded is a policy document as IAM answers it: URL-encoded,
// spaces as %20 (botocore decodes it with Python's unquote, which leaves
// '+' alone).
func percentEncoded(doc string) string { return strings.ReplaceAll(url.QueryEscape(doc), "+", "%20") }

// one is a result holding one entity element named by its kind.
func one(k kindSpec, x xmlEntity) any {
	switch k.kind {
	case iam.KindGroup:
		return struct {
			Group xmlEntity `xml:"Group"`
		}{x}
	case iam.KindRole:
		return struct {
			Role xmlEntity `xml:"Role"`
		}{x}
	}
	return struct {
		User xmlEntity `xml:"User"`
	}{x}
}

func createEntity(k kindSpec) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, _, err := h.named(p, c, k)
		if err != nil {
			return nil, err
		}
		e := iam.Entity{Kind: k.kind, Account: c.Account, Name: name, Path: p.opt("Path")}
		if k.kind == iam.KindRole {
			e.Trust, e.Description = p.opt("AssumeRolePolicyDocument"), p.opt("Description")
			if e.MaxSessionDuration, err = p.optInt("MaxSessionDuration"); err != nil {
				return nil, err
			}
		}
		e, err = h.Dir.Create(ctx, e, h.CheckTrust)
		if err != nil {
			return nil, err
		}
		return one(k, h.xmlEntity(c, e)), nil
	}
}

// getUser answers the caller itself when no UserName is given: the
// account (as IAM answers its root) or the caller's own user.
func getUser(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name := p.opt("UserName")
	if name == "" && c.User == "" {
		if !c.Admin {
			return nil, validation("UserName is required")
		}
		acct := h.accountID(c)
		return one(userKind, xmlEntity{Path: "/", UserName: "root", UserID: acct,
			Arn: fmt.Sprintf("arn:aws:iam::%s:root", acct), CreateDate: isoTime(time.Unix(0, 0))}), nil
	}
	if name == "" {
		name = c.User
	}
	if _, _, err := h.onSubject(p, c, userKind, name, nil); err != nil {
		return nil, err
	}
	return h.getNamed(c, userKind, name)
}

// getEntity answers GetGroup (with its members) and GetRole.
func getEntity(k kindSpec) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, _, err := h.named(p, c, k)
		if err != nil {
			return nil, err
		}
		return h.getNamed(c, k, name)
	}
}

func (h *Handler) getNamed(c Caller, k kindSpec, name string) (any, error) {
	e, err := h.Dir.Get(k.kind, c.Account, name)
	if err != nil {
		return nil, err
	}
	if k.kind != iam.KindGroup {
		return one(k, h.xmlEntity(c, e)), nil
	}
	members, err := h.Dir.Members(c.Account, e.Name)
	if err != nil {
		return nil, err
	}
	res := struct {
		Group       xmlEntity   `xml:"Group"`
		Users       []xmlEntity `xml:"Users>member"`
		IsTruncated bool        `xml:"IsTruncated"`
	}{Group: h.xmlEntity(c, e), Users: []xmlEntity{}}
	for _, u := range members {
		res.Users = append(res.Users, h.xmlEntity(c, u))
	}
	return res, nil
}

// listEntities answers ListUsers, ListGroups and ListRoles.
func listEntities(k kindSpec) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		prefix := p.opt("PathPrefix")
		if prefix == "" {
			prefix = "/"
		}
		if err := h.authorize(c, p.action, fmt.Sprintf("arn:aws:iam::%s:%s%s", h.accountID(c), k.kind, prefix)); err != nil {
			return nil, err
		}
		return pageOf(p, h.Dir.List(k.kind, c.Account, prefix), func(e iam.Entity) string { return e.Name },
			func(page []iam.Entity, truncated bool, marker string) any {
				xs := make([]xmlEntity, 0, len(page))
				for _, e := range page {
					xs = append(xs, h.xmlEntity(c, e))
				}
				return listResult(k.title+"s", xs, truncated, marker)
			})
	}
}

// listPage is a listing's pagination.
type listPage struct {
	IsTruncated bool   `xml:"IsTruncated"`
	Marker      string `xml:"Marker,omitempty"`
}

// listResult is a list element named plural ("Users") with pagination.
func listResult(plural string, xs []xmlEntity, truncated bool, marker string) any {
	page := listPage{truncated, marker}
	switch plural {
	case "Groups":
		return struct {
			Groups []xmlEntity `xml:"Groups>member"`
			listPage
		}{xs, page}
	case "Roles":
		return struct {
			Roles []xmlEntity `xml:"Roles>member"`
			listPage
		}{xs, page}
	}
	return struct {
		Users []xmlEntity `xml:"Users>member"`
		listPage
	}{xs, page}
}

// pageOf cuts the page a request's Marker and MaxItems name from items
// sorted by name, and makes its result.
func pageOf[T any](p params, items []T, name func(T) string, result func([]T, bool, string) any) (any, error) {
	n, err := p.maxItems()
	if err != nil {
		return nil, err
	}
	page, next := paginate(items, p.opt("Marker"), n, name)
	return result(page, next != "", next), nil
}

func updateEntity(k kindSpec, newNameParam string) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, _, err := h.named(p, c, k)
		if err != nil {
			return nil, err
		}
		_, err = h.Dir.Edit(ctx, k.kind, c.Account, name, func(e *iam.Entity) error {
			if v := p.opt(newNameParam); v != "" {
				e.Name = v
			}
			if v := p.opt("NewPath"); v != "" {
				e.Path = v
			}
			return nil
		})
		return nil, err
	}
}

func updateRole(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.named(p, c, roleKind)
	if err != nil {
		return nil, err
	}
	maxSession, err := p.optInt("MaxSessionDuration")
	if err != nil {
		return nil, err
	}
	_, err = h.Dir.Edit(ctx, iam.KindRole, c.Account, name, func(e *iam.Entity) error {
		if _, ok := p.form["Description"]; ok {
			e.Description = p.opt("Description")
		}
		if maxSession != 0 {
			if maxSession < 3600 || maxSession > 43200 {
				return fmt.Errorf("%w: MaxSessionDuration must be 3600 to 43200 seconds", iam.ErrInvalidInput)
			}
			e.MaxSessionDuration = maxSession
		}
		return nil
	})
	return struct{}{}, err
}

var updateAssumeRolePolicy = change(roleKind, []string{"PolicyDocument"}, func(ctx context.Context, h *Handler, c Caller, name string, v []string) error {
	if h.CheckTrust != nil {
		if err := h.CheckTrust(v[0]); err != nil {
			return fmt.Errorf("%w: %w", iam.ErrMalformedPolicy, err)
		}
	}
	_, err := h.Dir.Edit(ctx, iam.KindRole, c.Account, name, func(e *iam.Entity) error {
		e.Trust = v[0]
		return nil
	})
	return err
})

// change is an action without a result on a named entity: fn runs with
// the entity's name and the fields named, once the caller is authorised.
func change(k kindSpec, fields []string, fn func(ctx context.Context, h *Handler, c Caller, name string, v []string) error) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, v, err := h.named(p, c, k, fields...)
		if err != nil {
			return nil, err
		}
		return nil, fn(ctx, h, c, name, v)
	}
}

// read is an action answering from a named entity: fn runs with the
// entity and the fields named, once the caller is authorised.
func read(k kindSpec, fields []string, fn func(p params, h *Handler, c Caller, e iam.Entity, v []string) (any, error)) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, v, err := h.named(p, c, k, fields...)
		if err != nil {
			return nil, err
		}
		e, err := h.Dir.Get(k.kind, c.Account, name)
		if err != nil {
			return nil, err
		}
		return fn(p, h, c, e, v)
	}
}

func deleteEntity(k kindSpec) action {
	return change(k, nil, func(ctx context.Context, h *Handler, c Caller, name string, _ []string) error {
		return h.Dir.Delete(ctx, k.kind, c.Account, name)
	})
}

func putPolicy(k kindSpec) action {
	return change(k, []string{"PolicyName", "PolicyDocument"}, func(ctx context.Context, h *Handler, c Caller, name string, v []string) error {
		return h.Dir.PutPolicy(ctx, k.kind, c.Account, name, v[0], v[1], h.CheckPolicy)
	})
}

func getPolicy(k kindSpec) action {
	return read(k, []string{"PolicyName"}, func(_ params, _ *Handler, _ Caller, e iam.Entity, v []string) (any, error) {
		doc, ok := e.Policies[v[0]]
		if !ok {
			return nil, fmt.Errorf("%w: the %s policy with name %s cannot be found", iam.ErrNoSuchEntity, k.kind, v[0])
		}
		x := struct {
			UserName       string `xml:"UserName,omitempty"`
			GroupName      string `xml:"GroupName,omitempty"`
			RoleName       string `xml:"RoleName,omitempty"`
			PolicyName     string `xml:"PolicyName"`
			PolicyDocument string `xml:"PolicyDocument"`
		}{PolicyName: v[0], PolicyDocument: percentEncoded(doc)}
		switch k.kind {
		case iam.KindUser:
			x.UserName = e.Name
		case iam.KindGroup:
			x.GroupName = e.Name
		case iam.KindRole:
			x.RoleName = e.Name
		}
		return x, nil
	})
}

func listPolicies(k kindSpec) action {
	return read(k, nil, func(p params, _ *Handler, _ Caller, e iam.Entity, _ []string) (any, error) {
		names := make([]string, 0, len(e.Policies))
		for n := range e.Policies {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
		return pageOf(p, names, func(s string) string { return s }, func(page []string, truncated bool, marker string) any {
			return struct {
				PolicyNames []string `xml:"PolicyNames>member"`
				listPage
			}{page, listPage{truncated, marker}}
		})
	})
}

func deletePolicy(k kindSpec) action {
	return change(k, []string{"PolicyName"}, func(ctx context.Context, h *Handler, c Caller, name string, v []string) error {
		return h.Dir.DeletePolicy(ctx, k.kind, c.Account, name, v[0])
	})
}

func attachPolicy(k kindSpec, attach bool) action {
	return change(k, []string{"PolicyArn"}, func(ctx context.Context, h *Handler, c Caller, name string, v []string) error {
		if attach {
			return h.Dir.Attach(ctx, k.kind, c.Account, name, v[0])
		}
		return h.Dir.Detach(ctx, k.kind, c.Account, name, v[0])
	})
}

type xmlAttached struct {
	PolicyName string `xml:"PolicyName"`
	PolicyArn  string `xml:"PolicyArn"`
}

func listAttached(k kindSpec) action {
	return read(k, nil, func(p params, _ *Handler, _ Caller, e iam.Entity, _ []string) (any, error) {
		prefix := p.opt("PathPrefix")
		var xs []xmlAttached
		for _, arn := range e.Attached {
			rest := arn[strings.LastIndex(arn, ":")+1:] // policy/PATH/NAME
			if !strings.HasPrefix(strings.TrimPrefix(rest, "policy"), prefix) {
				continue
			}
			xs = append(xs, xmlAttached{PolicyName: rest[strings.LastIndex(rest, "/")+1:], PolicyArn: arn})
		}
		return pageOf(p, xs, func(x xmlAttached) string { return x.PolicyName }, func(page []xmlAttached, truncated bool, marker string) any {
			return struct {
				AttachedPolicies []xmlAttached `xml:"AttachedPolicies>member"`
				listPage
			}{page, listPage{truncated, marker}}
		})
	})
}

func membership(add bool) action {
	return change(groupKind, []string{"UserName"}, func(ctx context.Context, h *Handler, c Caller, group string, v []string) error {
		if add {
			return h.Dir.AddToGroup(ctx, c.Account, group, v[0])
		}
		return h.Dir.RemoveFromGroup(ctx, c.Account, group, v[0])
	})
}

var listGroupsForUser = read(userKind, nil, func(p params, h *Handler, c Caller, u iam.Entity, _ []string) (any, error) {
	var groups []iam.Entity
	for _, g := range u.Groups {
		if e, err := h.Dir.Get(iam.KindGroup, c.Account, g); err == nil {
			groups = append(groups, e)
		}
	}
	slices.SortFunc(groups, func(a, b iam.Entity) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return pageOf(p, groups, func(e iam.Entity) string { return e.Name }, func(page []iam.Entity, truncated bool, marker string) any {
		xs := make([]xmlEntity, 0, len(page))
		for _, e := range page {
			xs = append(xs, h.xmlEntity(c, e))
		}
		return listResult("Groups", xs, truncated, marker)
	})
})

// keyOwner is the user an access key action is about: UserName, or the
// caller's own when omitted (an IAM user, or the account's root).
func (h *Handler) keyOwner(p params, c Caller, fields ...string) (string, []string, error) {
	name := p.opt("UserName")
	if name == "" {
		switch {
		case c.User != "":
			name = c.User
		case c.Root:
			// The root's own keys: authorised as the root itself.
			values := make([]string, len(fields))
			for i, f := range fields {
				v, err := p.req(f)
				if err != nil {
					return "", nil, err
				}
				values[i] = v
			}
			return "", values, nil
		default:
			return "", nil, validation("UserName is required: this caller's keys are the Tenant's, kept in a Secret")
		}
	}
	return h.onSubject(p, c, userKind, name, fields)
}

// xmlKey is an AccessKey element (the secret only when just created).
type xmlKey struct {
	UserName        string `xml:"UserName"`
	AccessKeyID     string `xml:"AccessKeyId"`
	Status          string `xml:"Status"`
	SecretAccessKey string `xml:"SecretAccessKey,omitempty"`
	CreateDate      string `xml:"CreateDate"`
}

func createAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, _, err := h.keyOwner(p, c)
	if err != nil {
		return nil, err
	}
	k, err := h.Dir.CreateAccessKey(ctx, c.Account, name)
	if err != nil {
		return nil, err
	}
	return struct {
		AccessKey xmlKey `xml:"AccessKey"`
	}{xmlKey{UserName: k.User, AccessKeyID: k.ID, Status: k.Status, SecretAccessKey: k.Secret, CreateDate: isoTime(k.Created)}}, nil
}

func listAccessKeys(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	// Read after every other server's changes (one metadata read when
	// there were none): a caller told a key is gone (the operator, which
	// then replaces it) must not be told so by a server whose directory
	// lags.
	if err := h.Dir.Refresh(ctx); err != nil {
		return nil, err
	}
	name, _, err := h.keyOwner(p, c)
	if err != nil {
		return nil, err
	}
	keys, err := h.Dir.Keys(c.Account, name)
	if err != nil {
		return nil, err
	}
	var res struct {
		Keys        []xmlKey `xml:"AccessKeyMetadata>member"`
		IsTruncated bool     `xml:"IsTruncated"`
	}
	for _, k := range keys {
		res.Keys = append(res.Keys, xmlKey{UserName: k.User, AccessKeyID: k.ID, Status: k.Status, CreateDate: isoTime(k.Created)})
	}
	return res, nil
}

func updateAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.keyOwner(p, c, "AccessKeyId", "Status")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.UpdateAccessKey(ctx, c.Account, name, v[0], v[1])
}

func deleteAccessKey(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, v, err := h.keyOwner(p, c, "AccessKeyId")
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.DeleteAccessKey(ctx, c.Account, name, v[0])
}

// providerARN is an OIDC provider's ARN.
func (h *Handler) providerARN(c Caller, pr iam.Provider) string {
	return fmt.Sprintf("arn:aws:iam::%s:oidc-provider/%s", h.accountID(c), iam.ProviderName(pr.URL))
}

// providerNamed reads the provider ARN a request names and authorises
// the action on it; the name is the ARN's part after oidc-provider/.
func (h *Handler) providerNamed(p params, c Caller) (string, error) {
	arn, err := p.req("OpenIDConnectProviderArn")
	if err != nil {
		return "", err
	}
	_, name, ok := strings.Cut(arn, ":oidc-provider/")
	if !ok || !strings.HasPrefix(arn, "arn:aws:iam::") {
		return "", validation("%s is not an OpenIDConnect provider's ARN", arn)
	}
	return name, h.authorize(c, p.action, arn)
}

func createProvider(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	u, err := p.req("Url")
	if err != nil {
		return nil, err
	}
	pr := iam.Provider{Account: c.Account, URL: u, ClientIDs: p.list("ClientIDList"), Thumbprints: p.list("ThumbprintList")}
	if err := h.authorize(c, p.action, h.providerARN(c, pr)); err != nil {
		return nil, err
	}
	pr, err = h.Dir.CreateProvider(ctx, pr)
	if err != nil {
		return nil, err
	}
	return struct {
		Arn string `xml:"OpenIDConnectProviderArn"`
	}{h.providerARN(c, pr)}, nil
}

func getProvider(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, err := h.providerNamed(p, c)
	if err != nil {
		return nil, err
	}
	pr, err := h.Dir.Provider(c.Account, name)
	if err != nil {
		return nil, err
	}
	return struct {
		URL         string   `xml:"Url"`
		ClientIDs   []string `xml:"ClientIDList>member"`
		Thumbprints []string `xml:"ThumbprintList>member"`
		CreateDate  string   `xml:"CreateDate"`
	}{pr.URL, pr.ClientIDs, pr.Thumbprints, isoTime(pr.Created)}, nil
}

func listProviders(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	if err := h.authorize(c, p.action, fmt.Sprintf("arn:aws:iam::%s:oidc-provider/*", h.accountID(c))); err != nil {
		return nil, err
	}
	type entry struct {
		Arn string `xml:"Arn"`
	}
	res := struct {
		List []entry `xml:"OpenIDConnectProviderList>member"`
	}{List: []entry{}}
	for _, pr := range h.Dir.Providers(c.Account) {
		res.List = append(res.List, entry{h.providerARN(c, pr)})
	}
	return res, nil
}

func deleteProvider(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	name, err := h.providerNamed(p, c)
	if err != nil {
		return nil, err
	}
	return nil, h.Dir.DeleteProvider(ctx, c.Account, name)
}

func addClientID(p params, pr *iam.Provider) error {
	id, err := p.req("ClientID")
	if err == nil && !slices.Contains(pr.ClientIDs, id) {
		pr.ClientIDs = append(pr.ClientIDs, id)
	}
	return err
}

func removeClientID(p params, pr *iam.Provider) error {
	id, err := p.req("ClientID")
	if err == nil {
		pr.ClientIDs = slices.DeleteFunc(pr.ClientIDs, func(s string) bool { return s == id })
	}
	return err
}

func setThumbprints(p params, pr *iam.Provider) error {
	pr.Thumbprints = p.list("ThumbprintList")
	if len(pr.Thumbprints) == 0 {
		return validation("ThumbprintList must hold at least one thumbprint")
	}
	return nil
}

func editProvider(edit func(params, *iam.Provider) error) action {
	return func(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
		name, err := h.providerNamed(p, c)
		if err != nil {
			return nil, err
		}
		return nil, h.Dir.EditProvider(ctx, c.Account, name, func(pr *iam.Provider) error { return edit(p, pr) })
	}
}

func accountSummary(ctx context.Context, h *Handler, p params, c Caller) (any, error) {
	if err := h.authorize(c, p.action, "*"); err != nil {
		return nil, err
	}
	users, groups, roles, providers := h.Dir.Counts(c.Account)
	type entry struct {
		Key   string `xml:"key"`
		Value int    `xml:"value"`
	}
	entries := []entry{
		{"Users", users}, {"UsersQuota", 5000}, {"Groups", groups}, {"GroupsQuota", 300},
		{"Roles", roles}, {"RolesQuota", 1000}, {"AccessKeysPerUserQuota", iam.MaxKeysPerUser},
		{"GroupsPerUserQuota", 10}, {"AttachedPoliciesPerUserQuota", 10},
		{"AttachedPoliciesPerGroupQuota", 10}, {"AttachedPoliciesPerRoleQuota", 10},
		{"OpenIDConnectProviders", providers},
	}
	return struct {
		Entries []entry `xml:"SummaryMap>entry"`
	}{entries}, nil
}

// optInt is an optional number (0 when absent).
func (p params) optInt(name string) (int, error) {
	v := p.opt(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, validation("%s must be a number", name)
	}
	return n, nil
}

// list is a list parameter: Name.member.1, Name.member.2, ...
func (p params) list(name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := p.form[fmt.Sprintf("%s.member.%d", name, i)]
		if !ok || len(v) == 0 {
			return out
		}
		out = append(out, v[0])
	}
}
