package s3front

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
)

// Access control lists, as S3 keeps them for buckets whose object
// ownership allows ACLs (a bucket created without ownership controls, or
// with ObjectWriter or BucketOwnerPreferred): a bucket's ACL in its record,
// an object version's in its metadata (metaACL), both in versitygw's
// stored form (auth.ACL: grantees by access key, groups by name), so the
// front end's access checks read them as they are.
//
// Grants name principals by canonical user ID on the wire and by access
// key inside (Identities maps the two); groups are AllUsers (anyone,
// signed or not), AuthenticatedUsers (any principal of the tenant that
// signed the request) and LogDelivery (kept as granted; no request is
// ever made as it). E-mail grantees are refused: principals have none.

// metaACL holds an object version's ACL and owner (JSON auth.ACL); a
// version without it belongs to its bucket's owner alone.
const metaACL = objlayer.InternalMetaPrefix + "Acl"

// Group grantees, as stored and as URIs.
const (
	groupAllUsers    = "all-users" // versitygw's name, which its checks know
	groupAuthUsers   = "authenticated-users"
	groupLogDelivery = "log-delivery"
	uriAllUsers      = "http://acs.amazonaws.com/groups/global/AllUsers"
	uriAuthUsers     = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	uriLogDelivery   = "http://acs.amazonaws.com/groups/s3/LogDelivery"
	xmlnsXSI         = "http://www.w3.org/2001/XMLSchema-instance"
)

var groupByURI = map[string]string{uriAllUsers: groupAllUsers, uriAuthUsers: groupAuthUsers, uriLogDelivery: groupLogDelivery}

func groupURI(group string) string {
	for uri, g := range groupByURI {
		if g == group {
			return uri
		}
	}
	return ""
}

// Identities names the tenant's principals as ACLs show them: canonical
// user IDs and display names (iam.Users).
type Identities interface {
	// Identity returns an access key's canonical user ID and display
	// name; ok is false for a key that names no principal.
	Identity(access string) (id, displayName string, ok bool)
	// AccessOf returns the access key of a canonical user ID.
	AccessOf(id string) (access string, ok bool)
}

// accessKeyIDs are Identities where IDs are the access keys (no users).
type accessKeyIDs struct{ root string }

func (a accessKeyIDs) Identity(access string) (string, string, bool) {
	return access, access, access == a.root
}
func (a accessKeyIDs) AccessOf(id string) (string, bool) { return id, id == a.root }

// The ACL errors S3 answers.
var (
	errInvalidID = s3err.APIError{Code: "InvalidArgument", Description: "Invalid id",
		HTTPStatusCode: http.StatusBadRequest}
	errEmailGrantee = s3err.APIError{Code: "UnresolvableGrantByEmailAddress",
		Description:    "The e-mail address you provided does not match any account on record.",
		HTTPStatusCode: http.StatusBadRequest}
	errUnknownGroup = s3err.APIError{Code: "InvalidArgument", Description: "Invalid group uri",
		HTTPStatusCode: http.StatusBadRequest}
	errCannedNotSupported = s3err.APIError{Code: "NotImplemented",
		Description: "This canned ACL grants a service Strata does not run.", HTTPStatusCode: http.StatusNotImplemented}
)

// ownerOnly is the ACL of a resource whose owner alone has access.
func ownerOnly(owner string) auth.ACL {
	return auth.ACL{Owner: owner, Grantees: []auth.Grantee{
		{Permission: auth.PermissionFullControl, Access: owner, Type: types.TypeCanonicalUser}}}
}

// aclHeaders are the request headers that set an ACL.
var aclHeaders = append([]string{"X-Amz-Acl"}, grantHeaders...)

// grantPermission is the permission each grant header gives.
var grantPermission = map[string]auth.Permission{
	"X-Amz-Grant-Full-Control": auth.PermissionFullControl,
	"X-Amz-Grant-Read":         auth.PermissionRead,
	"X-Amz-Grant-Read-Acp":     auth.PermissionReadAcp,
	"X-Amz-Grant-Write":        auth.PermissionWrite,
	"X-Amz-Grant-Write-Acp":    auth.PermissionWriteAcp,
}

// hasACLHeaders reports whether a request sets an ACL through headers.
func hasACLHeaders(get func(string) []byte) bool {
	for _, h := range aclHeaders {
		if len(get(h)) > 0 {
			return true
		}
	}
	return false
}

// aclRequest is what a request says about an ACL: a canned ACL, grant
// headers or (PutBucketAcl, PutObjectAcl) an AccessControlPolicy body.
type aclRequest struct {
	canned string
	grants map[string]string // grant header -> value
	body   []byte
}

