package controllers

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/s3rules"
)

// TestClaimNames: generated bucket and principal names are valid, within
// their limits, and distinct for distinct claims that share a long prefix.
func TestClaimNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	seen := map[string]bool{}
	for _, c := range []struct{ ns, name string }{{"team-a", "data"}, {long, "x"}, {long, "y"}, {"ns", "dotted.name.v1"}, {"n", strings.Repeat("b.", 100) + "c"}} {
		bc := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}}
		b := bucketNameOf(bc)
		if !s3rules.ValidBucketName(b) || seen[b] {
			t.Errorf("claim %s/%s: bucket name %q (valid %v, seen %v)", c.ns, c.name, b, s3rules.ValidBucketName(b), seen[b])
		}
		seen[b] = true
		p := principalName(&v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}})
		if len(p) > 64 || len(p) == 0 || strings.ContainsAny(p, "/ ") {
			t.Errorf("access %s/%s: principal name %q", c.ns, c.name, p)
		}
	}
	if got := bucketNameOf(&v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data"}}); got != "team-a-data" {
		t.Errorf("a short name is kept readable: %q", got)
	}
}

// TestAccessPolicies: a role's policy names the claimed buckets and their
// objects only; a policy document is taken only when what it allows stays
// inside the claimed buckets and S3.
func TestAccessPolicies(t *testing.T) {
	var doc policyDocument
	if err := json.Unmarshal([]byte(rolePolicy(v1.AccessRead, []string{"b1", "b2"})), &doc); err != nil {
		t.Fatal(err)
	}
	st := doc.Statement[0]
	if st.Effect != "Allow" || strings.Join(st.Resource, " ") != "arn:aws:s3:::b1 arn:aws:s3:::b1/* arn:aws:s3:::b2 arn:aws:s3:::b2/*" {
		t.Errorf("read role: %+v", st)
	}
	for _, a := range st.Action {
		if strings.HasPrefix(a, "s3:Put") || strings.HasPrefix(a, "s3:Delete") || a == "s3:ListAllMyBuckets" {
			t.Errorf("a read role allows %s", a)
		}
	}
	for _, c := range []struct {
		doc, refusal string
	}{
		{`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject"],"Resource":"arn:aws:s3:::b1/*"}]}`, ""},
		{`{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::b1","arn:aws:s3:::b1/logs/*"]}}`, ""},
		{`{"Statement":[{"Effect":"Deny","Action":"*","Resource":"*"},{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b1"}]}`, ""},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::*"}]}`, "not one of the claimed buckets"},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::b10/*"}]}`, "not one of the claimed buckets"},
		{`{"Statement":[{"Effect":"Allow","Action":"iam:CreateUser","Resource":"arn:aws:s3:::b1"}]}`, "not an S3 action"},
		{`{"Statement":[{"Effect":"Allow","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::b1"}]}`, "NotAction is not allowed"},
		{`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","NotResource":"arn:aws:s3:::b1"}]}`, "NotResource is not allowed"},
		{`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b1"}]}`, "Principal is not allowed"},
		{`{"Statement":[]}`, "no statement"},
		{`not json`, "not a JSON policy document"},
	} {
		err := checkAccessPolicy(c.doc, []string{"b1", "b2"})
		switch {
		case c.refusal == "" && err != nil:
			t.Errorf("%s: refused: %v", c.doc, err)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
			t.Errorf("%s: %v, want %q", c.doc, err, c.refusal)
		}
	}
}

// TestTrustPolicy: a role trusts one ServiceAccount's tokens for the
// tenant's audience from the cluster's issuer.
func TestTrustPolicy(t *testing.T) {
	doc := trustPolicy("arn:aws:iam:::oidc-provider/kubernetes.default.svc", "https://kubernetes.default.svc", "sts.strata.dev/store/media", "app", "reader")
	for _, want := range []string{`"Federated":"arn:aws:iam:::oidc-provider/kubernetes.default.svc"`, `"kubernetes.default.svc:sub":"system:serviceaccount:app:reader"`,
		`"kubernetes.default.svc:aud":"sts.strata.dev/store/media"`, `"Action":"sts:AssumeRoleWithWebIdentity"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("trust policy %s lacks %s", doc, want)
		}
	}
}
