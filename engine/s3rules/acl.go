package s3rules

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// Access control lists, as S3 keeps them for buckets whose object
// ownership allows ACLs (a bucket created without ownership controls, or
// with ObjectWriter or BucketOwnerPreferred): a bucket's ACL in its
// record, an object version's in its metadata. They are stored as JSON
// (ACL) naming grantees by access key and groups by name, the form
// existing drives and gateway volumes hold (versitygw's), so both read
// them as they are.
//
// Grants name principals by canonical user ID on the wire and by access
// key inside (Identities maps the two); groups are AllUsers (anyone,
// signed or not), AuthenticatedUsers (any principal of the tenant that
// signed the request) and LogDelivery (kept as granted; no request is
// ever made as it). E-mail grantees are refused: principals have none.

// Permission is an ACL permission.
type Permission string

// ACL permissions.
const (
	PermFullControl Permission = "FULL_CONTROL"
	PermRead        Permission = "READ"
	PermWrite       Permission = "WRITE"
	PermReadACP     Permission = "READ_ACP"
	PermWriteACP    Permission = "WRITE_ACP"
)

// Grantee types, as S3's documents name them.
const (
	TypeCanonicalUser = "CanonicalUser"
	TypeGroup         = "Group"
	TypeEmail         = "AmazonCustomerByEmail"
)

// Groups, as stored and as URIs.
const (
	GroupAllUsers    = "all-users"
	GroupAuthUsers   = "authenticated-users"
	GroupLogDelivery = "log-delivery"
	uriAllUsers      = "http://acs.amazonaws.com/groups/global/AllUsers"
	uriAuthUsers     = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	uriLogDelivery   = "http://acs.amazonaws.com/groups/s3/LogDelivery"
	xmlnsXSI         = "http://www.w3.org/2001/XMLSchema-instance"
	xmlnsS3          = "http://s3.amazonaws.com/doc/2006-03-01/"
)

var groupByURI = map[string]string{uriAllUsers: GroupAllUsers, uriAuthUsers: GroupAuthUsers, uriLogDelivery: GroupLogDelivery}

func groupURI(group string) string {
	for uri, g := range groupByURI {
		if g == group {
			return uri
		}
	}
	return ""
}

// PublicGroupURIs are the grantee URIs that make an ACL public.
var PublicGroupURIs = []string{uriAllUsers, uriAuthUsers}

// Grant is one grant of a stored ACL.
type Grant struct {
	Permission Permission
	Access     string // an access key, or a group name
	Type       string // TypeCanonicalUser or TypeGroup
}

// ACL is a stored ACL: its owner's access key and its grants.
type ACL struct {
	Owner    string
	Grantees []Grant
}

// Identities names the tenant's principals as ACLs show them: canonical
// user IDs and display names.
type Identities interface {
	// Identity returns an access key's canonical user ID and display
	// name; ok is false for a key that names no principal.
	Identity(access string) (id, displayName string, ok bool)
	// AccessOf returns the access key of a canonical user ID.
	AccessOf(id string) (access string, ok bool)
	// KnownPrincipal reports whether an IAM ARN (an account's root, a
	// user's, a role's) or an account ID names a principal of the tenant.
	KnownPrincipal(arn string) bool
}

// OwnerOnly is the ACL of a resource whose owner alone has access.
func OwnerOnly(owner string) ACL {
	return ACL{Owner: owner, Grantees: []Grant{{Permission: PermFullControl, Access: owner, Type: TypeCanonicalUser}}}
}

// DecodeACL reads a stored ACL; nil for none or one that does not parse
// (which then grants nothing but the owner's rights).
func DecodeACL(doc []byte) *ACL {
	if len(doc) == 0 {
		return nil
	}
	var acl ACL
	if json.Unmarshal(doc, &acl) != nil || acl.Owner == "" {
		return nil
	}
	return &acl
}

// Encode renders an ACL as stored.
func (a ACL) Encode() []byte {
	b, _ := json.Marshal(a) // strings only: cannot fail
	return b
}

// GrantsPublic reports whether an ACL grants a public group anything.
func (a ACL) GrantsPublic() bool {
	for _, g := range a.Grantees {
		if g.Type == TypeGroup && (g.Access == GroupAllUsers || g.Access == GroupAuthUsers) {
			return true
		}
	}
	return false
}

