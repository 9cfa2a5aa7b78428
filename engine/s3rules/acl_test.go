package s3rules

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/s3err"
)

// testIDs names two principals: root, access key "rootkey", is canonical
// user "main" ("Main"); user "altkey" is its own canonical ID.
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

func (testIDs) KnownPrincipal(arn string) bool {
	return arn == "arn:aws:iam::RGW1:user/app/u" || arn == "arn:aws:iam::RGW1:root" || arn == "RGW2"
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

// codeOf is the S3 error code of err ("" for none; the text of an error
// that is not an S3 answer, so a test shows it).
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := s3err.As(err); ok {
		return e.Code
	}
	return "not an S3 answer: " + err.Error()
}

// grantsOf renders a stored ACL compactly: "owner type:access:permission...".
func grantsOf(acl *ACL) string {
	if acl == nil {
		return "none"
	}
	parts := []string{acl.Owner}
	for _, g := range acl.Grantees {
		parts = append(parts, fmt.Sprintf("%s:%s:%s", g.Type, g.Access, g.Permission))
	}
	return strings.Join(parts, " ")
}

func headerGetter(h map[string]string) func(string) string {
	return func(name string) string { return h[name] }
}

// What each way of setting an ACL (canned, grant headers, a document)
// stores, and what is refused with which S3 error.
func TestACLRequestBuildsTheStoredACL(t *testing.T) {
	obj := ACLTarget{Object: true, Owner: "altkey", BucketOwner: "rootkey"}
	ownObj := ACLTarget{Object: true, Owner: "rootkey", BucketOwner: "rootkey"}
	bucket := ACLTarget{Owner: "rootkey"}
	const xsi = `xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"`
	cases := []struct {
		name    string
		target  ACLTarget
		headers map[string]string
		body    string
		want    string // grantsOf, or the error code
	}{
		{"nothing set", obj, nil, "", "none"},
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
		// The bucket's owner writing its own object: one grant, not two.
		{"bucket-owner-full-control by the bucket's owner", ownObj, map[string]string{"X-Amz-Acl": "bucket-owner-full-control"}, "",
			"rootkey CanonicalUser:rootkey:FULL_CONTROL"},
		{"log-delivery-write on a bucket", bucket, map[string]string{"X-Amz-Acl": "log-delivery-write"}, "",
			"rootkey CanonicalUser:rootkey:FULL_CONTROL Group:log-delivery:WRITE Group:log-delivery:READ_ACP"},
		{"log-delivery-write on an object", obj, map[string]string{"X-Amz-Acl": "log-delivery-write"}, "", "InvalidArgument"},
		{"bucket-owner-read on a bucket", bucket, map[string]string{"X-Amz-Acl": "bucket-owner-read"}, "", "InvalidArgument"},
		{"unknown canned ACL", obj, map[string]string{"X-Amz-Acl": "everyone"}, "", "InvalidArgument"},
		// A canned ACL for a service Strata does not run: known, not offered.
		{"aws-exec-read", obj, map[string]string{"X-Amz-Acl": "aws-exec-read"}, "", "NotImplemented"},
		// Grant headers: ids are canonical IDs (main is rootkey), quoted or
		// not; the stored order is the headers' fixed order.
		{"grants by id and uri", obj, map[string]string{
			"X-Amz-Grant-Read":         `id="main", uri="http://acs.amazonaws.com/groups/global/AllUsers"`,
			"X-Amz-Grant-Write-Acp":    `id=altkey`,
			"X-Amz-Grant-Full-Control": `id="altkey"`}, "",
			"altkey CanonicalUser:altkey:FULL_CONTROL CanonicalUser:rootkey:READ Group:all-users:READ CanonicalUser:altkey:WRITE_ACP"},
		{"grant to an unknown id", obj, map[string]string{"X-Amz-Grant-Read": `id="nobody"`}, "", "InvalidArgument"},
		{"grant by e-mail", obj, map[string]string{"X-Amz-Grant-Read": `emailAddress="a@example.com"`}, "", "UnresolvableGrantByEmailAddress"},
		{"grant to an unknown group", obj, map[string]string{"X-Amz-Grant-Read": `uri="http://example.com/everyone"`}, "", "InvalidArgument"},
		{"grant without a kind", obj, map[string]string{"X-Amz-Grant-Read": `altkey`}, "", "InvalidRequest"},
		{"grant of an unknown kind", obj, map[string]string{"X-Amz-Grant-Read": `arn="x"`}, "", "InvalidRequest"},
		{"canned and grants", obj, map[string]string{"X-Amz-Acl": "private", "X-Amz-Grant-Read": `id=altkey`}, "", "InvalidRequest"},
		// An AccessControlPolicy document: its owner, when named, must be
		// the resource's (main is rootkey).
		{"document", bucket, nil, `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>main</ID></Owner><AccessControlList>` +
			`<Grant><Grantee ` + xsi + ` xsi:type="CanonicalUser"><ID>altkey</ID></Grantee><Permission>READ</Permission></Grant>` +
			`<Grant><Grantee ` + xsi + ` xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AuthenticatedUsers</URI></Grantee><Permission>WRITE</Permission></Grant>` +
			`</AccessControlList></AccessControlPolicy>`,
			"rootkey CanonicalUser:altkey:READ Group:authenticated-users:WRITE"},
		{"document without an owner", bucket, nil, `<AccessControlPolicy><AccessControlList/></AccessControlPolicy>`, "rootkey"},
		{"document naming another owner", bucket, nil, `<AccessControlPolicy><Owner><ID>altkey</ID></Owner><AccessControlList/></AccessControlPolicy>`, "InvalidArgument"},
		{"document with a bad permission", bucket, nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee ` + xsi +
			` xsi:type="CanonicalUser"><ID>main</ID></Grantee><Permission>ALL</Permission></Grant></AccessControlList></AccessControlPolicy>`, "MalformedACLError"},
		{"document with an untyped grantee", bucket, nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee>` +
			`<ID>main</ID></Grantee><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>`, "MalformedACLError"},
		{"document granting by e-mail", bucket, nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee ` + xsi +
			` xsi:type="AmazonCustomerByEmail"><EmailAddress>a@example.com</EmailAddress></Grantee><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>`,
			"UnresolvableGrantByEmailAddress"},
		{"document that is not XML", bucket, nil, `{"grants": []}`, "MalformedACLError"},
		{"document and headers", bucket, map[string]string{"X-Amz-Acl": "private"}, `<AccessControlPolicy/>`, "UnexpectedContent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			acl, err := ReadACLRequest(headerGetter(c.headers), body).Build(c.target, testIDs{})
			got := grantsOf(acl)
			if err != nil {
				got = codeOf(err)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// Under BucketOwnerEnforced only a request granting the owner full control
// and no one else passes (s3api checks Build's ACL with
// OnlyOwnerFullControl): a grant header naming the owner alone, once or
// twice, does; any other grantee does not.
func TestGrantHeaderNamingOnlyTheOwner(t *testing.T) {
	target := ACLTarget{Object: true, Owner: "altkey", BucketOwner: "altkey"}
	for _, c := range []struct {
		header, value string
		ownerOnly     bool
	}{
		{"X-Amz-Grant-Full-Control", `id="altkey"`, true},
		{"X-Amz-Grant-Full-Control", `id=altkey`, true},
		{"X-Amz-Grant-Full-Control", `id="altkey", id="altkey"`, true},
		{"X-Amz-Grant-Full-Control", `id="altkey", id="main"`, false},
		{"X-Amz-Grant-Full-Control", `uri="http://acs.amazonaws.com/groups/global/AllUsers"`, false},
		{"X-Amz-Grant-Read", `id="altkey"`, false}, // the owner, but less than full control
	} {
		acl, err := ReadACLRequest(headerGetter(map[string]string{c.header: c.value}), nil).Build(target, testIDs{})
		if err != nil {
			t.Errorf("%s: %s: %v", c.header, c.value, err)
			continue
		}
		if got := acl.OnlyOwnerFullControl(); got != c.ownerOnly {
			t.Errorf("%s: %s: owner only %v, want %v", c.header, c.value, got, c.ownerOnly)
		}
	}
}

// Whom an ACL lets do what: grants to a principal, to AuthenticatedUsers
// (any signed request) and to AllUsers (anyone), full control implying
// every permission.
func TestACLAllows(t *testing.T) {
	acl := ACL{Owner: "rootkey", Grantees: []Grant{
		{Permission: PermFullControl, Access: "rootkey", Type: TypeCanonicalUser},
		{Permission: PermRead, Access: GroupAllUsers, Type: TypeGroup},
		{Permission: PermWrite, Access: GroupAuthUsers, Type: TypeGroup},
		{Permission: PermReadACP, Access: "altkey", Type: TypeCanonicalUser},
		// A group that is named like an access key must not match it.
		{Permission: PermWriteACP, Access: "someone", Type: TypeGroup},
	}}
	for _, c := range []struct {
		access string
		perm   Permission
		want   bool
	}{
		{"rootkey", PermWriteACP, true},
		{"", PermRead, true},
		{"", PermWrite, false},
		{"anykey", PermWrite, true},
		{"altkey", PermReadACP, true},
		{"altkey", PermWriteACP, false},
		{"someone", PermWriteACP, false},
		{"", PermReadACP, false},
	} {
		if got := acl.Allows(c.access, c.perm); got != c.want {
			t.Errorf("Allows(%q, %s) = %v, want %v", c.access, c.perm, got, c.want)
		}
	}
	if !acl.GrantsPublic() {
		t.Error("an ACL granting AllUsers READ is public")
	}
	// IgnorePublicAcls: the groups' grants are dropped, the others kept.
	private := acl.WithoutPublicGrants()
	if private.GrantsPublic() || private.Allows("", PermRead) || private.Allows("anykey", PermWrite) || !private.Allows("altkey", PermReadACP) {
		t.Errorf("without public grants: %s", grantsOf(&private))
	}
	if OwnerOnly("altkey").Allows("rootkey", PermRead) || !OwnerOnly("altkey").OnlyOwnerFullControl() {
		t.Error("OwnerOnly grants another principal, or more than the owner's full control")
	}
}

// A stored ACL reads back as written; what does not parse, or names no
// owner, is no ACL (the owner's rights alone then).
func TestStoredACLRoundTrip(t *testing.T) {
	acl := ACL{Owner: "altkey", Grantees: []Grant{
		{Permission: PermFullControl, Access: "altkey", Type: TypeCanonicalUser},
		{Permission: PermRead, Access: GroupAuthUsers, Type: TypeGroup},
	}}
	if got := DecodeACL(acl.Encode()); grantsOf(got) != grantsOf(&acl) {
		t.Errorf("round trip: %s, want %s", grantsOf(got), grantsOf(&acl))
	}
	for _, doc := range []string{"", "not json", `{"Grantees":[]}`} {
		if got := DecodeACL([]byte(doc)); got != nil {
			t.Errorf("%q decoded to %s", doc, grantsOf(got))
		}
	}
}

// Which requests set a public ACL (BlockPublicAcls refuses them): canned
// ACLs and grants naming AllUsers or AuthenticatedUsers, in headers or in
// a document.
func TestACLRequestPublic(t *testing.T) {
	for _, c := range []struct {
		headers map[string]string
		body    string
		want    bool
	}{
		{nil, "", false},
		{map[string]string{"X-Amz-Acl": "private"}, "", false},
		{map[string]string{"X-Amz-Acl": "bucket-owner-full-control"}, "", false},
		{map[string]string{"X-Amz-Acl": "public-read"}, "", true},
		{map[string]string{"X-Amz-Acl": "public-read-write"}, "", true},
		{map[string]string{"X-Amz-Acl": "authenticated-read"}, "", true},
		{map[string]string{"X-Amz-Grant-Read": `id="main"`}, "", false},
		{map[string]string{"X-Amz-Grant-Write": `uri="http://acs.amazonaws.com/groups/global/AuthenticatedUsers"`}, "", true},
		{nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee></Grant></AccessControlList></AccessControlPolicy>`, true},
		{nil, `<AccessControlPolicy><AccessControlList><Grant><Grantee><URI>http://acs.amazonaws.com/groups/s3/LogDelivery</URI></Grantee></Grant></AccessControlList></AccessControlPolicy>`, false},
	} {
		if got := ReadACLRequest(headerGetter(c.headers), []byte(c.body)).Public(); got != c.want {
			t.Errorf("%v %s: public %v, want %v", c.headers, c.body, got, c.want)
		}
	}
}

