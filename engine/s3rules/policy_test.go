package s3rules

import (
	"encoding/json"
	"strings"
	"testing"
)

func policyDoc(statements ...string) []byte {
	return []byte(`{"Version":"2012-10-17","Statement":[` + strings.Join(statements, ",") + `]}`)
}

// What PutBucketPolicy accepts, and what it refuses, each refusal
// MalformedPolicy: a policy is never accepted with a part ignored.
func TestParseBucketPolicy(t *testing.T) {
	accepted := map[string]string{
		"anyone, both resources":   `{"Effect":"Allow","Principal":"*","Action":"*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}`,
		"principals by key and id": `{"Effect":"Allow","Principal":{"AWS":["altkey","main","arn:aws:iam:::user/altkey"]},"Action":"s3:Get*","Resource":"arn:aws:s3:::b/*"}`,
		"canonical user":           `{"Effect":"Allow","Principal":{"CanonicalUser":"main"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"wildcard bucket":          `{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:ListBucket","Resource":["arn:aws:s3:::*","arn:aws:s3:::*/*"]}`,
		"resource *":               `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*"}`,
		"one statement, no list":   `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"Deny with NotPrincipal":   `{"Effect":"Deny","NotPrincipal":{"AWS":"altkey"},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"}`,
		"NotAction, NotResource":   `{"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","NotResource":"arn:aws:s3:::b/public/*"}`,
		"Null condition":           `{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}`,
		"tag condition":            `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}`,
		"set and numeric":          `{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"ForAllValues:StringLike":{"s3:RequestObjectTagKeys":["a*","b"]},"NumericLessThanEquals":{"s3:max-keys":10}}}`,
		"date and bool":            `{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"},"Bool":{"aws:SecureTransport":false}}}`,
		"service principal":        `{"Effect":"Allow","Principal":{"Service":"logging.s3.amazonaws.com"},"Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}`,
		"other AWS accounts":       `{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::s3tenant1:root","123456789012"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
	}
	for what, s := range accepted {
		if _, err := ParseBucketPolicy(policyDoc(s), "b", testIDs{}); err != nil {
			t.Errorf("%s: refused: %v", what, err)
		}
	}
	refused := map[string]string{
		"another bucket":               `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`,
		"not an S3 resource":           `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:sqs:::b"}`,
		"unknown action":               `{"Effect":"Allow","Principal":"*","Action":"s3:Teleport","Resource":"arn:aws:s3:::b/*"}`,
		"not s3":                       `{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"arn:aws:s3:::b/*"}`,
		"unknown principal":            `{"Effect":"Allow","Principal":{"AWS":"nobody"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"unknown canonical user":       `{"Effect":"Allow","Principal":{"CanonicalUser":"nobody"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"unknown principal kind":       `{"Effect":"Allow","Principal":{"Federated":"x"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"Allow with NotPrincipal":      `{"Effect":"Allow","NotPrincipal":{"AWS":"altkey"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"Principal and NotPrincipal":   `{"Effect":"Deny","Principal":"*","NotPrincipal":{"AWS":"altkey"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"no principal":                 `{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"Action and NotAction":         `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","NotAction":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}`,
		"no action":                    `{"Effect":"Allow","Principal":"*","Resource":"arn:aws:s3:::b/*"}`,
		"tag key without a tag name":   `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:RequestObjectTag/":"x"}}}`,
		"unknown condition key":        `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:colour":"red"}}}`,
		"unknown operator":             `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringRoughly":{"aws:Referer":"x"}}}`,
		"unknown set qualifier":        `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"ForSomeValues:StringEquals":{"aws:Referer":"x"}}}`,
		"Null has no IfExists":         `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"NullIfExists":{"aws:Referer":"true"}}}`,
		"bad address":                  `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"not-an-ip"}}}`,
		"bad number":                   `{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"NumericLessThan":{"s3:max-keys":"ten"}}}`,
		"bad date":                     `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"DateLessThan":{"aws:CurrentTime":"tomorrow"}}}`,
		"bad bool":                     `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"Bool":{"aws:SecureTransport":"maybe"}}}`,
		"no condition value":           `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:Referer":[]}}}`,
		"an object as condition value": `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"aws:Referer":{"a":1}}}}`,
		"bad effect":                   `{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"no resource":                  `{"Effect":"Allow","Principal":"*","Action":"s3:GetObject"}`,
		"misspelt field":               `{"Effect":"Allow","Principals":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		"a principal that is text":     `{"Effect":"Allow","Principal":"everyone","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
	}
	for what, s := range refused {
		_, err := ParseBucketPolicy(policyDoc(s), "b", testIDs{})
		if code := codeOf(err); code != "MalformedPolicy" {
			t.Errorf("%s: %q (%v), want MalformedPolicy", what, code, err)
		}
	}
	for _, doc := range []string{
		`{"Version":"2012-10-17"}`, `{"Statement":[]}`, `[1,2]`, `{"Version":"2001-01-01","Statement":[]}`,
		`{"Version":"2012-10-17","Statement":null}`, `{"Version":"2012-10-17","Statement":[],"Extra":1}`, `not json`,
	} {
		_, err := ParseBucketPolicy([]byte(doc), "b", testIDs{})
		if code := codeOf(err); code != "MalformedPolicy" {
			t.Errorf("document %s: %q (%v), want MalformedPolicy", doc, code, err)
		}
	}
}

// ctxOf is a condition context holding one value per key.
func ctxOf(kv ...string) ConditionContext {
	return func(key string) ([]string, bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == key {
				return []string{kv[i+1]}, true
			}
		}
		return nil, false
	}
}

// How a policy judges requests: an explicit Deny wins over any Allow,
// NotPrincipal and NotAction invert their match, and operators treat keys
// a request lacks as AWS does (IfExists and negated operators hold).
func TestPolicyDecisions(t *testing.T) {
	p, err := ParseBucketPolicy(policyDoc(
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}`,
		`{"Effect":"Allow","Principal":{"AWS":"altkey"},"Action":"s3:*","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"Null":{"s3:x-amz-server-side-encryption":"true"}}}`,
		`{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringNotEquals":{"s3:x-amz-server-side-encryption":"AES256"}}}`,
		`{"Effect":"Deny","NotPrincipal":{"AWS":"rootkey"},"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/locked/*"}`,
		`{"Effect":"Deny","Principal":"*","NotAction":["s3:GetObject","s3:ListBucket"],"Resource":"arn:aws:s3:::b/archive/*"}`,
		`{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLikeIfExists":{"aws:Referer":"https://example.com/*"},"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}`,
		`{"Effect":"Allow","Principal":{"CanonicalUser":"main"},"Action":"s3:GetBucketAcl","Resource":"arn:aws:s3:::b"}`,
		`{"Effect":"Allow","Principal":"*","Action":"s3:GetObjectTagging","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"S3:ExistingObjectTag/Environment":"production"}}}`,
	), "b", testIDs{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		what      string
		principal string
		action    Action
		resource  string
		ctx       ConditionContext
		want      Decision
	}{
		{"tagged public", "", ActGetObject, Resource("b", "x"), ctxOf("s3:existingobjecttag/security", "public"), Allow},
		{"tagged private", "", ActGetObject, Resource("b", "x"), ctxOf("s3:existingobjecttag/security", "private"), NoMatch},
		{"untagged", "", ActGetObject, Resource("b", "x"), ctxOf(), NoMatch},
		{"alt reads anything", "altkey", ActGetObject, Resource("b", "x"), ctxOf(), Allow},
		{"alt's grant is for objects, not the bucket", "altkey", ActGetBucketAcl, Resource("b", ""), ctxOf(), NoMatch},
		{"root, named by canonical ID", "rootkey", ActGetBucketAcl, Resource("b", ""), ctxOf(), Allow},
		{"alt puts without encryption", "altkey", ActPutObject, Resource("b", "x"), ctxOf(), Deny},
		{"alt puts with AES256", "altkey", ActPutObject, Resource("b", "x"), ctxOf("s3:x-amz-server-side-encryption", "AES256"), Allow},
		{"alt puts with aws:kms", "altkey", ActPutObject, Resource("b", "x"), ctxOf("s3:x-amz-server-side-encryption", "aws:kms"), Deny},
		{"root deletes locked", "rootkey", ActDeleteObject, Resource("b", "locked/x"), ctxOf(), NoMatch},
		{"alt deletes locked", "altkey", ActDeleteObject, Resource("b", "locked/x"), ctxOf(), Deny},
		{"anonymous deletes locked", "", ActDeleteObject, Resource("b", "locked/x"), ctxOf(), Deny},
		{"alt deletes elsewhere", "altkey", ActDeleteObject, Resource("b", "open/x"), ctxOf(), Allow},
		{"alt reads archive", "altkey", ActGetObject, Resource("b", "archive/x"), ctxOf(), Allow},
		{"alt tags archive", "altkey", ActPutObjectTagging, Resource("b", "archive/x"), ctxOf(), Deny},
		{"list from 10/8 without referer", "", ActListBucket, Resource("b", ""), ctxOf("aws:sourceip", "10.1.2.3"), Allow},
		{"list from 10/8 with the referer", "", ActListBucket, Resource("b", ""), ctxOf("aws:sourceip", "10.1.2.3", "aws:referer", "https://example.com/a"), Allow},
		{"list from 10/8, another referer", "", ActListBucket, Resource("b", ""), ctxOf("aws:sourceip", "10.1.2.3", "aws:referer", "https://evil.example/"), NoMatch},
		{"list from elsewhere", "", ActListBucket, Resource("b", ""), ctxOf("aws:sourceip", "192.0.2.1"), NoMatch},
		{"list from no known address", "", ActListBucket, Resource("b", ""), ctxOf(), NoMatch},
		{"another bucket", "altkey", ActGetObject, Resource("c", "x"), ctxOf(), NoMatch},
		// The condition key's prefix is case-insensitive, the tag's name
		// (an S3 tag key) is not.
		{"tag named as in the policy", "", ActGetObjectTagging, Resource("b", "x"), ctxOf("s3:existingobjecttag/Environment", "production"), Allow},
		{"tag named in another case", "", ActGetObjectTagging, Resource("b", "x"), ctxOf("s3:existingobjecttag/environment", "production"), NoMatch},
	}
	for _, c := range cases {
		got := p.Decide(PolicyRequest{Principal: c.principal, Action: c.action, Resource: c.resource, Context: c.ctx})
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
}

// A policy is public when it allows anyone something, unless the grant is
// narrowed to source addresses; Deny statements and named principals do
// not make it public.
func TestPolicyPublic(t *testing.T) {
	for _, c := range []struct {
		statement string
		public    bool
	}{
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, true},
		{`{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, true},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/security":"public"}}}`, true},
		{`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}`, false},
		{`{"Effect":"Allow","Principal":{"AWS":"altkey"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, false},
		{`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`, false},
	} {
		p, err := ParseBucketPolicy(policyDoc(c.statement), "b", testIDs{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Public(); got != c.public {
			t.Errorf("%s: public %v, want %v", c.statement, got, c.public)
		}
	}
}

// A stored policy naming a principal that has gone since still loads (the
// bucket keeps working) and the statement matches no request, while
// PutBucketPolicy refuses the same document.
func TestStoredPolicyWithAGonePrincipal(t *testing.T) {
	doc := policyDoc(
		`{"Effect":"Allow","Principal":{"AWS":["gone","altkey"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`,
		`{"Effect":"Allow","Principal":{"CanonicalUser":"also-gone"},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::b"}`,
	)
	if _, err := ParseBucketPolicy(doc, "b", testIDs{}); codeOf(err) != "MalformedPolicy" {
		t.Fatalf("PutBucketPolicy accepted a principal that names no one: %v", err)
	}
	p, err := ParseStoredPolicy(doc, "b", testIDs{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		principal string
		action    Action
		resource  string
		want      Decision
	}{
		{"gone", ActGetObject, Resource("b", "x"), NoMatch},
		{"", ActGetObject, Resource("b", "x"), NoMatch},
		{"also-gone", ActListBucket, Resource("b", ""), NoMatch},
		{"", ActListBucket, Resource("b", ""), NoMatch},
		{"altkey", ActGetObject, Resource("b", "x"), Allow},
	} {
		if got := p.Decide(PolicyRequest{Principal: c.principal, Action: c.action, Resource: c.resource, Context: ctxOf()}); got != c.want {
			t.Errorf("%q %s: %v, want %v", c.principal, c.action, got, c.want)
		}
	}
}

// ForAnyValue and ForAllValues over a multi-valued key, and the plain
// operators over one: ForAllValues holds over no values at all,
// ForAnyValue does not.
func TestConditionSets(t *testing.T) {
	keys := func(vs ...string) ConditionContext {
		return func(string) ([]string, bool) { return vs, vs != nil }
	}
	absent := ConditionContext(func(string) ([]string, bool) { return nil, false })
	for _, c := range []struct {
		op   string
		ctx  ConditionContext
		want bool
	}{
		{"ForAllValues:StringEquals", keys("a", "b"), true},
		{"ForAllValues:StringEquals", keys("a", "z"), false},
		{"ForAllValues:StringEquals", keys(), true},
		{"ForAllValues:StringEquals", absent, true},
		{"ForAnyValue:StringEquals", keys("z", "b"), true},
		{"ForAnyValue:StringEquals", keys("z"), false},
		{"ForAnyValue:StringEquals", keys(), false},
		{"ForAnyValue:StringEquals", absent, false},
		{"ForAllValues:StringNotEquals", keys("y", "z"), true},
		{"ForAllValues:StringNotEquals", keys("a", "z"), false},
		{"StringEquals", keys("z", "a"), true},
		{"StringNotEquals", keys("z", "a"), false},
		{"StringNotEquals", absent, true},
		{"StringEqualsIfExists", absent, true},
		{"StringEquals", absent, false},
	} {
		cond, err := parseCondition(c.op, "s3:RequestObjectTagKeys", json.RawMessage(`["a","b"]`))
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := c.ctx("")
		if got := cond.holds(c.ctx); got != c.want {
			t.Errorf("%s over %q: %v, want %v", c.op, vals, got, c.want)
		}
	}
}

// Each operator family compares as its type does: numbers as numbers,
// dates as times (RFC 3339, a day, or epoch seconds), addresses by
// prefix, booleans and IgnoreCase strings regardless of case, Like with
// wildcards.
func TestConditionOperators(t *testing.T) {
	for _, c := range []struct {
		op, key, value, got string
		want                bool
	}{
		{"NumericLessThan", "s3:max-keys", `10`, "9", true},
		{"NumericLessThan", "s3:max-keys", `10`, "10", false},
		{"NumericLessThanEquals", "s3:max-keys", `10`, "10", true},
		{"NumericGreaterThan", "s3:max-keys", `"10"`, "100", true}, // not compared as text
		{"NumericGreaterThanEquals", "s3:max-keys", `10`, "9.5", false},
		{"NumericEquals", "s3:max-keys", `10`, "10.0", true},
		{"NumericNotEquals", "s3:max-keys", `10`, "11", true},
		{"NumericEquals", "s3:max-keys", `10`, "ten", false},
		{"DateLessThan", "aws:CurrentTime", `"2030-01-01T00:00:00Z"`, "2029-12-31T23:59:59Z", true},
		{"DateGreaterThan", "aws:CurrentTime", `"2030-01-01"`, "2030-01-01T00:00:01Z", true},
		{"DateEquals", "aws:EpochTime", `1700000000`, "2023-11-14T22:13:20Z", true},
		{"DateNotEquals", "aws:EpochTime", `1700000000`, "1700000000", false},
		{"IpAddress", "aws:SourceIp", `"10.0.0.0/8"`, "10.255.0.1", true},
		{"IpAddress", "aws:SourceIp", `"192.0.2.7"`, "192.0.2.7", true},
		{"IpAddress", "aws:SourceIp", `"2001:db8::/32"`, "2001:db8::1", true},
		{"IpAddress", "aws:SourceIp", `"10.0.0.0/8"`, "11.0.0.1", false},
		{"NotIpAddress", "aws:SourceIp", `"10.0.0.0/8"`, "11.0.0.1", true},
		{"Bool", "aws:SecureTransport", `true`, "TRUE", true},
		{"Bool", "aws:SecureTransport", `"false"`, "true", false},
		{"StringEqualsIgnoreCase", "aws:Referer", `"HTTPS://Example.com"`, "https://example.COM", true},
		{"StringNotEqualsIgnoreCase", "aws:Referer", `"a"`, "A", false},
		{"StringLike", "s3:prefix", `"home/*/docs"`, "home/ann/docs", true},
		{"StringLike", "s3:prefix", `"home/?"`, "home/ab", false},
		{"StringNotLike", "s3:prefix", `"home/*"`, "tmp/x", true},
		{"StringEquals", "s3:prefix", `"Home"`, "home", false},
		{"ArnLike", "aws:PrincipalArn", `"arn:aws:iam:::user/*"`, "arn:aws:iam:::user/ann", true},
		{"ArnEquals", "aws:PrincipalArn", `"arn:aws:iam:::user/ann"`, "arn:aws:iam:::user/bob", false},
		{"ArnNotLike", "aws:PrincipalArn", `"arn:aws:iam:::user/a*"`, "arn:aws:iam:::user/bob", true},
		{"Null", "aws:Referer", `false`, "x", true},
		{"Null", "aws:Referer", `true`, "x", false},
	} {
		cond, err := parseCondition(c.op, c.key, json.RawMessage(c.value))
		if err != nil {
			t.Errorf("%s %s %s: %v", c.op, c.key, c.value, err)
			continue
		}
		if got := cond.holds(ctxOf(strings.ToLower(c.key), c.got)); got != c.want {
			t.Errorf("%s %s %s against %q: %v, want %v", c.op, c.key, c.value, c.got, got, c.want)
		}
	}
}

// Patterns of actions and resources: * is any run of characters, even
// across slashes or none; ? exactly one.
func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/a/b/c", true},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/", true},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b", false},
		{"arn:aws:s3:::b/a?c", "arn:aws:s3:::b/abc", true},
		{"arn:aws:s3:::b/a?c", "arn:aws:s3:::b/ac", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"?", "", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"s3:get*", "s3:getobject", true},
		{"s3:get*", "s3:putobject", false},
	} {
		if got := wildcardMatch(c.pattern, c.s); got != c.want {
			t.Errorf("%q ~ %q: %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// Identity policies: no principal, IAM's version and unique Sids, S3 and
// IAM actions on their own resources; Deny wins as in bucket policies.
func TestIdentityPolicies(t *testing.T) {
	for _, bad := range []string{
		`{"Version":"2008-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`,
		`{"Version":"2012-10-17"}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Sid":"a","Effect":"Allow","Action":"s3:*","Resource":"*"},{"Sid":"a","Effect":"Deny","Action":"s3:*","Resource":"*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"iam:Create-User","Resource":"*"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:ec2:::x"}]}`,
	} {
		if _, err := ParseIdentityPolicy([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	p, err := ParseIdentityPolicy([]byte(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:*","iam:Get*"],"Resource":["arn:aws:s3:::app/*","arn:aws:iam:::user/*"]},
		{"Effect":"Deny","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::app/keep/*"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action   Action
		resource string
		want     Decision
	}{
		{ActGetObject, "arn:aws:s3:::app/k", Allow},
		{ActDeleteObject, "arn:aws:s3:::app/k", Allow},
		{ActDeleteObject, "arn:aws:s3:::app/keep/k", Deny},
		{ActGetObject, "arn:aws:s3:::other/k", NoMatch},
		{"iam:GetUser", "arn:aws:iam:::user/app", Allow},
		{"iam:CreateUser", "arn:aws:iam:::user/app", NoMatch},
	} {
		if got := p.Decide(PolicyRequest{Principal: "anyone", Action: c.action, Resource: c.resource}); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.action, c.resource, got, c.want)
		}
	}
}

// IAM principals in bucket policies: a directory user, an account (its
// root ARN or ID) match the requests whose ARNs name them; a principal
// nobody knows is refused when the policy is set.
func TestPolicyIAMPrincipals(t *testing.T) {
	doc := `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::RGW1:user/app/u","RGW2"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	p, err := ParseBucketPolicy([]byte(doc), "b", testIDs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arns []string
		want Decision
	}{
		{[]string{"arn:aws:iam::RGW1:user/app/u", "arn:aws:iam::RGW1:root", "RGW1"}, Allow},
		{[]string{"arn:aws:iam::RGW1:user/app/other", "arn:aws:iam::RGW1:root", "RGW1"}, NoMatch},
		{[]string{"arn:aws:iam::RGW2:user/x", "arn:aws:iam::RGW2:root", "RGW2"}, Allow},
		{nil, NoMatch},
	} {
		got := p.Decide(PolicyRequest{PrincipalARNs: c.arns, Action: "s3:GetObject", Resource: "arn:aws:s3:::b/k",
			Context: func(string) ([]string, bool) { return nil, false }})
		if got != c.want {
			t.Errorf("%v: %v, want %v", c.arns, got, c.want)
		}
	}
	unknown := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::RGW9:user/nobody"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	if _, err := ParseBucketPolicy([]byte(unknown), "b", testIDs{}); err == nil {
		t.Error("a policy naming a principal nobody knows was accepted")
	}
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::RGW1:oidc-provider/issuer"},"Action":"sts:AssumeRoleWithWebIdentity"}]}`
	tp, err := ParseTrustPolicy([]byte(trust))
	if err != nil {
		t.Fatal(err)
	}
	if d := tp.Decide(PolicyRequest{PrincipalARNs: []string{"arn:aws:iam::RGW1:oidc-provider/issuer"}, Action: "sts:AssumeRoleWithWebIdentity",
		Context: func(string) ([]string, bool) { return nil, false }}); d != Allow {
		t.Errorf("the trust policy's provider: %v", d)
	}
	for _, bad := range []string{
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRole"}]}`,
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole","Resource":"*"}]}`,
	} {
		if _, err := ParseTrustPolicy([]byte(bad)); err == nil {
			t.Errorf("trust policy accepted: %s", bad)
		}
	}
}