// OnlyOwnerFullControl reports whether an ACL grants nothing but its
// owner's full control (what an unset ACL means).
func (a ACL) OnlyOwnerFullControl() bool {
	for _, g := range a.Grantees {
		if g.Type != TypeCanonicalUser || g.Access != a.Owner || g.Permission != PermFullControl {
			return false
		}
	}
	return true
}

// WithoutPublicGrants is the ACL with the public groups' grants dropped
// (IgnorePublicAcls).
func (a ACL) WithoutPublicGrants() ACL {
	out := ACL{Owner: a.Owner}
	for _, g := range a.Grantees {
		if g.Type == TypeGroup && (g.Access == GroupAllUsers || g.Access == GroupAuthUsers) {
			continue
		}
		out.Grantees = append(out.Grantees, g)
	}
	return out
}

// Allows reports whether the ACL gives a principal (its access key; ""
// when the request is anonymous) a permission: a grant of it or of full
// control to the principal, to AuthenticatedUsers when it signed, or to
// AllUsers.
func (a ACL) Allows(access string, p Permission) bool {
	for _, g := range a.Grantees {
		if g.Permission != p && g.Permission != PermFullControl {
			continue
		}
		switch {
		case g.Type == TypeGroup && g.Access == GroupAllUsers:
			return true
		case g.Type == TypeGroup && g.Access == GroupAuthUsers && access != "":
			return true
		case g.Type == TypeCanonicalUser && access != "" && g.Access == access:
			return true
		}
	}
	return false
}

// ACLsEnabled reports whether a bucket's object ownership lets ACLs grant
// anything (every setting but BucketOwnerEnforced).
func ACLsEnabled(ownership string) bool { return ownership != "BucketOwnerEnforced" }

