package s3front

import (
	"errors"
	"strings"
	"testing"

	"github.com/versity/versitygw/s3err"
)

func policyDoc(statements ...string) []byte {
	return []byte(`{"Version":"2012-10-17","Statement":[` + strings.Join(statements, ",") + `]}`)
}

// TestParseBucketPolicy: what PutBucketPolicy accepts and what it refuses,
// each refusal MalformedPolicy.
func TestParseBucketPolicy(t *testing.T) {
	ok := []string{
		`{"Effect":"Allow","Principal":"*","Action":"*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}`,
		`{"Effect":"Allow","Principal":{"AWS":["altkey","main","arn:aws:iam:::user/altkey"]},"Action":"s3:Get*","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:ListBucket","Resource":["arn:aws:s3:::*","arn:aws:s3:::*/*"]}`,
		`{"Effect":"Deny","NotPrincipal":{"AWS":"altkey"},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","NotResource":"arn:aws:s3:::b/public/*"}`,
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}`,
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}`,
		`{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"ForAllValues:StringLike":{"s3:RequestObjectTagKeys":["a*","b"]},"NumericLessThanEquals":{"s3:max-keys":10}}}`,
		`{"Effect":"Allow","Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::s3tenant1:root","123456789012"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
	}
	for _, s := range ok {
		if _, err := parseBucketPolicy(policyDoc(s), "b", testIDs{}); err != nil {
			t.Errorf("refused %s: %v", s, err)
		}
	}
	bad := map[string]string{
		"another bucket":           `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`,
		"unknown action":           `{"Effect":"Allow","Principal":"*","Action":"s3:Teleport","Resource":"arn:aws:s3:::b/*"}`,
		"not s3":                   `{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"arn:aws:s3:::b/*"}`,
		"unknown principal":        `{"Effect":"Allow","Principal":{"AWS":"nobody"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"Allow with NotPrincipal":  `{"Effect":"Allow","NotPrincipal":{"AWS":"altkey"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"unknown condition key":    `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:colour":"red"}}}`,
		"unknown operator":         `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringRoughly":{"aws:Referer":"x"}}}`,
		"bad address":              `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"not-an-ip"}}}`,
		"bad effect":               `{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"no resource":              `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}`,
		"misspelt field":           `{"Effect":"Allow","Principals":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"a principal that is text": `{"Effect":"Allow","Principal":"everyone","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
	}
	for what, s := range bad {
		_, err := parseBucketPolicy(policyDoc(s), "b", testIDs{})
		var e s3err.APIError
		if !errors.As(err, &e) || e.Code != "MalformedPolicy" {
			t.Errorf("%s: %v, want MalformedPolicy", what, err)
		}
	}
	for _, doc := range []string{`{"Version":"2012-10-17"}`, `{"Statement":[]}`, `[1,2]`, `{"Version":"2001-01-01","Statement":[]}`} {
		if _, err := parseBucketPolicy([]byte(doc), "b", testIDs{}); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
}

// TestPolicyDecisions: an explicit Deny wins, NotPrincipal and NotAction,
// and the operators' rules for keys a request lacks.
func TestPolicyDecisions(t *testing.T) {
	p, err := parseBucketPolicy(policyDoc(
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}`,
		`{"Effect":"Allow","Principal":{"AWS":"altkey"},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}`,
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}}}`,
		`{"Effect":"Deny","NotPrincipal":{"AWS":"rootkey"},"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/locked/*"}`,
		`{"Effect":"Deny","Principal":"*","NotAction":["s3:GetObject","s3:ListBucket"],"Resource":"arn:aws:s3:::b/archive/*"}`,
		`{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLikeIfExists":{"aws:Referer":"https://example.com/*"},"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}`,
	), "b", testIDs{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := func(kv ...string) conditionContext {
		return func(key string) ([]string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == key {
					return []string{kv[i+1]}, true
				}
			}
			return nil, false
		}
	}
	cases := []struct {
		what      string
		principal string
		action    string
		resource  string
		ctx       conditionContext
		want      policyDecision
	}{
		{"tagged public", "", "s3:GetObject", "arn:aws:s3:::b/x", ctx("s3:existingobjecttag/security", "public"), policyAllow},
		{"tagged private", "", "s3:GetObject", "arn:aws:s3:::b/x", ctx("s3:existingobjecttag/security", "private"), policyNoMatch},
		{"untagged", "", "s3:GetObject", "arn:aws:s3:::b/x", ctx(), policyNoMatch},
		{"alt reads anything", "altkey", "s3:GetObject", "arn:aws:s3:::b/x", ctx(), policyAllow},
		{"alt puts without encryption", "altkey", "s3:PutObject", "arn:aws:s3:::b/x", ctx(), policyDeny},
		{"alt puts with AES256", "altkey", "s3:PutObject", "arn:aws:s3:::b/x", ctx("s3:x-amz-server-side-encryption", "AES256"), policyAllow},
		{"alt puts with aws:kms", "altkey", "s3:PutObject", "arn:aws:s3:::b/x", ctx("s3:x-amz-server-side-encryption", "aws:kms"), policyDeny},
		{"root deletes locked", "rootkey", "s3:DeleteObject", "arn:aws:s3:::b/locked/x", ctx(), policyNoMatch},
		{"alt deletes locked", "altkey", "s3:DeleteObject", "arn:aws:s3:::b/locked/x", ctx(), policyDeny},
		{"anonymous deletes locked", "", "s3:DeleteObject", "arn:aws:s3:::b/locked/x", ctx(), policyDeny},
		{"alt reads archive", "altkey", "s3:GetObject", "arn:aws:s3:::b/archive/x", ctx(), policyAllow},
		{"alt tags archive", "altkey", "s3:PutObjectTagging", "arn:aws:s3:::b/archive/x", ctx(), policyDeny},
		{"list from 10/8 without referer", "", "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:sourceip", "10.1.2.3"), policyAllow},
		{"list from 10/8 with the referer", "", "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:sourceip", "10.1.2.3", "aws:referer", "https://example.com/a"), policyAllow},
		{"list from 10/8, another referer", "", "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:sourceip", "10.1.2.3", "aws:referer", "https://evil.example/"), policyNoMatch},
		{"list from elsewhere", "", "s3:ListBucket", "arn:aws:s3:::b", ctx("aws:sourceip", "192.0.2.1"), policyNoMatch},
	}
	for _, c := range cases {
		if got := p.decide(policyRequest{principal: c.principal, action: c.action, resource: c.resource, context: c.ctx}); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	if !p.public() {
		t.Error("a policy allowing anyone to read tagged objects is public")
	}
}

