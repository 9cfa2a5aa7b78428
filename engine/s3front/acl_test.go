package s3front

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"
)

// testIDs: root "rootkey" is canonical user "main" ("Main"), user "altkey"
// is its own ID.
type testIDs struct{}

func (testIDs) Identity(access string) (string, string, bool) {
	switch access {
	case "rootkey":
		return "main", "Main", true
	case "altkey":
		return "altkey", "altkey", true
	}
	return "", "", false
}

func (testIDs) AccessOf(id string) (string, bool) {
	switch id {
	case "main":
		return "rootkey", true
	case "altkey":
		return "altkey", true
	}
	return "", false
}

func grantsOf(acl *auth.ACL) string {
	if acl == nil {
		return "none"
	}
	var parts []string
	for _, g := range acl.Grantees {
		parts = append(parts, fmt.Sprintf("%s:%s:%s", g.Type, g.Access, g.Permission))
	}
	return acl.Owner + " " + strings.Join(parts, " ")
}

func headers(h map[string]string) func(string) []byte {
	return func(name string) []byte {
		if v, ok := h[name]; ok {
			return []byte(v)
		}
		return nil
	}
}

// TestACLRequests: what each way of setting an ACL stores, and what is
// refused with which S3 error.
func TestACLRequests(t *testing.T) {
	obj := aclTarget{object: true, owner: "altkey", bucketOwner: "rootkey"}
	bucket := aclTarget{owner: "rootkey"}
	cases := []struct {
		name    string
		target  aclTarget
		headers map[string]string
		body    string
		want    string // grantsOf, or the error code
	}{
		{"none", obj, nil, "", "none"},
		{"private", bucket, map[string]string{"X-Amz-Acl": "private"}, "", "rootkey CanonicalUser:rootkey:FULL_CONTROL"},
		{"public-read", bucket, map[string]string{"X-Amz-Acl": "public-read"}, "",
			"rootkey CanonicalUser:rootkey:FULL_CONTROL Group:all-users:READ"},
		{"public-read-write", bucket, map[string]string{"X-Amz-Acl": "public-read-write"}, "",
			"rootkey CanonicalUser:rootkey:FULL_CONTROL Group:all-users:READ Group:all-users:WRITE"},
		{"authenticated-read", obj, map[string]string{"X-Amz-Acl": "authenticated-read"}, "",
			"altkey CanonicalUser:altkey:FULL_CONTROL Group:authenticated-users:READ"},
		{"bucket-owner-read", obj, map[string]string{"X-Amz-Acl": "bucket-owner-read"}, "",
			"altkey CanonicalUser:altkey:FULL_CONTROL CanonicalUser:rootkey:READ"},
		{"bucket-owner-full-control", obj, map[string]string{"X-Amz-Acl": "bucket-owner-full-control"}, "",
			"altkey CanonicalUser:altkey:FULL_CONTROL CanonicalUser:rootkey:FULL_CONTROL"},
		{"bucket-owner-read on a bucket", bucket, map[string]string{"X-Amz-Acl": "bucket-owner-read"}, "", "InvalidArgument"},
		{"unknown canned", obj, map[string]string{"X-Amz-Acl": "everyone"}, "", "InvalidArgument"},
		{"aws-exec-read", obj, map[string]string{"X-Amz-Acl": "aws-exec-read"}, "", "NotImplemented"},
		{"grants by id and uri", obj, map[string]string{
			"X-Amz-Grant-Read":         `id="main", uri="http://acs.amazonaws.com/groups/global/AllUsers"`,
			"X-Amz-Grant-Write-Acp":    `id=altkey`,
			"X-Amz-Grant-Full-Control": `id="altkey"`}, "",
			"altkey CanonicalUser:altkey:FULL_CONTROL CanonicalUser:rootkey:READ Group:all-users:READ CanonicalUser:altkey:WRITE_ACP"},
		{"grant to an unknown id", obj, map[string]string{"X-Amz-Grant-Read": `id="nobody"`}, "", "InvalidArgument"},
		{"grant by e-mail", obj, map[string]string{"X-Amz-Grant-Read": `emailAddress="a@example.com"`}, "", "UnresolvableGrantByEmailAddress"},
		{"grant to an unknown group", obj, map[string]string{"X-Amz-Grant-Read": `uri="http://example.com/everyone"`}, "", "InvalidArgument"},
		{"canned and grants", obj, map[string]string{"X-Amz-Acl": "private", "X-Amz-Grant-Read": `id=altkey`}, "", "InvalidRequest"},
		{"body", bucket, nil, `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>main</ID></Owner><AccessControlList>` +
			`<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>altkey</ID></Grantee><Permission>READ</Permission></Grant>` +
			`<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AuthenticatedUsers</URI></Grantee><Permission>WRITE</Permission></Grant>` +
			`</AccessControlList></AccessControlPolicy>`,
			"rootkey CanonicalUser:altkey:READ Group:authenticated-users:WRITE"},
		{"body naming another owner", bucket, nil, `<AccessControlPolicy><Owner><ID>altkey</ID></Owner><AccessControlList/></AccessControlPolicy>`, "InvalidArgument"},
		{"body with a bad permission", bucket, nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>main</ID></Grantee><Permission>ALL</Permission></Grant></AccessControlList></AccessControlPolicy>`, "MalformedACLError"},
		{"body that is not XML", bucket, nil, `{"grants": []}`, "MalformedACLError"},
		{"body and headers", bucket, map[string]string{"X-Amz-Acl": "private"}, `<AccessControlPolicy/>`, "UnexpectedContent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acl, err := readACLRequest(headers(c.headers), []byte(c.body)).build(c.target, testIDs{})
			got := grantsOf(acl)
			if err != nil {
				var s3e s3err.S3Error
				if !errors.As(err, &s3e) {
					t.Fatalf("%v is not an S3 error", err)
				}
				got = s3e.BaseError().Code
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestRenderACL: groups first (as S3 lists them), principals by canonical
// ID and display name, groups by URI.
func TestRenderACL(t *testing.T) {
	acl := auth.ACL{Owner: "rootkey", Grantees: []auth.Grantee{
		{Permission: auth.PermissionFullControl, Access: "rootkey", Type: types.TypeCanonicalUser},
		{Permission: auth.PermissionRead, Access: groupAllUsers, Type: types.TypeGroup},
		{Permission: auth.PermissionRead, Access: "gone", Type: types.TypeCanonicalUser},
	}}
	var doc struct {
		Owner  struct{ ID, DisplayName string }
		Grants []struct {
			Grantee struct {
				Type            string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
				ID, DisplayName string
				URI             string
			}
			Permission string
		} `xml:"AccessControlList>Grant"`
	}
	if err := xml.Unmarshal(renderACL(acl, testIDs{}), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range doc.Grants {
		got = append(got, g.Grantee.Type+":"+g.Grantee.ID+":"+g.Grantee.DisplayName+":"+g.Grantee.URI+":"+g.Permission)
	}
	want := "Group:::" + uriAllUsers + ":READ CanonicalUser:main:Main::FULL_CONTROL CanonicalUser:gone:gone::READ"
	if doc.Owner.ID != "main" || doc.Owner.DisplayName != "Main" || strings.Join(got, " ") != want {
		t.Fatalf("owner %+v, grants %v\nwant %s", doc.Owner, got, want)
	}
}