// GrantHeaders are the request headers that grant permissions.
var GrantHeaders = []string{"X-Amz-Grant-Full-Control", "X-Amz-Grant-Read", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write", "X-Amz-Grant-Write-Acp"}

var grantPermission = map[string]Permission{
	"X-Amz-Grant-Full-Control": PermFullControl,
	"X-Amz-Grant-Read":         PermRead,
	"X-Amz-Grant-Read-Acp":     PermReadACP,
	"X-Amz-Grant-Write":        PermWrite,
	"X-Amz-Grant-Write-Acp":    PermWriteACP,
}

// ACLRequest is what a request says about an ACL: a canned ACL, grant
// headers or (PutBucketAcl, PutObjectAcl) an AccessControlPolicy body.
type ACLRequest struct {
	Canned string
	grants map[string]string // grant header -> value
	body   []byte
}

// ReadACLRequest reads a request's ACL headers (get returns a header's
// value, "" when absent) and body (nil for writes of data).
func ReadACLRequest(get func(string) string, body []byte) ACLRequest {
	r := ACLRequest{Canned: get("X-Amz-Acl"), body: bytes.TrimSpace(body)}
	for _, h := range GrantHeaders {
		if v := get(h); v != "" {
			if r.grants == nil {
				r.grants = map[string]string{}
			}
			r.grants[h] = v
		}
	}
	return r
}

// Empty reports whether the request sets no ACL.
func (r ACLRequest) Empty() bool { return r.Canned == "" && len(r.grants) == 0 && len(r.body) == 0 }

// Public reports whether the request grants a public group through its
// canned ACL or grant headers (BlockPublicAcls refuses it).
func (r ACLRequest) Public() bool {
	switch r.Canned {
	case "public-read", "public-read-write", "authenticated-read":
		return true
	}
	for _, v := range r.grants {
		for _, uri := range PublicGroupURIs {
			if strings.Contains(v, uri) {
				return true
			}
		}
	}
	for _, uri := range PublicGroupURIs {
		if bytes.Contains(r.body, []byte(uri)) {
			return true
		}
	}
	return false
}

// ACLTarget is what an ACL is set on: its owner (the object's writer, or
// the bucket's owner) and, for an object, its bucket's owner.
type ACLTarget struct {
	Object      bool
	Owner       string
	BucketOwner string
}

// Build turns a request into the ACL it sets (owner included); nil, nil
// when the request sets none.
func (r ACLRequest) Build(t ACLTarget, ids Identities) (*ACL, error) {
	switch {
	case r.Empty():
		return nil, nil
	case len(r.body) > 0 && (r.Canned != "" || len(r.grants) > 0):
		return nil, s3err.UnexpectedContent
	case r.Canned != "" && len(r.grants) > 0:
		return nil, s3err.InvalidRequest.With("Specifying both Canned ACLs and Header Grants is not allowed")
	case r.Canned != "":
		g, err := cannedGrants(r.Canned, t)
		if err != nil {
			return nil, err
		}
		return &ACL{Owner: t.Owner, Grantees: g}, nil
	case len(r.grants) > 0:
		var out []Grant
		for _, h := range GrantHeaders { // a fixed order: the stored ACL does not change with map order
			v, ok := r.grants[h]
			if !ok {
				continue
			}
			g, err := parseGrantHeader(v, grantPermission[h], ids)
			if err != nil {
				return nil, err
			}
			out = append(out, g...)
		}
		return &ACL{Owner: t.Owner, Grantees: out}, nil
	}
	return parseACLDocument(r.body, t.Owner, ids)
}

var errCannedNotSupported = s3err.NotImplemented.With("This canned ACL grants a service Strata does not run.")

func cannedGrants(canned string, t ACLTarget) ([]Grant, error) {
	owner := Grant{Permission: PermFullControl, Access: t.Owner, Type: TypeCanonicalUser}
	group := func(p Permission, g string) Grant { return Grant{Permission: p, Access: g, Type: TypeGroup} }
	switch canned {
	case "private":
		return []Grant{owner}, nil
	case "public-read":
		return []Grant{owner, group(PermRead, GroupAllUsers)}, nil
	case "public-read-write":
		return []Grant{owner, group(PermRead, GroupAllUsers), group(PermWrite, GroupAllUsers)}, nil
	case "authenticated-read":
		return []Grant{owner, group(PermRead, GroupAuthUsers)}, nil
	}
	invalid := s3err.InvalidArgumentNamed("", "x-amz-acl", canned)
	invalid.Message = "Invalid canned ACL: " + canned
	if !t.Object {
		if canned == "log-delivery-write" {
			return []Grant{owner, group(PermWrite, GroupLogDelivery), group(PermReadACP, GroupLogDelivery)}, nil
		}
		return nil, invalid
	}
	bucketOwner := func(p Permission) Grant { return Grant{Permission: p, Access: t.BucketOwner, Type: TypeCanonicalUser} }
	switch canned {
	case "bucket-owner-read":
		if t.BucketOwner == t.Owner {
			return []Grant{owner}, nil
		}
		return []Grant{owner, bucketOwner(PermRead)}, nil
	case "bucket-owner-full-control":
		if t.BucketOwner == t.Owner {
			return []Grant{owner}, nil
		}
		return []Grant{owner, bucketOwner(PermFullControl)}, nil
	case "aws-exec-read":
		return nil, errCannedNotSupported
	}
	return nil, invalid
}

var (
	errInvalidID    = s3err.InvalidArgument.With("Invalid id")
	errUnknownGroup = s3err.InvalidArgument.With("Invalid group uri")
)

// parseGrantHeader reads one grant header: `id="...", uri="..."`.
func parseGrantHeader(v string, p Permission, ids Identities) ([]Grant, error) {
	var out []Grant
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, s3err.InvalidRequest.With("A grant header must name its grantees as id=\"...\" or uri=\"...\".")
		}
		g, err := grantee(strings.ToLower(strings.TrimSpace(k)), strings.Trim(strings.TrimSpace(val), `"`), ids)
		if err != nil {
			return nil, err
		}
		g.Permission = p
		out = append(out, g)
	}
	return out, nil
}

// grantee resolves a grantee named by kind (id, uri, emailaddress).
func grantee(kind, value string, ids Identities) (Grant, error) {
	switch kind {
	case "id":
		access, ok := ids.AccessOf(value)
		if !ok {
			return Grant{}, errInvalidID
		}
		return Grant{Access: access, Type: TypeCanonicalUser}, nil
	case "uri":
		g, ok := groupByURI[value]
		if !ok {
			return Grant{}, errUnknownGroup
		}
		return Grant{Access: g, Type: TypeGroup}, nil
	case "emailaddress":
		return Grant{}, s3err.UnresolvableGrantByEmail
	}
	return Grant{}, s3err.InvalidRequest.With("A grantee must be named by id, uri or emailAddress.")
}