// GetBucketAcl's and GetObjectAcl's document, as a client decodes it:
// group grants first (as S3 lists them), principals by canonical ID and
// display name (the access key for one no longer known), groups by URI,
// each grantee typed with xsi:type.
func TestRenderACL(t *testing.T) {
	acl := ACL{Owner: "rootkey", Grantees: []Grant{
		{Permission: PermFullControl, Access: "rootkey", Type: TypeCanonicalUser},
		{Permission: PermRead, Access: GroupAllUsers, Type: TypeGroup},
		{Permission: PermRead, Access: "gone", Type: TypeCanonicalUser},
		{Permission: PermWrite, Access: GroupLogDelivery, Type: TypeGroup},
	}}
	out, err := xml.Marshal(RenderACL(acl, testIDs{}))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name
		Owner   struct{ ID, DisplayName string }
		Grants  []struct {
			Grantee struct {
				Type            string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
				ID, DisplayName string
				URI             string
			}
			Permission string
		} `xml:"AccessControlList>Grant"`
	}
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []string
	for _, g := range doc.Grants {
		got = append(got, g.Grantee.Type+":"+g.Grantee.ID+":"+g.Grantee.DisplayName+":"+g.Grantee.URI+":"+g.Permission)
	}
	want := []string{
		"Group:::" + uriAllUsers + ":READ",
		"Group:::" + uriLogDelivery + ":WRITE",
		"CanonicalUser:main:Main::FULL_CONTROL",
		"CanonicalUser:gone:gone::READ",
	}
	if doc.XMLName.Space != xmlnsS3 || doc.XMLName.Local != "AccessControlPolicy" {
		t.Errorf("document element %v", doc.XMLName)
	}
	if doc.Owner.ID != "main" || doc.Owner.DisplayName != "Main" || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("owner %+v, grants\n%s\nwant\n%s\n%s", doc.Owner, strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}