// TestConditionSets: ForAnyValue and ForAllValues over a multi-valued key.
func TestConditionSets(t *testing.T) {
	keys := func(vs ...string) conditionContext {
		return func(key string) ([]string, bool) { return vs, vs != nil }
	}
	for _, c := range []struct {
		op   string
		ctx  conditionContext
		want bool
	}{
		{"ForAllValues:StringEquals", keys("a", "b"), true},
		{"ForAllValues:StringEquals", keys("a", "z"), false},
		{"ForAllValues:StringEquals", keys(), true},
		{"ForAnyValue:StringEquals", keys("z", "b"), true},
		{"ForAnyValue:StringEquals", keys("z"), false},
		{"ForAnyValue:StringEquals", keys(), false},
	} {
		cond, err := parseCondition(c.op, "s3:RequestObjectTagKeys", []byte(`["a","b"]`))
		if err != nil {
			t.Fatal(err)
		}
		if got := cond.holds(c.ctx); got != c.want {
			t.Errorf("%s over %v: %v, want %v", c.op, c.ctx, got, c.want)
		}
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b/c", true},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b", false},
		{"arn:aws:s3:::b/a?c", "arn:aws:s3:::b/abc", true},
		{"arn:aws:s3:::b/a?c", "arn:aws:s3:::b/ac", false},
		{"*", "", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
	} {
		if got := wildcardMatch(c.pattern, c.s); got != c.want {
			t.Errorf("%q ~ %q: %v", c.pattern, c.s, got)
		}
	}
}