// accessControlPolicyIn is S3's AccessControlPolicy as a request sends it
// (namespaces as clients write them).
type accessControlPolicyIn struct {
	Owner struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type         string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID           string `xml:"ID"`
			URI          string `xml:"URI"`
			EmailAddress string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// parseACLDocument reads a PutBucketAcl or PutObjectAcl body. Its owner,
// when named, must be the resource's.
func parseACLDocument(body []byte, owner string, ids Identities) (*ACL, error) {
	var doc accessControlPolicyIn
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, s3err.MalformedACL
	}
	if doc.Owner.ID != "" {
		if access, ok := ids.AccessOf(doc.Owner.ID); !ok || access != owner {
			return nil, errInvalidID
		}
	}
	acl := &ACL{Owner: owner}
	for _, g := range doc.Grants {
		p := Permission(g.Permission)
		switch p {
		case PermFullControl, PermRead, PermReadACP, PermWrite, PermWriteACP:
		default:
			return nil, s3err.MalformedACL
		}
		var kind, value string
		switch g.Grantee.Type {
		case TypeCanonicalUser:
			kind, value = "id", g.Grantee.ID
		case TypeGroup:
			kind, value = "uri", g.Grantee.URI
		case TypeEmail:
			kind, value = "emailaddress", g.Grantee.EmailAddress
		default:
			return nil, s3err.MalformedACL
		}
		gr, err := grantee(kind, value, ids)
		if err != nil {
			return nil, err
		}
		gr.Permission = p
		acl.Grantees = append(acl.Grantees, gr)
	}
	return acl, nil
}

// AccessControlPolicy is S3's ACL document as GetBucketAcl and
// GetObjectAcl answer it.
type AccessControlPolicy struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ AccessControlPolicy"`
	Owner   Owner    `xml:"Owner"`
	Grants  []struct {
		Grantee struct {
			XMLNS       string `xml:"xmlns:xsi,attr"`
			Type        string `xml:"xsi:type,attr"`
			ID          string `xml:"ID,omitempty"`
			DisplayName string `xml:"DisplayName,omitempty"`
			URI         string `xml:"URI,omitempty"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// Owner names an owner in S3's documents.
type Owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

// Named is an access key's canonical ID and display name (the key itself
// for a principal no longer known).
func Named(access string, ids Identities) Owner {
	if id, name, ok := ids.Identity(access); ok {
		return Owner{ID: id, DisplayName: name}
	}
	return Owner{ID: access, DisplayName: access}
}

// RenderACL is an ACL as GetBucketAcl and GetObjectAcl answer it: group
// grants first, as S3 lists them.
func RenderACL(acl ACL, ids Identities) AccessControlPolicy {
	var out AccessControlPolicy
	out.Owner = Named(acl.Owner, ids)
	grants := slices.Clone(acl.Grantees)
	rank := func(g Grant) int {
		if g.Type == TypeGroup {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(grants, func(a, b Grant) int { return cmp.Compare(rank(a), rank(b)) })
	for _, g := range grants {
		var a = struct {
			Grantee struct {
				XMLNS       string `xml:"xmlns:xsi,attr"`
				Type        string `xml:"xsi:type,attr"`
				ID          string `xml:"ID,omitempty"`
				DisplayName string `xml:"DisplayName,omitempty"`
				URI         string `xml:"URI,omitempty"`
			} `xml:"Grantee"`
			Permission string `xml:"Permission"`
		}{}
		a.Grantee.XMLNS, a.Grantee.Type, a.Permission = xmlnsXSI, g.Type, string(g.Permission)
		if g.Type == TypeGroup {
			a.Grantee.URI = groupURI(g.Access)
		} else {
			o := Named(g.Access, ids)
			a.Grantee.ID, a.Grantee.DisplayName = o.ID, o.DisplayName
		}
		out.Grants = append(out.Grants, a)
	}
	return out
}