func readACLRequest(get func(string) []byte, body []byte) aclRequest {
	r := aclRequest{canned: string(get("X-Amz-Acl")), body: bytes.TrimSpace(body)}
	for _, h := range grantHeaders {
		if v := get(h); len(v) > 0 {
			if r.grants == nil {
				r.grants = map[string]string{}
			}
			r.grants[h] = string(v)
		}
	}
	return r
}

func (r aclRequest) empty() bool { return r.canned == "" && len(r.grants) == 0 && len(r.body) == 0 }

// aclTarget is what an ACL is set on: its owner (the object's writer, or
// the bucket's owner) and, for an object, its bucket's owner.
type aclTarget struct {
	object      bool
	owner       string
	bucketOwner string
}

// build turns a request into the ACL it sets (owner included); nil, nil
// when the request sets none.
func (r aclRequest) build(t aclTarget, ids Identities) (*auth.ACL, error) {
	switch {
	case r.empty():
		return nil, nil
	case len(r.body) > 0 && (r.canned != "" || len(r.grants) > 0):
		return nil, s3err.GetAPIError(s3err.ErrUnexpectedContent)
	case r.canned != "" && len(r.grants) > 0:
		return nil, s3err.GetAPIError(s3err.ErrBothCannedAndHeaderGrants)
	case r.canned != "":
		g, err := cannedGrants(r.canned, t)
		if err != nil {
			return nil, err
		}
		return &auth.ACL{Owner: t.owner, Grantees: g}, nil
	case len(r.grants) > 0:
		var out []auth.Grantee
		for _, h := range grantHeaders { // a fixed order: the stored ACL does not change with map order
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
		return &auth.ACL{Owner: t.owner, Grantees: out}, nil
	}
	return parseACLDocument(r.body, t.owner, ids)
}

// cannedGrants are the grants of a canned ACL.
func cannedGrants(canned string, t aclTarget) ([]auth.Grantee, error) {
	owner := auth.Grantee{Permission: auth.PermissionFullControl, Access: t.owner, Type: types.TypeCanonicalUser}
	group := func(p auth.Permission, g string) auth.Grantee {
		return auth.Grantee{Permission: p, Access: g, Type: types.TypeGroup}
	}
	switch canned {
	case "private":
		return []auth.Grantee{owner}, nil
	case "public-read":
		return []auth.Grantee{owner, group(auth.PermissionRead, groupAllUsers)}, nil
	case "public-read-write":
		return []auth.Grantee{owner, group(auth.PermissionRead, groupAllUsers), group(auth.PermissionWrite, groupAllUsers)}, nil
	case "authenticated-read":
		return []auth.Grantee{owner, group(auth.PermissionRead, groupAuthUsers)}, nil
	}
	if !t.object {
		if canned == "log-delivery-write" {
			return []auth.Grantee{owner, group(auth.PermissionWrite, groupLogDelivery), group(auth.PermissionReadAcp, groupLogDelivery)}, nil
		}
		return nil, s3err.GetInvalidArgumentErr(s3err.InvalidArgCannedAcl, canned)
	}
	bucketOwner := func(p auth.Permission) auth.Grantee {
		return auth.Grantee{Permission: p, Access: t.bucketOwner, Type: types.TypeCanonicalUser}
	}
	switch canned {
	case "bucket-owner-read":
		if t.bucketOwner == t.owner {
			return []auth.Grantee{owner}, nil
		}
		return []auth.Grantee{owner, bucketOwner(auth.PermissionRead)}, nil
	case "bucket-owner-full-control":
		if t.bucketOwner == t.owner {
			return []auth.Grantee{owner}, nil
		}
		return []auth.Grantee{owner, bucketOwner(auth.PermissionFullControl)}, nil
	case "aws-exec-read":
		return nil, errCannedNotSupported
	}
	return nil, s3err.GetInvalidArgumentErr(s3err.InvalidArgCannedAcl, canned)
}

// parseGrantHeader reads one grant header: `id="...", uri="..."`.
func parseGrantHeader(v string, p auth.Permission, ids Identities) ([]auth.Grantee, error) {
	var out []auth.Grantee
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, s3err.GetAPIError(s3err.ErrInvalidRequest)
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
func grantee(kind, value string, ids Identities) (auth.Grantee, error) {
	switch kind {
	case "id":
		access, ok := ids.AccessOf(value)
		if !ok {
			return auth.Grantee{}, errInvalidID
		}
		return auth.Grantee{Access: access, Type: types.TypeCanonicalUser}, nil
	case "uri":
		g, ok := groupByURI[value]
		if !ok {
			return auth.Grantee{}, errUnknownGroup
		}
		return auth.Grantee{Access: g, Type: types.TypeGroup}, nil
	case "emailaddress":
		return auth.Grantee{}, errEmailGrantee
	}
	return auth.Grantee{}, s3err.GetAPIError(s3err.ErrInvalidRequest)
}

// accessControlPolicyDoc is S3's AccessControlPolicy as a request sends
// it (namespaces as clients write them).
type accessControlPolicyDoc struct {
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
func parseACLDocument(body []byte, owner string, ids Identities) (*auth.ACL, error) {
	var doc accessControlPolicyDoc
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, s3err.GetAPIError(s3err.ErrMalformedACL)
	}
	if doc.Owner.ID != "" {
		if access, ok := ids.AccessOf(doc.Owner.ID); !ok || access != owner {
			return nil, errInvalidID
		}
	}
	acl := &auth.ACL{Owner: owner}
	for _, g := range doc.Grants {
		p := auth.Permission(g.Permission)
		switch p {
		case auth.PermissionFullControl, auth.PermissionRead, auth.PermissionReadAcp, auth.PermissionWrite, auth.PermissionWriteAcp:
		default:
			return nil, s3err.GetAPIError(s3err.ErrMalformedACL)
		}
		var kind, value string
		switch types.Type(g.Grantee.Type) {
		case types.TypeCanonicalUser:
			kind, value = "id", g.Grantee.ID
		case types.TypeGroup:
			kind, value = "uri", g.Grantee.URI
		case types.TypeAmazonCustomerByEmail:
			kind, value = "emailaddress", g.Grantee.EmailAddress
		default:
			return nil, s3err.GetAPIError(s3err.ErrMalformedACL)
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

// renderACL is an ACL as GetBucketAcl and GetObjectAcl answer it: group
// grants first, as S3 lists them.
func renderACL(acl auth.ACL, ids Identities) []byte {
	var out accessControlPolicy
	out.Owner.ID, out.Owner.DisplayName = named(acl.Owner, ids)
	grants := slices.Clone(acl.Grantees)
	rank := func(g auth.Grantee) int {
		if g.Type == types.TypeGroup {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(grants, func(a, b auth.Grantee) int { return cmp.Compare(rank(a), rank(b)) })
	for _, g := range grants {
		var a aclGrant
		a.Grantee.XMLNS, a.Grantee.Type, a.Permission = xmlnsXSI, string(g.Type), string(g.Permission)
		if g.Type == types.TypeGroup {
			a.Grantee.URI = groupURI(g.Access)
		} else {
			a.Grantee.ID, a.Grantee.DisplayName = named(g.Access, ids)
		}
		out.Grants = append(out.Grants, a)
	}
	return marshalDoc(out)
}

// named is an access key's canonical ID and display name (the key itself
// for a principal no longer known).
func named(access string, ids Identities) (string, string) {
	if id, name, ok := ids.Identity(access); ok {
		return id, name
	}
	return access, access
}

// decodeACL reads a stored ACL; nil for none or one that does not parse
// (which then grants nothing but the owner's rights).
func decodeACL(doc []byte) *auth.ACL {
	if len(doc) == 0 {
		return nil
	}
	var acl auth.ACL
	if json.Unmarshal(doc, &acl) != nil || acl.Owner == "" {
		return nil
	}
	return &acl
}

func encodeACL(acl auth.ACL) []byte {
	b, _ := json.Marshal(acl) // strings only: cannot fail
	return b
}

// grantsPublic reports whether an ACL grants a public group anything.
func grantsPublic(acl auth.ACL) bool {
	for _, g := range acl.Grantees {
		if g.Type == types.TypeGroup && (g.Access == groupAllUsers || g.Access == groupAuthUsers) {
			return true
		}
	}
	return false
}

// onlyOwnerFullControl reports whether an ACL grants nothing but its
// owner's full control (what an unset ACL means).
func onlyOwnerFullControl(acl auth.ACL) bool {
	for _, g := range acl.Grantees {
		if g.Type != types.TypeCanonicalUser || g.Access != acl.Owner || g.Permission != auth.PermissionFullControl {
			return false
		}
	}
	return true
}

// aclsEnabled reports whether a bucket's object ownership lets ACLs
// grant anything (every setting but BucketOwnerEnforced).
func aclsEnabled(ownership string) bool {
	return ownership != string(types.ObjectOwnershipBucketOwnerEnforced)
}
