package iamapi

import (
	"encoding/xml"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/iam"
	"github.com/strata-storage/strata/engine/s3rules"
)

func checkTrust(doc string) error {
	_, err := s3rules.ParseTrustPolicy([]byte(doc))
	return err
}

// Groups, roles and OIDC providers in the shapes botocore reads; an
// account's callers see their account only.
func TestGroupsRolesProviders(t *testing.T) {
	h := handler(t)
	h.CheckTrust = checkTrust
	root := Caller{Account: "RGW1", Root: true, Admin: true}
	ok := func(kv ...string) string {
		t.Helper()
		code, body := call(t, h, root, kv...)
		if code != 200 {
			t.Fatalf("%v: %d %s", kv, code, body)
		}
		return body
	}
	ok("Action", "CreateUser", "UserName", "u1")
	ok("Action", "CreateGroup", "GroupName", "g1", "Path", "/t/")
	ok("Action", "AddUserToGroup", "GroupName", "g1", "UserName", "u1")
	body := ok("Action", "GetGroup", "GroupName", "G1")
	if !strings.Contains(body, "<Arn>arn:aws:iam::RGW1:group/t/g1</Arn>") || !strings.Contains(body, "<UserName>u1</UserName>") {
		t.Errorf("GetGroup: %s", body)
	}
	body = ok("Action", "ListGroupsForUser", "UserName", "u1")
	if !strings.Contains(body, "<GroupName>g1</GroupName>") {
		t.Errorf("ListGroupsForUser: %s", body)
	}
	ok("Action", "AttachGroupPolicy", "GroupName", "g1", "PolicyArn", iam.ArnS3FullAccess)
	body = ok("Action", "ListAttachedGroupPolicies", "GroupName", "g1")
	if !strings.Contains(body, "<PolicyName>AmazonS3FullAccess</PolicyName>") {
		t.Errorf("ListAttachedGroupPolicies: %s", body)
	}
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::RGW1:user/u1"},"Action":"sts:AssumeRole"}]}`
	body = ok("Action", "CreateRole", "RoleName", "r1", "AssumeRolePolicyDocument", trust, "MaxSessionDuration", "7200")
	if !strings.Contains(body, "<RoleId>AROA") || !strings.Contains(body, "<MaxSessionDuration>7200</MaxSessionDuration>") {
		t.Errorf("CreateRole: %s", body)
	}
	ok("Action", "UpdateRole", "RoleName", "r1", "Description", "d", "MaxSessionDuration", "43200")
	body = ok("Action", "GetRole", "RoleName", "r1")
	if !strings.Contains(body, "<Description>d</Description>") || !strings.Contains(body, "<MaxSessionDuration>43200</MaxSessionDuration>") {
		t.Errorf("GetRole after UpdateRole: %s", body)
	}
	if code, body := call(t, h, root, "Action", "CreateRole", "RoleName", "r2",
		"AssumeRolePolicyDocument", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole","Resource":"*"}]}`); code != 400 ||
		!strings.Contains(body, "MalformedPolicyDocument") {
		t.Errorf("a trust policy without a Principal: %d %s", code, body)
	}
	// The tenant's own account sees none of RGW1's.
	if _, body := call(t, h, admin, "Action", "ListRoles"); strings.Contains(body, "r1") {
		t.Errorf("another account lists RGW1's roles: %s", body)
	}

	body = ok("Action", "CreateOpenIDConnectProvider", "Url", "https://issuer.example/x", "ClientIDList.member.1", "a",
		"ThumbprintList.member.1", strings.Repeat("a", 40))
	arn := "arn:aws:iam::RGW1:oidc-provider/issuer.example/x"
	if !strings.Contains(body, "<OpenIDConnectProviderArn>"+arn+"</OpenIDConnectProviderArn>") {
		t.Fatalf("CreateOpenIDConnectProvider: %s", body)
	}
	ok("Action", "AddClientIDToOpenIDConnectProvider", "OpenIDConnectProviderArn", arn, "ClientID", "b")
	body = ok("Action", "GetOpenIDConnectProvider", "OpenIDConnectProviderArn", arn)
	if !strings.Contains(body, "<ClientIDList><member>a</member><member>b</member></ClientIDList>") || !strings.Contains(body, "<Url>https://issuer.example/x</Url>") {
		t.Errorf("GetOpenIDConnectProvider: %s", body)
	}
	body = ok("Action", "GetAccountSummary")
	if !strings.Contains(body, "<entry><key>Users</key><value>1</value></entry>") || !strings.Contains(body, "<key>AccessKeysPerUserQuota</key>") {
		t.Errorf("GetAccountSummary: %s", body)
	}
	ok("Action", "DeleteOpenIDConnectProvider", "OpenIDConnectProviderArn", arn)
	if code, _ := call(t, h, root, "Action", "GetOpenIDConnectProvider", "OpenIDConnectProviderArn", arn); code != 404 {
		t.Errorf("a deleted provider: %d", code)
	}
}

func stsCall(t *testing.T, s *STS, c Caller, kv ...string) (int, string) {
	t.Helper()
	form := url.Values{"Version": {STSVersion}}
	for i := 0; i+1 < len(kv); i += 2 {
		form.Set(kv[i], kv[i+1])
	}
	w := httptest.NewRecorder()
	s.Serve(t.Context(), w, form, c, "req-2")
	return w.Code, w.Body.String()
}

// AssumeRole: a user its role's trust policy names gets a session whose
// token opens to that role; one it does not name is refused; durations
// beyond the role's longest are refused; GetCallerIdentity names each.
func TestAssumeRole(t *testing.T) {
	h := handler(t)
	h.CheckTrust = checkTrust
	s := &STS{IAM: h, Sessions: iam.NewSessions(masterKeys{})}
	root := Caller{Account: "RGW1", Root: true, Admin: true}
	for _, kv := range [][]string{
		{"Action", "CreateUser", "UserName", "u1", "Path", "/p/"},
		{"Action", "CreateUser", "UserName", "u2"},
		{"Action", "CreateRole", "RoleName", "r1", "AssumeRolePolicyDocument",
			`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::RGW1:user/p/u1"},"Action":"sts:AssumeRole"}]}`},
	} {
		if code, body := call(t, h, root, kv...); code != 200 {
			t.Fatalf("%v: %d %s", kv, code, body)
		}
	}
	u1 := Caller{Account: "RGW1", User: "u1"}
	_, body := stsCall(t, s, u1, "Action", "GetCallerIdentity")
	if !strings.Contains(body, "<Arn>arn:aws:iam::RGW1:user/p/u1</Arn>") || !strings.Contains(body, "<Account>RGW1</Account>") ||
		!strings.Contains(body, "<UserId>AIDA") {
		t.Errorf("GetCallerIdentity of a user: %s", body)
	}
	_, body = stsCall(t, s, root, "Action", "GetCallerIdentity")
	if !strings.Contains(body, "<Arn>arn:aws:iam::RGW1:root</Arn>") || !strings.Contains(body, "<UserId>RGW1</UserId>") {
		t.Errorf("GetCallerIdentity of the root: %s", body)
	}

	code, body := stsCall(t, s, u1, "Action", "AssumeRole", "RoleArn", "arn:aws:iam::RGW1:role/r1", "RoleSessionName", "job",
		"DurationSeconds", "900", "Policy", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`)
	var res struct {
		Key     string `xml:"AssumeRoleResult>Credentials>AccessKeyId"`
		Token   string `xml:"AssumeRoleResult>Credentials>SessionToken"`
		RoleID  string `xml:"AssumeRoleResult>AssumedRoleUser>AssumedRoleId"`
		RoleArn string `xml:"AssumeRoleResult>AssumedRoleUser>Arn"`
	}
	if err := xml.Unmarshal([]byte(body), &res); code != 200 || err != nil {
		t.Fatalf("AssumeRole: %d %v %s", code, err, body)
	}
	sess, err := s.Sessions.Open(res.Token)
	if err != nil || sess.AccessKey != res.Key || sess.Role != "r1" || sess.Account != "RGW1" || len(sess.Policies) != 1 {
		t.Errorf("the session token opens to %+v, %v", sess, err)
	}
	if !strings.HasSuffix(res.RoleID, ":job") || res.RoleArn != "arn:aws:sts::RGW1:assumed-role/r1/job" {
		t.Errorf("AssumedRoleUser %s %s", res.RoleID, res.RoleArn)
	}
	_, body = stsCall(t, s, Caller{Account: "RGW1", Session: &sess}, "Action", "GetCallerIdentity")
	if !strings.Contains(body, "<UserId>"+res.RoleID+"</UserId>") || !strings.Contains(body, "<Arn>"+res.RoleArn+"</Arn>") {
		t.Errorf("GetCallerIdentity of the session: %s", body)
	}

	for _, c := range []struct {
		who  Caller
		kv   []string
		code int
		err  string
	}{
		{Caller{Account: "RGW1", User: "u2"}, []string{"RoleArn", "arn:aws:iam::RGW1:role/r1", "RoleSessionName", "job"}, 403, "AccessDenied"},
		{u1, []string{"RoleArn", "arn:aws:iam::RGW1:role/r1", "RoleSessionName", "job", "DurationSeconds", "7200"}, 400, "ValidationError"},
		{u1, []string{"RoleArn", "arn:aws:iam::RGW1:role/nope", "RoleSessionName", "job"}, 403, "AccessDenied"},
		{u1, []string{"RoleArn", "arn:aws:iam::RGW1:role/r1", "RoleSessionName", "j"}, 400, "ValidationError"},
		{u1, []string{"RoleArn", "arn:aws:iam::RGW1:role/r1", "RoleSessionName", "job", "Policy", "{}"}, 400, "MalformedPolicyDocument"},
	} {
		h.CheckPolicy = func(doc string) error {
			_, err := s3rules.ParseIdentityPolicy([]byte(doc))
			return err
		}
		code, body := stsCall(t, s, c.who, append([]string{"Action", "AssumeRole"}, c.kv...)...)
		if code != c.code || !strings.Contains(body, "<Code>"+c.err+"</Code>") || !strings.Contains(body, stsXmlns) {
			t.Errorf("%+v %v: %d %s, want %d %s", c.who, c.kv, code, body, c.code, c.err)
		}
	}
	code, body = stsCall(t, s, u1, "Action", "GetSessionToken")
	if code != 200 || !strings.Contains(body, "<AccessKeyId>ASIA") {
		t.Errorf("GetSessionToken: %d %s", code, body)
	}
	if code, _ := stsCall(t, s, Caller{Session: &sess}, "Action", "GetSessionToken"); code != 403 {
		t.Errorf("GetSessionToken with session credentials: %d", code)
	}
}
